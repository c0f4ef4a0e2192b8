//! `mosaic-bus human`, black-box: the real binary as the broker (booted over
//! its host IPC, `support::Broker`) and as the human CLI, spawned the way a
//! terminal, a shell or an agent would spawn it. One test per rule of the
//! human's and the reader's paths (docs/protocol.md, docs/human.md).
//!
//! The proof walks the CLI's whole ancestry. Every CLI and shell here is
//! started [`detached`], so this test process and its ancestors are never
//! in that ancestry: the proof sees only what each test builds, and every
//! assertion runs wherever the test runs, even under an agent's harness.
//!
//! Nothing sleeps: a shell that must wait for a binding blocks on `read`
//! until the test writes its stdin; every wait for a child is bounded by
//! [`WAIT`].

#[path = "../support/mod.rs"]
mod support;

mod history;
mod reads;

use std::path::Path;
use std::process::Command;
use std::sync::mpsc;

use mosaic_adapters::procfs::ProcFs;
use mosaic_app::runtime::human_proof::RUN_MARKERS;
use mosaic_domain::{CallerKind, Verb};
use mosaic_ports::ProcessTable;
use serde_json::{json, Value};

use support::detached::{detached, Outcome, Pending};
use support::{
    acme, acme_launches, config, data_root, globex, launch, merge, message, open_db, raise_args,
    raw_refused, Agent, Broker, BIN, WAIT,
};

// ---------------------------------------------------------------------------
// Running the CLI.

/// `PATH` for the shells below (the CLI itself needs none).
fn path() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into())
}

/// `mosaic-bus human SOCKET`, [`detached`], with an empty environment, as
/// from a clean terminal.
fn human_cli(socket: &Path) -> Command {
    let mut command = detached();
    command.arg(BIN).arg("human").arg(socket);
    command
}

/// `sh -c SCRIPT BIN SOCKET`, [`detached`], with only `PATH` in its
/// environment. `$0` is the CLI, `$1` the socket. A script that must stay
/// the CLI's parent ends in `exit $?`, so the shell cannot exec its last
/// command instead.
fn shell(script: &str, socket: &Path) -> Command {
    let mut command = detached();
    command
        .args(["/bin/sh", "-c", script])
        .arg(BIN)
        .arg(socket)
        .env("PATH", path());
    command
}

/// Runs `command` with `input` on stdin.
#[track_caller]
fn run(command: &mut Command, input: &Value) -> Outcome {
    Pending::start(command).finish(format!("{input}\n").as_bytes())
}

/// The clean human: [`human_cli`] with `input`.
#[track_caller]
fn human(socket: &Path, input: &Value) -> Outcome {
    run(&mut human_cli(socket), input)
}

/// `{business:"acme", verb, args}`.
fn acme_request(verb: &str, args: Value) -> Value {
    json!({"business": "acme", "verb": verb, "args": args})
}

// ---------------------------------------------------------------------------
// Brokers and evidence.

/// acme with every run of [`acme_launches`] and one reader.
fn acme_broker(root: &Path) -> Broker {
    Broker::boot(root, &config(root, &[acme()], &acme_launches(), &["acme"]))
}

/// Agents of `broker` that claimed their roles.
fn claimed<const N: usize>(broker: &Broker, runs: [&str; N]) -> [Agent; N] {
    runs.map(|run| {
        let agent = broker.agent(run);
        agent.claim();
        agent
    })
}

/// ops' gated `message.send` to qa: routed to the human.
#[track_caller]
fn gated_send(ops: &Agent) -> Value {
    let d = ops.raise("message.send", Some("qa"), json!({}));
    assert_eq!(
        (&d["class"], &d["route"]),
        (&json!("gated"), &json!("human"))
    );
    d
}

/// The `trail` of a UUID subject (a decision, a message).
#[track_caller]
fn trail_of(reader: &Agent, id: &Value) -> Vec<Value> {
    reader.trail(id.as_str().expect("an id"))
}

/// The kinds of [`trail_of`].
fn kinds(trail: &[Value]) -> Vec<&str> {
    trail
        .iter()
        .map(|r| r["kind"].as_str().expect("a kind"))
        .collect()
}

/// A `human.input` trail record.
fn human_input(id: &Value, verb: &str, subject: &Value, subject_kind: &str) -> Value {
    json!({"kind": "human.input", "business": "acme", "id": id, "verb": verb,
           "subject": subject, "subject_kind": subject_kind})
}

/// Whether `id` is a UUID as the wire spells it.
fn is_uuid(id: &Value) -> bool {
    id.as_str().is_some_and(|s| {
        s.len() == 36
            && s.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_hexdigit() && !b.is_ascii_uppercase(),
            })
    })
}

/// The ledger of a closed data root: `(kind, business)` in write order.
fn ledger(root: &Path) -> Vec<(String, Option<String>)> {
    let db = open_db(root);
    let mut rows = db
        .prepare("SELECT kind, business FROM ledger ORDER BY seq")
        .expect("prepare");
    rows.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .map(|r| r.expect("a row"))
        .collect()
}

/// The `human_inputs` of a closed data root: `(verb, subject_kind,
/// subject)` in write order.
fn human_inputs(root: &Path) -> Vec<(String, Option<String>, Option<String>)> {
    let db = open_db(root);
    let mut rows = db
        .prepare("SELECT verb, subject_kind, subject FROM human_inputs ORDER BY seq")
        .expect("prepare");
    rows.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .map(|r| r.expect("a row"))
        .collect()
}

/// A recorded refusal: `(business, role, verb, code)`.
type Refused = (Option<String>, Option<String>, Option<String>, String);

/// The recorded refusals of a closed data root, in write order, a
/// window's count (`refusal_tally`) standing for that many.
fn refusals(root: &Path) -> Vec<Refused> {
    let db = open_db(root);
    let mut rows = db
        .prepare("SELECT business, role, verb, code, count FROM refusal_tally ORDER BY seq")
        .expect("prepare");
    rows.query_map([], |r| {
        let refused: Refused = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        let count: i64 = r.get(4)?;
        Ok(vec![refused; usize::try_from(count).expect("a count")])
    })
    .expect("query")
    .flat_map(|r| r.expect("a row"))
    .collect()
}

/// A `human-proof-failed` refusal as recorded: of nobody, for `verb`.
fn proof_refusal(verb: &str) -> Refused {
    (
        None,
        None,
        Some(verb.to_owned()),
        "human-proof-failed".to_owned(),
    )
}

// ---------------------------------------------------------------------------
// The proof with real processes.

#[test]
fn a_cli_carrying_a_run_marker_or_under_an_ancestor_carrying_one_is_refused() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [ops] = claimed(&b, ["ops-1"]);
    let d = gated_send(&ops);
    let resolve = acme_request("decision.resolve", json!({"id": d["id"], "choice": "yes"}));

    // Our launcher's marker first, then every other documented one.
    let markers: Vec<&str> = std::iter::once("MOSAIC_RUN_ID")
        .chain(
            RUN_MARKERS
                .iter()
                .copied()
                .filter(|m| *m != "MOSAIC_RUN_ID"),
        )
        .collect();
    assert_eq!(markers.len(), RUN_MARKERS.len(), "{RUN_MARKERS:?}");

    // The CLI itself carries the marker (as an agent's own shell tool
    // would pass it on).
    for marker in &markers {
        run(human_cli(&b.socket).env(marker, "1"), &resolve).refused("human-proof-failed", 1);
    }
    // Only its parent shell carries it: the CLI is started with the marker
    // removed from its own environment.
    let mut shells = Vec::new();
    for marker in &markers {
        let script = format!(r#"env -u {marker} "$0" human "$1"; exit $?"#);
        let sh = Pending::start(shell(&script, &b.socket).env(marker, "run-7"));
        shells.push((sh.pid(), *marker));
        sh.finish(format!("{resolve}\n").as_bytes())
            .refused("human-proof-failed", 1);
    }
    let reader = b.reader(0);
    assert_eq!(kinds(&trail_of(&reader, &d["id"])), ["decision.raised"]);

    // The same shell without a marker: the human.
    let script = r#"env -u MOSAIC_RUN_ID "$0" human "$1"; exit $?"#;
    let resolved = run(&mut shell(script, &b.socket), &resolve).ok();
    assert_eq!(resolved["status"], "resolved", "{resolved}");
    let stderr = b.close();
    // Each refusal was for the marker, on the peer or on that very shell.
    for marker in &markers {
        let line = format!("reason=\"the peer carries the run marker {marker}\"\n");
        assert!(stderr.contains(&line), "{line:?} in {stderr}");
    }
    for (pid, marker) in shells {
        let line = format!("reason=\"ancestor {pid} carries the run marker {marker}\"\n");
        assert!(stderr.contains(&line), "{line:?} in {stderr}");
    }
    let refused = refusals(root.path());
    assert_eq!(
        refused,
        vec![proof_refusal("decision.resolve"); 2 * RUN_MARKERS.len()]
    );
}

#[test]
fn a_cli_from_a_clean_environment_resolves_a_gated_decision_as_the_human() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [ops] = claimed(&b, ["ops-1"]);
    let d = gated_send(&ops);
    let id = d["id"].clone();

    // The human's inbox shows what an approval authorizes.
    let inbox = human(&b.socket, &acme_request("inbox", json!({}))).ok();
    let mut item = d.clone();
    item["type"] = json!("decision");
    assert_eq!(inbox, json!([item]));
    assert_eq!(
        d["authorization"],
        json!({"action": "message.send", "target": "qa", "approvalChoice": "yes"})
    );

    let resolved = human(
        &b.socket,
        &acme_request("decision.resolve", json!({"id": id, "choice": "yes"})),
    )
    .ok();
    let mut expected = d.clone();
    merge(
        &mut expected,
        json!({"status": "resolved", "choice": "yes"}),
    );
    assert_eq!(resolved, expected);

    // human.input, then the resolution it caused, by the human.
    let reader = b.reader(0);
    let trail = trail_of(&reader, &id);
    assert_eq!(
        kinds(&trail),
        ["decision.raised", "human.input", "decision.resolved"]
    );
    let input = trail[1]["id"].clone();
    assert!(is_uuid(&input), "{input}");
    assert_eq!(
        trail[1],
        human_input(&input, "decision.resolve", &id, "decision")
    );
    assert_eq!(
        trail[2],
        json!({"kind": "decision.resolved", "business": "acme", "id": id, "choice": "yes",
               "by": "human", "by_run": null, "note": null})
    );
    // The approval is real: ops' gated send goes through, once.
    let sent = ops.ok(
        "message.send",
        json!({"to": "qa", "body": "hi", "decision": id}),
    );
    assert!(is_uuid(&sent["id"]), "{sent}");
    assert_eq!(
        kinds(&trail_of(&reader, &id))[3..],
        ["approval.consumed", "action.allowed", "message.sent"]
    );
    // Resolving again is refused, and records no second human.input.
    human(
        &b.socket,
        &acme_request("decision.resolve", json!({"id": id, "choice": "no"})),
    )
    .refused("decision-closed", 1);
    b.close();
    assert_eq!(
        human_inputs(root.path()),
        [(
            "decision.resolve".to_owned(),
            Some("decision".to_owned()),
            id.as_str().map(str::to_owned)
        )]
    );
}

#[test]
fn the_humans_changes_wakes_on_a_decision_routed_to_the_human_and_records_nothing() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [ops] = claimed(&b, ["ops-1"]);
    // An agent's marker is refused, as for every verb.
    run(
        human_cli(&b.socket).env("MOSAIC_RUN_ID", "1"),
        &acme_request("changes", json!({})),
    )
    .refused("human-proof-failed", 1);
    let now = human(&b.socket, &acme_request("changes", json!({}))).ok();
    assert_eq!(now["changes"], json!([]), "{now}");
    let since = now["cursor"].as_u64().expect("a cursor");
    // A wait that the raise wakes: stdin given at once, the answer later.
    let waiting = Pending::start(&mut human_cli(&b.socket));
    let wait = acme_request("changes", json!({"since": since, "timeoutMs": 60_000}));
    let (done, answered) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(waiting.finish(format!("{wait}\n").as_bytes()));
    });
    let d = gated_send(&ops);
    let woke = answered.recv_timeout(WAIT).expect("the wait answers").ok();
    let changes = woke["changes"].as_array().expect("changes");
    assert!(
        changes
            .iter()
            .any(|c| c["kind"] == "decision.raised" && c["decision"] == d["id"]),
        "{woke}"
    );
    assert!(woke["cursor"].as_u64() > Some(since), "{woke}");
    // An unknown business is refused after the proof, as for every verb.
    let globex = json!({"business": "nobody", "verb": "changes", "args": {}});
    human(&b.socket, &globex).refused("bad-request", 1);
    b.close();
    assert_eq!(human_inputs(root.path()), []);
}

#[test]
fn a_cli_whose_ancestor_is_a_bound_launch_is_refused() {
    let root = data_root();
    let mut b = acme_broker(root.path());
    let request = acme_request("agents", json!({}));
    let table = ProcFs::new();
    // A shell that waits for one line, then runs the CLI as its child.
    let waiting =
        |b: &Broker| Pending::start(&mut shell(r#"read _; "$0" human "$1"; exit $?"#, &b.socket));
    let go = format!("go\n{request}\n");
    let record = |run: &str, pid: u32, start_time: u64| {
        json!({"business": "acme", "role": "dev", "run": run, "harness": "pi",
               "pid": pid, "startTime": start_time})
    };

    // Bound with its real pid and start time (field 22 of its stat): refused.
    let bound = waiting(&b);
    let bound_pid = bound.pid();
    let start = table.process(bound_pid).expect("the shell").start_time;
    b.bind_ok(&record("dev-8", bound_pid, start));
    bound.finish(go.as_bytes()).refused("human-proof-failed", 1);

    // The CLI itself is the bound launch (the shell execs it: same pid, same
    // start time): refused.
    let exec = Pending::start(&mut shell(r#"read _; exec "$0" human "$1""#, &b.socket));
    let exec_pid = exec.pid();
    let start = table.process(exec_pid).expect("the shell").start_time;
    b.bind_ok(&record("dev-9", exec_pid, start));
    exec.finish(go.as_bytes()).refused("human-proof-failed", 1);

    // Not bound: the human. A record of its pid with another start time
    // (a launch whose pid was reused since) is no longer bound at all: the
    // broker checks the process at binding (the synthetic tests in
    // human_proof.rs cover a reused pid in the registry).
    let unbound = waiting(&b);
    let reused = waiting(&b);
    let reused_pid = reused.pid();
    let start = table.process(reused_pid).expect("the shell").start_time;
    assert_eq!(
        b.bind_launch(&record("dev-10", reused_pid, start + 1)),
        json!({"ok": false, "error": "launch-start-mismatch"})
    );
    for sh in [unbound, reused] {
        let agents = sh.finish(go.as_bytes()).ok();
        assert_eq!(agents.as_array().map(Vec::len), Some(9), "{agents}");
    }
    let stderr = b.close();
    let line = format!("reason=\"ancestor {bound_pid} is a bound launch\"\n");
    assert!(stderr.contains(&line), "{line:?} in {stderr}");
    let line = format!("peer={exec_pid} reason=\"the peer is a bound launch\"\n");
    assert!(stderr.contains(&line), "{line:?} in {stderr}");
    assert_eq!(refusals(root.path()), vec![proof_refusal("agents"); 2]);
}

// ---------------------------------------------------------------------------
// What the human does, and its evidence.

#[test]
fn the_humans_acknowledgement_withdrawal_and_message_each_append_human_input() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [ops, lead] = claimed(&b, ["ops-1", "lead-1"]);
    let reader = b.reader(0);
    let d = gated_send(&ops);
    let id = d["id"].clone();

    let seen = human(&b.socket, &acme_request("decision.seen", json!({"id": id}))).ok();
    assert_eq!(seen, d);
    let withdrawn = human(
        &b.socket,
        &acme_request("decision.withdraw", json!({"id": id, "note": "not now"})),
    )
    .ok();
    let mut expected = d.clone();
    expected["status"] = json!("withdrawn");
    assert_eq!(withdrawn, expected);
    let trail = trail_of(&reader, &id);
    assert_eq!(
        kinds(&trail),
        [
            "decision.raised",
            "human.input",
            "decision.seen",
            "human.input",
            "decision.withdrawn"
        ]
    );
    let (seen_input, withdraw_input) = (trail[1]["id"].clone(), trail[3]["id"].clone());
    assert_eq!(
        trail[1],
        human_input(&seen_input, "decision.seen", &id, "decision")
    );
    assert_eq!(
        trail[2],
        json!({"kind": "decision.seen", "business": "acme", "id": id, "by": "human",
               "by_run": null, "note": null})
    );
    assert_eq!(
        trail[3],
        human_input(&withdraw_input, "decision.withdraw", &id, "decision")
    );
    assert_eq!(
        trail[4],
        json!({"kind": "decision.withdrawn", "business": "acme", "id": id, "by": "human",
               "by_run": null, "note": "not now"})
    );

    // An instruction: its `request` is its own human.input.
    let sent = human(
        &b.socket,
        &acme_request("message.send", json!({"to": "lead", "body": "ship it"})),
    )
    .ok();
    let (m, request) = (sent["id"].clone(), sent["request"].clone());
    assert!(is_uuid(&m) && is_uuid(&request), "{sent}");
    assert_eq!(sent.as_object().map(|o| o.len()), Some(2), "{sent}");
    let as_sent = message(
        &m,
        ("human", ""),
        "lead",
        "ship it",
        json!({"from_run": null, "request": request}),
    );
    let mut record = as_sent.clone();
    merge(
        &mut record,
        json!({"kind": "message.sent", "business": "acme"}),
    );
    assert_eq!(
        trail_of(&reader, &m),
        [human_input(&request, "message.send", &m, "message"), record]
    );
    assert_eq!(lead.ok("message.receive", json!({})), json!([as_sent]));

    let ids = [&seen_input, &withdraw_input, &request];
    assert!(ids.iter().all(|i| is_uuid(i)), "{ids:?}");
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );
    b.close();
    assert_eq!(
        human_inputs(root.path())
            .iter()
            .map(|(verb, _, _)| verb.as_str())
            .collect::<Vec<_>>(),
        ["decision.seen", "decision.withdraw", "message.send"]
    );
}

#[test]
fn the_humans_launch_switch_appends_human_input_and_survives_a_restart() {
    let root = data_root();
    let cfg = config(
        root.path(),
        &[acme()],
        &[launch("acme", "lead", "lead-1")],
        &[],
    );
    let first = Broker::boot(root.path(), &cfg);
    let lead = first.agent("lead-1");
    lead.claim();
    let role_launch = raise_args("role.launch", Some("dev"), json!({"choice": "yes"}));
    let revoked = human(&first.socket, &acme_request("launch.revoke", json!({}))).ok();
    assert_eq!(revoked, json!({}));
    let mut first = first;
    assert_eq!(
        first.bind_launch(&launch("acme", "dev", "dev-5")),
        json!({"ok": false, "error": "launch-revoked"})
    );
    lead.refused("decision.raise", role_launch.clone(), "launch-revoked");
    first.terminate();

    // Still off after a restart: at boot, by bindLaunch and for role.launch.
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
    let lead = second.agent("lead-1");
    assert_eq!(lead.ok("role.claim", json!({})), json!({"status": "held"}));
    lead.refused("decision.raise", role_launch.clone(), "launch-revoked");

    let restored = human(&second.socket, &acme_request("launch.restore", json!({}))).ok();
    assert_eq!(restored, json!({}));
    second.bind_ok(&launch("acme", "dev", "dev-5")).claim();
    let d = lead.ok("decision.raise", role_launch);
    assert_eq!(d["status"], "resolved", "{d}");
    second.close();

    // Each switch right after its own human.input, which names no subject.
    let kinds: Vec<String> = ledger(root.path()).into_iter().map(|(k, _)| k).collect();
    let switches: Vec<[&str; 2]> = kinds
        .windows(2)
        .filter(|w| w[1].starts_with("launch."))
        .map(|w| [w[0].as_str(), w[1].as_str()])
        .collect();
    assert_eq!(
        switches,
        [
            ["human.input", "launch.revoked"],
            ["human.input", "launch.restored"]
        ]
    );
    assert_eq!(
        human_inputs(root.path()),
        [
            ("launch.revoke".to_owned(), None, None),
            ("launch.restore".to_owned(), None, None)
        ]
    );
}

#[test]
fn the_human_ends_a_run_recorded_as_its_input_and_the_run_is_refused_from_then_on() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [dev] = claimed(&b, ["dev-1"]);
    let reader = b.reader(0);
    let end = |run: &str| human(&b.socket, &acme_request("run.end", json!({"run": run})));
    assert_eq!(end("dev-1").ok(), json!({}));
    // From now on dev-1's capability does nothing, reads and waits included.
    for (verb, args) in [
        ("role.claim", json!({})),
        ("role.release", json!({})),
        ("message.send", json!({"to": "qa", "body": "still here?"})),
        ("inbox", json!({})),
        ("agents", json!({})),
        ("changes", json!({})),
    ] {
        dev.refused(verb, args, "run-ended");
    }
    // The role is free at once for the next run.
    b.agent("dev-2").claim();
    end("dev-1").refused("run-ended", 1);
    end("nobody-1").refused("unknown-reference", 1);
    end("-x").refused("bad-id", 1);
    // The human's word, then the end it made, filed under the role.
    let trail = reader.trail("dev");
    let at = trail
        .iter()
        .position(|r| r["kind"] == "session.ended")
        .expect("the end is on the role's trail");
    assert_eq!(trail[at - 1]["kind"], "human.input", "{trail:?}");
    assert_eq!(
        (&trail[at - 1]["verb"], &trail[at - 1]["subject"]),
        (&json!("run.end"), &json!("dev"))
    );
    assert_eq!(
        trail[at],
        json!({"kind": "session.ended", "business": "acme", "role": "dev", "run": "dev-1",
               "cause": "human", "status": null, "signal": null, "vacated": true})
    );
    let row = reader
        .ok("agents", json!({}))
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["run"] == "dev-1")
        .cloned()
        .expect("dev-1's row");
    assert_eq!(row["holding"], false);
    assert_eq!(row["ended"]["cause"], "human");
    b.close();
    assert_eq!(
        human_inputs(root.path()),
        [(
            "run.end".to_owned(),
            Some("role".to_owned()),
            Some("dev".to_owned())
        )]
    );
}

// ---------------------------------------------------------------------------
// Who cannot be the human.

#[test]
fn no_claimed_human_name_is_accepted() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [ops] = claimed(&b, ["ops-1"]);
    let d = gated_send(&ops);
    let resolve = json!({"id": d["id"], "choice": "yes"});

    // The CLI's own check, before any connection: exit 2.
    let mut as_alice = acme_request("decision.resolve", resolve.clone());
    as_alice["as"] = json!("alice");
    human(&b.socket, &as_alice).refused("unknown-key", 2);
    let mut with_proof = acme_request("decision.resolve", resolve.clone());
    with_proof["human"] = json!({"nonce": "0".repeat(64), "name": "alice"});
    human(&b.socket, &with_proof).refused("unknown-key", 2);
    // A name among the verb's arguments: the broker's argument check, for
    // the proven human (exit 1).
    let mut by_alice = resolve.clone();
    by_alice["by"] = json!("alice");
    let by_alice = human(&b.socket, &acme_request("decision.resolve", by_alice));
    by_alice.refused("unknown-key", 1);

    // Raw lines from this test process, which is not the CLI binary.
    let nonce = "0123456789abcdef".repeat(4);
    let line = |extra: Value| {
        let mut line = json!({"human": {"nonce": nonce}, "business": "acme",
                              "verb": "decision.resolve", "args": resolve});
        merge(&mut line, extra);
        line.to_string().into_bytes()
    };
    raw_refused(&b.socket, &line(json!({})), "human-proof-failed");
    raw_refused(&b.socket, &line(json!({"as": "alice"})), "unknown-key");
    raw_refused(
        &b.socket,
        &line(json!({"human": {"nonce": nonce, "name": "alice"}})),
        "unknown-key",
    );
    raw_refused(
        &b.socket,
        &line(json!({"human": {"name": "alice"}})),
        "bad-request",
    );
    // A capability cannot be presented alongside a human claim.
    raw_refused(&b.socket, &line(json!({"cap": ops.cap})), "unknown-key");

    // Nothing was resolved, and no human input was recorded.
    let reader = b.reader(0);
    assert_eq!(kinds(&trail_of(&reader, &d["id"])), ["decision.raised"]);
    let stderr = b.close();
    let line = format!(
        "peer={} reason=\"the peer is not the broker's executable\"\n",
        std::process::id()
    );
    assert!(stderr.contains(&line), "{line:?} in {stderr}");
    assert!(ledger(root.path()).iter().all(|(k, _)| k != "human.input"));
    assert!(human_inputs(root.path()).is_empty());
    let by_alice_refusal = (
        Some("acme".to_owned()),
        None,
        Some("decision.resolve".to_owned()),
        "unknown-key".to_owned(),
    );
    assert_eq!(
        refusals(root.path()),
        [by_alice_refusal, proof_refusal("decision.resolve")]
    );
}

#[test]
fn agent_and_reader_capabilities_never_act_as_the_human() {
    let root = data_root();
    let mut launches = acme_launches();
    launches.push(launch("globex", "lead", "g-lead-1"));
    let b = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme(), globex()],
            &launches,
            &["acme", "globex"],
        ),
    );
    let [lead, ops] = claimed(&b, ["lead-1", "ops-1"]);
    let d = gated_send(&ops);
    let id = d["id"].clone();
    let (reader, other) = (b.reader(0), b.reader(1));
    assert_eq!(
        (
            &b.boot["readers"][0]["business"],
            &b.boot["readers"][1]["business"]
        ),
        (&json!("acme"), &json!("globex"))
    );

    // Agents: the launch switch is the human's, and a human-routed decision
    // has no agent resolver, not even the arbiter.
    for agent in [&lead, &ops] {
        agent.refused("launch.revoke", json!({}), "human-only");
        agent.refused("launch.restore", json!({}), "human-only");
        agent.refused("run.end", json!({"run": "ops-1"}), "human-only");
        agent.refused(
            "decision.resolve",
            json!({"id": id, "choice": "yes"}),
            "not-resolver",
        );
    }
    // Readers: no resolution, acknowledgement, withdrawal, message, claim
    // or switch.
    for (verb, args) in [
        ("decision.resolve", json!({"id": id, "choice": "yes"})),
        ("decision.seen", json!({"id": id})),
        ("decision.withdraw", json!({"id": id})),
        ("message.send", json!({"to": "lead", "body": "x"})),
        ("role.claim", json!({})),
    ] {
        reader.refused(verb, args, "not-authorized");
    }
    reader.refused("launch.revoke", json!({}), "human-only");
    reader.refused("launch.restore", json!({}), "human-only");
    reader.refused("run.end", json!({"run": "ops-1"}), "human-only");

    // A reader sees only its own business.
    other.refused("trail", json!({"subject": id}), "cross-business");
    other.refused(
        "decision.resolve",
        json!({"id": id, "choice": "yes"}),
        "not-authorized",
    );
    assert_eq!(other.ok("inbox", json!({})), json!([]));
    let runs: Vec<Value> = other
        .ok("agents", json!({}))
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| a["run"].clone())
        .collect();
    assert_eq!(runs, [json!("g-lead-1")]);
    let mut item = d.clone();
    item["type"] = json!("decision");
    assert_eq!(reader.ok("inbox", json!({})), json!([item]));

    // Still open, with no human input; the launch switch still on.
    assert_eq!(kinds(&trail_of(&reader, &id)), ["decision.raised"]);
    let launch = lead.ok(
        "decision.raise",
        raise_args("role.launch", Some("dev"), json!({"choice": "yes"})),
    );
    assert_eq!(launch["status"], "resolved", "{launch}");
    b.close();
    assert!(human_inputs(root.path()).is_empty());
}

// ---------------------------------------------------------------------------
// Usage.

#[test]
fn usage_errors_exit_2_and_an_unknown_business_is_refused_bad_request() {
    let root = data_root();
    let b = acme_broker(root.path());
    let request = acme_request("inbox", json!({}));

    // No socket, or more than one argument: exit 2 before anything else.
    let mut bare = detached();
    bare.arg(BIN).arg("human");
    run(&mut bare, &request).refused("bad-request", 2);
    run(human_cli(&b.socket).arg("extra"), &request).refused("bad-request", 2);

    // Stdin that is not one `{business, verb, args?}` object: exit 2.
    for input in [
        &b"{\"business\":\"acme\",\"verb\":"[..],
        b"",
        b"[]",
        b"{\"business\":\"acme\"}",
        b"{\"verb\":\"inbox\"}",
        b"{\"business\":7,\"verb\":\"inbox\"}",
        b"{\"business\":\"acme\",\"verb\":\"inbox\"} {}",
    ] {
        let outcome = Pending::start(&mut human_cli(&b.socket)).finish(input);
        outcome.refused("bad-request", 2);
    }
    // More than 64 KiB.
    let big = vec![b' '; 64 * 1024 + 1];
    Pending::start(&mut human_cli(&b.socket))
        .finish(&big)
        .refused("request-too-large", 2);

    // A business id that is not an id: the broker's envelope check.
    human(
        &b.socket,
        &json!({"business": "Not An Id", "verb": "inbox"}),
    )
    .refused("bad-id", 1);
    // A well-formed business the broker does not know: refused after the
    // proof, with a static code.
    let unknown = human(&b.socket, &json!({"business": "initech", "verb": "inbox"}));
    unknown.refused("bad-request", 1);
    // A known business, without args, works.
    let inbox = json!({"business": "acme", "verb": "inbox"});
    assert_eq!(human(&b.socket, &inbox).ok(), json!([]));
    // No broker behind the socket.
    let missing = root.path().join("no.sock");
    human(&missing, &request).refused("broker-unavailable", 1);
    b.close();
    // Only the unknown business reached the broker's writer: a refusal of
    // nobody, since no business was bound.
    assert_eq!(
        refusals(root.path()),
        [(
            None,
            None,
            Some("inbox".to_owned()),
            "bad-request".to_owned()
        )]
    );
}
