//! The change-feed leg: agents wait on `changes` across kills, and each is
//! told of exactly the messages stored for its role, once each and in order.

use super::*;

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
struct Told {
    seq: u64,
    kind: String,
    /// The message of a `message.sent`.
    message: Option<String>,
}

/// What one waiter saw across every broker generation.
#[derive(Debug, Default)]
struct WaiterLog {
    seen: Vec<Told>,
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
                    log.seen.push(Told {
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
    let campaign = Campaign::from_env("crash_changes", DEFAULT_FEED_SEED);
    let (rounds, seed) = (campaign.rounds, campaign.seed);
    let started = Instant::now();
    let root = support::data_root();
    let cfg = config(root.path(), &[feed_business()], &feed_launches(), &[]);
    let broker = Broker::boot(root.path(), &cfg);
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

    // The crashes land at random moments of traffic and open waits. The
    // last broker serves a while and is never killed; the senders stop,
    // then every waiter reads up to the end.
    let (broker, _) = campaign.crash(root.path(), &cfg, broker, |broker, _| {
        shared.publish(broker.caps());
    });
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
