//! The broker as the S3 and S4 teams run it in their integration tests:
//! the real runtime (socket, protocol, browser HTTP/SSE) over the in-memory
//! fakes of `mosaic-ports`, so it opens no SQLite file and reads nothing
//! under `/proc`, and time moves only when the test moves it.
//!
//! Agents talk through the real socket [`Client`]; the human is a request
//! from this test process, whose ancestry the fake process table makes up
//! (clean, or with an agent among its ancestors); a browser request times
//! out when the test advances the clock; the evidence is read back through
//! [`views`]. The host's side of a run's life runs here too: ending runs
//! and hearing of every end, what it notes of a run, and the boot that
//! ends a run whose process is gone. Nothing here depends on the machine's real processes, so it
//! runs the same everywhere, run markers in the environment included.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use mosaic_adapters::config::{business_from_json, BootConfig};
use mosaic_adapters::wire::Usage;
use mosaic_app::runtime::human_proof::{BrokerExe, NONCE_ENV};
use mosaic_app::runtime::start_runtime;
use mosaic_app::runtime::world::{BrokerIdentity, Ports};
use mosaic_client::socket::Client;
use mosaic_client::views::views;
use mosaic_domain::evidence::{EndCause, Ending, Harness, LaunchRecord};
use mosaic_domain::{BusinessId, Refusal, RoleInstance, RunId, Timestamp};
use mosaic_ports::fakes::{
    FakeCredentials, FakeProcess, FakeProcessTable, ManualClock, MemoryStore, SeededEntropy,
};
use mosaic_ports::process::Environ;
use mosaic_ports::{Clock, ExeIdentity, ProcessError, ProcessInfo, ProcessTable};
use serde_json::{json, Value};

const EXE: &str = "/opt/mosaic/bin/mosaic-bus";
/// The device and inode of the made-up executable.
const EXE_DEV: u64 = 2049;
const EXE_INO: u64 = 131_075;
const NONCE: &str = "0123456789abcdef0123456789abcdef";
/// The fake pids of the two agents; no such processes need exist.
const LEAD_PID: u32 = 7001;
const DEV_PID: u32 = 7002;
const DEV_START: u64 = 12;
/// The fake shell the human's CLI runs in.
const SHELL_PID: u32 = 9001;

fn launch(role: &str, run: &str, pid: u32, start_time: u64) -> LaunchRecord {
    LaunchRecord {
        business: BusinessId::parse("shop").expect("id"),
        role: RoleInstance::parse(role).expect("role"),
        run: RunId::parse(run).expect("run"),
        harness: Harness::Pi,
        address: None,
        pid,
        start_time,
    }
}

/// The human CLI as the fake table shows it: this test process (the
/// socket's peer, as `SO_PEERCRED` says) is the broker's executable with
/// the request's nonce, started from a shell whose parent is `parent`.
fn human_ancestry(table: &FakeProcessTable, parent: u32) {
    let uid = rustix::process::geteuid().as_raw();
    table.insert(
        FakeProcess::new(std::process::id(), SHELL_PID)
            .uid(uid)
            .start_time(500)
            .exe(EXE)
            .exe_identity(EXE_DEV, EXE_INO)
            .env([(NONCE_ENV, NONCE)]),
    );
    table.insert(
        FakeProcess::new(SHELL_PID, parent)
            .uid(uid)
            .start_time(100)
            .env([("SHELL", "/bin/sh")]),
    );
}

/// The two agents' processes, as the broker checks them at binding: they
/// run, as the broker's user, since their records' start times.
fn agents_running(table: &FakeProcessTable) {
    let uid = rustix::process::geteuid().as_raw();
    table.insert(FakeProcess::new(1, 0).start_time(1));
    table.insert(FakeProcess::new(LEAD_PID, 1).uid(uid).start_time(11));
    table.insert(
        FakeProcess::new(DEV_PID, 1)
            .uid(uid)
            .start_time(DEV_START)
            .env([("PATH", "/usr/bin")]),
    );
}

/// One line as the human CLI sends it.
fn human(socket: &std::path::Path, verb: &str, args: Value) -> Result<Value, Refusal> {
    let line = json!({"human": {"nonce": NONCE}, "business": "shop", "verb": verb, "args": args});
    let answer = Client::new(socket, "").call_line(line.to_string().as_bytes())?;
    mosaic_client::socket::parse_response(&answer)
}

/// A pane's event stream over plain HTTP/1.1, read line by line.
struct Pane {
    events: BufReader<TcpStream>,
}

impl Pane {
    fn connect(url: &str, token: &str) -> Pane {
        let address = url.strip_prefix("http://").expect("an http url");
        let mut stream = TcpStream::connect(address).expect("connect");
        write!(
            stream,
            "GET /api/events?browser=1&clientId=pane-1&token={token} HTTP/1.1\r\nHost: {address}\r\n\r\n"
        )
        .expect("request");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut pane = Pane {
            events: BufReader::new(stream),
        };
        assert_eq!(pane.next()["type"], "heartbeat", "registered");
        pane
    }

    fn next(&mut self) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.events.read_line(&mut line).expect("read") > 0,
                "stream ended"
            );
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                return serde_json::from_str(data).expect("event JSON");
            }
        }
    }
}

const SHOP: &str = r#"{"id": "shop", "human": "alice",
    "arbiters": {"technical": "lead", "delivery": "lead"},
    "roles": {
      "lead": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
      "dev": {"authority": {"withinRole": ["browser.snapshot", "message.send"], "crossRole": []}}}}"#;

/// A running broker over fakes, with the handles a test moves it by.
struct Shop {
    broker: mosaic_app::runtime::Broker,
    booted: mosaic_app::runtime::Booted,
    store: MemoryStore,
    clock: ManualClock,
    _dir: tempfile::TempDir,
}

impl Shop {
    /// Starts `shop` over the fakes and `processes`, with browser control,
    /// `lead-1` and `dev-1` bound and a reader.
    fn start(processes: Arc<dyn ProcessTable>) -> Shop {
        let launches = vec![
            launch("lead", "lead-1", LEAD_PID, 11),
            launch("dev", "dev-1", DEV_PID, DEV_START),
        ];
        Shop::start_over(MemoryStore::new(), processes, launches)
    }

    /// Starts `shop` over `store` (a restart, when it holds evidence),
    /// the fakes and `processes`, with browser control, `launches` bound
    /// and a reader.
    fn start_over(
        store: MemoryStore,
        processes: Arc<dyn ProcessTable>,
        launches: Vec<LaunchRecord>,
    ) -> Shop {
        let clock = ManualClock::new(Timestamp::from_unix_ms(1_767_225_600_000).expect("time"));
        let dir = tempfile::tempdir().expect("a folder for the socket");
        let ports = Ports {
            store: store.clone(),
            clock: Arc::new(clock.clone()),
            entropy: Box::new(SeededEntropy::new(42)),
            processes,
            credentials: Box::new(FakeCredentials::new()),
            identity: BrokerIdentity {
                uid: rustix::process::geteuid().as_raw(),
                exe: BrokerExe {
                    path: EXE.into(),
                    identity: ExeIdentity {
                        dev: EXE_DEV,
                        ino: EXE_INO,
                    },
                },
                namespaces: mosaic_ports::fakes::HOST_NAMESPACES,
            },
        };
        let config = BootConfig {
            data_root: dir.path().to_owned(),
            businesses: vec![business_from_json(SHOP).expect("business")],
            launches,
            readers: vec![BusinessId::parse("shop").expect("id")],
            browser_listen: Some("127.0.0.1:0".into()),
            ..BootConfig::default()
        };
        let (broker, booted) = start_runtime(ports, config).expect("the runtime starts over fakes");
        Shop {
            broker,
            booted,
            store,
            clock,
            _dir: dir,
        }
    }

    /// A socket client of `run`.
    fn agent(&self, run: &str) -> Client {
        let launch = self
            .booted
            .launches
            .iter()
            .find(|l| l.run.as_str() == run)
            .expect("a launch");
        Client::new(&self.booted.socket, launch.cap.expose())
    }
}

#[test]
fn the_runtime_over_fakes_serves_agents_the_human_and_a_pane_on_the_test_clock() {
    let table = FakeProcessTable::new();
    agents_running(&table);
    let shop = Shop::start(Arc::new(table.clone()));
    let Shop {
        booted,
        store,
        clock,
        ..
    } = &shop;
    let (lead, dev) = (shop.agent("lead-1"), shop.agent("dev-1"));
    assert_eq!(
        lead.call("role.claim", json!({})),
        Ok(json!({"status": "claimed"}))
    );
    assert_eq!(
        dev.call("role.claim", json!({})),
        Ok(json!({"status": "claimed"}))
    );

    // A gated decision goes to the human.
    let raised = dev
        .call(
            "decision.raise",
            json!({"action": "release.publish", "target": "v1", "question": "Publish v1?",
                   "options": [{"key": "yes", "text": "Publish"}, {"key": "no", "text": "Wait"}],
                   "recommendation": "yes", "blocking": true, "task_ref": "vikunja:1/7"}),
        )
        .expect("raised");
    assert_eq!(raised["class"], "gated");
    assert_eq!(raised["route"], "human");
    let decision = raised["id"].as_str().expect("an id").to_owned();

    // A CLI with an agent (dev-1's launch) among its ancestors is refused,
    // and nothing is resolved.
    human_ancestry(&table, DEV_PID);
    let refused = human(
        &booted.socket,
        "decision.resolve",
        json!({"id": decision, "choice": "yes"}),
    );
    assert_eq!(refused, Err(Refusal::HumanProofFailed));

    // From a clean shell, the same request resolves it.
    human_ancestry(&table, 1);
    let resolved = human(
        &booted.socket,
        "decision.resolve",
        json!({"id": decision, "choice": "yes"}),
    )
    .expect("the human resolves it");
    assert_eq!(resolved["status"], "resolved");

    // A browser request reaches the pane, and times out when the clock
    // passes its deadline: no sleep, no real 10 s.
    let endpoint = booted.browser.as_ref().expect("browser control");
    let mut pane = Pane::connect(&endpoint.url, &endpoint.token.expose());
    let started = std::time::Instant::now();
    let asked = {
        let dev = dev.clone();
        std::thread::spawn(move || {
            dev.call(
                "browser.request",
                json!({"action": "snapshot", "parameters": {}, "timeoutMs": 10_000}),
            )
        })
    };
    let request = loop {
        let event = pane.next();
        if event["type"] == "browser-control-request" {
            break event;
        }
    };
    let claim_by = Timestamp::parse(request["properties"]["claimBy"].as_str().expect("claimBy"))
        .expect("a timestamp");
    assert_eq!(
        claim_by.unix_ms() - clock.now().unix_ms(),
        10_000,
        "claim-by is the test clock's"
    );
    clock.advance(Duration::from_millis(10_001));
    assert_eq!(
        asked.join().expect("the agent's thread"),
        Err(Refusal::BrowserTimeout)
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "timed out on the test clock, not after 10 s of real time"
    );

    // The evidence, read back through the shared views.
    let reader = views(Client::new(&booted.socket, booted.readers[0].cap.expose()));
    let kinds: Vec<String> = reader
        .trail(&decision)
        .expect("trail")
        .iter()
        .map(|r| r["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["decision.raised", "human.input", "decision.resolved"]
    );
    let agents = reader.agents().expect("agents");
    assert_eq!(agents.len(), 2);
    assert!(agents.iter().all(|a| a["holding"] == true), "{agents:?}");
    let records = store.records();
    let refused_proofs = records
        .iter()
        .filter(|r| format!("{:?}", r.evidence).contains("HumanProofFailed"))
        .count();
    assert_eq!(refused_proofs, 1, "the refused proof is evidence");
    assert!(
        records.windows(2).all(|w| w[0].at < w[1].at),
        "write times strictly increase on the test clock"
    );
    let Shop { broker, .. } = shop;
    broker.close().expect("close");
}

/// A process table whose environment reads of one pid stall until the test
/// lets them go, as a read of `/proc/<pid>/environ` can while the target's
/// memory map is locked.
struct Stalling {
    table: FakeProcessTable,
    pid: u32,
    state: std::sync::Mutex<(bool, bool)>,
    changed: std::sync::Condvar,
}

impl Stalling {
    /// Blocks until a read has stalled.
    fn wait_stalled(&self) {
        let state = self.state.lock().expect("lock");
        drop(
            self.changed
                .wait_while(state, |(stalled, _)| !*stalled)
                .expect("wait"),
        );
    }

    fn release(&self) {
        self.state.lock().expect("lock").1 = true;
        self.changed.notify_all();
    }
}

impl ProcessTable for Stalling {
    fn process(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        self.table.process(pid)
    }

    fn exe_identity(&self, pid: u32) -> Result<ExeIdentity, ProcessError> {
        self.table.exe_identity(pid)
    }

    fn namespaces(&self, pid: u32) -> Result<mosaic_ports::Namespaces, ProcessError> {
        self.table.namespaces(pid)
    }

    fn environ(&self, pid: u32) -> Result<Environ, ProcessError> {
        if pid == self.pid {
            let mut state = self.state.lock().expect("lock");
            state.0 = true;
            self.changed.notify_all();
            drop(
                self.changed
                    .wait_while(state, |(_, released)| !*released)
                    .expect("wait"),
            );
        }
        self.table.environ(pid)
    }
}

#[test]
fn a_human_proof_held_up_delays_only_itself_and_fails_at_its_limit() {
    let table = FakeProcessTable::new();
    agents_running(&table);
    human_ancestry(&table, 1);
    let stalling = Arc::new(Stalling {
        table,
        pid: std::process::id(),
        state: std::sync::Mutex::new((false, false)),
        changed: std::sync::Condvar::new(),
    });
    let shop = Shop::start(Arc::clone(&stalling) as Arc<dyn ProcessTable>);
    let (lead, dev) = (shop.agent("lead-1"), shop.agent("dev-1"));
    assert!(lead.call("role.claim", json!({})).is_ok());
    assert!(dev.call("role.claim", json!({})).is_ok());
    let socket = shop.booted.socket.clone();
    let asked = std::thread::spawn(move || human(&socket, "inbox", json!({})));
    stalling.wait_stalled();

    // While the human's proof is stuck reading /proc, the writer serves
    // everyone else: a send is answered (and acknowledged) now.
    let started = std::time::Instant::now();
    let sent = dev.call(
        "message.send",
        json!({"to": "lead", "body": "ready for review"}),
    );
    let took = started.elapsed();
    assert!(sent.is_ok(), "{sent:?}");
    let delivered = lead.call("message.receive", json!({})).expect("receive");
    assert_eq!(delivered[0]["body"], "ready for review");
    eprintln!("message.send while a human proof is stalled: {took:?}");

    // The proof's limit is on the clock: when it passes, the human is
    // refused, although the read is still stuck.
    shop.clock.advance(std::time::Duration::from_secs(2));
    assert_eq!(
        asked.join().expect("the human's thread"),
        Err(Refusal::HumanProofFailed)
    );
    stalling.release();
    let Shop { broker, .. } = shop;
    broker.close().expect("close");
}

/// The row of `run` in the reader's `agents`.
fn row(shop: &Shop, run: &str) -> Value {
    let reader = views(Client::new(
        &shop.booted.socket,
        shop.booted.readers[0].cap.expose(),
    ));
    let agents = reader.agents().expect("agents");
    agents
        .into_iter()
        .find(|a| a["run"] == run)
        .unwrap_or_else(|| panic!("no row for {run}"))
}

#[test]
fn the_host_and_the_human_end_runs_and_the_host_hears_of_every_end() {
    let table = FakeProcessTable::new();
    agents_running(&table);
    human_ancestry(&table, 1);
    let shop = Shop::start(Arc::new(table));
    let mut ends = shop.broker.ended_runs();
    let (lead, dev) = (shop.agent("lead-1"), shop.agent("dev-1"));
    assert!(lead.call("role.claim", json!({})).is_ok());
    assert!(dev.call("role.claim", json!({})).is_ok());
    let (lead_1, dev_1) = (
        RunId::parse("lead-1").unwrap(),
        RunId::parse("dev-1").unwrap(),
    );

    // What the host notes of a run's life shows in `agents`.
    shop.broker.note_restart(&dev_1);
    shop.broker.note_restart(&dev_1);
    let usage = Usage {
        turns: 4,
        input_tokens: 5_000,
        output_tokens: 300,
        cost_usd: 0.125,
    };
    assert_eq!(shop.broker.note_usage(&dev_1, usage), Ok(()));
    let nan = Usage {
        cost_usd: f64::NAN,
        ..usage
    };
    assert_eq!(
        shop.broker.note_usage(&dev_1, nan),
        Err(Refusal::BadRequest)
    );
    let dev_row = row(&shop, "dev-1");
    assert_eq!(
        (&dev_row["restarts"], &dev_row["usage"], &dev_row["ended"]),
        (
            &json!(2),
            &json!({"turns": 4, "inputTokens": 5000, "outputTokens": 300, "costUsd": 0.125}),
            &Value::Null
        )
    );
    assert_eq!(row(&shop, "lead-1")["usage"], Value::Null);

    // The human ends dev-1: the host hears of it before the human's answer.
    assert_eq!(
        human(&shop.booted.socket, "run.end", json!({"run": "dev-1"})),
        Ok(json!({}))
    );
    let heard = ends.try_recv().expect("the end is announced");
    assert_eq!(
        (
            heard.agent.run.as_str(),
            heard.ending.cause(),
            heard.vacated
        ),
        ("dev-1", EndCause::Human, true)
    );
    assert_eq!(
        dev.call("inbox", json!({})),
        Err(Refusal::RunEnded),
        "an ended run reads nothing"
    );

    // The host ends lead-1, which exited 0; the end is announced too.
    let exited = Ending::of_exit(Some(0), None).unwrap();
    assert_eq!(shop.broker.end_run(&lead_1, exited), Ok(()));
    let heard = ends.try_recv().expect("the end is announced");
    assert_eq!(
        (heard.agent.run.as_str(), heard.ending, heard.vacated),
        ("lead-1", exited, true)
    );
    assert_eq!(shop.broker.end_run(&lead_1, exited), Err(Refusal::RunEnded));
    assert_eq!(
        shop.broker
            .end_run(&RunId::parse("nobody-1").unwrap(), exited),
        Err(Refusal::UnknownReference)
    );
    assert_eq!(
        shop.broker
            .end_run(&lead_1, Ending::of_cause(EndCause::Human)),
        Err(Refusal::BadRequest),
        "only the human's verb records the human's word"
    );
    assert!(ends.try_recv().is_err(), "a refused end is not announced");
    let lead_row = row(&shop, "lead-1");
    assert_eq!(
        (
            &lead_row["ended"]["cause"],
            &lead_row["ended"]["status"],
            &lead_row["exited"]
        ),
        (
            &json!("exited"),
            &json!(0),
            &json!({"status": 0, "signal": null})
        )
    );
    let Shop { broker, .. } = shop;
    broker.close().expect("close");
}

#[test]
fn at_boot_a_run_whose_process_is_gone_ends_and_one_that_cannot_be_read_lives() {
    let table = FakeProcessTable::new();
    agents_running(&table);
    let first = Shop::start(Arc::new(table));
    assert!(first.agent("dev-1").call("role.claim", json!({})).is_ok());
    assert!(first.agent("lead-1").call("role.claim", json!({})).is_ok());
    let Shop { broker, store, .. } = first;
    broker.close().expect("close");

    // dev-1's pid now runs another process; lead-1's cannot be read.
    let uid = rustix::process::geteuid().as_raw();
    let table = FakeProcessTable::new()
        .with(FakeProcess::new(1, 0).start_time(1))
        .with(
            FakeProcess::new(DEV_PID, 1)
                .uid(uid)
                .start_time(DEV_START + 1),
        )
        .with(
            FakeProcess::new(LEAD_PID, 1)
                .uid(uid)
                .start_time(11)
                .stat_unreadable(),
        )
        .with(FakeProcess::new(7003, 1).uid(uid).start_time(13));
    let second = Shop::start_over(
        store,
        Arc::new(table),
        vec![launch("dev", "dev-2", 7003, 13)],
    );
    let dev_row = row(&second, "dev-1");
    assert_eq!(
        (&dev_row["ended"]["cause"], &dev_row["holding"]),
        (&json!("process-gone"), &json!(false))
    );
    let lead_row = row(&second, "lead-1");
    assert_eq!(
        (&lead_row["ended"], &lead_row["holding"]),
        (&Value::Null, &json!(true))
    );
    assert_eq!(
        second.agent("dev-2").call("role.claim", json!({})),
        Ok(json!({"status": "claimed"})),
        "the role of a run that is gone is free"
    );
    let Shop { broker, .. } = second;
    broker.close().expect("close");
}
