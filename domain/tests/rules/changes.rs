//! The change feed's rules: which record makes which pointer, and who
//! hears of it. Each test is one rule of `changes::Watcher::concerns`.

use mosaic_domain::changes::{self, Change, Routing, Topic, Watcher};
use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, ClaimEvidence, Consumption, DecisionActor, DecisionEvidence,
    DecisionRecord, EndCause, Ending, Evidence, Harness, HumanInput, LaunchEvidence, LaunchRecord,
    MessageEvidence, MessageRecord, Observation, OptionKey, RaiseFields, Recipient, RefusalRecord,
    Route, RunEnd, Sender, Subject,
};
use mosaic_domain::*;
use std::time::Duration;

fn role(s: &str) -> RoleInstance {
    RoleInstance::parse(s).unwrap()
}
fn business(s: &str) -> BusinessId {
    BusinessId::parse(s).unwrap()
}
fn agent(r: &str, run: &str) -> AgentRef {
    AgentRef {
        role: role(r),
        run: RunId::parse(run).unwrap(),
    }
}
fn watcher(b: &str, r: &str, run: &str) -> Watcher {
    Watcher::Agent {
        business: business(b),
        role: role(r),
        run: RunId::parse(run).unwrap(),
    }
}
fn reader(b: &str) -> Watcher {
    Watcher::Reader {
        business: business(b),
    }
}
fn did(n: u8) -> DecisionId {
    DecisionId::from_random([n; 16])
}
fn mid(n: u8) -> MessageId {
    MessageId::from_random([n; 16])
}

/// acme's lead (the arbiter), dev (run dev-1, the raiser), qa (a
/// bystander), a second dev run, globex's dev, and acme's reader.
fn everyone() -> Vec<(&'static str, Watcher)> {
    vec![
        ("lead", watcher("acme", "lead", "lead-1")),
        ("dev", watcher("acme", "dev", "dev-1")),
        ("dev-2", watcher("acme", "dev", "dev-2")),
        ("qa", watcher("acme", "qa", "qa-1")),
        ("globex-dev", watcher("globex", "dev", "dev-9")),
        ("reader", reader("acme")),
        ("globex-reader", reader("globex")),
    ]
}

/// The names of the watchers `everyone` who hear of `change`.
fn audience(change: &Change) -> Vec<&'static str> {
    everyone()
        .into_iter()
        .filter(|(_, w)| w.concerns(change))
        .map(|(name, _)| name)
        .collect()
}

fn message(to: Recipient) -> Evidence {
    Evidence::Message(MessageEvidence::Sent(Box::new(MessageRecord {
        id: mid(1),
        business: business("acme"),
        from: Sender::Agent(agent("lead", "lead-1")),
        to,
        class: None,
        body: "BODY".to_owned(),
        in_reply_to: None,
        corrects: None,
        decision: None,
        request: None,
    })))
}

/// A decision dev-1 raised, routed to `route`.
fn raised(route: Route) -> DecisionRecord {
    DecisionRecord {
        id: did(7),
        business: business("acme"),
        raiser: agent("dev", "dev-1"),
        fields: RaiseFields {
            action: Action::parse("repo.merge").unwrap(),
            target: None,
            question: "QUESTION".to_owned(),
            options: Vec::new(),
            recommendation: "R".to_owned(),
            blocking: false,
            technical: false,
            project: None,
            task_ref: None,
            requirement_ref: None,
            supersedes: None,
        },
        approval_choice: OptionKey::yes(),
        class: ActionClass::CrossRole,
        route,
        holder: None,
    }
}

/// Every event of a decision routed to `route`, as records.
fn decision_events() -> Vec<(&'static str, Evidence)> {
    let acme = business("acme");
    let by = DecisionActor::Agent(agent("lead", "lead-1"));
    let note = Some("NOTE".to_owned());
    vec![
        (
            "resolved",
            Evidence::Decision(DecisionEvidence::Resolved {
                business: acme.clone(),
                id: did(7),
                choice: OptionKey::yes(),
                by: by.clone(),
                note: note.clone(),
            }),
        ),
        (
            "seen",
            Evidence::Decision(DecisionEvidence::Seen {
                business: acme.clone(),
                id: did(7),
                by: by.clone(),
                note: note.clone(),
            }),
        ),
        (
            "withdrawn",
            Evidence::Decision(DecisionEvidence::Withdrawn {
                business: acme.clone(),
                id: did(7),
                by: DecisionActor::Human,
                note,
            }),
        ),
        (
            "superseded",
            Evidence::Decision(DecisionEvidence::Superseded {
                business: acme,
                id: did(7),
                by: did(8),
            }),
        ),
    ]
}

fn change(record: &Evidence, routing: Option<Routing>) -> Change {
    Change::of(record, routing).expect("a change")
}

#[test]
fn a_message_reaches_the_holder_of_its_role_or_the_readers_when_to_the_human() {
    let to_dev = change(&message(Recipient::Role(role("dev"))), None);
    assert_eq!(audience(&to_dev), ["dev", "dev-2"]);
    assert_eq!(
        (to_dev.kind, to_dev.message, to_dev.decision),
        ("message.sent", Some(mid(1)), None)
    );
    let to_human = change(&message(Recipient::Human), None);
    assert_eq!(audience(&to_human), ["reader"]);
}

#[test]
fn a_raise_reaches_its_resolver_role_and_the_readers() {
    let to_lead = raised(Route::Role(role("lead")));
    let record = Evidence::Decision(DecisionEvidence::Raised(Box::new(to_lead)));
    let raise = change(&record, None);
    // The readers hear of it too: `agents` shows it against its raiser.
    assert_eq!(audience(&raise), ["lead", "reader"]);
    assert_eq!(
        (raise.kind, raise.decision),
        ("decision.raised", Some(did(7)))
    );
    let to_human = Evidence::Decision(DecisionEvidence::Raised(Box::new(raised(Route::Human))));
    assert_eq!(audience(&change(&to_human, None)), ["reader"]);
    // Within role: routed to the raiser's own role.
    let own = Evidence::Decision(DecisionEvidence::Raised(Box::new(raised(Route::Role(
        role("dev"),
    )))));
    assert_eq!(audience(&change(&own, None)), ["dev", "dev-2", "reader"]);
}

#[test]
fn a_decisions_later_events_reach_its_raiser_run_and_closing_ones_its_resolver_and_the_readers() {
    let to_lead = Routing::of(&raised(Route::Role(role("lead"))));
    let to_human = Routing::of(&raised(Route::Human));
    for (event, record) in decision_events() {
        let routed = change(&record, Some(to_lead.clone()));
        let expected: &[&str] = match event {
            "seen" => &["dev"],
            "resolved" => &["dev", "reader"],
            _ => &["lead", "dev", "reader"],
        };
        assert_eq!(audience(&routed), expected, "{event} routed to lead");
        assert_eq!(routed.decision, Some(did(7)), "{event}");
        let human = change(&record, Some(to_human.clone()));
        let expected: &[&str] = match event {
            "seen" => &["dev"],
            _ => &["dev", "reader"],
        };
        assert_eq!(audience(&human), expected, "{event} routed to the human");
    }
}

#[test]
fn a_decision_event_without_its_decisions_routing_reaches_nobody() {
    for (event, record) in decision_events() {
        assert_eq!(
            Change::routing_needed(&record),
            Some(&did(7)),
            "{event} needs the routing of the decision it is about"
        );
        assert_eq!(Change::of(&record, None), None, "{event}");
    }
    let raise = Evidence::Decision(DecisionEvidence::Raised(Box::new(raised(Route::Human))));
    assert_eq!(Change::routing_needed(&raise), None);
}

#[test]
fn a_release_or_revocation_reaches_the_roles_holder_and_every_claim_the_readers() {
    let acme = business("acme");
    let dev = agent("dev", "dev-1");
    let claimed = ClaimEvidence::Claimed {
        business: acme.clone(),
        agent: dev.clone(),
    };
    let released = ClaimEvidence::Released {
        business: acme.clone(),
        agent: dev.clone(),
    };
    let revoked = ClaimEvidence::Revoked {
        business: acme,
        agent: dev,
        decision: did(3),
    };
    let of = |claim| change(&Evidence::Claim(claim), None);
    assert_eq!(audience(&of(claimed)), ["reader"]);
    let released = of(released);
    assert_eq!(audience(&released), ["dev", "dev-2", "reader"]);
    assert_eq!(
        (released.kind, released.role),
        ("role.released", Some(role("dev")))
    );
    assert_eq!(audience(&of(revoked)), ["dev", "dev-2", "reader"]);
}

/// `session.ended` of dev-1, which freed the role or not.
fn ended(b: &str, vacated: bool) -> Evidence {
    Evidence::Claim(ClaimEvidence::Ended(RunEnd {
        business: business(b),
        agent: agent("dev", "dev-1"),
        ending: Ending::of_cause(EndCause::Human),
        vacated,
    }))
}

#[test]
fn an_end_that_frees_a_role_reaches_its_holder_and_every_end_the_readers() {
    let freed = change(&ended("acme", true), None);
    assert_eq!(audience(&freed), ["dev", "dev-2", "reader"]);
    assert_eq!(
        (freed.kind, freed.role, freed.message, freed.decision),
        ("session.ended", Some(role("dev")), None, None)
    );
    // A run that held nothing leaves the role's holder undisturbed.
    assert_eq!(audience(&change(&ended("acme", false), None)), ["reader"]);
    assert_eq!(
        audience(&change(&ended("globex", true), None)),
        ["globex-dev", "globex-reader"]
    );
}

#[test]
fn the_launch_switch_reaches_every_agent_and_the_readers_and_a_launch_the_readers() {
    let switch = |e| change(&Evidence::Launch(e), None);
    let off = switch(LaunchEvidence::Revoked {
        business: business("acme"),
    });
    assert_eq!(audience(&off), ["lead", "dev", "dev-2", "qa", "reader"]);
    assert_eq!(off.kind, "launch.revoked");
    let on = switch(LaunchEvidence::Restored {
        business: business("acme"),
    });
    assert_eq!(audience(&on), ["lead", "dev", "dev-2", "qa", "reader"]);
    let launched = switch(LaunchEvidence::Launched(LaunchRecord {
        business: business("acme"),
        role: role("qa"),
        run: RunId::parse("qa-1").unwrap(),
        harness: Harness::Pi,
        address: None,
        pid: 1,
        start_time: 1,
    }));
    assert_eq!(audience(&launched), ["reader"]);
    assert_eq!(launched.role, Some(role("qa")));
}

#[test]
fn a_task_observation_reaches_the_readers_and_other_observations_nobody() {
    let task = TaskRef::parse("vikunja:3/17").unwrap();
    let observed = |kind: &str, subject| {
        Evidence::Observed(Observation {
            business: business("acme"),
            agent: agent("dev", "dev-1"),
            kind: kind.to_owned(),
            body: "{}".to_owned(),
            subject,
            request: None,
        })
    };
    let updated = change(&observed("task.updated", Some(Subject::Task(task))), None);
    assert_eq!(audience(&updated), ["reader"]);
    assert_eq!((updated.kind, updated.task), ("event.observed", Some(task)));
    for (kind, subject) in [
        ("action.allowed", Some(Subject::Task(task))),
        ("action.allowed", Some(Subject::Role(role("dev")))),
        ("action.allowed", None),
    ] {
        assert_eq!(
            Change::of(&observed(kind, subject.clone()), None),
            None,
            "{kind} {subject:?}"
        );
    }
}

#[test]
fn deliveries_reads_approvals_inputs_and_refusals_make_no_change() {
    let acme = business("acme");
    let dev = agent("dev", "dev-1");
    let records = [
        Evidence::Message(MessageEvidence::Delivered {
            business: acme.clone(),
            message: mid(1),
            run: dev.run.clone(),
        }),
        Evidence::Message(MessageEvidence::Read {
            business: acme.clone(),
            message: mid(1),
            run: dev.run.clone(),
        }),
        Evidence::Consumed(Consumption {
            business: acme.clone(),
            decision: did(1),
            agent: dev.clone(),
            action: Action::parse("repo.merge").unwrap(),
            target: None,
        }),
        Evidence::Allowed(ActionAllowed {
            business: acme.clone(),
            agent: dev.clone(),
            action: Action::parse("message.send").unwrap(),
            target: None,
            decision: None,
            subject: None,
        }),
        Evidence::Human(HumanInput {
            id: EventId::from_random([2; 16]),
            business: acme.clone(),
            verb: "decision.resolve".to_owned(),
            subject: None,
        }),
        Evidence::Refused(RefusalRecord {
            business: Some(acme),
            agent: Some(dev),
            verb: Some("inbox".to_owned()),
            refusal: Refusal::NotHolder,
        }),
    ];
    for record in records {
        assert_eq!(Change::of(&record, None), None, "{}", record.kind());
    }
}

/// Every change the tests above build, for the properties below.
fn all_changes() -> Vec<Change> {
    let mut records = vec![
        (message(Recipient::Role(role("dev"))), None),
        (message(Recipient::Role(role("qa"))), None),
        (message(Recipient::Human), None),
    ];
    for route in [
        Route::Role(role("lead")),
        Route::Role(role("dev")),
        Route::Human,
    ] {
        let record = raised(route);
        records.push((
            Evidence::Decision(DecisionEvidence::Raised(Box::new(record.clone()))),
            None,
        ));
        for (_, event) in decision_events() {
            records.push((event, Some(Routing::of(&record))));
        }
    }
    for b in ["acme", "globex"] {
        records.push((
            Evidence::Launch(LaunchEvidence::Revoked {
                business: business(b),
            }),
            None,
        ));
        records.push((
            Evidence::Claim(ClaimEvidence::Released {
                business: business(b),
                agent: agent("dev", "dev-1"),
            }),
            None,
        ));
        records.push((ended(b, true), None));
        records.push((ended(b, false), None));
    }
    records
        .into_iter()
        .map(|(record, routing)| change(&record, routing))
        .collect()
}

#[test]
fn a_watcher_shares_a_topic_with_every_change_it_hears_of() {
    for change in all_changes() {
        let topics = change.topics();
        for (name, watcher) in everyone() {
            if watcher.concerns(&change) {
                assert!(
                    watcher.topics().iter().any(|t| topics.contains(t)),
                    "{name} hears of {change:?} but listens to none of {topics:?}"
                );
            }
        }
    }
}

#[test]
fn nobody_hears_of_another_business_and_no_change_carries_text() {
    for change in all_changes() {
        for (name, watcher) in everyone() {
            if watcher.business() != &change.business {
                assert!(!watcher.concerns(&change), "{name} heard of {change:?}");
            }
        }
        let shown = format!("{change:?}");
        for text in ["BODY", "QUESTION", "NOTE"] {
            assert!(!shown.contains(text), "{shown}");
        }
    }
    let globex_topics = reader("globex").topics();
    assert_eq!(globex_topics, [Topic::Readers(business("globex"))]);
}

#[test]
fn a_wait_defaults_to_30_s_and_is_clamped_to_1_to_120_s() {
    let ms = Duration::from_millis;
    assert_eq!(changes::wait(None), ms(30_000));
    assert_eq!(changes::wait(Some(0)), ms(1_000));
    assert_eq!(changes::wait(Some(999)), ms(1_000));
    assert_eq!(changes::wait(Some(2_500)), ms(2_500));
    assert_eq!(changes::wait(Some(120_000)), ms(120_000));
    assert_eq!(changes::wait(Some(u64::MAX)), ms(120_000));
}
