//! The verb table against the bus: a command's verb and references, the
//! recorded refusals, and every verb from every caller kind.

use super::*;

#[test]
fn a_command_names_its_verb_and_the_messages_the_runtime_must_read_for_it() {
    let mut reply = send(1, "lead", None);
    if let Command::Send { input, .. } = &mut reply {
        input.in_reply_to = Some(MessageId::from_random([2; 16]));
        input.corrects = Some(MessageId::from_random([3; 16]));
    }
    assert_eq!(
        reply.references(),
        [
            MessageId::from_random([2; 16]),
            MessageId::from_random([3; 16])
        ]
    );
    assert_eq!(send(1, "lead", None).references(), []);
    let read = Command::Read {
        id: MessageId::from_random([4; 16]),
        known: None,
    };
    assert_eq!(read.references(), [MessageId::from_random([4; 16])]);
    assert_eq!(Command::Claim.references(), []);
    for (command, verb) in [
        (Command::Claim, "role.claim"),
        (Command::Release, "role.release"),
        (send(1, "lead", None), "message.send"),
        (read, "message.read"),
        (resolve(1, "yes"), "decision.resolve"),
        (Command::LaunchRevoke, "launch.revoke"),
        (
            Command::Authorize {
                action: act("repo.merge"),
                target: None,
                decision: None,
            },
            "authorize",
        ),
    ] {
        assert_eq!(command.verb(), verb);
    }
    assert_eq!(caller("dev", "r1").kind(), CallerKind::Agent);
    assert_eq!(human(1).kind(), CallerKind::Human);
    assert_eq!(
        Caller::Reader { business: acme() }.kind(),
        CallerKind::Reader
    );
}

#[test]
fn a_refusal_is_recorded_with_its_caller_and_verb_at_the_next_write_time() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    let last = f.committed.last().unwrap().at;
    f.bus.handle_refused(
        t(0),
        Some(&caller("dev", "r1")),
        Some("role.claim"),
        Refusal::RoleHeld,
    );
    f.bus
        .handle_refused(t(0), Some(&human(1)), None, Refusal::NotAuthorized);
    f.bus
        .handle_refused(t(0), None, None, Refusal::BadCapability);
    let records: Vec<Stamped> = std::iter::from_fn(|| f.bus.poll_effect()).collect();
    let refused = |business: Option<BusinessId>, agent, verb: Option<&str>, refusal| {
        Evidence::Refused(mosaic_domain::evidence::RefusalRecord {
            business,
            agent,
            verb: verb.map(str::to_owned),
            refusal,
        })
    };
    assert_eq!(
        records
            .iter()
            .map(|s| s.evidence.clone())
            .collect::<Vec<_>>(),
        [
            refused(
                Some(acme()),
                Some(agent("dev", "r1")),
                Some("role.claim"),
                Refusal::RoleHeld
            ),
            refused(Some(acme()), None, None, Refusal::NotAuthorized),
            refused(None, None, None, Refusal::BadCapability),
        ]
    );
    let times: Vec<Timestamp> = records.iter().map(|s| s.at).collect();
    assert_eq!(
        times,
        [1, 2, 3].map(|n| Timestamp::from_unix_ms(last.unix_ms() + n).unwrap())
    );
    assert_eq!(f.bus.business(&acme()).map(|b| b.id()), Some(&acme()));
    assert!(f
        .bus
        .business(&BusinessId::parse("globex").unwrap())
        .is_none());
}

/// A bus where each verb has something to act on, for the caller test:
/// dev/r1, lead/l1 and ops/o1 hold their roles (ops/o1 bound by the host);
/// decision 1 (dev's merge) is routed to lead; decision 2 (lead's merge)
/// to the human; decision 3 (revoking ops) is approved by the human.
fn callers_fixture() -> Fixture {
    let mut f = Fixture::new();
    f.bind("ops", "o1");
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.claim("ops", "o1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    f.raise("lead", "l1", 2, raise("repo.merge", None));
    f.raise("lead", "l1", 3, raise("role.revoke", Some("ops")));
    f.ok(&human(3), resolve(3, "yes"));
    f
}

/// The commands that serve `verb`, from a caller of `kind`, each valid in
/// [`callers_fixture`]: a caller the table lists can only be refused by
/// the bus disagreeing with the table. Reads never reach the bus.
fn serving(verb: Verb, kind: CallerKind) -> Vec<(Caller, Command)> {
    let dev = caller("dev", "r1");
    let by = match kind {
        CallerKind::Agent => dev.clone(),
        CallerKind::Reader => Caller::Reader { business: acme() },
        CallerKind::Human => human(50),
    };
    // An agent resolves as lead and withdraws as dev, the raiser, the
    // decision routed to lead; the others act on the human's. An agent
    // writes to another role, the others to dev.
    let (decision, to) = match kind {
        CallerKind::Agent => (1, "lead"),
        CallerKind::Reader | CallerKind::Human => (2, "dev"),
    };
    let as_lead = |command| match kind {
        CallerKind::Agent => vec![(caller("lead", "l1"), command)],
        CallerKind::Reader | CallerKind::Human => vec![(by.clone(), command)],
    };
    let note = None;
    let command = match verb {
        Verb::RoleClaim => Command::Claim,
        Verb::RoleRelease => Command::Release,
        Verb::RoleRevoke => {
            return as_lead(Command::Revoke {
                role: role("ops"),
                decision: did(3),
            })
        }
        Verb::DecisionRaise => raising(9, raise("repo.merge", None)),
        Verb::DecisionResolve => return as_lead(resolve(decision, "yes")),
        Verb::DecisionSeen => {
            return as_lead(Command::Seen {
                id: did(decision),
                note,
            })
        }
        Verb::DecisionWithdraw => Command::Withdraw {
            id: did(decision),
            note,
        },
        Verb::MessageSend => send(5, to, None),
        Verb::MessageReceive => Command::Receive { batch: Vec::new() },
        // An agent reads what was delivered to it; the others a message to
        // the human.
        Verb::MessageRead => {
            let mut facts = stored(6, "acme");
            match kind {
                CallerKind::Agent => facts.delivered_to = Some(RunId::parse("r1").unwrap()),
                CallerKind::Reader | CallerKind::Human => facts.record.to = Recipient::Human,
            }
            Command::Read {
                id: facts.record.id,
                known: Some(facts),
            }
        }
        Verb::EventEmit => Command::EmitRoutine {
            target: None,
            subject: None,
        },
        Verb::LaunchRevoke => Command::LaunchRevoke,
        Verb::LaunchRestore => Command::LaunchRestore,
        Verb::RunEnd => Command::EndRun {
            run: RunId::parse("o1").unwrap(),
        },
        Verb::BrowserRequest => Command::RecordBrowserOutcome { body: "{}".into() },
        Verb::Inbox
        | Verb::Tasks
        | Verb::Agents
        | Verb::Trail
        | Verb::Head
        | Verb::History
        | Verb::Changes => return Vec::new(),
    };
    vec![(by, command)]
}

/// What a caller of `kind` gets from a bus that agrees with `callers`.
#[track_caller]
fn assert_agrees(callers: &[CallerKind], kind: CallerKind, got: Result<(), Refusal>, what: &str) {
    if callers.contains(&kind) {
        assert_eq!(
            got,
            Ok(()),
            "{what} from {kind:?}: the table lists the caller"
        );
    } else if callers == [CallerKind::Human] {
        assert_eq!(got, Err(Refusal::HumanOnly), "{what} from {kind:?}");
    } else {
        assert_eq!(got, Err(Refusal::NotAuthorized), "{what} from {kind:?}");
    }
}

#[test]
fn the_bus_and_the_change_feed_serve_exactly_the_callers_the_verb_table_lists() {
    for &verb in Verb::ALL {
        for kind in CallerKind::ALL {
            let commands = serving(verb, kind);
            // A write is tested here, through the bus; a read never reaches
            // the bus and is tested against the same table where the runtime
            // admits it (app/tests/human/,
            // `every_read_answers_exactly_the_callers_the_verb_table_lists`).
            assert_eq!(commands.is_empty(), verb.is_read(), "{verb} is tested");
            for (caller, command) in commands {
                let got = callers_fixture().run(&caller, command).0;
                assert_agrees(verb.callers(), kind, got.map(|_| ()), verb.as_str());
            }
        }
    }
    let trusted = [
        Command::Authorize {
            action: act("repo.push"),
            target: None,
            decision: None,
        },
        record("review.noted", None, None),
    ];
    for command in trusted {
        for (kind, caller) in [
            (CallerKind::Agent, caller("dev", "r1")),
            (CallerKind::Reader, Caller::Reader { business: acme() }),
            (CallerKind::Human, human(50)),
        ] {
            let got = callers_fixture().run(&caller, command.clone()).0;
            let trusted = mosaic_domain::verb::TRUSTED_CALLERS;
            assert_agrees(trusted, kind, got.map(|_| ()), command.verb());
        }
    }
    for (kind, caller) in [
        (CallerKind::Agent, caller("dev", "r1")),
        (CallerKind::Reader, Caller::Reader { business: acme() }),
        (CallerKind::Human, human(50)),
    ] {
        let watcher = mosaic_domain::changes::Watcher::of(&caller, |_, _| true);
        assert_agrees(
            Verb::Changes.callers(),
            kind,
            watcher.map(|_| ()),
            "changes",
        );
    }
}

#[test]
fn only_message_receive_carries_the_caller_s_undelivered_messages() {
    for &verb in Verb::ALL {
        for kind in CallerKind::ALL {
            for (_, command) in serving(verb, kind) {
                assert_eq!(
                    command.wants_batch(),
                    verb == Verb::MessageReceive,
                    "{verb} from {kind:?}"
                );
            }
        }
    }
    // The batch the runtime reads is what the command then carries.
    let batch = vec![stored(1, "acme"), stored(2, "acme")];
    let receive = Command::Receive { batch: Vec::new() }.with_facts(batch.clone());
    assert_eq!(receive, Command::Receive { batch });
}
