//! The bus's verbs, one rule per test, with exact replies and exact evidence.
//!
//! One file of `bus_verbs/` per subject: [`roles`], [`ends`] (a run's
//! end), [`decisions`] (and [`decision_text`], the words a decision may
//! hold), [`messages`], [`human_inbox`] (raise order and the human's
//! acknowledgement), [`switch_and_commits`], [`events`] and [`table`] (the
//! verb table against the bus); the fixture and the helpers they share are
//! here.

mod decision_text;
mod decisions;
mod ends;
mod events;
mod human_inbox;
mod messages;
mod roles;
mod switch_and_commits;
mod table;

use mosaic_domain::authority::Grant;
use mosaic_domain::bus::{BodyField, Bus, Caller, Command, EventBody, Reply, SendInput};
use mosaic_domain::business::{AuthoritySpec, RoleSpec};
use mosaic_domain::claims::{BindReply, ClaimReply};
use mosaic_domain::decisions::{RaiseInput, Status};
use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, ClaimEvidence, Consumption, DecisionActor, DecisionEvidence,
    DecisionOption, EndCause, Ending, Evidence, Harness, HumanInput, LaunchEvidence, LaunchRecord,
    MessageEvidence, MessageRecord, OptionKey, RaiseFields, Recipient, Route, RunEnd, Sender,
    Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::*;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(ms).unwrap()
}
fn role(s: &str) -> RoleInstance {
    RoleInstance::parse(s).unwrap()
}
fn act(s: &str) -> Action {
    Action::parse(s).unwrap()
}
fn acme() -> BusinessId {
    BusinessId::parse("acme").unwrap()
}
fn agent(r: &str, run: &str) -> AgentRef {
    AgentRef {
        role: role(r),
        run: RunId::parse(run).unwrap(),
    }
}
fn caller(r: &str, run: &str) -> Caller {
    Caller::Agent {
        business: acme(),
        agent: agent(r, run),
    }
}
fn human(n: u8) -> Caller {
    Caller::Human {
        business: acme(),
        input: EventId::from_random([n; 16]),
    }
}
fn did(n: u8) -> DecisionId {
    DecisionId::from_random([n; 16])
}
fn key(s: &str) -> OptionKey {
    OptionKey::parse(s).unwrap()
}

/// acme: `lead` (delivery and technical arbiter, launches), `dev` (sends
/// messages within role, merges cross-role), `ops` (nothing).
fn business(dev_within: &[&str], dev_cross: &[&str]) -> Business {
    business_with_technical(dev_within, dev_cross, "lead")
}

fn business_with_technical(dev_within: &[&str], dev_cross: &[&str], technical: &str) -> Business {
    let spec = |within: &[&str], cross: &[&str]| RoleSpec {
        authority: AuthoritySpec {
            within_role: Some(within.iter().map(|a| act(a)).collect()),
            cross_role: Some(cross.iter().map(|a| act(a)).collect()),
        },
        credentials: Default::default(),
    };
    Business::validate(BusinessSpec {
        id: acme(),
        human: HumanName::parse("alice").unwrap(),
        technical_arbiter: role(technical),
        delivery_arbiter: role("lead"),
        roles: [
            (role("lead"), spec(&["message.send"], &["repo.merge"])),
            (role("dev"), spec(dev_within, dev_cross)),
            (role("ops"), spec(&[], &[])),
        ]
        .into_iter()
        .collect(),
        launch_by: vec![role("lead")],
    })
    .unwrap()
}

fn standard() -> Business {
    business(&["message.send", "repo.push"], &["repo.merge"])
}

/// A bus whose every verb commits at once, with a clock the test moves.
struct Fixture {
    bus: Bus,
    now: i64,
    committed: Vec<Stamped>,
}

impl Fixture {
    fn new() -> Self {
        Self {
            bus: Bus::new([standard()], None),
            now: 1_000,
            committed: Vec::new(),
        }
    }

    /// Runs `command` and, when accepted, commits its evidence and returns it.
    fn run(
        &mut self,
        caller: &Caller,
        command: Command,
    ) -> (Result<Reply, Refusal>, Vec<Evidence>) {
        self.now += 10;
        let reply = self.bus.handle(t(self.now), caller, command);
        (reply, self.commit())
    }

    /// Asserts the exact reply and the exact evidence of one verb.
    #[track_caller]
    fn expect(
        &mut self,
        caller: &Caller,
        command: Command,
        reply: Result<Reply, Refusal>,
        evidence: &[Evidence],
    ) {
        let (got, got_evidence) = self.run(caller, command);
        assert_eq!(got, reply, "reply");
        assert_eq!(got_evidence, evidence, "evidence");
    }

    #[track_caller]
    fn refuse(&mut self, caller: &Caller, command: Command, refusal: Refusal) {
        self.expect(caller, command, Err(refusal), &[]);
    }

    #[track_caller]
    fn ok(&mut self, caller: &Caller, command: Command) -> Reply {
        let (reply, _) = self.run(caller, command);
        reply.unwrap()
    }

    fn claim(&mut self, r: &str, run: &str) {
        self.ok(&caller(r, run), Command::Claim);
    }

    /// Binds run `run` of role `r`, as the host does, and commits it.
    #[track_caller]
    fn bind(&mut self, r: &str, run: &str) {
        self.now += 10;
        let record = LaunchRecord {
            business: acme(),
            role: role(r),
            run: RunId::parse(run).unwrap(),
            harness: Harness::Pi,
            address: None,
            pid: 4242,
            start_time: 7,
        };
        self.bus.handle_bind(t(self.now), record).unwrap();
        self.commit();
    }

    /// Commits what the bus queued and returns its evidence.
    fn commit(&mut self) -> Vec<Evidence> {
        let mut evidence = Vec::new();
        while let Some(s) = self.bus.poll_effect() {
            evidence.push(s.evidence.clone());
            self.committed.push(s);
        }
        self.bus.handle_committed();
        evidence
    }

    /// The host ends `run` with `ending`: its answer and, committed, its
    /// evidence.
    fn end(&mut self, run: &str, ending: Ending) -> (Result<(), Refusal>, Vec<Evidence>) {
        self.now += 10;
        let got = self
            .bus
            .handle_end(t(self.now), &RunId::parse(run).unwrap(), ending);
        (got, self.commit())
    }

    /// Raises decision `did(id)` as `r/run` and returns it.
    #[track_caller]
    fn raise(
        &mut self,
        r: &str,
        run: &str,
        id: u8,
        input: RaiseInput,
    ) -> mosaic_domain::decisions::Decision {
        let reply = self.ok(&caller(r, run), raising(id, input));
        let Reply::Decision(d) = reply else {
            panic!("not a decision: {reply:?}")
        };
        *d
    }
}

/// `decision.raise` of `input` as decision `did(id)`.
fn raising(id: u8, input: RaiseInput) -> Command {
    Command::Raise {
        id: did(id),
        input: Box::new(input),
    }
}

fn raise(action: &str, target: Option<&str>) -> RaiseInput {
    RaiseInput {
        fields: RaiseFields {
            action: act(action),
            target: target.map(|s| Target::parse(s).unwrap()),
            question: "May I?".into(),
            options: vec![
                DecisionOption {
                    key: key("yes"),
                    text: "Yes".into(),
                },
                DecisionOption {
                    key: key("no"),
                    text: "No".into(),
                },
            ],
            recommendation: "yes".into(),
            blocking: false,
            technical: false,
            project: None,
            task_ref: None,
            requirement_ref: None,
            supersedes: None,
        },
        choice: None,
        approval_choice: None,
    }
}

fn resolve(id: u8, choice: &str) -> Command {
    Command::Resolve {
        id: did(id),
        choice: key(choice),
        note: None,
    }
}

fn send(n: u8, to: &str, decision: Option<DecisionId>) -> Command {
    Command::Send {
        id: MessageId::from_random([n; 16]),
        input: Box::new(SendInput {
            to: if to == "human" {
                Recipient::Human
            } else {
                Recipient::Role(role(to))
            },
            class: None,
            body: "hello".into(),
            in_reply_to: None,
            corrects: None,
            decision,
        }),
        known: Vec::new(),
    }
}

/// `record_event` of `kind` under `subject`, with `request` for `task.created`.
fn record(kind: &str, subject: Option<Subject>, request: Option<EventId>) -> Command {
    Command::RecordEvent {
        kind: act(kind),
        body: "{}".into(),
        subject,
        request,
    }
}

/// A message of `business` as the store has it, for `known`.
fn stored(n: u8, business: &str) -> MessageFacts {
    MessageFacts {
        record: MessageRecord {
            id: MessageId::from_random([n; 16]),
            business: BusinessId::parse(business).unwrap(),
            from: Sender::Human,
            to: Recipient::Role(role("dev")),
            class: None,
            body: "earlier".into(),
            in_reply_to: None,
            corrects: None,
            decision: None,
            request: None,
        },
        delivered_to: None,
        read: false,
    }
}
