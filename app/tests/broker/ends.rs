//! The end of a run: the host's `endRun` over its IPC, what the run's
//! capability is answered from then on, the feed's wake-ups, the rows of
//! `agents` across a restart, and the boot that ends a run whose process
//! is gone (as after `up` was killed outright), freeing its role.

use std::process::{Command, Stdio};
use std::thread;

use mosaic_ports::ProcessTable as _;
use serde_json::{json, Value};

use crate::support::{acme, acme_launches, config, data_root, launch, unlock, Agent, Broker};

/// The current cursor, from `changes` without `since`.
#[track_caller]
fn cursor(agent: &Agent) -> u64 {
    agent.ok("changes", json!({}))["cursor"]
        .as_u64()
        .expect("a cursor")
}

/// `changes {since}` on a thread of its own, waiting up to 20 s.
fn wait(agent: &Agent, since: u64) -> thread::JoinHandle<Value> {
    let agent = agent.clone();
    thread::spawn(move || agent.ok("changes", json!({"since": since, "timeoutMs": 20_000})))
}

/// The `(kind, role)` pairs of an answer's changes.
fn ends_heard(answer: &Value) -> Vec<(String, String)> {
    answer["changes"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap_or_default().to_owned(),
                c["role"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The run `run`'s row of `agents`.
#[track_caller]
fn row(reader: &Agent, run: &str) -> Value {
    let agents = reader.ok("agents", json!({}));
    agents
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["run"] == run)
        .cloned()
        .unwrap_or_else(|| panic!("no row for {run}: {agents}"))
}

/// A row's `ended` without its time, after checking it has one.
#[track_caller]
fn ended(row: &Value) -> Value {
    let mut ended = row["ended"].clone();
    let at = ended
        .as_object_mut()
        .and_then(|e| e.remove("at"))
        .unwrap_or_else(|| panic!("no end in {row}"));
    assert!(at.as_str().is_some_and(|a| a.ends_with('Z')), "{row}");
    ended
}

#[test]
fn end_run_frees_the_role_wakes_its_watchers_and_refuses_the_run_from_then_on() {
    let root = data_root();
    let cfg = config(root.path(), &[acme()], &acme_launches(), &["acme"]);
    let mut b = Broker::boot(root.path(), &cfg);
    let (reader, dev) = (b.reader(0), b.agent("dev-1"));
    dev.claim();
    // The holder and a reader wait on the feed; the end wakes both.
    let (dev_waits, reader_waits) = (wait(&dev, cursor(&dev)), wait(&reader, cursor(&reader)));
    assert_eq!(
        b.host(&json!({"op": "endRun", "run": "dev-1", "status": 3})),
        json!({"ok": true})
    );
    let freed = [("session.ended".to_owned(), "dev".to_owned())];
    assert_eq!(ends_heard(&dev_waits.join().expect("dev's wait")), freed);
    assert_eq!(ends_heard(&reader_waits.join().expect("the wait")), freed);
    // Every call of the ended run is refused, reads and waits included.
    for (verb, args) in [
        ("role.claim", json!({})),
        ("role.release", json!({})),
        ("message.receive", json!({})),
        ("message.send", json!({"to": "lead", "body": "still here?"})),
        ("inbox", json!({})),
        ("agents", json!({})),
        ("trail", json!({"subject": "dev"})),
        ("changes", json!({})),
    ] {
        dev.refused(verb, args, "run-ended");
    }
    let dev_row = row(&reader, "dev-1");
    assert_eq!(
        (&dev_row["holding"], &dev_row["exited"], ended(&dev_row)),
        (
            &json!(false),
            &json!({"status": 3, "signal": null}),
            json!({"cause": "failed", "status": 3})
        )
    );
    // Bound again with its record, the run is still over.
    b.bind_ok(&launch("acme", "dev", "dev-1"))
        .refused("role.claim", json!({}), "run-ended");
    // The next run of the role claims it at once.
    b.agent("dev-2").claim();
    // What the host gets wrong is refused, and the broker keeps serving.
    for (line, code) in [
        (json!({"op": "endRun", "run": "dev-1"}), "run-ended"),
        (
            json!({"op": "endRun", "run": "nobody-1"}),
            "unknown-reference",
        ),
        (
            json!({"op": "endRun", "run": "qa-1", "status": 0, "signal": 9}),
            "bad-request",
        ),
        (
            json!({"op": "endRun", "run": "qa-1", "status": 256}),
            "bad-request",
        ),
        (json!({"op": "endRun", "run": "-qa"}), "bad-id"),
        (json!({"op": "endRun"}), "bad-request"),
    ] {
        assert_eq!(b.host(&line), json!({"ok": false, "error": code}), "{line}");
    }
    // A signal is a failure; neither a status nor a signal is an exit.
    assert_eq!(
        b.host(&json!({"op": "endRun", "run": "dev-2", "signal": 9})),
        json!({"ok": true})
    );
    assert_eq!(
        b.host(&json!({"op": "endRun", "run": "qa-1", "status": null})),
        json!({"ok": true})
    );
    assert_eq!(
        ended(&row(&reader, "dev-2")),
        json!({"cause": "failed", "signal": 9})
    );
    assert_eq!(ended(&row(&reader, "qa-1")), json!({"cause": "exited"}));
    assert_eq!(row(&reader, "lead-1")["ended"], Value::Null);
    // What the broker saw each run ask is kept in its memory only (a
    // restarted broker starts afresh); the ends are evidence.
    let evidence = |mut row: Value| {
        for key in ["lastVerb", "lastAt", "waiting"] {
            row.as_object_mut().and_then(|o| o.remove(key));
        }
        row
    };
    let before: Vec<Value> = ["dev-1", "dev-2", "qa-1"]
        .iter()
        .map(|run| evidence(row(&reader, run)))
        .collect();
    let log = b.close();
    assert!(log.contains("run ended"), "{log}");

    // A restart rebuilds the same ends from the evidence.
    let again = Broker::boot(root.path(), &cfg);
    let reader = again.reader(0);
    let after: Vec<Value> = ["dev-1", "dev-2", "qa-1"]
        .iter()
        .map(|run| row(&reader, run))
        .inspect(|row| assert_eq!(row["lastVerb"], Value::Null, "{row}"))
        .map(evidence)
        .collect();
    assert_eq!(after, before, "the ends as the live broker had them");
    again
        .agent("dev-1")
        .refused("role.claim", json!({}), "run-ended");
    let trail = reader.trail("dev");
    let kinds: Vec<&str> = trail.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "session.ended").count(),
        2,
        "{kinds:?}"
    );
    again.close();
}

#[test]
fn at_boot_a_run_whose_process_is_gone_ends_and_its_role_is_claimable() {
    let root = data_root();
    // dev-1 runs in a process of its own, which dies with the broker.
    let mut process = Command::new("sh")
        .args(["-c", "read _"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn dev-1's process");
    let pid = process.id();
    let start_time = mosaic_adapters::procfs::ProcFs::new()
        .process(pid)
        .expect("its stat")
        .start_time;
    let mut dev_1 = launch("acme", "dev", "dev-1");
    dev_1["pid"] = json!(pid);
    dev_1["startTime"] = json!(start_time);
    let first = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme()],
            &[dev_1, launch("acme", "lead", "lead-1")],
            &["acme"],
        ),
    );
    first.agent("dev-1").claim();
    first.agent("lead-1").claim();
    // The host dies outright, and its agent with it.
    first.kill();
    process.kill().expect("kill dev-1's process");
    process.wait().expect("reap it");
    unlock(root.path());

    // The next host launches dev-2; the boot ends dev-1, whose role is free.
    let second = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme()],
            &[launch("acme", "dev", "dev-2")],
            &["acme"],
        ),
    );
    let reader = second.reader(0);
    let dev_row = row(&reader, "dev-1");
    assert_eq!(
        (&dev_row["holding"], ended(&dev_row)),
        (&json!(false), json!({"cause": "process-gone"}))
    );
    // lead-1's process (the stand-in) runs: its run lives, and holds lead.
    let lead_row = row(&reader, "lead-1");
    assert_eq!(
        (&lead_row["ended"], &lead_row["holding"]),
        (&Value::Null, &json!(true))
    );
    second.agent("dev-2").claim();
    let log = second.close();
    assert!(
        log.contains("the run's process is gone: the run ended"),
        "{log}"
    );
}
