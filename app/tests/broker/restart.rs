//! Restart: SIGTERM, boot again on the same data root (new capabilities),
//! and what the rebuilt state still refuses. Human decisions in between are
//! made offline ([`human_offline`]), independent of the human CLI's proof.

use std::path::Path;

use mosaic_domain::bus::{Command as BusCommand, Reply};
use serde_json::{json, Value};

use crate::support::{
    acme, acme_launches, config, data_root, human_offline, human_resolve_offline, launch,
    launch_pid, ledger_times, raise_args, stand_in, start_time, without_last_at, Broker,
};

fn acme_config(root: &Path) -> Value {
    config(root, &[acme()], &acme_launches(), &["acme"])
}

#[track_caller]
fn assert_ledger_increasing(root: &Path) {
    let times = ledger_times(root);
    assert!(times.len() > 5, "{times:?}");
    for pair in times.windows(2) {
        assert!(pair[0] < pair[1], "broker time went back: {pair:?}");
    }
}

#[test]
fn a_revoked_run_never_reclaims_its_role_also_after_restart() {
    let root = data_root();
    let cfg = acme_config(root.path());
    let first = Broker::boot(root.path(), &cfg);
    let lead = first.agent("lead-1");
    lead.claim();
    first.agent("dev-1").claim();
    let d = lead.raise("role.revoke", Some("dev"), json!({}));
    assert_eq!(d["holder"], "dev-1");
    let id = d["id"].clone();
    first.terminate();

    human_resolve_offline(root.path(), &[acme()], "acme", &id, "yes");

    let second = Broker::boot(root.path(), &cfg);
    let (lead, dev1, dev2) = (
        second.agent("lead-1"),
        second.agent("dev-1"),
        second.agent("dev-2"),
    );
    // Claims were rebuilt from evidence.
    assert_eq!(lead.ok("role.claim", json!({})), json!({"status": "held"}));
    assert_eq!(dev1.ok("role.claim", json!({})), json!({"status": "held"}));
    assert_eq!(
        lead.ok("role.revoke", json!({"role": "dev", "decision": id})),
        json!({})
    );
    dev1.refused("role.claim", json!({}), "run-revoked");
    lead.refused(
        "role.revoke",
        json!({"role": "dev", "decision": id}),
        "decision-consumed",
    );
    assert_eq!(
        lead.trail_kinds(id.as_str().expect("an id")),
        [
            "decision.raised",
            "human.input",
            "decision.resolved",
            "approval.consumed",
            "action.allowed",
            "role.revoked",
        ]
    );
    // The revoke also ended the run, in the same transaction.
    let trail = lead.trail("dev");
    assert_eq!(
        trail[trail.len() - 2..],
        [
            json!({"kind": "role.revoked", "business": "acme", "role": "dev", "run": "dev-1",
                     "decision": id}),
            json!({"kind": "session.ended", "business": "acme", "role": "dev", "run": "dev-1",
                   "cause": "revoked", "status": null, "signal": null, "vacated": false}),
        ]
    );
    dev2.claim();
    second.close();

    let third = Broker::boot(root.path(), &cfg);
    let (dev1, dev2) = (third.agent("dev-1"), third.agent("dev-2"));
    dev1.refused("role.claim", json!({}), "run-revoked");
    dev2.ok("role.release", json!({}));
    dev1.refused("role.claim", json!({}), "run-revoked");
    let agents = third.reader(0).ok("agents", json!({}));
    let mut dev1_row = agents
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["run"] == "dev-1")
        .cloned()
        .expect("dev-1's row");
    let ended_at = dev1_row["ended"]
        .as_object_mut()
        .and_then(|e| e.remove("at"))
        .expect("the end's time");
    assert!(
        ended_at.as_str().is_some_and(|at| at.ends_with('Z')),
        "{ended_at}"
    );
    assert_eq!(
        without_last_at(dev1_row),
        json!({"role": "dev", "run": "dev-1", "harness": "pi", "address": null,
                "pid": launch_pid(), "start_time": start_time(),
                "holding": false, "revoked": true,
                "launching": true, "waitsOn": [], "exited": null,
                "ended": {"cause": "revoked"}, "restarts": 0, "usage": null,
                "lastVerb": "role.claim", "waiting": false})
    );
    // The role's trail spans three brokers and the offline human, in one
    // strictly increasing broker time.
    third.reader(0).trail("dev");
    third.close();
    assert_ledger_increasing(root.path());
}

#[test]
fn a_revoke_after_the_holder_changed_refuses_holder_changed() {
    let root = data_root();
    let cfg = acme_config(root.path());
    let first = Broker::boot(root.path(), &cfg);
    let lead = first.agent("lead-1");
    lead.claim();
    first.agent("qa-1").claim();
    let held = lead.raise("role.revoke", Some("qa"), json!({}));
    let vacant = lead.raise("role.revoke", Some("arch"), json!({}));
    assert_eq!(
        (&held["holder"], &vacant["holder"]),
        (&json!("qa-1"), &Value::Null)
    );
    first.terminate();

    for d in [&held, &vacant] {
        human_resolve_offline(root.path(), &[acme()], "acme", &d["id"], "yes");
    }

    let second = Broker::boot(root.path(), &cfg);
    let lead = second.agent("lead-1");
    second.agent("qa-1").ok("role.release", json!({}));
    second.agent("qa-2").claim();
    for _ in 0..2 {
        // Refused, and the refusal spent nothing: the same answer again.
        lead.refused(
            "role.revoke",
            json!({"role": "qa", "decision": held["id"]}),
            "holder-changed",
        );
    }
    second.agent("arch-1").claim();
    lead.refused(
        "role.revoke",
        json!({"role": "arch", "decision": vacant["id"]}),
        "holder-changed",
    );
    assert_eq!(
        second.agent("qa-2").ok("role.claim", json!({})),
        json!({"status": "held"})
    );
    assert_eq!(
        second.agent("arch-1").ok("role.claim", json!({})),
        json!({"status": "held"})
    );
    second.close();
}

#[test]
fn a_consumed_approval_still_refuses_after_restart() {
    let root = data_root();
    let cfg = acme_config(root.path());
    let first = Broker::boot(root.path(), &cfg);
    let (lead, dev) = (first.agent("lead-1"), first.agent("dev-1"));
    lead.claim();
    dev.claim();
    let spent = dev.raise("message.send", Some("qa"), json!({}));
    let kept = dev.raise("message.send", Some("qa"), json!({}));
    lead.resolve(&spent["id"], "yes");
    lead.resolve(&kept["id"], "yes");
    dev.send("qa", "first", json!({"decision": spent["id"]}));
    first.terminate();

    let second = Broker::boot(root.path(), &cfg);
    let dev = second.agent("dev-1");
    dev.refused(
        "message.send",
        json!({"to": "qa", "body": "again", "decision": spent["id"]}),
        "decision-consumed",
    );
    dev.send("qa", "second", json!({"decision": kept["id"]}));
    second.close();

    let third = Broker::boot(root.path(), &cfg);
    third.agent("dev-1").refused(
        "message.send",
        json!({"to": "qa", "body": "third", "decision": kept["id"]}),
        "decision-consumed",
    );
    third.close();
    assert_ledger_increasing(root.path());
}

#[test]
fn a_changed_policy_refuses_decision_mismatch_in_either_direction() {
    let root = data_root();
    let first = Broker::boot(root.path(), &acme_config(root.path()));
    let (lead, dev, ops) = (
        first.agent("lead-1"),
        first.agent("dev-1"),
        first.agent("ops-1"),
    );
    for agent in [&lead, &dev, &ops] {
        agent.claim();
    }
    let cross = dev.raise("message.send", Some("qa"), json!({}));
    assert_eq!(cross["class"], "cross-role");
    lead.resolve(&cross["id"], "yes");
    let gated = ops.raise("message.send", Some("qa"), json!({}));
    assert_eq!(gated["class"], "gated");
    first.terminate();

    // The host restarts the broker with another policy: sending becomes
    // gated for dev and cross-role for ops.
    let mut changed = acme();
    changed["roles"]["dev"]["authority"]["crossRole"] = json!(["repo.merge"]);
    changed["roles"]["ops"]["authority"]["crossRole"] = json!(["message.send"]);
    let second = Broker::boot(
        root.path(),
        &config(root.path(), &[changed], &acme_launches(), &["acme"]),
    );
    let send = |decision: &Value| json!({"to": "qa", "body": "x", "decision": decision});
    second
        .agent("dev-1")
        .refused("message.send", send(&cross["id"]), "decision-mismatch");
    second
        .agent("ops-1")
        .refused("message.send", send(&gated["id"]), "decision-mismatch");
    second.close();

    // Back under the policy it was raised for, the approval was never spent.
    let third = Broker::boot(root.path(), &acme_config(root.path()));
    third
        .agent("dev-1")
        .send("qa", "x", json!({"decision": cross["id"]}));
    third.close();
}

#[test]
fn rebinding_after_restart_needs_the_identical_launch_record() {
    let root = data_root();
    let mut dev = launch("acme", "dev", "dev-1");
    dev["address"] = json!("tmux:%1");
    dev["harness"] = json!("claude-code");
    let later = launch("acme", "qa", "qa-9");
    let cfg = config(
        root.path(),
        &[acme()],
        &[launch("acme", "lead", "lead-1"), dev.clone()],
        &[],
    );
    let mut first = Broker::boot(root.path(), &cfg);
    first.bind_ok(&later).claim();
    first.terminate();

    let mut second = Broker::boot(root.path(), &cfg);
    let qa = second.bind_ok(&later);
    assert_eq!(qa.ok("role.claim", json!({})), json!({"status": "held"}));
    let mut moved = later.clone();
    moved["pid"] = json!(stand_in(1).pid);
    moved["startTime"] = json!(stand_in(1).start_time);
    assert_eq!(
        second.bind_launch(&moved),
        json!({"ok": false, "error": "launch-mismatch"})
    );
    second.agent("dev-1").claim();
    second.close();

    // A start time one tick off names no process of this pid.
    let mut off = dev.clone();
    off["startTime"] = json!(start_time() + 1);
    let cfg_off = config(
        root.path(),
        &[acme()],
        &[launch("acme", "lead", "lead-1"), off],
        &[],
    );
    Broker::boot_refused_run(root.path(), &cfg_off, "launch-start-mismatch", "dev-1");
    for (pointer, value) in [
        ("/role", json!("qa")),
        ("/harness", json!("pi")),
        ("/address", Value::Null),
    ] {
        let mut changed = dev.clone();
        *changed.pointer_mut(pointer).expect(pointer) = value;
        let cfg = config(
            root.path(),
            &[acme()],
            &[launch("acme", "lead", "lead-1"), changed],
            &[],
        );
        Broker::boot_refused(root.path(), &cfg, "launch-mismatch");
    }
    let third = Broker::boot(root.path(), &cfg);
    assert_eq!(
        third.agent("dev-1").ok("role.claim", json!({})),
        json!({"status": "held"})
    );
    third.close();
}

#[test]
fn a_human_launch_revoke_refuses_new_launches_and_role_launch() {
    let root = data_root();
    let cfg = config(
        root.path(),
        &[acme()],
        &[launch("acme", "lead", "lead-1")],
        &[],
    );
    let first = Broker::boot(root.path(), &cfg);
    first.agent("lead-1").claim();
    first.terminate();

    let replies = human_offline(
        root.path(),
        &[acme()],
        "acme",
        vec![BusCommand::LaunchRevoke],
    );
    assert!(
        matches!(replies.as_slice(), [Ok(Reply::Done)]),
        "{replies:?}"
    );

    // Known runs rebind; a new one cannot be bound, at boot or later.
    let with_new = config(
        root.path(),
        &[acme()],
        &[
            launch("acme", "lead", "lead-1"),
            launch("acme", "dev", "dev-5"),
        ],
        &[],
    );
    Broker::boot_refused(root.path(), &with_new, "launch-revoked");
    let mut second = Broker::boot(root.path(), &cfg);
    assert_eq!(
        second.bind_launch(&launch("acme", "dev", "dev-5")),
        json!({"ok": false, "error": "launch-revoked"})
    );
    second.agent("lead-1").refused(
        "decision.raise",
        raise_args("role.launch", Some("dev"), json!({"choice": "yes"})),
        "launch-revoked",
    );
    second.close();

    let replies = human_offline(
        root.path(),
        &[acme()],
        "acme",
        vec![BusCommand::LaunchRestore],
    );
    assert!(
        matches!(replies.as_slice(), [Ok(Reply::Done)]),
        "{replies:?}"
    );
    let mut third = Broker::boot(root.path(), &cfg);
    third.bind_ok(&launch("acme", "dev", "dev-5")).claim();
    let d = third
        .agent("lead-1")
        .raise("role.launch", Some("dev"), json!({"choice": "yes"}));
    assert_eq!(d["status"], "resolved");
    third.close();
}
