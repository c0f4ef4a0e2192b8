//! Plain functions the fuzz targets in `fuzz/` call, and that the tests in
//! `tests/` replay over the seed corpus, so CI exercises every target.
//!
//! Each one panics only when an invariant breaks; that panic is the finding.
//!
//! - [`parsers`]: every strict text parser of the domain;
//! - `machines` (feature `fuzzing`, which brings in `arbitrary`): the
//!   composed [`Bus`](crate::bus::Bus) and the browser request machine,
//!   driven by arbitrary transition sequences.

use crate::browser::{CaptureLabel, ClickText, HttpUrl, InputValue, ScrollDirection, Selector};
use crate::evidence::{Harness, MessageClass, OptionKey};
use crate::{
    Action, BrowserRequestId, BusinessId, Capability, ClaimToken, ClientId, Date, DecisionId,
    EventId, HumanName, MessageId, RoleInstance, RunId, Target, TaskRef, Timestamp,
};

#[cfg(feature = "fuzzing")]
pub use machines::machines;

/// Every strict parser: whatever it accepts must print back to exactly the
/// same text (one text form per value) and parse again to the same value.
/// A few parsers carry a second invariant: a timestamp's date is its first
/// ten characters, and a URL's origin is itself a URL with that origin.
pub fn parsers(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    round_trip(text, Timestamp::parse, Timestamp::to_string);
    round_trip(text, Date::parse, Date::to_string);
    round_trip(text, TaskRef::parse, TaskRef::to_string);
    round_trip(text, DecisionId::parse, DecisionId::to_string);
    round_trip(text, MessageId::parse, MessageId::to_string);
    round_trip(text, EventId::parse, EventId::to_string);
    round_trip(text, BrowserRequestId::parse, BrowserRequestId::to_string);
    round_trip(text, BusinessId::parse, BusinessId::to_string);
    round_trip(text, RoleInstance::parse, RoleInstance::to_string);
    round_trip(text, RunId::parse, RunId::to_string);
    round_trip(text, ClientId::parse, ClientId::to_string);
    round_trip(text, HumanName::parse, HumanName::to_string);
    round_trip(text, Action::parse, Action::to_string);
    round_trip(text, Target::parse, Target::to_string);
    round_trip(text, OptionKey::parse, OptionKey::to_string);
    round_trip(text, Capability::parse, Capability::expose);
    round_trip(text, ClaimToken::parse, ClaimToken::expose);
    round_trip(text, MessageClass::parse, |c| c.as_str().to_owned());
    round_trip(text, Harness::parse, |h| h.as_str().to_owned());
    round_trip(text, ScrollDirection::parse, |d| d.as_str().to_owned());
    round_trip(text, Selector::parse, |s| s.as_str().to_owned());
    round_trip(text, ClickText::parse, |s| s.as_str().to_owned());
    round_trip(text, InputValue::parse, |s| s.as_str().to_owned());
    round_trip(text, CaptureLabel::parse, |s| s.as_str().to_owned());
    round_trip(text, HttpUrl::parse, |u| u.as_str().to_owned());

    if let Ok(at) = Timestamp::parse(text) {
        assert_eq!(
            Timestamp::from_unix_ms(at.unix_ms()),
            Ok(at),
            "a parsed timestamp is in range"
        );
        assert_eq!(
            at.date().to_string(),
            text[..10],
            "a timestamp's date is its first ten characters"
        );
        assert!(at.date().midnight() <= at, "a day starts at its midnight");
    }
    if let Ok(url) = HttpUrl::parse(text) {
        let origin = url.origin();
        let again = HttpUrl::parse(origin.as_str()).map(|o| o.origin().clone());
        assert_eq!(
            again.as_ref(),
            Ok(origin),
            "an origin is a URL whose origin is itself"
        );
    }
}

fn round_trip<T: PartialEq + std::fmt::Debug, E>(
    text: &str,
    parse: impl Fn(&str) -> Result<T, E>,
    print: impl Fn(&T) -> String,
) {
    if let Ok(value) = parse(text) {
        let printed = print(&value);
        assert_eq!(
            printed, text,
            "a parsed value prints back to its only text form"
        );
        assert!(
            parse(&printed).is_ok_and(|again| again == value),
            "the printed form parses to the same value"
        );
    }
}

#[cfg(feature = "fuzzing")]
mod machines {
    //! The `machines` target: arbitrary transition sequences through the
    //! composed bus and the browser request machine, with their invariants
    //! checked after every step. `tests/` has the exact reference models;
    //! these checks are the compact ones a fuzzer can hammer for hours.

    use std::collections::btree_map::Entry;
    use std::collections::{BTreeMap, BTreeSet};

    use arbitrary::{Result, Unstructured};

    use crate::authority::Grant;
    use crate::browser::{
        effective_timeout, BrowserAction, BrowserEffect, BrowserRequests, ClaimReply, ClientInfo,
        HttpUrl, PaneOutcome,
    };
    use crate::bus::{Bus, BusMark, Caller, Command, Reply};
    use crate::business::{AuthoritySpec, RoleSpec};
    use crate::claims::Occupancy;
    use crate::command::Draw;
    use crate::decisions::Status;
    use crate::evidence::{
        AgentRef, Evidence, Harness, LaunchRecord, MessageEvidence, OptionKey, Recipient, Stamped,
        Subject,
    };
    use crate::messages::{MessageFacts, RECEIVE_LIMIT};
    use crate::{
        Action, BrowserRequestId, Business, BusinessId, BusinessSpec, ClaimToken, ClientId,
        DecisionId, EventId, HumanName, MessageId, Refusal, RoleInstance, RunId, Target, TaskRef,
        Timestamp, Verb,
    };

    /// At most this many transitions per input, so one input stays cheap.
    const MAX_STEPS: usize = 256;
    /// The start time, away from both ends of the timestamp range.
    const START_MS: i64 = 1_700_000_000_000;

    /// Drives the bus (first byte even) or the browser request machine (odd)
    /// through the transitions `data` decodes to.
    ///
    /// Bus invariants, after every step: a refused verb or binding leaves the
    /// bus equal to before; a failed commit restores the bus to equality with
    /// the last committed one, and `rollback_to` to equality with the bus at
    /// its mark; after a commit, a bus rebuilt from the committed records
    /// alone equals the live one; committed write times strictly increase;
    /// an approval is spent at most once, ever; a message is delivered at most
    /// once and read only by the run it was delivered to; a resolved,
    /// withdrawn or superseded decision never changes status; a role holder
    /// is never a run revoked from that role, nor a run that ended; a run
    /// that ended is refused every verb and ends once; an accepted claim
    /// holds the role and an accepted release gives it up.
    ///
    /// Browser invariants: each reply and effect list is the one a plain
    /// model predicts (a live id refuses, no recipient refuses at once, the
    /// first claim by a recipient wins, only the claim token settles, an
    /// abort or timeout settles and cancels at the claimant or at every
    /// recipient); every accepted request settles exactly once; after
    /// `handle_timeout(now)` no request outlives its deadline.
    pub fn machines(data: &[u8]) {
        let mut u = Unstructured::new(data);
        let browser = u.arbitrary::<u8>().is_ok_and(|b| b % 2 == 1);
        // Running out of data only ends the sequence early.
        let _ = if browser {
            run_browser(&mut u)
        } else {
            run_bus(&mut u)
        };
    }

    fn pick<T: Clone>(u: &mut Unstructured<'_>, items: &[T]) -> Result<T> {
        u.choose(items).cloned()
    }

    // --- the bus ---

    /// Role names: three of `acme`, `solo` of `globex`, and one neither defines.
    const ROLES: [&str; 5] = ["lead", "dev", "ops", "solo", "ghost"];
    const RUNS: [&str; 2] = ["r1", "r2"];
    const BUSINESSES: [&str; 3] = ["acme", "globex", "nobody"];
    const ACTIONS: [&str; 8] = [
        Verb::MessageSend.as_str(),
        "repo.merge",
        "repo.push",
        "repo.delete",
        Verb::RoleRevoke.as_str(),
        crate::business::ROLE_LAUNCH,
        "routine",
        "task.created",
    ];
    const TARGETS: [Option<&str>; 6] = [
        None,
        Some("main"),
        Some("dev"),
        Some("ops"),
        Some("human"),
        Some("https://example.com"),
    ];
    const KEYS: [&str; 3] = ["yes", "no", "maybe"];
    /// The trusted in-process calls the harness sends beside the verbs.
    const TRUSTED_CALLS: usize = 3;
    const KINDS: [&str; 6] = [
        "task.created",
        "task.updated",
        "human.input",
        "action.allowed",
        "review.noted",
        "browser.completed",
    ];

    fn name<T>(text: &str, parse: fn(&str) -> std::result::Result<T, Refusal>) -> T {
        match parse(text) {
            Ok(value) => value,
            Err(refusal) => panic!("the harness's own name {text:?} is valid: {refusal}"),
        }
    }

    fn uuid_bytes(n: u64) -> [u8; 16] {
        let mut bytes = [0x5a; 16];
        bytes[..8].copy_from_slice(&n.to_be_bytes());
        bytes
    }

    /// `acme` (lead arbitrates and may launch; dev sends and pushes within
    /// role; both merge cross-role; ops has no authority) and `globex` (one
    /// role), as in the tests' fixture.
    fn businesses() -> Vec<Business> {
        let spec = |within: &[&str], cross: &[&str]| RoleSpec {
            authority: AuthoritySpec {
                within_role: Some(within.iter().map(|a| name(a, Action::parse)).collect()),
                cross_role: Some(cross.iter().map(|a| name(a, Action::parse)).collect()),
            },
            credentials: Default::default(),
        };
        let role = |r: &str| name(r, RoleInstance::parse);
        let acme = BusinessSpec {
            id: name("acme", BusinessId::parse),
            human: name("alice", HumanName::parse),
            technical_arbiter: role("lead"),
            delivery_arbiter: role("lead"),
            roles: [
                (
                    role("lead"),
                    spec(&[Verb::MessageSend.as_str()], &["repo.merge"]),
                ),
                (
                    role("dev"),
                    spec(&[Verb::MessageSend.as_str(), "repo.push"], &["repo.merge"]),
                ),
                (role("ops"), spec(&[], &[])),
            ]
            .into_iter()
            .collect(),
            launch_by: vec![role("lead")],
        };
        let globex = BusinessSpec {
            id: name("globex", BusinessId::parse),
            human: name("bob", HumanName::parse),
            technical_arbiter: role("solo"),
            delivery_arbiter: role("solo"),
            roles: [(role("solo"), spec(&[Verb::MessageSend.as_str()], &[]))]
                .into_iter()
                .collect(),
            launch_by: vec![],
        };
        [acme, globex]
            .into_iter()
            .map(|spec| match Business::validate(spec) {
                Ok(business) => business,
                Err(invalid) => panic!("the harness's businesses are valid: {}", invalid.refusal),
            })
            .collect()
    }

    /// The bus under test, with what the harness knows beside it.
    struct BusHarness {
        businesses: Vec<Business>,
        bus: Bus,
        now: i64,
        /// The bus as of the last commit.
        committed: Bus,
        /// Every committed record, in order.
        log: Vec<Stamped>,
        /// What the store would know about each committed message.
        messages: BTreeMap<MessageId, MessageFacts>,
        /// Every approval ever spent in a committed record.
        spent: BTreeSet<DecisionId>,
        /// Open savepoints of the current batch, each with the bus at it.
        marks: Vec<(BusMark, Bus)>,
        /// Every decision and message id drawn so far, for references.
        decisions: Vec<DecisionId>,
        sent: Vec<MessageId>,
        draws: u64,
    }

    /// The harness's names and ids, as [`Command::drawn`] draws them.
    struct Drawer<'h, 'u, 'd> {
        h: &'h mut BusHarness,
        u: &'u mut Unstructured<'d>,
    }

    impl Draw for Drawer<'_, '_, '_> {
        fn role(&mut self) -> Result<RoleInstance> {
            Ok(name(pick(self.u, &ROLES)?, RoleInstance::parse))
        }

        fn recipient(&mut self) -> Result<Recipient> {
            Ok(match pick(self.u, &ROLES)? {
                "ghost" if self.u.arbitrary()? => Recipient::Human,
                role => Recipient::Role(name(role, RoleInstance::parse)),
            })
        }

        fn decision(&mut self) -> Result<DecisionId> {
            self.h.decision(self.u)
        }

        fn new_decision(&mut self) -> DecisionId {
            let id = DecisionId::from_random(self.h.draw());
            self.h.decisions.push(id);
            id
        }

        fn message(&mut self) -> Result<MessageId> {
            self.h.message(self.u)
        }

        fn run(&mut self) -> Result<RunId> {
            Ok(name(pick(self.u, &["r1", "r2", "r9"])?, RunId::parse))
        }

        fn new_message(&mut self) -> MessageId {
            let id = MessageId::from_random(self.h.draw());
            self.h.sent.push(id);
            id
        }

        fn key(&mut self) -> Result<OptionKey> {
            BusHarness::key(self.u)
        }

        fn target(&mut self) -> Result<Option<Target>> {
            BusHarness::target(self.u)
        }

        fn subject(&mut self) -> Result<Option<Subject>> {
            self.h.subject(self.u)
        }

        fn action(&mut self) -> Result<Action> {
            Ok(name(pick(self.u, &ACTIONS)?, Action::parse))
        }

        fn browser_action(&mut self) -> Result<Action> {
            let action = format!("browser.{}", pick(self.u, &BrowserAction::NAMES)?);
            Ok(name(&action, Action::parse))
        }

        fn task_ref(&mut self) -> Result<TaskRef> {
            Ok(name("vikunja:1/2", TaskRef::parse))
        }

        fn flag(&mut self) -> Result<bool> {
            self.u.arbitrary()
        }

        fn up_to(&mut self, max: u8) -> Result<u8> {
            self.u.int_in_range(0..=max)
        }
    }

    fn run_bus(u: &mut Unstructured<'_>) -> Result<()> {
        let businesses = businesses();
        let bus = Bus::new(businesses.clone(), None);
        let mut h = BusHarness {
            businesses,
            committed: bus.clone(),
            bus,
            now: START_MS,
            log: Vec::new(),
            messages: BTreeMap::new(),
            spent: BTreeSet::new(),
            marks: Vec::new(),
            decisions: Vec::new(),
            sent: Vec::new(),
            draws: 0,
        };
        let mut steps = 0;
        while !u.is_empty() && steps < MAX_STEPS {
            steps += 1;
            let step = h.step(u);
            h.check_seats();
            step?;
        }
        h.commit();
        Ok(())
    }

    impl BusHarness {
        fn now(&self) -> Timestamp {
            match Timestamp::from_unix_ms(self.now) {
                Ok(now) => now,
                Err(refusal) => panic!("the harness keeps time in range: {refusal}"),
            }
        }

        fn draw(&mut self) -> [u8; 16] {
            self.draws += 1;
            uuid_bytes(self.draws)
        }

        fn step(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
            match u.int_in_range(0..=15u8)? {
                0..=8 => self.verb(u),
                9 if u.arbitrary()? => self.end(u),
                9 => self.bind(u),
                10 | 11 => {
                    self.commit();
                    Ok(())
                }
                12 => {
                    self.fail_commit();
                    Ok(())
                }
                13 => {
                    self.marks.push((self.bus.mark(), self.bus.clone()));
                    Ok(())
                }
                14 => self.rollback_to_mark(u),
                _ => self.refuse_or_tick(u),
            }
        }

        fn caller(&mut self, u: &mut Unstructured<'_>) -> Result<Caller> {
            let business = name(pick(u, &BUSINESSES)?, BusinessId::parse);
            Ok(match u.int_in_range(0..=7u8)? {
                0 => Caller::Reader { business },
                1 => Caller::Human {
                    business,
                    input: EventId::from_random(self.draw()),
                },
                _ => {
                    let mut agent = self.agent(u)?;
                    // A capability is its launch's: a bound run speaks for
                    // the business and role it was bound to, as the runtime
                    // finds them, never for another.
                    let business = match self.bus.launches().record(&agent.run) {
                        Some(launch) => {
                            agent.role = launch.role.clone();
                            launch.business.clone()
                        }
                        None => business,
                    };
                    Caller::Agent { business, agent }
                }
            })
        }

        fn agent(&self, u: &mut Unstructured<'_>) -> Result<AgentRef> {
            Ok(AgentRef {
                role: name(pick(u, &ROLES)?, RoleInstance::parse),
                run: name(pick(u, &RUNS)?, RunId::parse),
            })
        }

        /// A decision raised earlier (or being raised), else one never raised.
        fn decision(&self, u: &mut Unstructured<'_>) -> Result<DecisionId> {
            if self.decisions.is_empty() || u.ratio(1, 8)? {
                return Ok(DecisionId::from_random(uuid_bytes(u64::MAX)));
            }
            pick(u, &self.decisions)
        }

        fn message(&self, u: &mut Unstructured<'_>) -> Result<MessageId> {
            if self.sent.is_empty() || u.ratio(1, 8)? {
                return Ok(MessageId::from_random(uuid_bytes(u64::MAX)));
            }
            pick(u, &self.sent)
        }

        fn option<T>(
            u: &mut Unstructured<'_>,
            value: impl FnOnce(&mut Unstructured<'_>) -> Result<T>,
        ) -> Result<Option<T>> {
            if u.arbitrary()? {
                value(u).map(Some)
            } else {
                Ok(None)
            }
        }

        fn target(u: &mut Unstructured<'_>) -> Result<Option<Target>> {
            Ok(pick(u, &TARGETS)?.map(|t| name(t, Target::parse)))
        }

        fn key(u: &mut Unstructured<'_>) -> Result<OptionKey> {
            Ok(name(pick(u, &KEYS)?, OptionKey::parse))
        }

        fn subject(&self, u: &mut Unstructured<'_>) -> Result<Option<Subject>> {
            Ok(match u.int_in_range(0..=4u8)? {
                0 => None,
                1 => Some(Subject::Task(name("vikunja:1/2", TaskRef::parse))),
                2 => Some(Subject::Decision(self.decision(u)?)),
                3 => Some(Subject::Message(self.message(u)?)),
                _ => Some(Subject::Role(name(pick(u, &ROLES)?, RoleInstance::parse))),
            })
        }

        /// The store's facts about `id`, as of everything staged so far
        /// (committed facts plus the outbox of the current batch).
        fn staged_messages(&self) -> BTreeMap<MessageId, MessageFacts> {
            let mut facts = self.messages.clone();
            let mut peek = self.bus.clone();
            while let Some(record) = peek.poll_effect() {
                if let Evidence::Message(m) = &record.evidence {
                    apply_message(&mut facts, m, false);
                }
            }
            facts
        }

        /// What the harness hands the bus: a verb of the table, or one of
        /// the trusted in-process calls. `None` for a read verb, which the
        /// runtime answers without the bus.
        fn command(
            &mut self,
            u: &mut Unstructured<'_>,
            caller: &Caller,
        ) -> Result<Option<(Option<Verb>, Command)>> {
            let i = u.choose_index(Verb::ALL.len() + TRUSTED_CALLS)?;
            let Some(&verb) = Verb::ALL.get(i) else {
                return Ok(Some((None, self.trusted(u, i - Verb::ALL.len())?)));
            };
            let Some(command) = Command::drawn(verb, &mut Drawer { h: self, u })? else {
                return Ok(None);
            };
            let facts = self.facts(caller, &command);
            Ok(Some((Some(verb), command.with_facts(facts))))
        }

        /// The store facts the runtime would read for `command`: the
        /// messages it references, and for an agent's `message.receive` its
        /// role's undelivered messages.
        fn facts(&self, caller: &Caller, command: &Command) -> Vec<MessageFacts> {
            let staged = self.staged_messages();
            let mut facts = Vec::new();
            if command.wants_batch() {
                match caller {
                    Caller::Agent { business, agent } => facts.extend(
                        staged
                            .values()
                            .filter(|m| {
                                &m.record.business == business
                                    && m.record.to == Recipient::Role(agent.role.clone())
                                    && m.delivered_to.is_none()
                            })
                            .take(RECEIVE_LIMIT)
                            .cloned(),
                    ),
                    Caller::Reader { .. } | Caller::Human { .. } => {}
                }
            }
            let referenced = command.references();
            facts.extend(referenced.iter().filter_map(|id| staged.get(id).cloned()));
            facts
        }

        /// Trusted call `i` of [`TRUSTED_CALLS`]: `authorize`, the broker's
        /// browser outcome, `record_event`.
        fn trusted(&mut self, u: &mut Unstructured<'_>, i: usize) -> Result<Command> {
            Ok(match i {
                0 => Command::Authorize {
                    action: name(pick(u, &ACTIONS)?, Action::parse),
                    target: Self::target(u)?,
                    decision: Self::option(u, |u| self.decision(u))?,
                },
                1 => Command::RecordBrowserOutcome {
                    body: "{}".to_owned(),
                },
                _ => {
                    let kind = name(pick(u, &KINDS)?, Action::parse);
                    Command::RecordEvent {
                        kind,
                        body: "{}".to_owned(),
                        subject: self.subject(u)?,
                        request: Self::option(u, |_| Ok(EventId::from_random(uuid_bytes(7))))?,
                    }
                }
            })
        }

        fn verb(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
            let caller = self.caller(u)?;
            let Some((verb, command)) = self.command(u, &caller)? else {
                return Ok(());
            };
            let (claim, release) = (
                matches!(command, Command::Claim),
                matches!(command, Command::Release),
            );
            let before = self.bus.clone();
            let now = self.now();
            let result = self.bus.handle(now, &caller, command);
            if let Some(verb) = verb {
                assert!(
                    verb.serves(caller.kind()) || result.is_err(),
                    "the bus refuses {verb} to a caller the verb table does not list"
                );
            }
            if let Caller::Agent { agent, .. } = &caller {
                assert!(
                    before.claims().ended(&agent.run).is_none() || result.is_err(),
                    "a run that ended is refused every verb"
                );
            }
            match result {
                Err(_) => assert!(
                    self.bus == before,
                    "a refused verb leaves the bus as it was"
                ),
                Ok(reply) => {
                    for d in before.decisions().iter() {
                        if d.status != Status::Open {
                            let after = self.bus.decisions().get(&d.record.id);
                            assert_eq!(
                                after.map(|a| &a.status),
                                Some(&d.status),
                                "a closed decision never changes status"
                            );
                        }
                    }
                    if let Reply::Authorized(Grant::Approval(id)) = reply {
                        assert!(
                            !before.authorizations().is_consumed(&id)
                                && self.bus.authorizations().is_consumed(&id),
                            "an approval is spent once, when it is granted"
                        );
                    }
                    if let Caller::Agent { business, agent } = &caller {
                        let holds = self.bus.claims().holds(business, agent);
                        assert!(!claim || holds, "an accepted claim holds the role");
                        assert!(!release || !holds, "an accepted release gives the role up");
                    }
                }
            }
            Ok(())
        }

        fn bind(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
            let agent = self.agent(u)?;
            let record = LaunchRecord {
                business: name(pick(u, &BUSINESSES)?, BusinessId::parse),
                role: agent.role,
                run: agent.run,
                harness: pick(u, &[Harness::Pi, Harness::ClaudeCode])?,
                address: None,
                pid: u.int_in_range(1..=3)?,
                start_time: u.int_in_range(0..=1)?,
            };
            // A host binds a run before it speaks: a run that already holds
            // a role somewhere was never launched by the host.
            let speaks = BUSINESSES.iter().any(|b| {
                ROLES.iter().any(|r| {
                    let held = AgentRef {
                        role: name(r, RoleInstance::parse),
                        run: record.run.clone(),
                    };
                    self.bus.claims().holds(&name(b, BusinessId::parse), &held)
                })
            });
            if speaks {
                return Ok(());
            }
            let before = self.bus.clone();
            let now = self.now();
            if self.bus.handle_bind(now, record).is_err() {
                assert!(
                    self.bus == before,
                    "a refused binding leaves the bus as it was"
                );
            }
            Ok(())
        }

        /// The host ends a run: once ended, it holds nothing and is refused
        /// every verb, and a second end is refused.
        fn end(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
            let run = name(pick(u, &["r1", "r2", "r9"])?, RunId::parse);
            let cause = pick(u, &crate::ending::EndCause::ALL)?;
            let Ok(ending) = crate::ending::Ending::new(cause, None, None) else {
                return Ok(());
            };
            let before = self.bus.clone();
            let now = self.now();
            match self.bus.handle_end(now, &run, ending) {
                Err(_) => assert!(self.bus == before, "a refused end leaves the bus as it was"),
                Ok(()) => {
                    assert!(
                        before.claims().ended(&run).is_none()
                            && self.bus.claims().ended(&run).is_some(),
                        "a run ends once"
                    );
                    assert_eq!(
                        self.bus.handle_end(now, &run, ending),
                        Err(Refusal::RunEnded),
                        "an ended run cannot end again"
                    );
                }
            }
            Ok(())
        }

        /// A refusal recorded on its own (the runtime does this for every
        /// refused request), or the wall clock moving, backwards too.
        fn refuse_or_tick(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
            if u.arbitrary()? {
                let caller = self.caller(u)?;
                let refusal = pick(u, Refusal::ALL)?;
                let now = self.now();
                let verb = pick(u, Verb::ALL)?;
                self.bus
                    .handle_refused(now, Some(&caller), Some(verb.as_str()), refusal);
            } else {
                self.now += i64::from(u.int_in_range(-5_000..=60_000i32)?);
            }
            Ok(())
        }

        fn rollback_to_mark(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
            if self.marks.is_empty() {
                return Ok(());
            }
            let i = u.choose_index(self.marks.len())?;
            // Marks after `i` are gone with the work they covered.
            self.marks.truncate(i + 1);
            let (mark, at_mark) = self.marks[i].clone();
            self.bus.rollback_to(mark);
            assert!(
                self.bus == at_mark,
                "rollback_to restores the bus as it was at the mark"
            );
            Ok(())
        }

        /// The store could not commit: the bus goes back to the last commit.
        fn fail_commit(&mut self) {
            while self.bus.poll_effect().is_some() {}
            self.bus.handle_rolled_back();
            assert!(
                self.bus == self.committed,
                "a failed commit restores the bus as of the last commit"
            );
            self.marks.clear();
        }

        /// The store committed the batch: check it, keep it, and rebuild a
        /// bus from the whole log to compare with the live one.
        fn commit(&mut self) {
            let mut batch = Vec::new();
            while let Some(record) = self.bus.poll_effect() {
                batch.push(record);
            }
            self.bus.handle_committed();
            self.marks.clear();
            for record in batch {
                if let Some(last) = self.log.last() {
                    assert!(last.at < record.at, "write times strictly increase");
                }
                match &record.evidence {
                    Evidence::Consumed(c) => assert!(
                        self.spent.insert(c.decision),
                        "an approval is spent at most once"
                    ),
                    Evidence::Message(m) => apply_message(&mut self.messages, m, true),
                    Evidence::Launch(_)
                    | Evidence::Claim(_)
                    | Evidence::Decision(_)
                    | Evidence::Allowed(_)
                    | Evidence::Human(_)
                    | Evidence::Observed(_)
                    | Evidence::Refused(_)
                    | Evidence::RefusalsCounted(_) => {}
                }
                self.log.push(record);
            }
            let mut rebuilt = Bus::new(self.businesses.clone(), self.log.last().map(|r| r.at));
            for record in &self.log {
                rebuilt.replay(record);
            }
            assert!(
                rebuilt == self.bus,
                "a bus rebuilt from the committed records equals the live one"
            );
            self.committed = self.bus.clone();
        }

        /// No role is held by a run that was revoked from it, or that ended.
        fn check_seats(&self) {
            for business in &self.businesses {
                for role in ROLES {
                    let role = name(role, RoleInstance::parse);
                    let Some(seat) = self.bus.claims().seat(business.id(), &role) else {
                        continue;
                    };
                    match seat.occupancy() {
                        Occupancy::Held(run) => assert!(
                            !seat.is_revoked(run) && self.bus.claims().ended(run).is_none(),
                            "a revoked or ended run never holds its role again"
                        ),
                        Occupancy::Vacant => {}
                    }
                }
            }
        }
    }

    /// Applies one message fact to what the store knows; `strict` asserts the
    /// delivery rules on committed facts.
    fn apply_message(
        facts: &mut BTreeMap<MessageId, MessageFacts>,
        evidence: &MessageEvidence,
        strict: bool,
    ) {
        match evidence {
            MessageEvidence::Sent(record) => {
                let fresh = facts
                    .insert(
                        record.id,
                        MessageFacts {
                            record: (**record).clone(),
                            delivered_to: None,
                            read: false,
                        },
                    )
                    .is_none();
                assert!(!strict || fresh, "a message id is sent once");
            }
            MessageEvidence::Delivered { message, run, .. } => {
                let Some(m) = facts.get_mut(message) else {
                    assert!(!strict, "only a sent message is delivered");
                    return;
                };
                assert!(
                    !strict || m.delivered_to.is_none(),
                    "a message is delivered at most once"
                );
                m.delivered_to = Some(run.clone());
            }
            MessageEvidence::Read { message, run, .. } => {
                let Some(m) = facts.get_mut(message) else {
                    assert!(!strict, "only a sent message is read");
                    return;
                };
                assert!(
                    !strict || (m.delivered_to.as_ref() == Some(run) && !m.read),
                    "a message is read once, by the run it was delivered to"
                );
                m.read = true;
            }
        }
    }

    // --- browser requests ---

    const CLIENTS: u8 = 3;

    fn rid(n: u8) -> BrowserRequestId {
        BrowserRequestId::from_random([n; 16])
    }

    fn client(n: u8) -> ClientId {
        name(&format!("c{n}"), ClientId::parse)
    }

    fn token(n: u8) -> ClaimToken {
        ClaimToken::from_random([n; 32])
    }

    /// A live request as the model sees it.
    struct Live {
        to: BTreeSet<ClientId>,
        claim: Option<(ClientId, u8)>,
        deadline: Timestamp,
    }

    impl Live {
        /// The effects of ending early with `refusal`.
        fn end(self, n: u8, refusal: Refusal) -> [BrowserEffect<u8>; 2] {
            let to = match self.claim {
                Some((claimant, _)) => vec![claimant],
                None => self.to.into_iter().collect(),
            };
            [
                BrowserEffect::Settle {
                    request: rid(n),
                    outcome: Err(refusal),
                },
                BrowserEffect::Cancel {
                    request: rid(n),
                    to,
                },
            ]
        }
    }

    fn run_browser(u: &mut Unstructured<'_>) -> Result<()> {
        let mut machine = BrowserRequests::<u8>::new();
        let mut live: BTreeMap<u8, Live> = BTreeMap::new();
        let (mut accepted, mut settled) = (0usize, 0usize);
        let mut now = START_MS;
        let mut steps = 0;
        let mut result = Ok(());
        while !u.is_empty() && steps < MAX_STEPS {
            steps += 1;
            let at = Timestamp::from_unix_ms(now).unwrap_or(Timestamp::MAX);
            let expected = match browser_step(u, &mut machine, &mut live, at, &mut now) {
                Ok(expected) => expected,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            accepted += expected
                .iter()
                .filter(|e| matches!(e, BrowserEffect::Deliver { .. }))
                .count();
            settled += drain(&mut machine, &expected);
            assert_eq!(machine.pending(), live.len(), "live requests as modelled");
            assert_eq!(
                machine.next_deadline(),
                live.values().map(|l| l.deadline).min(),
                "the next deadline is the earliest live one"
            );
        }
        // Time runs out: everything still live times out, once.
        let expected: Vec<_> = std::mem::take(&mut live)
            .into_iter()
            .flat_map(|(n, l)| l.end(n, Refusal::BrowserTimeout))
            .collect();
        machine.handle_timeout(Timestamp::MAX);
        settled += drain(&mut machine, &expected);
        assert_eq!(machine.pending(), 0, "no request outlives every deadline");
        assert_eq!(
            accepted, settled,
            "every accepted request settles exactly once"
        );
        result
    }

    /// Drains the machine's effects, which must be `expected`; returns how
    /// many settle a request.
    fn drain(machine: &mut BrowserRequests<u8>, expected: &[BrowserEffect<u8>]) -> usize {
        let mut effects = Vec::new();
        while let Some(effect) = machine.poll_effect() {
            effects.push(effect);
        }
        assert_eq!(effects, expected, "the effects a plain model predicts");
        effects
            .iter()
            .filter(|e| matches!(e, BrowserEffect::Settle { .. }))
            .count()
    }

    /// One transition; returns the effects it must queue.
    fn browser_step(
        u: &mut Unstructured<'_>,
        machine: &mut BrowserRequests<u8>,
        live: &mut BTreeMap<u8, Live>,
        at: Timestamp,
        now: &mut i64,
    ) -> Result<Vec<BrowserEffect<u8>>> {
        let n = u.int_in_range(0..=3u8)?;
        Ok(match u.int_in_range(0..=4u8)? {
            0 => {
                let action = if u.arbitrary()? {
                    BrowserAction::Open {
                        url: name("https://example.com/", HttpUrl::parse),
                        viewport: None,
                    }
                } else {
                    BrowserAction::Snapshot { selector: None }
                };
                let mut clients = Vec::new();
                for c in 0..CLIENTS {
                    if u.arbitrary()? {
                        clients.push(ClientInfo {
                            id: client(c),
                            capable: u.arbitrary()?,
                        });
                    }
                }
                let requested = requested_ms(u)?;
                let timeout = effective_timeout(&action, requested);
                let to: BTreeSet<ClientId> = clients
                    .iter()
                    .filter(|c| c.capable || !action.needs_capable_client())
                    .map(|c| c.id.clone())
                    .collect();
                let reply = machine.handle_request(at, rid(n), action.clone(), timeout, &clients);
                let (want, effects) = match live.entry(n) {
                    Entry::Occupied(_) => (Err(Refusal::BadRequest), Vec::new()),
                    Entry::Vacant(_) if to.is_empty() => {
                        (Err(Refusal::NoBrowserClient), Vec::new())
                    }
                    Entry::Vacant(slot) => {
                        let deadline = at.saturating_add(timeout);
                        let deliver = BrowserEffect::Deliver {
                            request: rid(n),
                            action,
                            claim_by: deadline,
                            to: to.iter().cloned().collect(),
                        };
                        slot.insert(Live {
                            to,
                            claim: None,
                            deadline,
                        });
                        (Ok(()), vec![deliver])
                    }
                };
                assert_eq!(reply, want, "a request's reply as modelled");
                effects
            }
            1 => {
                let (c, t) = (u.int_in_range(0..=CLIENTS)?, u.int_in_range(0..=2u8)?);
                let reply = machine.handle_claim(rid(n), &client(c), token(t));
                let want = match live.get_mut(&n) {
                    Some(l) if l.claim.is_none() && l.to.contains(&client(c)) => {
                        l.claim = Some((client(c), t));
                        ClaimReply::Granted(token(t))
                    }
                    Some(_) | None => ClaimReply::Refused,
                };
                assert_eq!(reply, want, "the first claim by a recipient wins");
                Vec::new()
            }
            2 => {
                let t = u.int_in_range(0..=2u8)?;
                let outcome = match u.int_in_range(0..=3u8)? {
                    0 => PaneOutcome::Done(t),
                    1 => PaneOutcome::Failed,
                    2 => PaneOutcome::AddressRefused,
                    _ => PaneOutcome::TooLarge,
                };
                let settles = outcome.clone().into_result();
                let matched = machine.handle_result(rid(n), &token(t), outcome);
                let want = live
                    .get(&n)
                    .is_some_and(|l| l.claim.as_ref().is_some_and(|(_, held)| *held == t));
                assert_eq!(matched, want, "only the claim token settles");
                if want {
                    live.remove(&n);
                    vec![BrowserEffect::Settle {
                        request: rid(n),
                        outcome: settles,
                    }]
                } else {
                    Vec::new()
                }
            }
            3 => {
                let was_live = machine.handle_abort(rid(n));
                let l = live.remove(&n);
                assert_eq!(was_live, l.is_some(), "only a live request aborts");
                l.map(|l| l.end(n, Refusal::BrowserAborted).to_vec())
                    .unwrap_or_default()
            }
            _ => {
                *now += i64::from(u.int_in_range(0..=60_000u32)?);
                let at = Timestamp::from_unix_ms(*now).unwrap_or(Timestamp::MAX);
                machine.handle_timeout(at);
                let due: Vec<u8> = live
                    .iter()
                    .filter(|(_, l)| l.deadline <= at)
                    .map(|(n, _)| *n)
                    .collect();
                let mut effects = Vec::new();
                for n in due {
                    if let Some(l) = live.remove(&n) {
                        effects.extend(l.end(n, Refusal::BrowserTimeout));
                    }
                }
                assert!(
                    machine.next_deadline().is_none_or(|d| d > at),
                    "no request outlives its deadline after handle_timeout"
                );
                effects
            }
        })
    }

    /// A requested timeout in milliseconds, sometimes none, sometimes out of
    /// the clamp range.
    fn requested_ms(u: &mut Unstructured<'_>) -> Result<Option<u64>> {
        Ok(match u.int_in_range(0..=3u8)? {
            0 => None,
            1 => Some(u.int_in_range(0..=1_500)?),
            2 => Some(u.int_in_range(0..=130_000)?),
            _ => Some(u.arbitrary()?),
        })
    }
}
