//! Every port's conformance suite against its fake, and the helpers that only
//! the fakes have (failure injection, settable time, synthetic processes).

use std::time::Duration;

use mosaic_domain::business::CredentialSource;
use mosaic_domain::evidence::{
    AgentRef, Evidence, LaunchEvidence, MessageEvidence, MessageRecord, Observation, Recipient,
    Sender, Stamped, Subject,
};
use mosaic_domain::messages::MessageFacts;
use mosaic_domain::{
    BrowserRequestId, BusinessId, ClientId, MessageId, RoleInstance, RunId, Timestamp,
};
use mosaic_ports::conformance::browser::BrowserHarness;
use mosaic_ports::conformance::credentials::CredentialFixture;
use mosaic_ports::conformance::process::ProcessFixture;
use mosaic_ports::conformance::{browser, clock, credentials, entropy, process, store};
use mosaic_ports::fakes::{
    FailingEntropy, FakeBrowserTransport, FakeCredentials, FakeEnviron, FakeProcess,
    FakeProcessTable, InjectedFailure, ManualClock, MemoryStore, SeededEntropy, HOST_NAMESPACES,
};
use mosaic_ports::process::Environ;
use mosaic_ports::{
    BrowserTransport, Clock, CredentialError, Credentials, Entropy, EvidenceStore, ExeIdentity,
    NamespaceId, Namespaces, PaneEvent, ProcessError, ProcessInfo, ProcessTable, StoreError,
    TaskView, TransportError,
};

// --- Conformance ------------------------------------------------------------

#[test]
fn memory_store_conforms() {
    store::run(MemoryStore::new);
    store::readers(MemoryStore::new);
}

#[test]
fn manual_clock_conforms() {
    for start in [
        Timestamp::EPOCH,
        ms(1_767_225_600_000),
        ms(253_402_300_799_999),
    ] {
        clock::run(|| ManualClock::new(start));
    }
    let clock = ManualClock::new(ms(1_767_225_600_000));
    clock::jumps(&clock, |c| c.advance(std::time::Duration::from_secs(1)));
    let mut back = 10_000;
    clock::jumps(&clock, |c| {
        back -= 1_000;
        c.set(ms(back));
    });
    clock::jumps(&clock.clone(), |c| {
        c.advance(std::time::Duration::from_millis(1))
    });
}

#[test]
fn seeded_entropy_conforms() {
    let mut seed = 0;
    entropy::run(|| {
        seed += 1;
        SeededEntropy::new(seed)
    });
}

/// The namespaces of a fake process in a sandbox: others than the host's.
const SANDBOX: Namespaces = Namespaces {
    pid: NamespaceId { dev: 4, ino: 11 },
    mnt: NamespaceId { dev: 4, ino: 12 },
    user: NamespaceId { dev: 4, ino: 13 },
};

#[test]
fn fake_process_table_conforms() {
    let fixture = ProcessFixture {
        alive: 100,
        gone: 999,
        env_var: (b"MOSAIC_RUN_ID".to_vec(), b"run-1".to_vec()),
        denied: 200,
        expect: vec![
            ProcessInfo {
                pid: 1,
                ppid: 0,
                uid: 0,
                start_time: 1,
                exe: Some("/sbin/init".into()),
            },
            ProcessInfo {
                pid: 100,
                ppid: 1,
                uid: 1000,
                start_time: 5000,
                exe: Some("/usr/bin/pi".into()),
            },
            ProcessInfo {
                pid: 200,
                ppid: 1,
                uid: 0,
                start_time: 40,
                exe: None,
            },
        ],
        exe_identities: vec![
            (1, ExeIdentity { dev: 8, ino: 12 }),
            (100, ExeIdentity { dev: 8, ino: 4711 }),
        ],
        namespaces: vec![(1, HOST_NAMESPACES), (100, HOST_NAMESPACES), (300, SANDBOX)],
        elsewhere: Some(300),
    };
    process::run(
        || {
            FakeProcessTable::new()
                .with(
                    FakeProcess::new(1, 0)
                        .uid(0)
                        .exe("/sbin/init")
                        .exe_identity(8, 12),
                )
                .with(
                    FakeProcess::new(100, 1)
                        .start_time(5000)
                        .exe("/usr/bin/pi")
                        .exe_identity(8, 4711)
                        .env([("HOME", "/home/h"), ("MOSAIC_RUN_ID", "run-1")]),
                )
                .with(
                    FakeProcess::new(200, 1)
                        .uid(0)
                        .start_time(40)
                        .environ(FakeEnviron::Denied),
                )
                .with(FakeProcess::new(300, 100).namespaces(SANDBOX))
        },
        &fixture,
    );
}

#[test]
fn fake_credentials_conform() {
    let file = |path: &str| CredentialSource::File(path.to_owned());
    let fixture = CredentialFixture {
        readable: vec![
            (
                file("/run/secrets/gitea"),
                b"gitea-token-0123456789\n".to_vec(),
            ),
            (
                CredentialSource::Env("VIKUNJA_TOKEN".to_owned()),
                b"vikunja-token-abcdef".to_vec(),
            ),
            (file("/run/secrets/largest"), vec![b'a'; 16 * 1024]),
        ],
        refused: vec![
            (file("/run/secrets/too-large"), CredentialError::TooLarge),
            (
                file("/run/secrets/world-readable"),
                CredentialError::UnsafePermissions,
            ),
            (file("/run/secrets/symlink"), CredentialError::UnsafePath),
            (file("/run/secrets/broken"), CredentialError::Unreadable),
            (file("/run/secrets/absent"), CredentialError::Missing),
            (
                CredentialSource::Env("UNSET_TOKEN".to_owned()),
                CredentialError::Missing,
            ),
        ],
    };
    credentials::run(
        || {
            FakeCredentials::new()
                .with_file("/run/secrets/gitea", b"gitea-token-0123456789\n".to_vec())
                .with_env("VIKUNJA_TOKEN", b"vikunja-token-abcdef".to_vec())
                .with_file("/run/secrets/largest", vec![b'a'; 16 * 1024])
                .with_file("/run/secrets/too-large", vec![b'a'; 16 * 1024 + 1])
                .with_error(
                    file("/run/secrets/world-readable"),
                    CredentialError::UnsafePermissions,
                )
                .with_error(file("/run/secrets/symlink"), CredentialError::UnsafePath)
                .with_error(file("/run/secrets/broken"), CredentialError::Unreadable)
        },
        &fixture,
    );
}

/// The fake transport plays its own panes.
struct FakePanes(FakeBrowserTransport);

impl BrowserHarness for FakePanes {
    type Transport = FakeBrowserTransport;

    fn transport(&self) -> &FakeBrowserTransport {
        &self.0
    }

    fn connect(&mut self, client: &ClientId, capable: bool) {
        self.0.connect(client.clone(), capable);
    }

    fn disconnect(&mut self, client: &ClientId) {
        self.0.disconnect(client);
    }

    fn received(&mut self, client: &ClientId) -> Vec<PaneEvent> {
        self.0.take_events(client)
    }
}

#[test]
fn fake_browser_transport_conforms() {
    browser::run(|| FakePanes(FakeBrowserTransport::new()));
}

// --- Helpers ----------------------------------------------------------------

fn ms(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(ms).unwrap()
}

fn acme() -> BusinessId {
    BusinessId::parse("acme").unwrap()
}

fn stamped(at: i64, evidence: Evidence) -> Stamped {
    Stamped {
        at: ms(at),
        evidence,
    }
}

fn message(n: u8) -> MessageRecord {
    MessageRecord {
        id: MessageId::from_random([n; 16]),
        business: acme(),
        from: Sender::Human,
        to: Recipient::Role(RoleInstance::parse("dev").unwrap()),
        class: None,
        body: format!("message {n}"),
        in_reply_to: None,
        corrects: None,
        decision: None,
        request: None,
    }
}

/// A batch of a machine-state record, a message and a task observation.
fn batch(start: i64) -> Vec<Stamped> {
    vec![
        stamped(
            start,
            Evidence::Launch(LaunchEvidence::Revoked { business: acme() }),
        ),
        stamped(
            start + 1,
            Evidence::Message(MessageEvidence::Sent(Box::new(message(1)))),
        ),
        stamped(
            start + 2,
            Evidence::Observed(Observation {
                business: acme(),
                agent: AgentRef {
                    role: RoleInstance::parse("dev").unwrap(),
                    run: RunId::parse("run-1").unwrap(),
                },
                kind: "task.updated".to_owned(),
                body: "{}".to_owned(),
                subject: Some(Subject::Task(
                    mosaic_domain::TaskRef::parse("vikunja:3/41").unwrap(),
                )),
                request: None,
            }),
        ),
    ]
}

fn is_injected(error: &StoreError) -> bool {
    match error {
        StoreError::Unavailable(source) => source.downcast_ref::<InjectedFailure>().is_some(),
        StoreError::Full(_)
        | StoreError::Duplicate
        | StoreError::Dangling
        | StoreError::CrossBusiness
        | StoreError::NonMonotonic
        | StoreError::Malformed => false,
    }
}

fn process_error(result: Result<ProcessInfo, ProcessError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(ProcessError::Gone) => "gone",
        Err(ProcessError::Denied) => "denied",
        Err(ProcessError::Unreadable(_)) => "unreadable",
    }
}

fn environ_error(result: Result<Environ, ProcessError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(ProcessError::Gone) => "gone",
        Err(ProcessError::Denied) => "denied",
        Err(ProcessError::Unreadable(_)) => "unreadable",
    }
}

// --- MemoryStore --------------------------------------------------------------

#[test]
fn injected_commit_failure_commits_nothing() {
    let mut store = MemoryStore::new();
    store.fail_next_commit();
    let error = store.commit(&batch(1_000)).unwrap_err();
    assert!(is_injected(&error), "{error:?}");
    assert_eq!(store.records(), vec![]);
    assert_eq!(store.last_write().unwrap(), None);
    assert_eq!(
        store.message(&MessageId::from_random([1; 16])).unwrap(),
        None
    );
    assert_eq!(store.tasks(&acme()).unwrap(), vec![]);
    let mut replayed = Vec::new();
    store.replay(&mut |r| replayed.push(r)).unwrap();
    assert_eq!(replayed, vec![]);
    // The failure was used up: the same batch now commits, which it could
    // not if any of it had been kept.
    store.commit(&batch(1_000)).unwrap();
    assert_eq!(store.records(), batch(1_000));
}

#[test]
fn each_armed_failure_fails_one_commit() {
    let mut store = MemoryStore::new();
    store.fail_next_commit();
    store.fail_next_commit();
    assert!(is_injected(&store.commit(&[]).unwrap_err()));
    assert!(is_injected(&store.commit(&batch(1_000)).unwrap_err()));
    store.commit(&batch(1_000)).unwrap();
    assert_eq!(store.records().len(), 3);
}

#[test]
fn unavailable_store_fails_every_operation_until_cleared() {
    let mut store = MemoryStore::new();
    store.commit(&batch(1_000)).unwrap();
    store.set_unavailable(true);
    let dev = RoleInstance::parse("dev").unwrap();
    let recipient = Recipient::Role(dev.clone());
    let subject = Subject::Message(MessageId::from_random([1; 16]));
    assert!(is_injected(&store.commit(&batch(2_000)).unwrap_err()));
    assert!(is_injected(&store.last_write().unwrap_err()));
    assert!(is_injected(&store.replay(&mut |_| {}).unwrap_err()));
    assert!(is_injected(
        &store.message(&MessageId::from_random([1; 16])).unwrap_err()
    ));
    assert!(is_injected(
        &store.undelivered(&acme(), &dev, 10).unwrap_err()
    ));
    assert!(is_injected(
        &store.unread(&acme(), &recipient, 10).unwrap_err()
    ));
    assert!(is_injected(&store.tasks(&acme()).unwrap_err()));
    assert!(is_injected(&store.trail(&acme(), &subject).unwrap_err()));
    store.set_unavailable(false);
    assert_eq!(store.last_write().unwrap(), Some(ms(1_002)));
    assert_eq!(
        store.undelivered(&acme(), &dev, 10).unwrap(),
        vec![MessageFacts {
            record: message(1),
            delivered_to: None,
            read: false
        }]
    );
    assert_eq!(store.records(), batch(1_000));
}

#[test]
fn store_clones_share_one_store() {
    let inspector = MemoryStore::new();
    let mut runtime = inspector.clone();
    runtime.commit(&batch(1_000)).unwrap();
    assert_eq!(inspector.records(), batch(1_000));
    let tasks = inspector.tasks(&acme()).unwrap();
    assert_eq!(
        tasks,
        vec![TaskView {
            task: mosaic_domain::TaskRef::parse("vikunja:3/41").unwrap(),
            kind: "task.updated".to_owned(),
            body: "{}".to_owned(),
            tombstone: false,
            at: ms(1_002),
        }]
    );
    // An injected failure armed through one clone hits the other.
    inspector.fail_next_commit();
    assert!(is_injected(&runtime.commit(&[]).unwrap_err()));
    assert_eq!(inspector.records(), batch(1_000));
    // A new store is independent.
    assert_eq!(MemoryStore::new().records(), vec![]);
}

// --- ManualClock --------------------------------------------------------------

#[test]
fn manual_clock_moves_only_when_told() {
    let clock = ManualClock::new(ms(1_000));
    let runtime: Box<dyn Clock> = Box::new(clock.clone());
    assert_eq!(runtime.now(), ms(1_000));
    assert_eq!(runtime.now(), ms(1_000));
    clock.advance(Duration::from_millis(250));
    assert_eq!(runtime.now(), ms(1_250));
    clock.set(ms(500));
    assert_eq!(runtime.now(), ms(500), "set may step backwards");
    clock.set(ms(253_402_300_799_000));
    clock.advance(Duration::from_secs(3600));
    assert_eq!(runtime.now(), ms(253_402_300_799_999), "advance saturates");
}

#[test]
fn manual_clock_is_shared_across_threads() {
    let clock = ManualClock::new(Timestamp::EPOCH);
    let other = clock.clone();
    std::thread::spawn(move || other.advance(Duration::from_secs(1)))
        .join()
        .unwrap();
    assert_eq!(clock.now(), ms(1_000));
}

// --- Entropy ------------------------------------------------------------------

#[test]
fn seeded_entropy_is_deterministic_per_seed() {
    let draw = |seed| {
        let mut e = SeededEntropy::new(seed);
        (0..5)
            .map(|_| e.capability().unwrap().expose())
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
}

#[test]
fn seeded_entropy_never_fills_all_zero() {
    // One-byte fills would be zero once in 256 draws without the redraw.
    let mut e = SeededEntropy::new(3);
    for _ in 0..10_000 {
        let mut b = [0u8; 1];
        e.fill(&mut b).unwrap();
        assert_ne!(b, [0]);
    }
    let mut empty = [0u8; 0];
    e.fill(&mut empty).unwrap();
}

#[test]
fn failing_entropy_always_fails_with_an_injected_failure() {
    let mut e = FailingEntropy;
    let error = e.capability().unwrap_err();
    assert!(std::error::Error::source(&error).is_some_and(|s| s.is::<InjectedFailure>()));
    assert!(e.claim_token().is_err());
    assert!(e.message_id().is_err());
}

// --- FakeProcessTable -----------------------------------------------------------

#[test]
fn process_table_builds_loops_and_odd_ancestries() {
    let table = FakeProcessTable::new()
        // A loop: 10 and 11 are each other's parent.
        .with(FakeProcess::new(10, 11).start_time(100))
        .with(FakeProcess::new(11, 10).start_time(100))
        // A parent started after its child: a reused pid.
        .with(FakeProcess::new(20, 21).start_time(100))
        .with(FakeProcess::new(21, 1).start_time(900))
        // A parent whose `stat` cannot be parsed.
        .with(FakeProcess::new(30, 31))
        .with(FakeProcess::new(31, 1).stat_unreadable());
    assert_eq!(table.process(10).unwrap().ppid, 11);
    assert_eq!(table.process(11).unwrap().ppid, 10);
    let (child, parent) = (table.process(20).unwrap(), table.process(21).unwrap());
    assert!(parent.start_time > child.start_time);
    assert_eq!(process_error(table.process(31)), "unreadable");
    assert_eq!(process_error(table.process(32)), "gone");
    assert_eq!(environ_error(table.environ(32)), "gone");
}

#[test]
fn process_table_environments() {
    let table = FakeProcessTable::new()
        .with(FakeProcess::new(10, 1).env([("A", "1"), ("B", "2")]))
        .with(FakeProcess::new(11, 1).environ(FakeEnviron::Denied))
        .with(FakeProcess::new(12, 1).environ(FakeEnviron::Gone))
        .with(FakeProcess::new(13, 1).environ(FakeEnviron::Unreadable))
        .with(FakeProcess::new(14, 1));
    assert_eq!(
        table.environ(10).unwrap(),
        vec![
            (b"A".to_vec(), b"1".to_vec()),
            (b"B".to_vec(), b"2".to_vec())
        ]
    );
    assert_eq!(environ_error(table.environ(11)), "denied");
    assert_eq!(environ_error(table.environ(12)), "gone");
    assert_eq!(environ_error(table.environ(13)), "unreadable");
    assert_eq!(table.environ(14).unwrap(), vec![]);
    // A denied environment leaves the process itself readable.
    assert_eq!(process_error(table.process(11)), "ok");
}

#[test]
fn process_table_executables_are_files_not_paths() {
    let table = FakeProcessTable::new()
        // The same path, another file: a binary replaced at its path.
        .with(FakeProcess::new(10, 1).exe("/usr/bin/x").exe_identity(8, 1))
        .with(FakeProcess::new(11, 1).exe("/usr/bin/x").exe_identity(8, 2))
        // A path and no file identity, as a kernel thread has neither.
        .with(FakeProcess::new(12, 1).exe("/usr/bin/x"))
        .with(FakeProcess::new(13, 1).exe_identity(8, 1).gone_after(1));
    assert_eq!(
        table.exe_identity(10).unwrap(),
        ExeIdentity { dev: 8, ino: 1 }
    );
    assert_ne!(
        table.exe_identity(10).unwrap(),
        table.exe_identity(11).unwrap()
    );
    assert!(matches!(
        table.exe_identity(12),
        Err(ProcessError::Unreadable(_))
    ));
    assert!(matches!(table.exe_identity(99), Err(ProcessError::Gone)));
    // Reading the executable does not count as a `process` read, and a
    // process that has vanished has no executable either.
    assert_eq!(
        table.exe_identity(13).unwrap(),
        ExeIdentity { dev: 8, ino: 1 }
    );
    assert_eq!(table.reads(13), 0);
    table.process(13).unwrap();
    assert!(matches!(table.exe_identity(13), Err(ProcessError::Gone)));
}

#[test]
fn process_vanishes_mid_walk() {
    let table = FakeProcessTable::new().with(FakeProcess::new(10, 1).gone_after(1));
    let walker = table.clone();
    assert_eq!(walker.process(10).unwrap().pid, 10);
    assert_eq!(process_error(walker.process(10)), "gone");
    assert_eq!(environ_error(walker.environ(10)), "gone");
    assert_eq!(table.reads(10), 2);
}

#[test]
fn process_table_changes_under_a_running_walker() {
    let table = FakeProcessTable::new().with(FakeProcess::new(10, 1).start_time(5));
    let walker = table.clone();
    assert!(table.remove(10));
    assert!(!table.remove(10));
    assert_eq!(process_error(walker.process(10)), "gone");
    // A new process with the same pid: a pid reuse, with a later start.
    table.insert(FakeProcess::new(10, 1).start_time(50).uid(1001));
    let reused = walker.process(10).unwrap();
    assert_eq!((reused.start_time, reused.uid), (50, 1001));
    assert_eq!(
        table.reads(10),
        1,
        "the read count restarts with the new process"
    );
}

// --- FakeCredentials --------------------------------------------------------------

#[test]
fn credentials_apply_the_contract_rules_and_log_reads() {
    let relative = CredentialSource::File("secrets/token".to_owned());
    let huge = CredentialSource::File("/secrets/huge".to_owned());
    let gitea = CredentialSource::File("/secrets/gitea".to_owned());
    let creds = FakeCredentials::new()
        .with(relative.clone(), Ok(b"token".to_vec()))
        .with(huge.clone(), Ok(vec![b'x'; 16 * 1024 + 1]))
        .with_file("/secrets/gitea", b"old".to_vec())
        .with_file("/secrets/gitea", b"new".to_vec());
    let broker = creds.clone();
    assert_eq!(broker.read(&relative), Err(CredentialError::UnsafePath));
    assert_eq!(broker.read(&huge), Err(CredentialError::TooLarge));
    assert_eq!(
        broker.read(&gitea),
        Ok(b"new".to_vec()),
        "a later mapping replaces"
    );
    assert_eq!(creds.reads(), vec![relative, huge, gitea]);
}

// --- FakeBrowserTransport ----------------------------------------------------------

fn pane(name: &str) -> ClientId {
    ClientId::parse(name).unwrap()
}

fn cancel(n: u8) -> PaneEvent {
    PaneEvent::Cancel {
        request: BrowserRequestId::from_random([n; 16]),
    }
}

#[test]
fn browser_transport_keeps_a_clients_events_past_disconnection() {
    let panes = FakeBrowserTransport::new();
    let broker = panes.clone();
    panes.connect(pane("b"), false);
    panes.connect(pane("a"), true);
    let ids: Vec<ClientId> = broker.clients().into_iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        vec![pane("b"), pane("a")],
        "clients in connection order"
    );
    broker.send(&pane("a"), cancel(1)).unwrap();
    broker.send(&pane("a"), cancel(2)).unwrap();
    assert_eq!(panes.events(&pane("a")), vec![cancel(1), cancel(2)]);
    assert!(panes.disconnect(&pane("a")));
    assert!(!panes.disconnect(&pane("a")));
    assert!(!panes.is_connected(&pane("a")));
    assert_eq!(
        broker.send(&pane("a"), cancel(3)),
        Err(TransportError::Gone)
    );
    assert_eq!(panes.take_events(&pane("a")), vec![cancel(1), cancel(2)]);
    assert_eq!(panes.take_events(&pane("a")), vec![]);
}

#[test]
fn browser_transport_reconnect_replaces_the_capability() {
    let panes = FakeBrowserTransport::new();
    panes.connect(pane("a"), true);
    panes.connect(pane("a"), false);
    let clients = panes.clients();
    assert_eq!(clients.len(), 1);
    assert!(!clients[0].capable);
    assert!(panes.is_connected(&pane("a")));
}
