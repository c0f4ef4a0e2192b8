//! `changes`, the change feed: who wakes on what, timeouts, refusals, and
//! cursors that lose nothing and repeat nothing across a clean restart and
//! a crash. Waits run on threads of their own; a wait answers whatever
//! lies after its cursor, so a change committed before the wait arrived
//! still wakes it, and no test depends on timing.

use std::path::Path;
use std::thread;

use serde_json::{json, Value};

use crate::support::{
    acme, acme_launches, config, data_root, globex, human_offline, human_resolve_offline, launch,
    unlock, Agent, Broker,
};

fn both_config(root: &Path) -> Value {
    let mut launches = acme_launches();
    launches.push(launch("globex", "dev", "gdev-1"));
    config(root, &[acme(), globex()], &launches, &["acme"])
}

/// The current cursor, from `changes` without `since`.
#[track_caller]
fn cursor(agent: &Agent) -> u64 {
    let answer = agent.ok("changes", json!({}));
    assert_eq!(answer["changes"], json!([]), "{answer}");
    answer["cursor"].as_u64().expect("a cursor")
}

/// `changes {since, timeoutMs}` on a thread of its own.
fn wait(agent: &Agent, since: u64, timeout_ms: u64) -> thread::JoinHandle<Value> {
    let agent = agent.clone();
    thread::spawn(move || agent.ok("changes", json!({"since": since, "timeoutMs": timeout_ms})))
}

/// The `(kind, id)` pairs of an answer's changes.
fn pointers(answer: &Value) -> Vec<(String, String)> {
    answer["changes"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| {
            let id = ["message", "decision", "role", "task"]
                .iter()
                .find_map(|k| c[*k].as_str())
                .unwrap_or_default();
            (
                c["kind"].as_str().expect("a kind").to_owned(),
                id.to_owned(),
            )
        })
        .collect()
}

fn text(id: &Value) -> String {
    id.as_str().expect("an id").to_owned()
}

#[test]
fn a_waiter_wakes_on_a_message_to_its_role_and_never_on_another_roles_or_business() {
    let root = data_root();
    let broker = Broker::boot(root.path(), &both_config(root.path()));
    let (lead, qa, dev) = (
        broker.agent("lead-1"),
        broker.agent("qa-1"),
        broker.agent("dev-1"),
    );
    let globex_dev = broker.agent("gdev-1");
    for agent in [&lead, &qa, &dev, &globex_dev] {
        agent.claim();
    }
    let since = cursor(&dev);
    let waiting = wait(&dev, since, 20_000);
    // Another role's message and another business's dev: nothing for dev.
    lead.send("qa", "for qa only", json!({}));
    globex_dev.send("dev", "globex to its own dev", json!({}));
    let for_dev = lead.send("dev", "for dev", json!({}));
    let answer = waiting.join().expect("the wait");
    assert_eq!(
        pointers(&answer),
        [("message.sent".to_owned(), text(&for_dev))]
    );
    let seq = answer["changes"][0]["seq"].as_u64().expect("a seq");
    assert!(seq > since, "{answer}");
    assert!(answer["cursor"].as_u64().expect("a cursor") >= seq);
    // Changes are pointers: no body, and reading them records nothing.
    assert!(!answer.to_string().contains("for dev"), "{answer}");
    let before = cursor(&dev);
    dev.ok("changes", json!({"since": 0, "timeoutMs": 1000}));
    assert_eq!(cursor(&dev), before, "reading changes wrote a record");
    // globex's dev heard of its own message only.
    let theirs = globex_dev.ok("changes", json!({"since": since, "timeoutMs": 1000}));
    assert_eq!(
        pointers(&theirs)
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>(),
        ["message.sent"]
    );
    broker.close();
}

#[test]
fn decisions_wake_their_resolver_then_their_raiser_and_carry_no_question_or_note() {
    let root = data_root();
    let broker = Broker::boot(root.path(), &both_config(root.path()));
    let (lead, dev) = (broker.agent("lead-1"), broker.agent("dev-1"));
    lead.claim();
    dev.claim();
    let since = cursor(&lead);
    let lead_waits = wait(&lead, since, 20_000);
    let decision = dev.raise(
        "repo.merge",
        Some("main"),
        json!({"question": "QUESTION-TEXT"}),
    );
    let id = decision["id"].clone();
    assert_eq!(decision["route"], "lead", "{decision}");
    let answer = lead_waits.join().expect("the wait");
    assert_eq!(
        pointers(&answer),
        [("decision.raised".to_owned(), text(&id))]
    );

    let since = answer["cursor"].as_u64().expect("a cursor");
    let dev_waits = wait(&dev, since, 20_000);
    lead.ok(
        "decision.resolve",
        json!({"id": id, "choice": "yes", "note": "NOTE-TEXT"}),
    );
    let answer = dev_waits.join().expect("the wait");
    assert_eq!(
        pointers(&answer),
        [("decision.resolved".to_owned(), text(&id))]
    );
    for (agent, from) in [(&lead, 0), (&dev, 0)] {
        let all = agent.ok("changes", json!({"since": from, "timeoutMs": 1000}));
        let shown = all.to_string();
        assert!(
            !shown.contains("QUESTION-TEXT") && !shown.contains("NOTE-TEXT"),
            "{shown}"
        );
    }
    broker.close();
}

#[test]
fn a_readers_wait_wakes_on_a_gated_decision_routed_to_the_human() {
    let root = data_root();
    let broker = Broker::boot(root.path(), &both_config(root.path()));
    let reader = broker.reader(0);
    let dev = broker.agent("dev-1");
    dev.claim();
    let since = cursor(&reader);
    let waiting = wait(&reader, since, 20_000);
    let gated = dev.raise("release.publish", Some("v1"), json!({}));
    assert_eq!(gated["route"], "human", "{gated}");
    let answer = waiting.join().expect("the wait");
    assert_eq!(
        pointers(&answer),
        [("decision.raised".to_owned(), text(&gated["id"]))]
    );
    broker.close();
}

#[test]
fn a_wait_times_out_empty_with_a_cursor_of_at_least_since() {
    let root = data_root();
    let broker = Broker::boot(root.path(), &both_config(root.path()));
    let dev = broker.agent("dev-1");
    dev.claim();
    let since = cursor(&dev);
    // 1 ms is clamped to the 1 s minimum.
    let answer = dev.ok("changes", json!({"since": since, "timeoutMs": 1}));
    assert_eq!(answer["changes"], json!([]), "{answer}");
    assert!(answer["cursor"].as_u64().expect("a cursor") >= since);
    let ahead = since + 1_000;
    let answer = dev.ok("changes", json!({"since": ahead, "timeoutMs": 1000}));
    assert_eq!(answer, json!({"cursor": ahead, "changes": []}));
    broker.close();
}

#[test]
fn changes_is_refused_to_a_non_holder_and_for_malformed_arguments() {
    let root = data_root();
    let broker = Broker::boot(root.path(), &both_config(root.path()));
    let dev = broker.agent("dev-1");
    dev.refused("changes", json!({}), "not-holder");
    dev.claim();
    for bad in [json!("1"), json!(-1), json!(1.5), json!(true), json!([1])] {
        dev.refused("changes", json!({"since": bad}), "bad-request");
        dev.refused("changes", json!({"timeoutMs": bad}), "bad-request");
    }
    dev.refused("changes", json!({"after": 1}), "unknown-key");
    assert_eq!(
        dev.ok("changes", json!({"since": null}))["changes"],
        json!([])
    );
    broker.close();
}

/// Sends `n` messages from lead to dev; their ids in order.
fn send_to_dev(lead: &Agent, n: usize, label: &str) -> Vec<String> {
    (0..n)
        .map(|i| text(&lead.send("dev", &format!("{label} {i}"), json!({}))))
        .collect()
}

/// Every message change for `agent` after `since`, following cursors to
/// the end; each answer must carry at least one change until the end.
fn drain(agent: &Agent, mut since: u64) -> (Vec<String>, u64) {
    let mut seen = Vec::new();
    loop {
        let answer = agent.ok("changes", json!({"since": since, "timeoutMs": 1000}));
        let cursor = answer["cursor"].as_u64().expect("a cursor");
        assert!(cursor >= since, "{answer}");
        let found = pointers(&answer);
        if found.is_empty() {
            return (seen, cursor);
        }
        seen.extend(
            found
                .into_iter()
                .filter(|(kind, _)| kind == "message.sent")
                .map(|(_, id)| id),
        );
        since = cursor;
    }
}

#[test]
fn a_cursor_loses_and_repeats_nothing_across_a_clean_restart_and_a_crash() {
    let root = data_root();
    let cfg = both_config(root.path());
    let first = Broker::boot(root.path(), &cfg);
    let (lead, dev) = (first.agent("lead-1"), first.agent("dev-1"));
    lead.claim();
    dev.claim();
    let start = cursor(&dev);
    // More than one answer's worth, so cursors are followed page by page.
    let mut sent = send_to_dev(&lead, 130, "before");
    let (seen, mid) = drain(&dev, start);
    assert_eq!(seen, sent);
    let more = send_to_dev(&lead, 5, "unseen");
    first.close();

    // Clean restart: the feed's memory is empty; the store answers.
    let second = Broker::boot(root.path(), &cfg);
    let (lead, dev) = (second.agent("lead-1"), second.agent("dev-1"));
    let (seen, after_restart) = drain(&dev, mid);
    assert_eq!(seen, more, "after a clean restart");
    let (again, _) = drain(&dev, start);
    sent.extend(more);
    assert_eq!(again, sent, "the whole history, once each");
    let crashed = send_to_dev(&lead, 7, "crashed");
    second.kill();
    unlock(root.path());

    let third = Broker::boot(root.path(), &cfg);
    let dev = third.agent("dev-1");
    let (seen, end) = drain(&dev, after_restart);
    assert_eq!(seen, crashed, "after SIGKILL, unlock and reboot");
    let (nothing, _) = drain(&dev, end);
    assert!(nothing.is_empty(), "{nothing:?}");
    // A waiter at the end still wakes on what comes next.
    let waiting = wait(&dev, end, 20_000);
    let lead = third.agent("lead-1");
    let next = lead.send("dev", "next", json!({}));
    let answer = waiting.join().expect("the wait");
    assert_eq!(
        pointers(&answer),
        [("message.sent".to_owned(), text(&next))]
    );
    third.close();
}

#[test]
fn the_resolution_of_a_decision_reaches_its_raiser_across_a_restart() {
    let root = data_root();
    let cfg = both_config(root.path());
    let first = Broker::boot(root.path(), &cfg);
    let dev = first.agent("dev-1");
    dev.claim();
    let decision = dev.raise("release.publish", Some("v2"), json!({}));
    let since = cursor(&dev);
    first.terminate();
    human_resolve_offline(
        root.path(),
        &[acme(), globex()],
        "acme",
        &decision["id"],
        "yes",
    );
    let second = Broker::boot(root.path(), &cfg);
    let dev = second.agent("dev-1");
    let answer = dev.ok("changes", json!({"since": since, "timeoutMs": 1000}));
    assert_eq!(
        pointers(&answer),
        [("decision.resolved".to_owned(), text(&decision["id"]))]
    );
    second.close();
}

/// The run `run`'s row of `agents`.
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

#[test]
fn a_reader_hears_of_decisions_routed_to_a_role_and_of_the_switch_and_agents_shows_them() {
    let root = data_root();
    let cfg = both_config(root.path());
    let first = Broker::boot(root.path(), &cfg);
    let reader = first.reader(0);
    let (lead, dev) = (first.agent("lead-1"), first.agent("dev-1"));
    lead.claim();
    dev.claim();
    let since = cursor(&reader);
    let waiting = wait(&reader, since, 20_000);
    let decision = dev.raise("repo.merge", Some("main"), json!({}));
    assert_eq!(decision["route"], "lead", "{decision}");
    let answer = waiting.join().expect("the wait");
    assert_eq!(
        pointers(&answer),
        [("decision.raised".to_owned(), text(&decision["id"]))]
    );
    let dev_row = row(&reader, "dev-1");
    assert_eq!(
        (&dev_row["launching"], &dev_row["waitsOn"]),
        (
            &json!(true),
            &json!([{"id": decision["id"], "action": "repo.merge", "target": "main",
                     "route": "lead", "blocking": false}])
        ),
        "{dev_row}"
    );
    assert_eq!(row(&reader, "lead-1")["waitsOn"], json!([]));
    // Its resolution wakes the reader, and the run waits on nothing.
    let since = answer["cursor"].as_u64().expect("a cursor");
    let waiting = wait(&reader, since, 20_000);
    lead.ok(
        "decision.resolve",
        json!({"id": decision["id"], "choice": "yes"}),
    );
    let answer = waiting.join().expect("the wait");
    assert_eq!(
        pointers(&answer),
        [("decision.resolved".to_owned(), text(&decision["id"]))]
    );
    assert_eq!(row(&reader, "dev-1")["waitsOn"], json!([]));
    let since = answer["cursor"].as_u64().expect("a cursor");
    first.terminate();
    // The human switches launching off; after the restart, `agents` says
    // so from the start, and the reader's feed carries the switch.
    let replies = human_offline(
        root.path(),
        &[acme(), globex()],
        "acme",
        vec![mosaic_domain::bus::Command::LaunchRevoke],
    );
    assert_eq!(replies.len(), 1);
    assert!(replies[0].is_ok(), "{replies:?}");
    let second = Broker::boot(root.path(), &cfg);
    let reader = second.reader(0);
    assert_eq!(row(&reader, "dev-1")["launching"], json!(false));
    let answer = reader.ok("changes", json!({"since": since, "timeoutMs": 1000}));
    // First the switch, then the reboot's rebindings (each one recorded).
    let heard = pointers(&answer);
    assert_eq!(
        heard.first(),
        Some(&("launch.revoked".to_owned(), String::new())),
        "{answer}"
    );
    assert!(
        heard[1..]
            .iter()
            .all(|(kind, _)| kind == "session.launched"),
        "{answer}"
    );
    second.close();
}

/// What the human reads about an agent comes from the broker: `agents`
/// says, of each run, the verb of its last request and when (`lastVerb`,
/// `lastAt`, null before its first), and whether a `changes` wait of it is
/// open now (`waiting`), as the broker saw them, whatever the agent says
/// of itself.
#[test]
fn agents_says_what_each_run_last_asked_and_whether_it_waits_now() {
    let root = data_root();
    let cfg = both_config(root.path());
    let broker = Broker::boot(root.path(), &cfg);
    let reader = broker.reader(0);
    let (lead, dev) = (broker.agent("lead-1"), broker.agent("dev-1"));
    let calls = |row: &Value| (row["lastVerb"].clone(), row["waiting"].clone());
    assert_eq!(
        calls(&row(&reader, "dev-1")),
        (Value::Null, json!(false)),
        "nothing asked yet"
    );
    assert_eq!(row(&reader, "dev-1")["lastAt"], Value::Null);
    lead.claim();
    dev.claim();
    let dev_row = row(&reader, "dev-1");
    assert_eq!(calls(&dev_row), (json!("role.claim"), json!(false)));
    let at = dev_row["lastAt"].as_str().expect("a time");
    assert!(
        mosaic_domain::Timestamp::parse(at).is_ok(),
        "a canonical time: {at}"
    );

    let since = cursor(&dev);
    let waiting = wait(&dev, since, 60_000);
    crate::support::wait_for("the reader sees dev-1 waiting", || {
        row(&reader, "dev-1")["waiting"] == json!(true)
    });
    assert_eq!(row(&reader, "dev-1")["lastVerb"], "changes");
    assert_eq!(
        calls(&row(&reader, "lead-1")),
        (json!("role.claim"), json!(false))
    );
    lead.send("dev", "wake up", json!({}));
    let answer = waiting.join().expect("the wait");
    assert_eq!(answer["changes"][0]["kind"], "message.sent", "{answer}");
    // Answered: the wait is over by the time its answer arrived.
    assert_eq!(
        calls(&row(&reader, "dev-1")),
        (json!("changes"), json!(false))
    );
    assert_eq!(row(&reader, "lead-1")["lastVerb"], "message.send");
    // An answer at once is no wait.
    dev.ok("inbox", json!({}));
    assert_eq!(
        calls(&row(&reader, "dev-1")),
        (json!("inbox"), json!(false))
    );
    broker.close();
}
