//! The first leg: eight clients send and decide while the broker is killed,
//! and every acknowledged request is stored exactly once.

use super::*;

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
    let campaign = Campaign::from_env("crash", DEFAULT_SEED);
    let (rounds, seed) = (campaign.rounds, campaign.seed);
    let started = Instant::now();
    let root = support::data_root();
    let cfg = config(root.path(), &[business()], &launches(), &["crash"]);
    let broker = Broker::boot(root.path(), &cfg);
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

    // The crashes land at random moments of full-speed traffic; `kills`
    // holds when each broker generation but the last was killed.
    let (broker, kills) = campaign.crash(root.path(), &cfg, broker, |broker, _| {
        shared.publish(broker.caps());
    });
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
