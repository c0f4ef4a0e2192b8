//! A broker whose writer thread dies closes itself and tells its host,
//! instead of staying half-alive: the real runtime, socket and protocol
//! over the fakes of `mosaic-ports`, with a clock that panics on the
//! writer thread once the test arms it (the way a log line that could not
//! be written used to kill the writer).
//!
//! After the writer died: the host's `on_failure` hook is called with
//! `writer`, the socket serves nobody any more (a client cannot connect:
//! `broker-unavailable`), and the host's `close` says
//! `broker-unavailable`. Without the panic (the control), nothing of that
//! happens and the close is clean.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use mosaic_adapters::config::{business_from_json, BootConfig};
use mosaic_app::runtime::human_proof::BrokerExe;
use mosaic_app::runtime::{start_runtime, Broker, BrokerIdentity, Failure, Ports, WRITER_THREAD};
use mosaic_client::socket::Client;
use mosaic_domain::evidence::{Harness, LaunchRecord};
use mosaic_domain::{BusinessId, Refusal, RoleInstance, RunId, Timestamp};
use mosaic_ports::fakes::{
    FakeCredentials, FakeProcess, FakeProcessTable, ManualClock, MemoryStore, SeededEntropy,
    HOST_NAMESPACES,
};
use mosaic_ports::{Clock, ExeIdentity};
use serde_json::json;

/// The longest the test waits for the broker to close itself.
const WAIT: Duration = Duration::from_secs(20);

/// A manual clock that panics when read on the writer thread once armed.
struct Tripwire {
    clock: ManualClock,
    armed: Arc<AtomicBool>,
}

impl Clock for Tripwire {
    fn now(&self) -> Timestamp {
        let on_writer = std::thread::current().name() == Some(WRITER_THREAD);
        assert!(
            !(on_writer && self.armed.load(Ordering::SeqCst)),
            "the tripwire: the writer thread dies here"
        );
        self.clock.now()
    }
}

/// A broker over the fakes with one agent run, `lead-1`, its capability,
/// and the switch that makes its writer die.
fn broker(root: &std::path::Path) -> (Broker, String, Arc<AtomicBool>) {
    let business = business_from_json(
        r#"{"id": "acme", "human": "alice",
            "arbiters": {"technical": "lead", "delivery": "lead"},
            "roles": {"lead": {"authority": {"withinRole": ["message.send"], "crossRole": []}}}}"#,
    )
    .expect("a business");
    let armed = Arc::new(AtomicBool::new(false));
    let clock = Tripwire {
        clock: ManualClock::new(Timestamp::from_unix_ms(1_767_225_600_000).expect("a time")),
        armed: Arc::clone(&armed),
    };
    let ports = Ports {
        store: MemoryStore::new(),
        clock: Arc::new(clock),
        entropy: Box::new(SeededEntropy::new(7)),
        processes: Arc::new(
            FakeProcessTable::new().with(FakeProcess::new(4242, 1).uid(1000).start_time(17)),
        ),
        credentials: Box::new(FakeCredentials::new()),
        identity: BrokerIdentity {
            uid: 1000,
            exe: BrokerExe {
                path: "/opt/mosaic-bus".into(),
                identity: ExeIdentity { dev: 1, ino: 2 },
            },
            namespaces: HOST_NAMESPACES,
        },
    };
    let launch = LaunchRecord {
        business: BusinessId::parse("acme").expect("an id"),
        role: RoleInstance::parse("lead").expect("a role"),
        run: RunId::parse("lead-1").expect("a run"),
        harness: Harness::Pi,
        address: None,
        pid: 4242,
        start_time: 17,
    };
    let (broker, booted) = start_runtime(
        ports,
        BootConfig {
            data_root: root.to_owned(),
            businesses: vec![business],
            launches: vec![launch],
            ..BootConfig::default()
        },
    )
    .expect("the broker starts");
    let cap = booted.launches[0].cap.expose().to_owned();
    (broker, cap, armed)
}

#[test]
fn a_broker_whose_writer_dies_closes_itself_and_tells_its_host() {
    let root = tempfile::tempdir().expect("a data root");
    let (broker, cap, armed) = broker(root.path());
    let (told, failures) = mpsc::channel();
    broker.on_failure(move |part| {
        let _ = told.send(part);
    });
    let lead = Client::new(broker.socket(), &cap);
    assert_eq!(
        lead.call("role.claim", json!({})),
        Ok(json!({"status": "claimed"}))
    );

    armed.store(true, Ordering::SeqCst);
    let answer = lead.call("message.send", json!({"to": "human", "body": "hello"}));
    assert!(
        matches!(
            answer,
            Err(Refusal::BrokerUnavailable | Refusal::OutcomeUnknown)
        ),
        "{answer:?}"
    );
    assert_eq!(failures.recv_timeout(WAIT), Ok(Failure::Writer));
    // Closed: nobody is served, nobody waits for an answer that never comes.
    assert_eq!(
        lead.call("inbox", json!({})),
        Err(Refusal::BrokerUnavailable)
    );
    // A hook registered afterwards hears of it at once.
    let (late, heard) = mpsc::channel();
    broker.on_failure(move |part| {
        let _ = late.send(part);
    });
    assert_eq!(heard.try_recv(), Ok(Failure::Writer));
    assert_eq!(broker.close(), Err(Refusal::BrokerUnavailable));
}

#[test]
fn without_a_dead_part_the_hook_is_never_called_and_the_close_is_clean() {
    let root = tempfile::tempdir().expect("a data root");
    let (broker, cap, _armed) = broker(root.path());
    let (told, failures) = mpsc::channel();
    broker.on_failure(move |part| {
        let _ = told.send(part);
    });
    let lead = Client::new(broker.socket(), &cap);
    assert_eq!(
        lead.call("role.claim", json!({})),
        Ok(json!({"status": "claimed"}))
    );
    assert!(lead
        .call("message.send", json!({"to": "human", "body": "hello"}))
        .is_ok());
    assert_eq!(broker.close(), Ok(()));
    assert_eq!(
        failures.recv_timeout(Duration::from_millis(100)),
        Err(mpsc::RecvTimeoutError::Disconnected),
        "the hook is dropped uncalled"
    );
}
