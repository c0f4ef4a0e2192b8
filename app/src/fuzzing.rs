//! Plain functions the fuzz targets in `fuzz/` call for the adapters' wire
//! and config parsers and for a whole socket request through the broker's
//! request pipeline; `tests/tests/fuzz_corpus.rs` replays each seed corpus
//! through them, so CI exercises every target. Each panics only when an
//! invariant breaks; that panic is the finding.
//!
//! - [`request_line`]: one socket request line through the broker's own
//!   pipeline (`crate::pipeline`) over the in-memory ports, against a fixed
//!   business;
//! - [`host_line`]: one line of the host channel (`mosaic-bus broker`);
//! - [`config`]: one normalized business definition;
//! - [`browser_bodies`]: one body posted to the pane's claim or result route.
//!
//! Behind the feature `fuzzing`, because it runs the runtime over the fakes
//! of `mosaic_ports::fakes`, which the product never carries.
//!
//! The world [`request_line`] runs in (see `fuzz/corpus/request_line/` for
//! lines that use it) is the broker's writer and read side over fakes: a
//! [`Driver`] over a `MemoryStore`, a reader pool of the same store with
//! the latest `View`, a `ManualClock` moved one second per line, an entropy
//! whose n-th draw is sixteen bytes of n, and a `FakeProcessTable`. Each
//! line takes the socket server's path: `admit`, then `read_now` beside the
//! writer (its refusal staged on the writer) or `stage_request` on it, then
//! the batch's commit, which publishes a new view when machine state
//! changed.
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
//! and a proven human draws its input's id before that; reads beside the
//! writer draw none. Before the line: lead, dev and solo hold their roles
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

use mosaic_adapters::config::{
    boot_from_value, business_from_json, business_from_value, launch_from_value, ConfigError,
};
use mosaic_adapters::socket::Peer;
use mosaic_adapters::wire::browser::{claim_body, result_body, TOO_LARGE_ERROR};
use mosaic_adapters::wire::host::{
    bind_reply, boot_error, boot_reply, host_error, parse_host_line, HostRequest,
};
use mosaic_adapters::wire::{
    self, parse_json, parse_request, Call, Dispatch, Envelope, SubjectRef, Verb, WireRequest,
};
use mosaic_domain::browser::PaneOutcome;
use mosaic_domain::bus::Caller;
use mosaic_domain::business::CredentialSource;
use mosaic_domain::evidence::{AgentRef, Evidence, LaunchRecord, RefusalRecord};
use mosaic_domain::{
    Action, ActionClass, Business, BusinessId, Capability, EventId, Refusal, RoleInstance,
    Timestamp,
};
use mosaic_ports::fakes::{FakeEnviron, FakeProcess, FakeProcessTable, ManualClock, MemoryStore};
use mosaic_ports::{Clock, Entropy, EntropyError, ExeIdentity};
use serde_json::{json, Value};

use crate::driver::Driver;
use crate::human_proof::{BrokerExe, NONCE_ENV};
use crate::pipeline::{
    admit, commit_batch, prove_now, read_now, stage_request, Admitted, Proven, Who, Writer,
    WriterWorld,
};
use crate::reads::{kind_of, read, Reads, View};
use crate::world::{BrokerIdentity, SharedEntropy, Time};

/// One socket request line, from a fixed caller of a fixed business, through
/// the broker's own request pipeline: `admit` (envelope, caller,
/// arguments), then `read_now` beside the writer (a read) or
/// `stage_request` on it (the human proof, then the driver or the read
/// side), then the batch's commit.
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
    reads: Reads<MemoryStore>,
    writer: WriterWorld,
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
        let reads = Reads::open(driver.store(), View::first(driver.bus(), &ids), head)
            .expect("the in-memory store opens readers");
        let entropy = Counter::default();
        let identity = BrokerIdentity {
            uid: UID,
            exe: BrokerExe {
                path: EXE.into(),
                identity: EXE_FILE,
            },
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
        let admitted = match admit(line, peer, None, lookup) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                return Served {
                    response: wire::err(refusal),
                    outcome: Err(refusal),
                    recorded: Recorded::Nothing,
                }
            }
        };
        if let Some((caller, call)) = admitted.read_beside_writer() {
            let (caller, call) = (caller.clone(), call.clone());
            return self.read_beside_writer(caller, admitted.verb, call);
        }
        let Admitted { who, verb, call } = admitted;
        let is_read = call.as_ref().is_ok_and(Call::is_read);
        let known = match &who {
            Who::Known(caller) => Ok(caller.clone()),
            Who::Human {
                nonce, business, ..
            } => {
                self.processes.insert(human_cli(nonce));
                Err(business.clone())
            }
        };
        // The proof runs beside the writer in the broker; here, just before.
        let who = match who {
            Who::Known(caller) => Proven::Known(caller),
            Who::Human {
                peer,
                nonce,
                business,
            } => {
                let view = self.reads.view().expect("the world has a view");
                let proof = prove_now(&self.processes, &self.identity, &view, peer, nonce);
                Proven::Human { business, proof }
            }
        };
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

    /// An agent's or reader's read on a reader handle with the latest
    /// view; a refusal is staged and committed on the writer, as the
    /// broker's `Job::Refuse` is.
    fn read_beside_writer(&mut self, caller: Caller, verb: &'static str, call: Call) -> Served {
        let text = self.reads.with_store(|view, store| {
            let text = read_now(view, store, &caller, call.clone());
            check_read_text(view, store, &caller, call, &text);
            text
        });
        let refusal = match text {
            Ok(text) => {
                return Served {
                    response: wire::ok_text(&text),
                    outcome: Ok(()),
                    recorded: Recorded::Nothing,
                }
            }
            Err(refusal) => refusal,
        };
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

fn capability(letter: char) -> Capability {
    Capability::parse(&cap(letter)).expect("a well-formed capability")
}

/// One line of the host channel.
///
/// Invariants:
/// - it parses the same way twice, and text that is not strict JSON is
///   `bad-request`;
/// - every answer the broker would give about it (`host_error`,
///   `boot_error`, `bind_reply`, `boot_reply`) is one line of strict JSON
///   that names the same business, run, code and reference;
/// - a parsed launch record re-encodes to a `bindLaunch` line that parses
///   to the same record, and the `agents` projection shows its fields;
/// - a parsed boot configuration is consistent (every launch and reader
///   names a configured business, each business once, absolute paths) and,
///   with everything but its businesses re-encoded, parses to itself.
pub fn host_line(data: &[u8]) {
    let parsed = parse_host_line(data);
    assert_eq!(parsed, parse_host_line(data), "parsing is deterministic");
    if parse_json(data).is_err() {
        assert_eq!(
            parsed,
            Err(Refusal::BadRequest.into()),
            "not JSON is bad-request"
        );
    }
    let cap = capability('f');
    match parsed {
        Err(error) => {
            let answer = strict(&host_error(error.refusal));
            assert_eq!(answer["ok"], false);
            assert_eq!(answer["error"], error.refusal.code());
            // A boot that fails names the reference at fault, if any.
            let answer = strict(&boot_error(error.refusal, error.reference.as_deref(), None));
            assert_eq!(answer["error"], error.refusal.code());
            assert_eq!(answer["reference"], json!(error.reference));
        }
        Ok(HostRequest::Close) => {}
        Ok(HostRequest::BindLaunch(record)) => {
            let line = json!({"op": "bindLaunch", "record": launch_json(&record)}).to_string();
            assert_eq!(
                parse_host_line(line.as_bytes()),
                Ok(HostRequest::BindLaunch(record.clone())),
                "a launch record re-encodes to itself"
            );
            let shown = wire::agent_json(&record, false, false);
            assert_eq!(shown["role"], record.role.as_str());
            assert_eq!(shown["run"], record.run.as_str());
            assert_eq!(shown["harness"], record.harness.as_str());
            assert_eq!(shown["address"], json!(record.address));
            assert_eq!(shown["pid"], record.pid);
            assert_eq!(shown["start_time"], record.start_time);
            let answer = strict(&bind_reply(Ok((
                record.business.clone(),
                record.run.clone(),
                cap.clone(),
            ))));
            assert_eq!(answer["launch"]["business"], record.business.as_str());
            assert_eq!(answer["launch"]["run"], record.run.as_str());
            assert_eq!(answer["launch"]["cap"], cap.expose());
        }
        Ok(HostRequest::Boot(config)) => {
            let ids: std::collections::BTreeSet<_> =
                config.businesses.iter().map(Business::id).collect();
            assert_eq!(ids.len(), config.businesses.len(), "each business once");
            assert!(config.launches.iter().all(|l| ids.contains(&l.business)));
            assert!(config.readers.iter().all(|r| ids.contains(r)));
            assert!(config.data_root.is_absolute());
            assert!(config.repo_roots.iter().all(|p| p.is_absolute()));

            let original = parse_json(data).expect("a parsed line is JSON");
            let mut encoded = json!({
                "dataRoot": config.data_root.to_str(),
                "businesses": original["config"]["businesses"],
                "launches": config.launches.iter().map(launch_json).collect::<Vec<_>>(),
                "readers": config.readers.iter().map(BusinessId::as_str).collect::<Vec<_>>(),
                "repoRoots": config.repo_roots.iter().map(|p| p.to_str()).collect::<Vec<_>>(),
            });
            if let Some(listen) = &config.browser_listen {
                encoded["browser"] = json!({"listen": listen});
            }
            assert_eq!(
                boot_from_value(encoded).as_ref(),
                Ok(&*config),
                "a boot configuration re-encodes to itself"
            );

            let launches: Vec<_> = config
                .launches
                .iter()
                .map(|l| (l.business.clone(), l.run.clone(), cap.clone()))
                .collect();
            let readers: Vec<_> = config
                .readers
                .iter()
                .map(|r| (r.clone(), cap.clone()))
                .collect();
            let socket = config.data_root.join("bus/bus.sock");
            let answer = strict(&boot_reply(&socket, &launches, &readers, None));
            let shown = answer["launches"].as_array().map_or(0, Vec::len);
            assert_eq!(shown, launches.len(), "the boot answer lists every launch");
            for (i, (business, run, _)) in launches.iter().enumerate() {
                assert_eq!(answer["launches"][i]["business"], business.as_str());
                assert_eq!(answer["launches"][i]["run"], run.as_str());
            }
            for (i, (business, _)) in readers.iter().enumerate() {
                assert_eq!(answer["readers"][i]["business"], business.as_str());
            }
        }
    }
}

/// A launch record in the host's shape.
fn launch_json(record: &LaunchRecord) -> Value {
    json!({
        "business": record.business.as_str(),
        "role": record.role.as_str(),
        "run": record.run.as_str(),
        "harness": record.harness.as_str(),
        "address": record.address,
        "pid": record.pid,
        "startTime": record.start_time,
    })
}

/// An answer as the host reads it: one line, strict JSON.
fn strict(answer: &Value) -> Value {
    let line = answer.to_string();
    assert!(!line.contains('\n'), "an answer is one line");
    parse_json(line.as_bytes()).expect("an answer is strict JSON")
}

/// One normalized business definition (`business_from_json`, the loader of
/// `up`'s config and of each business in a boot configuration).
///
/// Invariants: it loads the same way twice; strict JSON text loads to the
/// same result through the text loader, the value loader and a boot
/// configuration that holds it under its id; and a business that loads says
/// back what its source says: id, human, arbiters, roles, the class of each
/// listed action, the launch block, and every credential reference.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let loaded = business_from_json(text);
    assert_eq!(loaded, business_from_json(text), "loading is deterministic");
    let Ok(value) = parse_json(data) else {
        return;
    };
    assert_eq!(
        business_from_value(value.clone()),
        loaded,
        "the text and value loaders agree"
    );
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("x")
        .to_owned();
    let boot =
        boot_from_value(json!({"dataRoot": "/srv/mosaic", "businesses": {id: value.clone()}}));
    assert_eq!(
        boot.map(|c| c.businesses),
        loaded.clone().map(|b| vec![b]),
        "a boot configuration loads its business the same way"
    );
    match loaded {
        Ok(business) => says_back(&value, &business),
        Err(ConfigError {
            refusal,
            reference: Some(reference),
        }) => names_its_reference(&value, refusal, &reference),
        Err(ConfigError {
            reference: None, ..
        }) => {}
    }
}

/// A refusal that names a role reference names one of the source's:
/// `"<business> <field> <role>"`, an undefined role for `unknown-role`, a
/// launcher listed twice for `bad-config`.
fn names_its_reference(source: &Value, refusal: Refusal, reference: &str) {
    let parts: Vec<&str> = reference.split(' ').collect();
    let [business, field, role] = parts[..] else {
        panic!("a reference is three words: {reference:?}");
    };
    assert_eq!(source["id"], business, "{reference}");
    let given = match field {
        "arbiters.technical" => vec![&source["arbiters"]["technical"]],
        "arbiters.delivery" => vec![&source["arbiters"]["delivery"]],
        "launch.by" => {
            let by = &source["launch"]["by"];
            by.as_array()
                .map_or_else(|| vec![by], |roles| roles.iter().collect())
        }
        _ => panic!("an unknown field in {reference:?}"),
    };
    let times = given.iter().filter(|r| **r == role).count();
    if refusal == Refusal::UnknownRole {
        assert!(times >= 1, "{reference}: the source names it");
        assert!(
            source["roles"].get(role).is_none(),
            "{reference}: undefined"
        );
    } else {
        assert_eq!(refusal, Refusal::BadConfig, "{reference}");
        assert_eq!(field, "launch.by", "{reference}");
        assert!(times >= 2, "{reference}: listed twice");
    }
}

/// Compares a loaded business with the JSON it came from.
fn says_back(source: &Value, business: &Business) {
    assert_eq!(source["id"], business.id().as_str());
    assert_eq!(source["human"], business.human().as_str());
    assert_eq!(
        source["arbiters"]["technical"],
        business.arbiter(true).as_str()
    );
    assert_eq!(
        source["arbiters"]["delivery"],
        business.arbiter(false).as_str()
    );
    let roles = source["roles"]
        .as_object()
        .expect("a loaded business has roles");
    assert_eq!(roles.len(), business.roles().count(), "every role, once");
    // `by` is one role or a non-empty list of them.
    let by = &source["launch"]["by"];
    let launchers: Vec<&str> = match by.as_array() {
        Some(roles) => roles.iter().filter_map(Value::as_str).collect(),
        None => by.as_str().into_iter().collect(),
    };
    assert!(
        by.is_null() || by.is_string() || by.as_array().is_some_and(|r| !r.is_empty()),
        "a loaded launch block's by: {by}"
    );
    let unlisted = Action::parse("fuzz.unlisted").expect("a valid action");
    let launch = Action::parse("role.launch").expect("a valid action");
    for (name, spec) in roles {
        let role = RoleInstance::parse(name).expect("a loaded role name is valid");
        let loaded = business.role(&role).expect("every source role is loaded");
        let mut listed = false;
        for (list, class) in [
            ("withinRole", ActionClass::WithinRole),
            ("crossRole", ActionClass::CrossRole),
        ] {
            for action in spec["authority"][list].as_array().into_iter().flatten() {
                let action = action.as_str().and_then(|a| Action::parse(a).ok());
                let action = action.expect("a loaded action is valid");
                listed |= action == unlisted;
                assert_eq!(business.class_of(&role, &action), class, "{name}: {action}");
            }
        }
        if !listed {
            assert_eq!(business.class_of(&role, &unlisted), ActionClass::Gated);
        }
        let launches = if launchers.contains(&name.as_str()) {
            ActionClass::WithinRole
        } else {
            ActionClass::Gated
        };
        assert_eq!(business.class_of(&role, &launch), launches, "{name}");

        let credentials = loaded.credentials();
        let services = [
            (
                "gitea",
                "rotateBy",
                credentials.gitea.as_ref().map(|c| (&c.source, c.rotate_by)),
            ),
            (
                "vikunja",
                "expires",
                credentials.vikunja.as_ref().map(|c| (&c.source, c.expires)),
            ),
        ];
        for (service, date_key, loaded) in services {
            let given = &spec["credentials"][service];
            let Some((source, date)) = loaded else {
                assert!(given.is_null(), "{name}: {service} is loaded when given");
                continue;
            };
            let (key, text) = match source {
                CredentialSource::File(path) => ("file", path),
                CredentialSource::Env(var) => ("env", var),
            };
            assert_eq!(given[key], text.as_str(), "{name}: {service}");
            assert_eq!(
                given[date_key].as_str(),
                date.map(|d| d.to_string()).as_deref(),
                "{name}: {service} {date_key}"
            );
        }
    }
}

// The world's fixed ids, checked against the documentation above.
/// One body posted to browser control's claim or result route.
///
/// Invariants:
/// - each parser gives the same answer twice, and a refusal is
///   `bad-request` (the routes answer it as HTTP 400);
/// - an accepted claim body re-encodes to one that parses to the same
///   request and client, or, when its ids are of another form (answered
///   `granted:false`), to one that is again of another form;
/// - an accepted result body re-encodes to one that parses to the same
///   request, claim token and outcome, or to no request and the same
///   outcome when its id or token is of another form (answered
///   `matched:false`): `Done` with the same data for `ok:true` (`null`
///   when it had none), `TooLarge` exactly for the follow-up code, `Failed`
///   for any other error or none.
pub fn browser_bodies(data: &[u8]) {
    let claim = claim_body(data);
    assert_eq!(
        claim,
        claim_body(data),
        "a claim body parses the same way twice"
    );
    match &claim {
        Ok(Some((request, client))) => {
            let again = json!({"requestId": request.to_string(), "clientId": client.as_str()});
            assert_eq!(claim_body(again.to_string().as_bytes()), claim);
        }
        Ok(None) => {
            let again = json!({"requestId": UNADDRESSED, "clientId": "pane-1"});
            assert_eq!(claim_body(again.to_string().as_bytes()), claim);
        }
        Err(refusal) => assert_eq!(*refusal, Refusal::BadRequest),
    }
    let body = match result_body(data) {
        Ok(body) => body,
        Err(refusal) => {
            assert_eq!(refusal, Refusal::BadRequest);
            assert_eq!(
                result_body(data).err(),
                Some(refusal),
                "refused the same way twice"
            );
            return;
        }
    };
    let mut again = match &body.claim {
        Some((request, token)) => {
            json!({"requestId": request.to_string(), "claimToken": token.expose()})
        }
        None => json!({"requestId": UNADDRESSED, "claimToken": UNADDRESSED}),
    };
    match &body.outcome {
        PaneOutcome::Done(data) => {
            again["ok"] = json!(true);
            // `null` data is sent as no data: the two parse alike.
            if !data.is_null() {
                again["data"] = data.clone();
            }
        }
        PaneOutcome::TooLarge => {
            again["ok"] = json!(false);
            again["error"] = json!(TOO_LARGE_ERROR);
        }
        PaneOutcome::Failed => {
            again["ok"] = json!(false);
            again["error"] = json!("action-failed");
        }
    }
    let reparsed = result_body(again.to_string().as_bytes()).expect("a re-encoded result parses");
    match (&reparsed.claim, &body.claim) {
        (Some((request, token)), Some((original, held))) => {
            assert_eq!(request, original);
            assert!(token.ct_eq(held), "the claim token survives");
        }
        (None, None) => {}
        (Some(_), None) | (None, Some(_)) => panic!("the request is addressed again, or not"),
    }
    assert_eq!(reparsed.outcome, body.outcome);
}

/// A string of no id's form: names no request, is no claim token.
const UNADDRESSED: &str = "forged";

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
