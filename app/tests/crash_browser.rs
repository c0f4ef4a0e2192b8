//! Crash consistency of browser requests in flight: an
//! agent sends `browser.request` at full speed, a pane over plain HTTP
//! claims and answers each one, and batches commit all the while; the
//! broker (a real `mosaic-bus broker` child) is killed with SIGKILL at
//! random moments. After each crash the operator runs `mosaic-bus unlock`,
//! the host boots the broker again on the same data root, and the agent
//! and the pane carry on with the new capability, URL and UI token.
//!
//! Every request is recorded with its outcome. Afterwards, on the closed
//! store:
//! - every acknowledged request is recorded exactly once: one
//!   `browser.completed` whose digest is the SHA-256 of the very answer
//!   line the agent got (the trail keeps the digest, never the payload);
//! - no `browser.completed` exists without its `action.allowed`: a pane
//!   never acted on an authorization the crash took back;
//! - no transaction is half-applied and `quick_check` is `ok`.
//!
//! The kill loop is `support::crash`'s. The default run crashes the
//! broker 3 times; the long run is
//! `MOSAIC_CRASH_ROUNDS=20 cargo test -p mosaic-app --test crash_browser --
//! --nocapture`, and `MOSAIC_CRASH_SEED=N` picks other kill moments. The
//! run prints one JSON summary line to stderr.

#[path = "support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mosaic_client::socket::Client;
use mosaic_domain::Refusal;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use support::crash::Campaign;
use support::{assert_whole_transactions, config, count, launch, open_db, Broker};

/// The seed of the default run.
const DEFAULT_SEED: u64 = 0x5eed_0022;

/// What the agent and the pane need of the broker now serving.
#[derive(Clone)]
struct Live {
    epoch: usize,
    cap: String,
    address: String,
    token: String,
}

struct Shared {
    socket: PathBuf,
    live: Mutex<Live>,
    changed: Condvar,
    stop: AtomicBool,
}

impl Shared {
    fn live(&self) -> Live {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Blocks until a broker newer than `epoch` serves, or the run stops.
    fn wait_past(&self, epoch: usize) {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        drop(
            self.changed
                .wait_while(live, |l| {
                    l.epoch == epoch && !self.stop.load(Ordering::SeqCst)
                })
                .unwrap_or_else(PoisonError::into_inner),
        );
    }

    fn publish(&self, live: Live) {
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) = live;
        self.changed.notify_all();
    }

    fn halt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.changed.notify_all();
    }
}

fn live_of(broker: &Broker, epoch: usize) -> Live {
    let url = broker.boot["browser"]["url"].as_str().expect("url");
    Live {
        epoch,
        cap: broker.cap("web-1"),
        address: url.strip_prefix("http://").expect("http").to_owned(),
        token: broker.boot["browser"]["token"]
            .as_str()
            .expect("token")
            .to_owned(),
    }
}

/// One request's outcome: the answer line, or the refusal.
struct Sent {
    epoch: usize,
    outcome: Result<Vec<u8>, Refusal>,
}

/// The agent: `browser.request` after `browser.request` until the run stops.
fn agent(shared: &Shared) -> Vec<Sent> {
    let mut sent = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        let live = shared.live();
        let client = Client::new(&shared.socket, &live.cap);
        let outcome = client.call_verbatim(
            "browser.request",
            json!({"action": "snapshot", "parameters": {}, "timeoutMs": 2_000}),
        );
        let lost = matches!(
            outcome,
            Err(Refusal::OutcomeUnknown | Refusal::BrokerUnavailable | Refusal::BadCapability)
        );
        sent.push(Sent {
            epoch: live.epoch,
            outcome,
        });
        if lost {
            // The broker is gone (or was replaced): wait for the next one.
            shared.wait_past(live.epoch);
        }
    }
    sent
}

/// One HTTP/1.1 POST with the UI token; the answer's JSON body.
fn post(live: &Live, path: &str, body: &Value) -> Option<Value> {
    let mut stream = TcpStream::connect(&live.address).ok()?;
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        live.address,
        live.token,
        body.len()
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    serde_json::from_str(answer.split("\r\n\r\n").nth(1)?).ok()
}

/// The pane: connects to the broker now serving, claims every request it
/// hears of and answers it, until the run stops; after a crash it waits
/// for the next broker.
fn pane(shared: &Shared) {
    while !shared.stop.load(Ordering::SeqCst) {
        let live = shared.live();
        // Gone or stopped: either way, wait for the next broker.
        let _ = serve_one_broker(shared, &live);
        shared.wait_past(live.epoch);
    }
}

/// Serves the broker of `live` until the run stops (`Some`) or the broker
/// is gone (`None`: its stream or a post failed).
fn serve_one_broker(shared: &Shared, live: &Live) -> Option<()> {
    let mut stream = TcpStream::connect(&live.address).ok()?;
    let request = format!(
        "GET /api/events?browser=1&clientId=pane-1&token={} HTTP/1.1\r\nHost: {}\r\n\r\n",
        live.token, live.address
    );
    stream.write_all(request.as_bytes()).ok()?;
    // Bounded, so the pane notices the end of the run.
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    let mut lines = BufReader::new(stream);
    while !shared.stop.load(Ordering::SeqCst) {
        let mut line = String::new();
        match lines.read_line(&mut line) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
            Err(_) => return None,
        }
        let Some(data) = line.trim_end().strip_prefix("data: ") else {
            continue;
        };
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        if event["type"] != "browser-control-request" {
            continue;
        }
        let id = event["properties"]["requestId"].clone();
        let claim = json!({"requestId": id, "clientId": "pane-1"});
        let granted = post(live, "/api/browser-control/claim", &claim)?;
        let Some(token) = granted["claimToken"].as_str() else {
            continue;
        };
        let result = json!({"requestId": id, "claimToken": token, "ok": true,
                            "data": {"text": format!("page for {id}")}});
        post(live, "/api/browser-control/result", &result)?;
    }
    Some(())
}

fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn acknowledged_browser_requests_survive_sigkill_exactly_once() {
    let campaign = Campaign::from_env("crash_browser", DEFAULT_SEED);
    let rounds = campaign.rounds;
    let started = Instant::now();
    let root = support::data_root();
    let business = json!({
        "id": "shop", "human": "alice",
        "arbiters": {"technical": "web", "delivery": "web"},
        "roles": {"web": {"authority": {"withinRole": ["browser.snapshot"], "crossRole": []}}}
    });
    let mut cfg = config(
        root.path(),
        &[business],
        &[launch("shop", "web", "web-1")],
        &[],
    );
    cfg["browser"] = json!({"listen": "127.0.0.1:0"});
    let broker = Broker::boot(root.path(), &cfg);
    broker.agent("web-1").claim();
    let shared = Arc::new(Shared {
        socket: broker.socket.clone(),
        live: Mutex::new(live_of(&broker, 0)),
        changed: Condvar::new(),
        stop: AtomicBool::new(false),
    });
    let agent = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || agent(&shared))
    };
    let pane = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || pane(&shared))
    };
    // The crashes land at random moments of full-speed traffic; the last
    // broker serves a while and is never killed.
    let (broker, _) = campaign.crash(root.path(), &cfg, broker, |broker, generation| {
        shared.publish(live_of(broker, generation));
    });
    shared.halt();
    let sent = agent.join().expect("the agent");
    pane.join().expect("the pane");
    broker.close();

    let ledger_rows = assert_whole_transactions(root.path());
    let db = open_db(root.path());
    let mut completed: HashMap<String, usize> = HashMap::new();
    let mut statement = db
        .prepare("SELECT body FROM observations WHERE kind = 'browser.completed'")
        .expect("query");
    let bodies = statement
        .query_map([], |row| row.get::<_, String>(0))
        .expect("rows");
    for body in bodies {
        let body: Value = serde_json::from_str(&body.expect("a row")).expect("JSON");
        let digest = body["sha256"].as_str().expect("a digest").to_owned();
        *completed.entry(digest).or_default() += 1;
    }
    let allowed = count(
        &db,
        "SELECT count(*) FROM actions_allowed WHERE action = 'browser.snapshot'",
        [],
    );
    let recorded: usize = completed.values().sum();
    let (mut acked, mut unknown, mut lost, mut duplicated) = (0, 0, 0, 0);
    let mut problems = Vec::new();
    for s in &sent {
        match &s.outcome {
            // A refusal comes as a line too, and alike ones have alike
            // digests: only answers are unique.
            Ok(line) if line.starts_with(br#"{"ok":true"#) => {
                acked += 1;
                match completed.get(&hex_digest(line)).copied().unwrap_or(0) {
                    1 => {}
                    0 => {
                        lost += 1;
                        problems.push(format!(
                            "acknowledged but not recorded: {}",
                            String::from_utf8_lossy(line)
                        ));
                    }
                    n => {
                        duplicated += 1;
                        problems.push(format!(
                            "recorded {n} times: {}",
                            String::from_utf8_lossy(line)
                        ));
                    }
                }
            }
            Err(Refusal::OutcomeUnknown) => unknown += 1,
            Ok(_) | Err(_) => {}
        }
    }
    eprintln!(
        "{}",
        json!({"crash_browser": {"rounds": rounds, "requests": sent.len(), "acknowledged": acked,
               "outcome_unknown": unknown, "lost": lost, "duplicated": duplicated,
               "completed_records": recorded, "authorizations": allowed,
               "ledger_rows": ledger_rows, "seconds": started.elapsed().as_secs_f64()}})
    );
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(acked > 0, "the agent was answered at least once");
    assert!(
        i64::try_from(recorded).expect("small") <= allowed,
        "{recorded} outcomes recorded for {allowed} authorizations"
    );
    let last = sent.iter().filter(|s| s.epoch == rounds).count();
    assert!(last > 0, "the last broker served the agent");
}
