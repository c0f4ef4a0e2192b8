//! The world [`request_line`] runs in (see `fuzz/corpus/request_line/` for
//! lines that use it) is the broker's writer and read side over fakes: a
//! [`Driver`] over a `MemoryStore`, a reader pool of the same store with
//! the latest `View`, a `ManualClock` moved one second per line, an entropy
//! whose n-th draw is sixteen bytes of n, and a `FakeProcessTable`. Each
//! line takes the socket server's path: `admit`, then where the broker's
//! own `route` sends it: `changes` through its one way in
//! (`changes::page`, over the feed the commits publish to, and the store
//! below it) or `read_now` beside the writer (an agent's or reader's, and
//! a proven human's, with either's refusal staged on the writer), or
//! `stage_request` on the writer; then the batch's commit, which publishes
//! a new view and the batch's changes.
//!
//! Business `acme` (`lead`, `dev`, `ops`, as in `examples/business.json`
//! plus a role without authority) and `globex` (`solo`); capabilities
//! `a`×64 (acme `lead`, run `r-lead`), `b`×64 (acme `dev`, `r-dev`), `c`×64
//! (acme `ops`, `r-ops`, bound but not holding), `d`×64 (an acme reader)
//! and `e`×64 (globex `solo`, `r-solo`); any other well-formed capability
//! is `dev`'s, so a mutated capability still reaches dispatch (the lookup
//! itself is a map lookup with nothing to fuzz). The launches are pids 101
//! to 104 (`lead`, `dev`, `ops`, `solo`), children of init (pid 1).
//!
//! A human line (`{"human":{"nonce":…},"business":…}`) is proven as the
//! broker proves the human CLI: its peer is pid 200 of the broker's uid
//! (1000), running the broker's executable (`/opt/mosaic/bin/mosaic-bus`)
//! with the line's nonce in its environment, started from the human's
//! terminal (pid 150, under init). The proof fails for a nonce that is not
//! 32 to 128 lowercase hex characters, and for one that begins with `d`
//! (then dev's launch, pid 102, started the CLI: a bound launch among its
//! ancestors) or with `c` (then a Claude Code shell did: pid 160, with the
//! run marker `CLAUDECODE`). As in the broker, an unknown business is
//! refused (`bad-request`) only after the proof.
//!
//! Ids: every call staged on the writer draws one id first, used or not,
//! and a proven human draws its input's id before that; reads and waits
//! beside the writer, the human's included, draw none. Before the line: lead, dev and solo hold their roles
//! (draws 1 to 3); dev raised `04040404-0404-4404-8404-040404040404`
//! (`repo.merge` on `main`, open, routed to lead); lead raised
//! `05050505-0505-4505-8505-050505050505` (`role.revoke` of dev, approved
//! by the human: draws 6 and 7); lead sent dev
//! `08080808-0808-4808-8808-080808080808` (delivered by dev's
//! `message.receive`, draw 9, unread) and
//! `0a0a0a0a-0a0a-4a0a-8a0a-0a0a0a0a0a0a` (undelivered); solo raised
//! `0b0b0b0b-0b0b-4b0b-8b0b-0b0b0b0b0b0b` (globex, open). The line's new id,
//! if it draws one, is `0c0c0c0c-…`; a proven human line's input is
//! `0c0c0c0c-…` and its new id `0d0d0d0d-…`.
//!
//! A `browser.request` line stops where the broker's writer stops: at its
//! authorization. Carrying it to a pane is the browser adapter's part.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mosaic_adapters::config::{business_from_json, launch_from_value};
use mosaic_adapters::socket::Peer;
use mosaic_adapters::wire::{
    self, parse_json, parse_request, Call, Dispatch, Envelope, SubjectRef, Verb, WireRequest,
};
use mosaic_domain::browser::AddressPolicy;
use mosaic_domain::bus::Caller;
use mosaic_domain::evidence::{AgentRef, Evidence, RefusalRecord};
use mosaic_domain::{Business, BusinessId, Capability, EventId, Refusal, Timestamp};
use mosaic_ports::fakes::{FakeEnviron, FakeProcess, FakeProcessTable, ManualClock, MemoryStore};
use mosaic_ports::{Clock, Entropy, EntropyError, ExeIdentity};
use serde_json::{json, Value};

use crate::runtime::changes::{self, Asked};
use crate::runtime::human_proof::{BrokerExe, NONCE_ENV};
use crate::runtime::pipeline::{
    admit, commit_batch, human_beside, prove_now, read_now, route, stage_request, Admitted,
    ProofLog, Proven, Route, Who, Writer, WriterWorld,
};
use crate::runtime::reads::{kind_of, read, Reads, View};
use crate::runtime::world::{BrokerIdentity, SharedEntropy, Time};
use crate::runtime::Driver;

/// One socket request line, from a fixed caller of a fixed business, through
/// the broker's own request pipeline: `admit` (envelope, caller,
/// arguments), then the broker's own routing (`route`): `changes` or
/// `read_now` beside the writer (the human's once proven), or
/// `stage_request` on it (the human proof, then the driver), then the
/// batch's commit.
///
/// Invariants:
/// - parsing is a function of the line: [`Envelope::parse`] and
///   [`parse_request`] give the same answer twice, and `parse_request` is
///   the envelope followed by its arguments; a subject or verb the line
///   spells parses back to the same text;
/// - the response is one line of strict JSON, `{"ok":true,"result":…}` or
///   `{"ok":false,"error":CODE}` with a code of [`Refusal`]; a read's text
///   as the socket writes it is its value's;
/// - a line refused before it names a caller, and every answered query,
///   leave the bus and the store as they were;
/// - a refusal of a known caller (or of nobody: a human whose proof failed,
///   or of an unknown business) leaves the bus as it was except for the
///   recorded refusal: the store gained exactly that one `request.refused`
///   record (or, when the store turned the commit down, nothing at all);
/// - an accepted verb leaves write times strictly increasing, and a bus
///   rebuilt from the store alone equals the live one;
/// - the same line in a second, identical world gives the same response and
///   the same records (no hidden state, no iteration-order dependence).
pub fn request_line(data: &[u8]) {
    let envelope = Envelope::parse(data);
    assert_eq!(envelope, Envelope::parse(data), "parsing is deterministic");
    let whole = parse_request(data);
    assert_eq!(whole, parse_request(data), "parsing is deterministic");
    let split = envelope.and_then(|e| {
        let who = e.presenter().clone();
        e.into_call().map(|call| WireRequest { who, call })
    });
    assert_eq!(
        whole, split,
        "a request is its envelope, then its arguments"
    );
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(subject) = SubjectRef::parse(text) {
            assert_eq!(subject.to_string(), text, "a subject has one text form");
            assert_eq!(SubjectRef::parse(&subject.to_string()), Ok(subject));
        }
        if let Ok(verb) = Verb::parse(text) {
            assert_eq!(verb.as_str(), text, "a verb has one wire name");
        }
    }

    let mut world = World::new();
    let bus = world.driver.bus().clone();
    let log = world.driver.store().records();
    let served = world.serve(data);
    let now = world.now();
    check_response(&served.response);

    let records = world.driver.store().records();
    let added = records.get(log.len()..).unwrap_or_default();
    assert_eq!(
        records.get(..log.len()),
        Some(&log[..]),
        "the store is append-only"
    );
    match (&served.outcome, served.recorded) {
        (Ok(()), Recorded::Nothing) | (Err(_), Recorded::Nothing) => {
            assert!(added.is_empty(), "nothing recorded for this line");
            assert!(world.driver.bus() == &bus, "the bus is as it was");
        }
        (Err(refusal), Recorded::Refusal { caller, verb }) => {
            if added.is_empty() {
                // The store turned the verb's commit down: nothing happened.
                assert!(world.driver.bus() == &bus, "the bus is as it was");
            } else {
                let agent = match &caller {
                    Some(Caller::Agent { agent, .. }) => Some(agent.clone()),
                    Some(Caller::Reader { .. } | Caller::Human { .. }) | None => None,
                };
                let record = RefusalRecord {
                    business: caller.as_ref().map(|c| c.business().clone()),
                    agent,
                    verb: Some(verb.to_owned()),
                    refusal: *refusal,
                };
                assert_eq!(added.len(), 1, "a refusal is one record");
                assert_eq!(added[0].evidence, Evidence::Refused(record));
                let mut expected = bus.clone();
                expected.handle_refused(now, caller.as_ref(), Some(verb), *refusal);
                while expected.poll_effect().is_some() {}
                expected.handle_committed();
                assert!(
                    world.driver.bus() == &expected,
                    "a refused verb changes the bus only by its recorded refusal"
                );
            }
        }
        (Ok(()), Recorded::Refusal { .. }) => {
            unreachable!("an accepted line is never recorded as a refusal")
        }
        (Ok(()), Recorded::Verb) => {
            assert!(
                records.windows(2).all(|w| w[0].at < w[1].at),
                "write times strictly increase"
            );
            let rebuilt = Driver::open(world.businesses.clone(), world.driver.store().clone());
            assert!(
                rebuilt.is_ok_and(|r| r.bus() == world.driver.bus()),
                "a bus rebuilt from the store equals the live one"
            );
        }
        (Err(_), Recorded::Verb) => unreachable!("a refused verb is recorded as a refusal"),
    }

    let mut twin = World::new();
    let again = twin.serve(data);
    assert_eq!(
        again.response, served.response,
        "the same line in the same world gets the same answer"
    );
    assert_eq!(
        twin.driver.store().records(),
        records,
        "the same line in the same world records the same evidence"
    );
}

/// The response line: one line of strict JSON with a known shape.
fn check_response(line: &str) {
    assert!(!line.contains('\n'), "a response is one line");
    let value = match parse_json(line.as_bytes()) {
        Ok(value) => value,
        Err(refusal) => panic!("a response is strict JSON ({refusal}): {line}"),
    };
    match value.get("ok") {
        Some(Value::Bool(true)) => assert!(value.get("result").is_some(), "{line}"),
        Some(Value::Bool(false)) => {
            let code = value.get("error").and_then(Value::as_str);
            assert!(
                code.and_then(Refusal::from_code).is_some(),
                "an error is a refusal code: {line}"
            );
        }
        Some(_) | None => panic!("a response says ok: {line}"),
    }
}

/// A read's answer as the socket writes it (`read_now`'s text) is the text
/// of its value (`reads::read`), byte for byte.
fn check_read_text(
    view: &View,
    store: &MemoryStore,
    caller: &Caller,
    call: Call,
    text: &Result<String, Refusal>,
) {
    let business = caller.business().clone();
    let dispatch = call.into_dispatch(|| [0; 16], |uuid| kind_of(store, &business, uuid));
    if let Ok(Dispatch::Query(query)) = dispatch {
        assert_eq!(
            *text,
            read(view, store, caller, query).map(|value| value.to_string()),
            "the socket's text of a read is its value's"
        );
    }
}

/// What serving a line recorded.
enum Recorded {
    /// Nothing: refused before a caller was known, or a query answered.
    Nothing,
    /// The refusal of this caller (`None`: a human whose proof failed, or
    /// of an unknown business) for this verb.
    Refusal {
        caller: Option<Caller>,
        verb: &'static str,
    },
    /// The accepted verb's evidence.
    Verb,
}

/// A served line: the response the socket would send, whether it was a
/// refusal, and what was recorded for it.
struct Served {
    response: String,
    outcome: Result<(), Refusal>,
    recorded: Recorded,
}

impl Served {
    /// A writer's answer, joined with its batch's commit as the broker's
    /// `Answer::send` does.
    fn from_writer(
        durable: Result<(), Refusal>,
        answer: Result<Value, Refusal>,
        recorded: Recorded,
    ) -> Self {
        let answer = durable.and(answer);
        Self {
            outcome: answer.as_ref().map(drop).map_err(|r| *r),
            response: wire::response(answer),
            recorded,
        }
    }
}

/// The business definitions of the world (`acme` is the fixture's).
const ACME: &str = r#"{"id":"acme","human":"alice","arbiters":{"technical":"lead","delivery":"lead"},
  "roles":{"lead":{"authority":{"withinRole":["message.send"],"crossRole":["repo.merge"]}},
           "dev":{"authority":{"withinRole":["message.send","repo.push"],"crossRole":["repo.merge"]}},
           "ops":{"authority":{"withinRole":[],"crossRole":[]}}},
  "launch":{"by":"lead"}}"#;
const GLOBEX: &str = r#"{"id":"globex","human":"bob","arbiters":{"technical":"solo","delivery":"solo"},
  "roles":{"solo":{"authority":{"withinRole":["message.send"],"crossRole":[]}}}}"#;

/// The capability letter, business, role and run of each bound launch.
const LAUNCHES: [(char, &str, &str, &str); 4] = [
    ('a', "acme", "lead", "r-lead"),
    ('b', "acme", "dev", "r-dev"),
    ('c', "acme", "ops", "r-ops"),
    ('e', "globex", "solo", "r-solo"),
];
/// The reader capability's letter.
const READER: char = 'd';
/// The wall clock before the first launch binds; each bind and each line
/// moves it one second on.
const START_MS: i64 = 1_767_225_600_000;
/// The broker's uid, which is the human's.
const UID: u32 = 1000;
/// The broker's executable, which the human CLI must be.
const EXE: &str = "/opt/mosaic/bin/mosaic-bus";
/// The device and inode of that executable.
const EXE_FILE: ExeIdentity = ExeIdentity {
    dev: 2049,
    ino: 131_075,
};
/// The human CLI that sends every human line (its peer pid).
const CLI: u32 = 200;
/// The human's terminal shell, which starts the CLI.
const TERMINAL: u32 = 150;
/// A Claude Code shell, which starts the CLI for a nonce beginning with `c`.
const CLAUDE_SHELL: u32 = 160;
/// Dev's launch, which starts the CLI for a nonce beginning with `d`.
const DEV_LAUNCH: u32 = 102;
/// A nonce the human proof accepts, for the world's own human line.
const NONCE: &str = "0123456789abcdef0123456789abcdef";

fn cap(letter: char) -> String {
    std::iter::repeat_n(letter, 64).collect()
}

/// The request line `{"cap","verb","args"}` of the launch with this letter.
fn line(letter: char, verb: Verb, args: &str) -> String {
    format!(
        r#"{{"cap":"{}","verb":"{verb}","args":{args}}}"#,
        cap(letter)
    )
}

/// The 16 bytes of the `n`-th id the world draws.
fn draw_bytes(n: u8) -> [u8; 16] {
    [n; 16]
}

/// The world's entropy: its n-th draw (counted from 1) fills with `n`, so
/// the n-th id drawn is made of [`draw_bytes`]`(n)`. Clones share a count.
#[derive(Clone, Default)]
struct Counter(Arc<AtomicU8>);

impl Counter {
    /// How many draws so far.
    fn draws(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Entropy for Counter {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError> {
        let n = self.0.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        buf.fill(n);
        Ok(())
    }
}

/// The human CLI as the kernel would show it for a line with `nonce`: the
/// broker's executable, the nonce in its environment, started from the
/// terminal, or (see the module documentation) by dev's launch or a Claude
/// Code shell.
fn human_cli(nonce: &str) -> FakeProcess {
    let parent = match nonce.as_bytes().first() {
        Some(b'd') => DEV_LAUNCH,
        Some(b'c') => CLAUDE_SHELL,
        Some(_) | None => TERMINAL,
    };
    FakeProcess::new(CLI, parent)
        .uid(UID)
        .start_time(2000)
        .exe(EXE)
        .exe_identity(EXE_FILE.dev, EXE_FILE.ino)
        .env([(NONCE_ENV, nonce)])
}

/// The broker's writer and read side over the fakes, brought to the state
/// the module documentation describes by real request lines.
struct World {
    businesses: Vec<Business>,
    driver: Driver<MemoryStore>,
    reads: Arc<Reads<MemoryStore>>,
    writer: WriterWorld,
    /// Where `changes` waits, as the socket's tasks do.
    runtime: tokio::runtime::Runtime,
    clock: ManualClock,
    /// What the human proof compares the CLI with.
    identity: BrokerIdentity,
    /// The table the human proof reads; the CLI is inserted per human
    /// line, with that line's nonce.
    processes: FakeProcessTable,
    callers: Vec<(Capability, Caller)>,
    entropy: Counter,
}

impl World {
    fn new() -> Self {
        let businesses: Vec<Business> = [ACME, GLOBEX]
            .iter()
            .map(|text| business_from_json(text).expect("the world's businesses load"))
            .collect();
        let start = Timestamp::from_unix_ms(START_MS).expect("the world's time is in range");
        let clock = ManualClock::new(start);
        let mut driver = Driver::open(businesses.clone(), MemoryStore::new())
            .expect("an empty in-memory store opens");
        let processes = FakeProcessTable::new()
            .with(FakeProcess::new(1, 0).uid(0).environ(FakeEnviron::Denied))
            .with(
                FakeProcess::new(TERMINAL, 1)
                    .uid(UID)
                    .start_time(500)
                    .env([("TERM", "xterm-256color")]),
            )
            .with(
                FakeProcess::new(CLAUDE_SHELL, 1)
                    .uid(UID)
                    .start_time(600)
                    .env([("CLAUDECODE", "1")]),
            );
        let mut callers = Vec::new();
        for (pid, (letter, business, role, run)) in (101u32..).zip(LAUNCHES) {
            let start_time = 1000 + u64::from(pid);
            let record = launch_from_value(json!({
                "business": business, "role": role, "run": run,
                "harness": "pi", "pid": pid, "startTime": start_time,
            }))
            .expect("the world's launch records parse");
            clock.advance(Duration::from_secs(1));
            driver
                .bind(clock.now(), record.clone())
                .expect("the world's launches bind");
            processes.insert(
                FakeProcess::new(pid, 1)
                    .uid(UID)
                    .start_time(start_time)
                    .env([("MOSAIC_RUN_ID", run)]),
            );
            let caller = Caller::Agent {
                business: record.business,
                agent: AgentRef {
                    role: record.role,
                    run: record.run,
                },
            };
            callers.push((capability(letter), caller));
        }
        let acme = BusinessId::parse("acme").expect("a valid id");
        callers.push((capability(READER), Caller::Reader { business: acme }));
        // As at the broker's boot: the first view already shows the binds.
        driver.take_changed_machines();
        let ids: Vec<BusinessId> = businesses.iter().map(|b| b.id().clone()).collect();
        let (head, _) = driver.take_changes();
        let reads = Reads::open(
            driver.store(),
            View::first(driver.bus(), &ids, Default::default(), Default::default()),
            head,
        )
        .expect("the in-memory store opens readers");
        let reads = Arc::new(reads);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime for the world's waits");
        let entropy = Counter::default();
        let identity = BrokerIdentity {
            uid: UID,
            exe: BrokerExe {
                path: EXE.into(),
                identity: EXE_FILE,
            },
            namespaces: mosaic_ports::fakes::HOST_NAMESPACES,
        };
        let writer = WriterWorld {
            time: Time::new(Arc::new(clock.clone())),
            entropy: SharedEntropy::new(Box::new(entropy.clone())),
        };
        let mut world = Self {
            businesses,
            driver,
            reads,
            writer,
            runtime,
            clock,
            identity,
            processes,
            callers,
            entropy,
        };

        let options = r#"[{"key":"yes","text":"Yes"},{"key":"no","text":"No"}]"#;
        let raise = |action: &str, target: &str| {
            format!(
                r#"{{"action":"{action}","target":"{target}","question":"May I?","options":{options},"recommendation":"yes","blocking":false}}"#
            )
        };
        let setup = [
            line('a', Verb::RoleClaim, "{}"),
            line('b', Verb::RoleClaim, "{}"),
            line('e', Verb::RoleClaim, "{}"),
            line('b', Verb::DecisionRaise, &raise("repo.merge", "main")),
            line('a', Verb::DecisionRaise, &raise("role.revoke", "dev")),
            format!(
                r#"{{"human":{{"nonce":"{NONCE}"}},"business":"acme","verb":"{resolve}","args":{{"id":"05050505-0505-4505-8505-050505050505","choice":"yes"}}}}"#,
                resolve = Verb::DecisionResolve,
            ),
            line('a', Verb::MessageSend, r#"{"to":"dev","body":"hello"}"#),
            line('b', Verb::MessageReceive, "{}"),
            line(
                'a',
                Verb::MessageSend,
                r#"{"to":"dev","body":"again","in_reply_to":"08080808-0808-4808-8808-080808080808"}"#,
            ),
            line('e', Verb::DecisionRaise, &raise("repo.merge", "main")),
        ];
        for step in setup {
            let served = world.serve(step.as_bytes());
            assert!(
                served.outcome.is_ok(),
                "setup line {step} answered {}",
                served.response
            );
        }
        world
    }

    /// The writer's time, which the line was served at.
    fn now(&self) -> Timestamp {
        self.writer.time.now()
    }

    /// Serves one line one second after the last, as the broker's socket
    /// handler and writer do (the writer's batch is this one line).
    fn serve(&mut self, line: &[u8]) -> Served {
        self.clock.advance(Duration::from_secs(1));
        let callers = &self.callers;
        let lookup = |cap: &Capability| {
            callers
                .iter()
                .find(|(known, _)| known == cap)
                .or_else(|| callers.get(1))
                .map(|(_, caller)| caller.clone())
        };
        let peer = Peer {
            uid: UID,
            pid: Some(CLI),
        };
        // The world loads no service token, so no bytes hold one.
        // The fuzz world's boot config allows no private address.
        let admitted = match admit(line, peer, None, lookup, &AddressPolicy::default()) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                return Served {
                    response: wire::err(refusal),
                    outcome: Err(refusal),
                    recorded: Recorded::Nothing,
                }
            }
        };
        match route(&admitted) {
            Route::Feed { caller, since, .. } => {
                let caller = caller.clone();
                self.changes(caller.clone(), since, |world, refusal| {
                    world.record_refusal(caller, admitted.verb, refusal)
                })
            }
            Route::Read { caller, call } => {
                let (caller, call) = (caller.clone(), call.clone());
                self.read_beside_writer(caller.clone(), call, |world, refusal| {
                    world.record_refusal(caller, admitted.verb, refusal)
                })
            }
            // A browser request stops where the broker's writer stops: at
            // its authorization.
            Route::Browser { .. } | Route::Writer => {
                let Admitted { who, verb, call } = admitted;
                let (who, known) = self.prove(who);
                self.stage(who, known, verb, call)
            }
            Route::HumanFeed { since, .. } => {
                let Admitted { who, verb, call } = admitted;
                let (who, known) = self.prove(who);
                let view = self.reads.view();
                match human_beside(&who, |b| view.is_some_and(|v| v.knows(b))) {
                    Some(human) => self.changes(human, since, |world, refusal| {
                        world.stage(who, known, verb, Err(refusal))
                    }),
                    None => self.stage(who, known, verb, call),
                }
            }
            Route::HumanRead => {
                let Admitted { who, verb, call } = admitted;
                let (who, known) = self.prove(who);
                let view = self.reads.view();
                match (
                    human_beside(&who, |b| view.is_some_and(|v| v.knows(b))),
                    call,
                ) {
                    (Some(human), Ok(read)) => {
                        self.read_beside_writer(human, read, |world, refusal| {
                            world.stage(who, known, verb, Err(refusal))
                        })
                    }
                    (Some(_) | None, call) => self.stage(who, known, verb, call),
                }
            }
        }
    }

    /// The human proof as the broker runs it beside the writer (here, just
    /// before), with the CLI inserted into the process table for the
    /// line's nonce; also whom a refusal would be recorded of, as far as
    /// the line tells: a capability's caller, or the human's business.
    fn prove(&mut self, who: Who) -> (Proven, Result<Caller, BusinessId>) {
        match who {
            Who::Known(caller) => (Proven::Known(caller.clone()), Ok(caller)),
            Who::Human {
                peer,
                nonce,
                business,
            } => {
                self.processes.insert(human_cli(&nonce));
                let view = self.reads.view().expect("the world has a view");
                let log = ProofLog::new(self.writer.time.clone());
                let proof = prove_now(
                    &self.processes,
                    &self.identity,
                    &view,
                    peer,
                    nonce,
                    &|| false,
                    &log,
                );
                let proven = Proven::Human {
                    business: business.clone(),
                    proof,
                };
                (proven, Err(business))
            }
        }
    }

    /// Stages the request on the writer and commits its batch, as the
    /// broker's writer does with a batch of this one line.
    fn stage(
        &mut self,
        who: Proven,
        known: Result<Caller, BusinessId>,
        verb: &'static str,
        call: Result<Call, Refusal>,
    ) -> Served {
        let is_read = call.as_ref().is_ok_and(Call::is_read);
        let drawn = self.entropy.draws();
        let writer = Writer {
            driver: &mut self.driver,
            world: &mut self.writer,
            reads: &self.reads,
        };
        let answer = stage_request(writer, who, verb, call);
        let durable = commit_batch(&mut self.driver, &self.reads);
        let recorded = match (&answer, known) {
            (Ok(_), Ok(_) | Err(_)) if is_read => Recorded::Nothing,
            (Ok(_), Ok(_) | Err(_)) => Recorded::Verb,
            (Err(_), Ok(caller)) => Recorded::Refusal {
                caller: Some(caller),
                verb,
            },
            // The writer draws a human's input id only once the proof
            // passed for a known business; before that, the refusal is of
            // nobody.
            (Err(_), Err(business)) => Recorded::Refusal {
                caller: (self.entropy.draws() != drawn).then(|| Caller::Human {
                    business,
                    input: EventId::from_random(draw_bytes(drawn.wrapping_add(1))),
                }),
                verb,
            },
        };
        Served::from_writer(durable, answer, recorded)
    }

    /// A read on a reader handle with the latest view, as `caller` (an
    /// agent, a reader, or a proven human); a refusal goes to `refused`,
    /// which has the writer record it as the broker does.
    fn read_beside_writer(
        &mut self,
        caller: Caller,
        call: Call,
        refused: impl FnOnce(&mut Self, Refusal) -> Served,
    ) -> Served {
        let text = self.reads.with_store(|view, store| {
            let text = read_now(view, store, &caller, call.clone());
            check_read_text(view, store, &caller, call, &text);
            text
        });
        match text {
            Ok(text) => Served {
                response: wire::ok_text(&text),
                outcome: Ok(()),
                recorded: Recorded::Nothing,
            },
            Err(refusal) => refused(self, refusal),
        }
    }

    /// `changes` through its one way in, as the socket's tasks take it, for
    /// `caller` (an agent, a reader, or a proven human's business); a
    /// refusal goes to `refused`. The world's clock stands still while a
    /// line is served, so it asks with no wait: the page is what lies after
    /// `since` now, in the feed's memory or in the store below it.
    fn changes(
        &mut self,
        caller: Caller,
        since: Option<u64>,
        refused: impl FnOnce(&mut Self, Refusal) -> Served,
    ) -> Served {
        let asked = Asked {
            caller,
            since,
            wait: Duration::ZERO,
        };
        let never_gone = std::future::pending();
        let page = self.runtime.block_on(changes::page(
            &self.reads,
            &self.writer.time,
            asked,
            never_gone,
        ));
        match page {
            Ok(page) => Served {
                response: wire::ok(wire::changes_json(page.cursor, &page.changes)),
                outcome: Ok(()),
                recorded: Recorded::Nothing,
            },
            Err(refusal) => refused(self, refusal),
        }
    }

    /// A refusal beside the writer, staged and committed on the writer, as
    /// the broker's `Job::Refuse` is.
    fn record_refusal(&mut self, caller: Caller, verb: &'static str, refusal: Refusal) -> Served {
        let refused = self
            .driver
            .stage_refusal(self.now(), Some(&caller), verb, refusal);
        let durable = commit_batch(&mut self.driver, &self.reads);
        let recorded = Recorded::Refusal {
            caller: Some(caller),
            verb,
        };
        Served::from_writer(durable, Err(refused), recorded)
    }
}

pub(super) fn capability(letter: char) -> Capability {
    Capability::parse(&cap(letter)).expect("a well-formed capability")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_domain::{DecisionId, MessageId, RunId};
    use mosaic_ports::EvidenceStore;

    #[test]
    fn the_documented_ids_are_the_drawn_ones() {
        let decision = |n| DecisionId::from_random(draw_bytes(n));
        let message = |n| MessageId::from_random(draw_bytes(n));
        assert_eq!(
            decision(4).to_string(),
            "04040404-0404-4404-8404-040404040404"
        );
        assert_eq!(
            decision(5).to_string(),
            "05050505-0505-4505-8505-050505050505"
        );
        assert_eq!(
            message(8).to_string(),
            "08080808-0808-4808-8808-080808080808"
        );
        assert_eq!(
            message(10).to_string(),
            "0a0a0a0a-0a0a-4a0a-8a0a-0a0a0a0a0a0a"
        );
        assert_eq!(
            decision(11).to_string(),
            "0b0b0b0b-0b0b-4b0b-8b0b-0b0b0b0b0b0b"
        );
        let world = World::new();
        assert_eq!(world.entropy.draws(), 11, "the setup drew eleven ids");
        let decisions = world.driver.bus().decisions();
        let revoke = decisions.get(&decision(5));
        assert_eq!(
            revoke.map(|d| d.record.holder.clone()),
            Some(Some(RunId::parse("r-dev").expect("a valid run")))
        );
        for n in [4, 11] {
            assert!(decisions.get(&decision(n)).is_some(), "decision {n}");
        }
        for n in [8, 10] {
            let sent = world.driver.store().message(&message(n));
            assert!(sent.is_ok_and(|m| m.is_some()), "message {n}");
        }
    }

    /// Serves `line` in a fresh world and returns its response.
    #[track_caller]
    fn answer(line: &str) -> String {
        World::new().serve(line.as_bytes()).response
    }

    fn human(nonce: &str, business: &str) -> String {
        format!(
            r#"{{"human":{{"nonce":"{nonce}"}},"business":"{business}","verb":"agents","args":{{}}}}"#
        )
    }

    #[test]
    fn a_proven_humans_reads_and_waits_run_beside_the_writer_as_the_brokers_do() {
        let line = |verb: Verb, args: &str| {
            format!(
                r#"{{"human":{{"nonce":"{NONCE}"}},"business":"acme","verb":"{verb}","args":{args}}}"#
            )
        };
        let mut world = World::new();
        let records = world.driver.store().records().len();
        for (verb, args) in [
            (Verb::Inbox, "{}"),
            (Verb::Agents, "{}"),
            (Verb::Head, "{}"),
            (Verb::History, "{}"),
            (Verb::History, r#"{"before":3}"#),
            (Verb::Trail, r#"{"subject":"lead"}"#),
            (Verb::Changes, "{}"),
            (Verb::Changes, r#"{"since":0}"#),
        ] {
            let served = world.serve(line(verb, args).as_bytes());
            assert!(served.outcome.is_ok(), "{verb}: {}", served.response);
            assert_eq!(world.entropy.draws(), 11, "{verb} draws no id");
        }
        assert_eq!(world.driver.store().records().len(), records);
        // A read of a business the broker does not know goes to the writer,
        // which records its refusal only after the proof (of nobody).
        let unknown = line(Verb::Inbox, "{}").replace("acme", "initech");
        let served = world.serve(unknown.as_bytes());
        assert_eq!(served.outcome, Err(Refusal::BadRequest));
        assert_eq!(world.driver.store().records().len(), records + 1);
        // A write of the human's draws its input's id, then the call's.
        let sent = world.serve(line(Verb::MessageSend, r#"{"to":"dev","body":"hi"}"#).as_bytes());
        assert!(sent.outcome.is_ok(), "{}", sent.response);
        assert_eq!(world.entropy.draws(), 13);
    }

    #[test]
    fn the_fuzzed_pipeline_refuses_a_private_browser_address_as_the_brokers_does() {
        let open = |url: &str| {
            line(
                'b',
                Verb::BrowserRequest,
                &format!(r#"{{"action":"open","parameters":{{"url":"{url}"}}}}"#),
            )
        };
        for url in [
            "http://127.0.0.1:9/",
            "http://0x7f.1/",
            "http://[::1]/",
            "http://a.localhost/",
        ] {
            let mut world = World::new();
            let records = world.driver.store().records().len();
            let served = world.serve(open(url).as_bytes());
            assert_eq!(served.outcome, Err(Refusal::BrowserAddressRefused), "{url}");
            assert_eq!(world.driver.store().records().len(), records + 1, "{url}");
        }
        let public = World::new().serve(open("https://example.com/").as_bytes());
        assert_ne!(public.outcome, Err(Refusal::BrowserAddressRefused));
    }

    #[test]
    fn a_human_line_is_proven_from_its_ancestry_before_its_business_is_looked_at() {
        let refused = |code: &str| format!(r#"{{"ok":false,"error":"{code}"}}"#);
        assert!(answer(&human(NONCE, "acme")).starts_with(r#"{"ok":true,"#));
        let launched = "d123456789abcdef0123456789abcdef";
        let marked = "c123456789abcdef0123456789abcdef";
        for nonce in [launched, marked, "n"] {
            assert_eq!(
                answer(&human(nonce, "acme")),
                refused("human-proof-failed"),
                "{nonce}"
            );
            assert_eq!(
                answer(&human(nonce, "initech")),
                refused("human-proof-failed"),
                "{nonce}"
            );
        }
        assert_eq!(answer(&human(NONCE, "initech")), refused("bad-request"));
    }
}
