//! Crash consistency with real processes: eight clients send
//! `message.send` and `decision.*` at full speed while the broker (a real
//! `mosaic-bus broker` child) is killed with SIGKILL at random moments.
//! After each crash the operator runs `mosaic-bus unlock`, the host boots
//! the broker again on the same data root with the same launch records
//! (new capabilities, handed to the clients), and the clients carry on.
//!
//! Every request is recorded with its outcome: acknowledged (with the id
//! the broker returned), refused (a static code), `outcome-unknown` or
//! `broker-unavailable`. Afterwards, on the closed store and through a
//! rebooted broker's `trail`:
//! - every acknowledged request is in the store exactly once (a send by
//!   its message id and its body marker, a raise by its decision id and
//!   its question marker, a resolve or withdraw by its decision event);
//! - a refused or `broker-unavailable` request is not in the store (its
//!   refusal is, for a refusal the broker recorded);
//! - an `outcome-unknown` request is in the store at most once, and
//!   `trail` of its id says the same as the store;
//! - no transaction is half-applied, `quick_check` is `ok`, and the broker
//!   boots on the store again (a verified open).
//!
//! A message or decision id is drawn by the broker, so each request carries
//! a unique marker (`c3-r17`: client 3, its request 17) as its body or
//! question, by which an unanswered one is found again.
//!
//! The default run crashes the broker 3 times. The long run:
//!
//! ```sh
//! MOSAIC_CRASH_ROUNDS=20 cargo test -p mosaic-app --test crash -- --nocapture
//! ```
//!
//! `MOSAIC_CRASH_SEED=N` replays another seed (the kill moments and each
//! client's choices; thread interleaving is the scheduler's). The run
//! prints one JSON summary line to stderr.
//!
//! A second leg crashes the broker while agents wait on `changes`
//! (issue 20): four waiters, each its own role, hold `changes {since}`
//! waits while four senders send them messages; after each SIGKILL,
//! `unlock` and reboot every waiter asks again from the cursor of its last
//! answered wait. In the end each waiter must have been told of exactly
//! the messages stored for its role, once each and in store order (every
//! acknowledged send among them), and of nothing else. It follows the same
//! `MOSAIC_CRASH_ROUNDS` and `MOSAIC_CRASH_SEED`:
//!
//! ```sh
//! MOSAIC_CRASH_ROUNDS=20 cargo test -p mosaic-app --test crash changes_waiters -- --nocapture
//! ```

#[path = "support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mosaic_adapters::socket::Client;
use mosaic_domain::Refusal;
use serde_json::{json, Map, Value};

use support::{
    assert_whole_transactions, config, count, env_number, launch, open_db, unlock, Broker, WAIT,
};

/// Concurrent clients, each its own role and run.
const CLIENTS: usize = 8;

/// Crashes in the default run.
const DEFAULT_ROUNDS: usize = 3;

/// The seed of the default run.
const DEFAULT_SEED: u64 = 0x5eed_0009;

/// The longest stretch of traffic before a kill, in milliseconds (the
/// shortest is a fifth of it).
const MAX_TRAFFIC_MS: u64 = 1_500;

/// Client `i`'s role: `w0` is the technical arbiter, `w1` the delivery one.
fn role(i: usize) -> String {
    format!("w{i}")
}

/// Client `i`'s run.
fn run(i: usize) -> String {
    format!("r{i}")
}

/// `crash`: every role sends within role and merges cross-role, so a raise
/// routes to `w1` (delivery) or `w0` (technical), or to the human when the
/// raiser is that arbiter.
fn business() -> Value {
    let roles: Map<String, Value> = (0..CLIENTS)
        .map(|i| {
            (
                role(i),
                json!({"authority": {"withinRole": ["message.send"], "crossRole": ["repo.merge"]}}),
            )
        })
        .collect();
    json!({
        "id": "crash",
        "human": "carol",
        "arbiters": {"technical": "w0", "delivery": "w1"},
        "roles": roles,
    })
}

fn launches() -> Vec<Value> {
    (0..CLIENTS)
        .map(|i| launch("crash", &role(i), &run(i)))
        .collect()
}

/// `mosaic-bus verify` recomputes the hash chain over every record of the
/// closed store, crashes and all: `ok`, at the ledger's size.
#[track_caller]
fn assert_chain_verifies(root: &std::path::Path, ledger_rows: i64) {
    let out = std::process::Command::new(support::BIN)
        .arg("verify")
        .arg("--db")
        .arg(root.join("bus").join("bus.sqlite"))
        .output()
        .expect("run mosaic-bus verify");
    let line: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(out.status.code(), Some(0), "verify: {line}");
    assert_eq!(line["ok"], json!(true), "{line}");
    assert_eq!(line["size"], json!(ledger_rows), "{line}");
}

/// A tiny xorshift64 generator: reproducible choices without a dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// How one request ended, as its client saw it.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// `{"ok":true}` with this result.
    Acked(Value),
    /// `{"ok":false}` with this code.
    Refused(Refusal),
    /// Sent, but no answer: the broker may or may not have acted.
    Unknown,
    /// Nothing was sent.
    Unavailable,
}

/// One request and its outcome.
#[derive(Debug, Clone)]
struct Sent {
    client: usize,
    /// The broker generation the capability came from.
    epoch: usize,
    verb: &'static str,
    /// The body (send) or question (raise) marker, unique per request.
    marker: String,
    /// The decision a resolve or withdraw names.
    target: Option<String>,
    outcome: Outcome,
    /// When the outcome came.
    answered: Instant,
}

impl Sent {
    /// The id the broker returned for an acknowledged send or raise.
    fn returned_id(&self) -> Option<String> {
        match &self.outcome {
            Outcome::Acked(result) => result["id"].as_str().map(str::to_owned),
            Outcome::Refused(_) | Outcome::Unknown | Outcome::Unavailable => None,
        }
    }
}

/// The broker generation the clients talk to.
struct Live {
    epoch: usize,
    caps: HashMap<String, String>,
}

/// What the clients and the crashing host share.
struct Shared {
    socket: PathBuf,
    live: Mutex<Live>,
    changed: Condvar,
    stop: AtomicBool,
    /// Open decisions an arbiter may resolve: (id, index of the routed client).
    routed: Mutex<Vec<(String, usize)>>,
}

impl Shared {
    /// The current generation and `run`'s capability in it, or `None` once
    /// the clients are told to stop.
    fn current(&self, run: &str) -> Option<(usize, String)> {
        if self.stop.load(Ordering::SeqCst) {
            return None;
        }
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let cap = live.caps.get(run).expect("a capability per run").clone();
        Some((live.epoch, cap))
    }

    /// Waits until a generation after `epoch` is published (or the stop).
    fn wait_past(&self, epoch: usize) {
        let deadline = Instant::now() + WAIT;
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        while live.epoch <= epoch && !self.stop.load(Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no new broker within {WAIT:?}");
            live = self
                .changed
                .wait_timeout(live, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Publishes a new generation's capabilities.
    fn publish(&self, caps: HashMap<String, String>) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.epoch += 1;
        live.caps = caps;
        self.changed.notify_all();
    }

    fn halt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        self.changed.notify_all();
    }

    /// Takes a random open decision routed to client `i`.
    fn take_routed(&self, i: usize, rng: &mut Rng) -> Option<String> {
        let mut routed = self.routed.lock().unwrap_or_else(PoisonError::into_inner);
        let mine: Vec<usize> = (0..routed.len()).filter(|&k| routed[k].1 == i).collect();
        if mine.is_empty() {
            return None;
        }
        let k = mine[rng.below(mine.len() as u64) as usize];
        Some(routed.swap_remove(k).0)
    }
}

/// One client: a random mix of sends, raises, resolves (the two arbiters)
/// and withdrawals (of its own raises), as fast as answers come. A resolve
/// may race its raiser's withdrawal: one of them is `decision-closed`.
fn client(i: usize, shared: &Shared, seed: u64) -> Vec<Sent> {
    let mut rng = Rng::new(seed ^ ((i as u64 + 1) << 32));
    let mut raised: Vec<String> = Vec::new();
    let mut sent = Vec::new();
    // Requests in a row that reached no live broker.
    let mut misses = 0;
    for n in 0.. {
        let Some((epoch, cap)) = shared.current(&run(i)) else {
            break;
        };
        let marker = format!("c{i}-r{n}");
        let roll = rng.below(100);
        let resolve = if i < 2 && roll < 40 {
            shared.take_routed(i, &mut rng)
        } else {
            None
        };
        let (verb, args, target) = if let Some(id) = resolve {
            let choice = if rng.below(2) == 0 { "yes" } else { "no" };
            let args = json!({"id": id, "choice": choice});
            ("decision.resolve", args, Some(id))
        } else if roll < 30 {
            // The arbiters raise in the other arbiter's domain.
            let technical = match i {
                0 => false,
                1 => true,
                _ => rng.below(2) == 0,
            };
            let domain = if technical { "technical" } else { "delivery" };
            let args = support::raise_args(
                "repo.merge",
                None,
                json!({"question": marker, "domain": domain}),
            );
            ("decision.raise", args, None)
        } else if roll < 45 && !raised.is_empty() {
            let id = raised.swap_remove(rng.below(raised.len() as u64) as usize);
            ("decision.withdraw", json!({"id": id}), Some(id))
        } else {
            let to = role((i + 1 + rng.below(CLIENTS as u64 - 1) as usize) % CLIENTS);
            ("message.send", json!({"to": to, "body": marker}), None)
        };
        let outcome = match Client::new(&shared.socket, cap).call(verb, args) {
            Ok(result) => Outcome::Acked(result),
            Err(Refusal::OutcomeUnknown) => Outcome::Unknown,
            Err(Refusal::BrokerUnavailable) => Outcome::Unavailable,
            Err(refusal) => Outcome::Refused(refusal),
        };
        if let (Outcome::Acked(d), "decision.raise") = (&outcome, verb) {
            let id = d["id"].as_str().expect("a decision id").to_owned();
            let route = match d["route"].as_str() {
                Some("w0") => Some(0),
                Some("w1") => Some(1),
                other => panic!("a raise of {} routed to {other:?}", role(i)),
            };
            if let Some(route) = route {
                shared
                    .routed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((id.clone(), route));
            }
            raised.push(id);
        }
        // No live broker answered: it crashed (or an old capability met the next one).
        let lost = matches!(
            outcome,
            Outcome::Unknown | Outcome::Unavailable | Outcome::Refused(Refusal::BadCapability)
        );
        sent.push(Sent {
            client: i,
            epoch,
            verb,
            marker,
            target,
            outcome,
            answered: Instant::now(),
        });
        // After a lost request the client tries once more at once (so some
        // requests meet a dead broker or an old capability), then waits for
        // the host to publish the next broker.
        if lost {
            misses += 1;
            if misses == 2 {
                shared.wait_past(epoch);
                misses = 0;
            }
        } else {
            misses = 0;
        }
    }
    sent
}

/// Where one request stands in the closed store.
struct Stored {
    /// How many times its marker (or decision event) is there.
    copies: usize,
    /// The id it is stored under by its client, when it is there.
    id: Option<String>,
}

/// The rows of the closed store the checks look at, read once (markers
/// are not indexed).
struct Snapshot {
    /// Message body → (id, sending run) of each message with that body.
    messages: HashMap<String, Vec<(String, Option<String>)>>,
    /// Decision question → (id, raising run) of each decision.
    decisions: HashMap<String, Vec<(String, String)>>,
    /// (decision, event, acting run) → how many such events.
    events: HashMap<(String, String, Option<String>), usize>,
    /// Decision → how many terminal events (resolved, withdrawn, superseded).
    terminal: HashMap<String, usize>,
}

impl Snapshot {
    fn read(db: &rusqlite::Connection) -> Snapshot {
        let rows = |sql: &str| -> Vec<(String, String, Option<String>)> {
            let mut st = db.prepare(sql).expect("prepare");
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .expect("query")
                .map(|r| r.expect("a row"))
                .collect()
        };
        let mut snapshot = Snapshot {
            messages: HashMap::new(),
            decisions: HashMap::new(),
            events: HashMap::new(),
            terminal: HashMap::new(),
        };
        for (body, id, run) in rows("SELECT body, id, from_run FROM messages") {
            snapshot.messages.entry(body).or_default().push((id, run));
        }
        for (question, id, run) in rows("SELECT question, id, raiser_run FROM decisions") {
            let run = run.expect("an agent raised it");
            snapshot
                .decisions
                .entry(question)
                .or_default()
                .push((id, run));
        }
        for (decision, event, run) in rows("SELECT decision, event, by_run FROM decision_events") {
            if event != "seen" {
                *snapshot.terminal.entry(decision.clone()).or_default() += 1;
            }
            *snapshot.events.entry((decision, event, run)).or_default() += 1;
        }
        snapshot
    }

    /// Looks `s` up.
    fn stored(&self, s: &Sent) -> Stored {
        let run = run(s.client);
        let event = |event: &str| {
            let target = s.target.clone().expect("a decision");
            let key = (target.clone(), event.to_owned(), Some(run.clone()));
            Stored {
                copies: self.events.get(&key).copied().unwrap_or(0),
                id: Some(target),
            }
        };
        match s.verb {
            "message.send" => {
                let found = self.messages.get(&s.marker).map_or(&[][..], Vec::as_slice);
                Stored {
                    copies: found.len(),
                    id: found
                        .iter()
                        .find(|(_, from)| from.as_deref() == Some(run.as_str()))
                        .map(|(id, _)| id.clone()),
                }
            }
            "decision.raise" => {
                let found = self.decisions.get(&s.marker).map_or(&[][..], Vec::as_slice);
                Stored {
                    copies: found.len(),
                    id: found
                        .iter()
                        .find(|(_, by)| by == &run)
                        .map(|(id, _)| id.clone()),
                }
            }
            "decision.resolve" => event("resolved"),
            "decision.withdraw" => event("withdrawn"),
            other => panic!("no lookup for {other}"),
        }
    }
}

/// Whether the trail of `id` shows request `s` as applied.
fn trail_shows(reader: &support::Agent, s: &Sent, id: &str) -> bool {
    let records = reader.trail(id);
    let run = run(s.client);
    records.iter().any(|r| match s.verb {
        "message.send" => {
            r["kind"] == "message.sent" && r["body"] == s.marker.as_str() && r["from_run"] == run
        }
        "decision.raise" => r["kind"] == "decision.raised" && r["question"] == s.marker.as_str(),
        "decision.resolve" => r["kind"] == "decision.resolved" && r["by_run"] == run,
        "decision.withdraw" => r["kind"] == "decision.withdrawn" && r["by_run"] == run,
        other => panic!("no trail check for {other}"),
    })
}

#[test]
fn acknowledged_requests_survive_sigkill_exactly_once() {
    let rounds = env_number("MOSAIC_CRASH_ROUNDS", DEFAULT_ROUNDS as u64) as usize;
    let seed = env_number("MOSAIC_CRASH_SEED", DEFAULT_SEED);
    let started = Instant::now();
    let root = support::data_root();
    let cfg = config(root.path(), &[business()], &launches(), &["crash"]);
    let mut broker = Broker::boot(root.path(), &cfg);
    for i in 0..CLIENTS {
        broker.agent(&run(i)).claim();
    }
    let shared = Arc::new(Shared {
        socket: broker.socket.clone(),
        live: Mutex::new(Live {
            epoch: 0,
            caps: broker.caps(),
        }),
        changed: Condvar::new(),
        stop: AtomicBool::new(false),
        routed: Mutex::new(Vec::new()),
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || client(i, &shared, seed))
        })
        .collect();

    let mut rng = Rng::new(seed);
    let mut traffic = || {
        let ms = MAX_TRAFFIC_MS / 5 + rng.below(MAX_TRAFFIC_MS * 4 / 5);
        Duration::from_millis(ms)
    };
    // When each broker generation but the last was killed.
    let mut kills: Vec<Instant> = Vec::new();
    for round in 0..rounds {
        // The crash lands at a random moment of full-speed traffic.
        std::thread::sleep(traffic());
        kills.push(Instant::now());
        broker.kill();
        let evidence = unlock(root.path());
        broker = Broker::boot(root.path(), &cfg);
        shared.publish(broker.caps());
        eprintln!(
            "crash: round {} of {rounds}: killed, unlocked ({}), booted again",
            round + 1,
            evidence.display()
        );
    }
    // The last broker serves a while and is never killed.
    std::thread::sleep(traffic());
    shared.halt();
    let sent: Vec<Sent> = clients
        .into_iter()
        .flat_map(|c| c.join().expect("a client thread"))
        .collect();
    let last_epoch = rounds;
    broker.close();

    // The closed store.
    let ledger_rows = assert_whole_transactions(root.path());
    assert_chain_verifies(root.path(), ledger_rows);
    let db = open_db(root.path());
    let snapshot = Snapshot::read(&db);
    let mut problems: Vec<String> = Vec::new();
    let mut unknown_to_trail: Vec<(usize, String, bool)> = Vec::new();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    let mut unknown_applied = 0;
    let (mut lost, mut duplicates) = (0, 0);
    for (k, s) in sent.iter().enumerate() {
        let here = snapshot.stored(s);
        let label = match &s.outcome {
            Outcome::Acked(_) => "acknowledged".to_owned(),
            Outcome::Refused(r) => format!("refused:{}", r.code()),
            Outcome::Unknown => "outcome-unknown".to_owned(),
            Outcome::Unavailable => "broker-unavailable".to_owned(),
        };
        *tally.entry(label).or_default() += 1;
        if here.copies > 1 {
            duplicates += 1;
            problems.push(format!("{s:?} is stored {} times", here.copies));
        }
        match &s.outcome {
            Outcome::Acked(_) => {
                if here.copies == 0 {
                    lost += 1;
                    problems.push(format!("acknowledged but lost: {s:?}"));
                }
                if let Some(id) = s.returned_id() {
                    if here.id.as_deref() != Some(id.as_str()) {
                        problems.push(format!("{s:?} is stored as {:?}", here.id));
                    }
                }
            }
            Outcome::Refused(refusal) => {
                if here.copies != 0 {
                    problems.push(format!("refused but applied: {s:?}"));
                }
                // A resolve racing the raiser's withdrawal (or the reverse)
                // finds the decision closed; an old capability may reach the
                // next broker. Nothing else is expected.
                let allowed = if *refusal == Refusal::DecisionClosed {
                    let target = s.target.as_deref().unwrap_or_default();
                    snapshot.terminal.get(target) == Some(&1)
                } else if *refusal == Refusal::BadCapability {
                    s.epoch < last_epoch
                } else {
                    problems.push(format!("unexpected refusal {}: {s:?}", refusal.code()));
                    true
                };
                if !allowed {
                    problems.push(format!("a refusal the store does not explain: {s:?}"));
                }
            }
            Outcome::Unknown => {
                if s.epoch == last_epoch {
                    problems.push(format!("outcome-unknown without a crash: {s:?}"));
                }
                if here.copies == 1 {
                    unknown_applied += 1;
                }
                if let Some(id) = here.id.clone() {
                    unknown_to_trail.push((k, id, here.copies == 1));
                }
            }
            Outcome::Unavailable => {
                if s.epoch == last_epoch {
                    problems.push(format!("broker-unavailable without a crash: {s:?}"));
                }
                if here.copies != 0 {
                    problems.push(format!("broker-unavailable but applied: {s:?}"));
                }
            }
        }
    }
    // Every refusal the broker answered was recorded once, and only an
    // unanswered request may have left one more. A run's refusals past ten
    // a second of a kind are counted in their window (`refusal_tally`),
    // whose count is written once the window is over: a SIGKILL loses the
    // counts of the windows still open, so a refusal answered in the last
    // two windows before its broker was killed may be missing.
    let lossable = 2 * mosaic_domain::refusal_counts::WINDOW;
    let mut per_verb: BTreeMap<(usize, &str), (i64, i64, i64)> = BTreeMap::new();
    for s in &sent {
        let entry = per_verb.entry((s.client, s.verb)).or_default();
        match s.outcome {
            Outcome::Refused(Refusal::BadCapability) => {}
            Outcome::Refused(_) => {
                entry.0 += 1;
                let killed = kills.get(s.epoch);
                if killed.is_some_and(|at| at.saturating_duration_since(s.answered) < lossable) {
                    entry.2 += 1;
                }
            }
            Outcome::Unknown => entry.1 += 1,
            Outcome::Acked(_) | Outcome::Unavailable => {}
        }
    }
    for ((client, verb), (refused, unknown, before_a_kill)) in &per_verb {
        let recorded = count(
            &db,
            "SELECT coalesce(sum(count), 0) FROM refusal_tally WHERE run = ?1 AND verb = ?2",
            [run(*client).as_str(), verb],
        );
        if recorded < refused - before_a_kill || recorded > refused + unknown {
            problems.push(format!(
                "{} {verb}: {refused} refusals answered ({before_a_kill} just before a kill), \
                 {unknown} unanswered, {recorded} recorded",
                run(*client)
            ));
        }
    }
    drop(db);

    // The reopened broker boots (a verified open) and its trail agrees
    // with the store about every unanswered request it can name.
    let broker = Broker::boot(root.path(), &cfg);
    let reader = broker.reader(0);
    for (k, id, applied) in &unknown_to_trail {
        let s = &sent[*k];
        if trail_shows(&reader, s, id) != *applied {
            problems.push(format!("the trail of {id} disagrees with the store: {s:?}"));
        }
    }
    broker.close();

    let summary = json!({
        "test": "crash",
        "seed": seed,
        "rounds": rounds,
        "clients": CLIENTS,
        "requests": sent.len(),
        "outcomes": tally,
        "outcome_unknown_applied": unknown_applied,
        "outcome_unknown_trailed": unknown_to_trail.len(),
        "lost": lost,
        "duplicates": duplicates,
        "ledger_rows": ledger_rows,
        "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    });
    eprintln!("{summary}");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    let acked = tally.get("acknowledged").copied().unwrap_or(0);
    assert!(acked > 0, "nothing was acknowledged: {summary}");
}

/// Agents of the change-feed leg that wait on `changes`, each its own role.
const WAITERS: usize = 4;

/// Agents of that leg that send them messages.
const SENDERS: usize = 4;

/// The change-feed leg's seed by default.
const DEFAULT_FEED_SEED: u64 = 0x5eed_0020;

/// Waiter `k`'s role and run.
fn waiter_role(k: usize) -> String {
    format!("q{k}")
}

fn waiter_run(k: usize) -> String {
    format!("qr{k}")
}

/// Sender `i`'s role and run.
fn sender_role(i: usize) -> String {
    format!("s{i}")
}

fn sender_run(i: usize) -> String {
    format!("sr{i}")
}

/// `feed`: waiters and senders, every role may send within role.
fn feed_business() -> Value {
    let roles: Map<String, Value> = (0..WAITERS)
        .map(waiter_role)
        .chain((0..SENDERS).map(sender_role))
        .map(|role| {
            (
                role,
                json!({"authority": {"withinRole": ["message.send"], "crossRole": []}}),
            )
        })
        .collect();
    json!({
        "id": "feed",
        "human": "carol",
        "arbiters": {"technical": sender_role(0), "delivery": sender_role(1)},
        "roles": roles,
    })
}

fn feed_launches() -> Vec<Value> {
    (0..WAITERS)
        .map(|k| launch("feed", &waiter_role(k), &waiter_run(k)))
        .chain((0..SENDERS).map(|i| launch("feed", &sender_role(i), &sender_run(i))))
        .collect()
}

/// One `message.send` of the leg to a waiter, and how it ended.
#[derive(Debug, Clone)]
struct FeedSend {
    /// The waiter it was sent to.
    to: usize,
    /// Its body, unique per send.
    marker: String,
    epoch: usize,
    outcome: Outcome,
}

/// One change a waiter was told of, in the order it was told.
#[derive(Debug, Clone)]
struct Seen {
    seq: u64,
    kind: String,
    /// The message of a `message.sent`.
    message: Option<String>,
}

/// What one waiter saw across every broker generation.
#[derive(Debug, Default)]
struct WaiterLog {
    seen: Vec<Seen>,
    /// Waits answered (with changes or at their timeout).
    answered: usize,
    /// Waits with no answer: the broker died under them (`outcome-unknown`)
    /// or could not be reached, or an old capability met the next broker.
    cut: usize,
    /// Order or cursor faults in the answers themselves.
    problems: Vec<String>,
}

/// Sender `i`: `message.send` to a random waiter, as fast as answers come.
fn feed_sender(i: usize, shared: &Shared, seed: u64) -> Vec<FeedSend> {
    let mut rng = Rng::new(seed ^ ((i as u64 + 1) << 40));
    let mut sent = Vec::new();
    let mut misses = 0;
    for n in 0.. {
        let Some((epoch, cap)) = shared.current(&sender_run(i)) else {
            break;
        };
        let to = rng.below(WAITERS as u64) as usize;
        let marker = format!("s{i}-m{n}");
        let args = json!({"to": waiter_role(to), "body": marker});
        let outcome = match Client::new(&shared.socket, cap).call("message.send", args) {
            Ok(result) => Outcome::Acked(result),
            Err(Refusal::OutcomeUnknown) => Outcome::Unknown,
            Err(Refusal::BrokerUnavailable) => Outcome::Unavailable,
            Err(refusal) => Outcome::Refused(refusal),
        };
        let lost = matches!(
            outcome,
            Outcome::Unknown | Outcome::Unavailable | Outcome::Refused(Refusal::BadCapability)
        );
        sent.push(FeedSend {
            to,
            marker,
            epoch,
            outcome,
        });
        if lost {
            misses += 1;
            if misses == 2 {
                shared.wait_past(epoch);
                misses = 0;
            }
        } else {
            misses = 0;
        }
    }
    sent
}

/// Waiter `k`: from `since` (its cursor before any message was sent),
/// waits on `changes {since: cursor}` and moves the cursor to each
/// answer's. A wait the crash cut leaves the cursor where the last answer
/// put it, and the waiter asks the next broker from there. Once `draining`
/// is set (every sender has stopped) it ends at the first wait, begun
/// after that, that is answered with no change.
fn feed_waiter(k: usize, shared: &Shared, draining: &AtomicBool, since: u64) -> WaiterLog {
    let mut log = WaiterLog::default();
    let mut cursor = since;
    let mut misses = 0;
    loop {
        let (epoch, cap) = {
            let live = shared.live.lock().unwrap_or_else(PoisonError::into_inner);
            let cap = live.caps.get(&waiter_run(k)).expect("a capability").clone();
            (live.epoch, cap)
        };
        let last = draining.load(Ordering::SeqCst);
        let args = json!({"since": cursor, "timeoutMs": 1000});
        match Client::new(&shared.socket, cap).call("changes", args) {
            Ok(answer) => {
                misses = 0;
                log.answered += 1;
                let next = answer["cursor"].as_u64().expect("a cursor");
                let changes = answer["changes"].as_array().expect("a list of changes");
                let mut at = cursor;
                if next < cursor {
                    log.problems.push(format!(
                        "{}: cursor {next} before since {cursor}",
                        waiter_role(k)
                    ));
                }
                for change in changes {
                    let seq = change["seq"].as_u64().expect("a seq");
                    if seq <= at || seq > next {
                        log.problems.push(format!(
                            "{}: change {change} out of order after {at}, cursor {next}",
                            waiter_role(k)
                        ));
                    }
                    at = seq;
                    log.seen.push(Seen {
                        seq,
                        kind: change["kind"].as_str().expect("a kind").to_owned(),
                        message: change["message"].as_str().map(str::to_owned),
                    });
                }
                let done = last && changes.is_empty();
                cursor = next;
                if done {
                    return log;
                }
            }
            Err(Refusal::OutcomeUnknown | Refusal::BrokerUnavailable | Refusal::BadCapability) => {
                log.cut += 1;
                misses += 1;
                if misses == 2 {
                    shared.wait_past(epoch);
                    misses = 0;
                }
            }
            Err(refusal) => {
                log.problems
                    .push(format!("{}: changes refused {refusal}", waiter_role(k)));
                return log;
            }
        }
    }
}

/// SIGKILL while agents wait on `changes`: waiters hold open waits while
/// senders send them messages; the broker is killed at random moments,
/// unlocked and booted again, and each waiter resumes from its last
/// answered cursor. Across the crashes no change is lost and none repeats:
/// each waiter is told of every message stored for its role (every
/// acknowledged send among them) exactly once, in store order, and of
/// nothing else.
#[test]
fn changes_waiters_resume_across_sigkill_without_loss_or_repeat() {
    let rounds = env_number("MOSAIC_CRASH_ROUNDS", DEFAULT_ROUNDS as u64) as usize;
    let seed = env_number("MOSAIC_CRASH_SEED", DEFAULT_FEED_SEED);
    let started = Instant::now();
    let root = support::data_root();
    let cfg = config(root.path(), &[feed_business()], &feed_launches(), &[]);
    let mut broker = Broker::boot(root.path(), &cfg);
    for k in 0..WAITERS {
        broker.agent(&waiter_run(k)).claim();
    }
    for i in 0..SENDERS {
        broker.agent(&sender_run(i)).claim();
    }
    let shared = Arc::new(Shared {
        socket: broker.socket.clone(),
        live: Mutex::new(Live {
            epoch: 0,
            caps: broker.caps(),
        }),
        changed: Condvar::new(),
        stop: AtomicBool::new(false),
        routed: Mutex::new(Vec::new()),
    });
    let draining = Arc::new(AtomicBool::new(false));
    // Each waiter's cursor before any message is sent: it must hear of
    // every one.
    let waiters: Vec<_> = (0..WAITERS)
        .map(|k| {
            let answer = broker.agent(&waiter_run(k)).ok("changes", json!({}));
            assert_eq!(answer["changes"], json!([]), "{answer}");
            let since = answer["cursor"].as_u64().expect("a cursor");
            let (shared, draining) = (Arc::clone(&shared), Arc::clone(&draining));
            std::thread::spawn(move || feed_waiter(k, &shared, &draining, since))
        })
        .collect();
    let senders: Vec<_> = (0..SENDERS)
        .map(|i| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || feed_sender(i, &shared, seed))
        })
        .collect();

    let mut rng = Rng::new(seed);
    let mut traffic = || {
        let ms = MAX_TRAFFIC_MS / 5 + rng.below(MAX_TRAFFIC_MS * 4 / 5);
        Duration::from_millis(ms)
    };
    for round in 0..rounds {
        // The crash lands at a random moment of traffic and open waits.
        std::thread::sleep(traffic());
        broker.kill();
        let evidence = unlock(root.path());
        broker = Broker::boot(root.path(), &cfg);
        shared.publish(broker.caps());
        eprintln!(
            "crash_changes: round {} of {rounds}: killed, unlocked ({}), booted again",
            round + 1,
            evidence.display()
        );
    }
    // The last broker serves a while and is never killed; the senders stop,
    // then every waiter reads up to the end.
    std::thread::sleep(traffic());
    shared.halt();
    let sent: Vec<FeedSend> = senders
        .into_iter()
        .flat_map(|s| s.join().expect("a sender thread"))
        .collect();
    draining.store(true, Ordering::SeqCst);
    let logs: Vec<WaiterLog> = waiters
        .into_iter()
        .map(|w| w.join().expect("a waiter thread"))
        .collect();
    let last_epoch = rounds;
    broker.close();

    // The closed store: every message to each waiter, in write order.
    let ledger_rows = assert_whole_transactions(root.path());
    assert_chain_verifies(root.path(), ledger_rows);
    let db = open_db(root.path());
    let stored: Vec<Vec<(String, String)>> = (0..WAITERS)
        .map(|k| {
            let mut st = db
                .prepare("SELECT id, body FROM messages WHERE business = 'feed' AND to_role = ?1 ORDER BY seq")
                .expect("prepare");
            st.query_map([waiter_role(k)], |r| Ok((r.get(0)?, r.get(1)?)))
                .expect("query")
                .map(|r| r.expect("a row"))
                .collect()
        })
        .collect();
    drop(db);

    let mut problems: Vec<String> = logs.iter().flat_map(|l| l.problems.clone()).collect();
    let (mut acked, mut unknown, mut unknown_applied) = (0, 0, 0);
    let (mut lost, mut repeated, mut phantom) = (0, 0, 0);
    let mut told: Vec<HashMap<String, usize>> = vec![HashMap::new(); WAITERS];
    for (k, log) in logs.iter().enumerate() {
        for seen in &log.seen {
            if let Some(id) = &seen.message {
                *told[k].entry(id.clone()).or_default() += 1;
            }
        }
        let heard: Vec<&str> = log
            .seen
            .iter()
            .filter(|s| s.kind == "message.sent")
            .filter_map(|s| s.message.as_deref())
            .collect();
        let expected: Vec<&str> = stored[k].iter().map(|(id, _)| id.as_str()).collect();
        if heard != expected {
            problems.push(format!(
                "{} heard {} messages, {} are stored for it (or in another order)",
                waiter_role(k),
                heard.len(),
                expected.len()
            ));
        }
        for (id, n) in &told[k] {
            if *n > 1 {
                repeated += 1;
                problems.push(format!("{} told of {id} {n} times", waiter_role(k)));
            }
            if !expected.contains(&id.as_str()) {
                phantom += 1;
                problems.push(format!(
                    "{} told of {id}, not stored for it",
                    waiter_role(k)
                ));
            }
        }
        let seqs: Vec<u64> = log.seen.iter().map(|s| s.seq).collect();
        if seqs.windows(2).any(|w| w[0] >= w[1]) {
            problems.push(format!(
                "{}: change positions repeat or go back",
                waiter_role(k)
            ));
        }
    }
    let by_marker: HashMap<&str, (usize, &str)> = stored
        .iter()
        .enumerate()
        .flat_map(|(k, rows)| {
            rows.iter()
                .map(move |(id, body)| (body.as_str(), (k, id.as_str())))
        })
        .collect();
    for s in &sent {
        match &s.outcome {
            Outcome::Acked(result) => {
                acked += 1;
                let id = result["id"].as_str().expect("a message id");
                let times = told[s.to].get(id).copied().unwrap_or(0);
                if times == 0 {
                    lost += 1;
                    problems.push(format!("acknowledged, never told: {s:?}"));
                }
                if by_marker.get(s.marker.as_str()) != Some(&(s.to, id)) {
                    problems.push(format!("acknowledged, not stored as answered: {s:?}"));
                }
            }
            Outcome::Unknown => {
                unknown += 1;
                if s.epoch == last_epoch {
                    problems.push(format!("outcome-unknown without a crash: {s:?}"));
                }
                if by_marker.contains_key(s.marker.as_str()) {
                    unknown_applied += 1;
                }
            }
            Outcome::Unavailable => {
                if s.epoch == last_epoch {
                    problems.push(format!("broker-unavailable without a crash: {s:?}"));
                }
                if by_marker.contains_key(s.marker.as_str()) {
                    problems.push(format!("broker-unavailable but applied: {s:?}"));
                }
            }
            Outcome::Refused(Refusal::BadCapability) if s.epoch < last_epoch => {}
            Outcome::Refused(refusal) => {
                problems.push(format!("unexpected refusal {}: {s:?}", refusal.code()));
            }
        }
    }
    let cut: usize = logs.iter().map(|l| l.cut).sum();
    let summary = json!({
        "test": "crash_changes",
        "seed": seed,
        "rounds": rounds,
        "waiters": WAITERS,
        "senders": SENDERS,
        "sends": sent.len(),
        "acked": acked,
        "outcome_unknown": unknown,
        "outcome_unknown_applied": unknown_applied,
        "lost": lost,
        "repeated": repeated,
        "phantom": phantom,
        "changes_told": logs.iter().map(|l| l.seen.len()).sum::<usize>(),
        "waits_answered": logs.iter().map(|l| l.answered).sum::<usize>(),
        "waits_cut": cut,
        "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    });
    eprintln!("{summary}");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(acked > 0, "nothing was acknowledged: {summary}");
    if rounds > 0 {
        assert!(cut > 0, "no crash landed while an agent waited: {summary}");
    }
}
