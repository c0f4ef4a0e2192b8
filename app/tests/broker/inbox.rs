//! What the human's inbox and `agents` say beyond their records:
//! blocking decisions first, then the oldest, across a restart; and
//! whether each run's process has exited.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use mosaic_ports::ProcessTable as _;
use serde_json::{json, Value};

use crate::support::{acme, acme_launches, config, data_root, Broker};

fn acme_broker(root: &Path) -> Broker {
    Broker::boot(root, &config(root, &[acme()], &acme_launches(), &["acme"]))
}

/// The ids of the inbox's decisions, in order.
fn decision_ids(inbox: &Value) -> Vec<Value> {
    inbox
        .as_array()
        .expect("an inbox")
        .iter()
        .filter(|item| item["type"] == "decision")
        .map(|item| item["id"].clone())
        .collect()
}

#[test]
fn the_humans_inbox_lists_blocking_decisions_first_then_the_oldest() {
    let root = data_root();
    let b = acme_broker(root.path());
    let ops = b.agent("ops-1");
    ops.claim();
    // ops has no authority: every action it raises is the human's.
    let raise = |action: &str, blocking: bool| {
        let extra = if blocking {
            json!({"blocking": true, "task_ref": "vikunja:3/41"})
        } else {
            json!({})
        };
        let d = ops.raise(action, Some("main"), extra);
        assert_eq!(d["route"], "human", "{d}");
        d["id"].clone()
    };
    // Enough of them that id order and raise order surely differ.
    let raised: Vec<(Value, bool)> = (0..12)
        .map(|i| {
            let blocking = i % 3 == 1;
            (raise(&format!("repo.step{i}"), blocking), blocking)
        })
        .collect();
    let expected: Vec<Value> = raised
        .iter()
        .filter(|(_, blocking)| *blocking)
        .chain(raised.iter().filter(|(_, blocking)| !*blocking))
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(decision_ids(&b.reader(0).ok("inbox", json!({}))), expected);
    b.close();
    // A restart replays the raises in their order.
    let b = acme_broker(root.path());
    assert_eq!(decision_ids(&b.reader(0).ok("inbox", json!({}))), expected);
    b.close();
}

/// The `agents` row of `run`.
#[track_caller]
fn row(broker: &Broker, run: &str) -> Value {
    let agents = broker.reader(0).ok("agents", json!({}));
    agents
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["run"] == run)
        .cloned()
        .unwrap_or_else(|| panic!("no row for {run} in {agents}"))
}

#[test]
fn agents_says_a_run_has_exited_once_its_process_is_gone() {
    let root = data_root();
    let mut b = acme_broker(root.path());
    let mut child = Command::new("sh")
        .args(["-c", "read _"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn an agent");
    let start_time = mosaic_adapters::procfs::ProcFs::new()
        .process(child.id())
        .expect("its stat")
        .start_time;
    b.bind_ok(
        &json!({"business": "acme", "role": "dev", "run": "dev-9", "harness": "pi",
                      "pid": child.id(), "startTime": start_time}),
    );
    assert_eq!(row(&b, "dev-9")["exited"], Value::Null);
    // The stand-in every other launch names still runs.
    assert_eq!(row(&b, "dev-1")["exited"], Value::Null);
    let mut stdin = child.stdin.take().expect("its input");
    stdin.write_all(b"go\n").expect("release it");
    let status = child.wait().expect("reap it");
    assert!(status.success(), "{status}");
    // Gone from the process table: exited, with no status the broker
    // could know (only `up`, which reaps its agents, tells it that).
    assert_eq!(
        row(&b, "dev-9")["exited"],
        json!({"status": null, "signal": null})
    );
    assert_eq!(row(&b, "dev-1")["exited"], Value::Null);
    b.close();
}
