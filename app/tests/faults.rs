//! Storage and file-system faults under a real `mosaic-bus broker` child:
//! what the broker does, and what it keeps, when
//! - its store is read-only at boot (a file mode, a read-only mount);
//! - the disk fills up under it (a small tmpfs, mounted by the test),
//!   including while a browser request's authorization syncs;
//! - its socket file is deleted while it runs;
//! - its WAL file is deleted while it runs, then it closes or crashes.
//!
//! The mount tests need to mount a tmpfs. As root they do; without root (or
//! where `mount` is refused) each runs again, whole, in a child process of
//! this binary that is root of its own user and mount namespaces, and fails
//! if it cannot get them. The storage-failure test also runs the real
//! runtime over a fake store that fails on demand, in this process.
//!
//! Tests run one at a time ([`serial`]): some mount file systems, and a
//! broker spawned by one test must not inherit another test's files.

#[path = "support/mod.rs"]
mod support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mosaic_domain::Refusal;
use serde_json::{json, Value};

use mosaic_client::socket::Client;
use support::pane::{boot_shop, Ui};
use support::tmpfs::Tmpfs;
use support::{
    acme, acme_launches, assert_gone, assert_whole_transactions, boot_line, config, count,
    data_root, launch, open_db, raise_args, unlock, Broker,
};

fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn acme_config(root: &Path) -> Value {
    config(root, &[acme()], &acme_launches(), &["acme"])
}

#[track_caller]
fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The bodies of every stored message, in write order.
fn stored_bodies(root: &Path) -> Vec<String> {
    let db = open_db(root);
    let mut rows = db
        .prepare("SELECT body FROM messages ORDER BY seq")
        .expect("prepare");
    rows.query_map([], |r| r.get::<_, String>(0))
        .expect("query")
        .map(|r| r.expect("a row"))
        .collect()
}

fn bodies(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|k| format!("{prefix}-{k}")).collect()
}

#[test]
fn a_read_only_store_refuses_the_boot_with_a_static_code_and_stays_as_it_was() {
    let _serial = serial();
    let root = data_root();
    let cfg = acme_config(root.path());
    let broker = Broker::boot(root.path(), &cfg);
    let lead = broker.agent("lead-1");
    lead.claim();
    for body in bodies("kept", 3) {
        lead.send("dev", &body, json!({}));
    }
    broker.close();
    let bus = root.path().join("bus");
    let db = bus.join("bus.sqlite");
    let before = std::fs::read(&db).expect("the store");

    // A store file made read-only: it is no longer the private file the
    // broker created, and the boot refuses before opening it.
    chmod(&db, 0o400);
    Broker::boot_refused(root.path(), &cfg, "unsafe-path");
    chmod(&db, 0o600);
    // The same for a read-only `bus/`.
    chmod(&bus, 0o500);
    Broker::boot_refused(root.path(), &cfg, "unsafe-path");
    chmod(&bus, 0o700);
    assert_eq!(std::fs::read(&db).expect("the store"), before);

    let broker = Broker::boot(root.path(), &cfg);
    broker.close();
    assert_eq!(stored_bodies(root.path()), bodies("kept", 3));
    assert_whole_transactions(root.path());
}

#[test]
fn a_read_only_file_system_refuses_the_boot_with_storage_unavailable() {
    let _serial = serial();
    Tmpfs::with(
        "4m",
        "a_read_only_file_system_refuses_the_boot_with_storage_unavailable",
        |fs| {
            let root = fs.path();
            let cfg = acme_config(root);
            let broker = Broker::boot(root, &cfg);
            let lead = broker.agent("lead-1");
            lead.claim();
            for body in bodies("kept", 3) {
                lead.send("dev", &body, json!({}));
            }
            broker.close();

            // (Linux refuses to remount a file system read-only while a broker has
            // its store open for writing, so this is the moment it can happen.)
            fs.remount("ro");
            Broker::boot_refused(root, &cfg, "storage-unavailable");
            fs.remount("rw");

            let broker = Broker::boot(root, &cfg);
            broker.close();
            assert_eq!(stored_bodies(root), bodies("kept", 3));
            assert_whole_transactions(root);
        },
    );
}

#[test]
fn a_full_disk_refuses_mutations_with_storage_unavailable_keeps_reads_and_recovers() {
    let _serial = serial();
    Tmpfs::with(
        "4m",
        "a_full_disk_refuses_mutations_with_storage_unavailable_keeps_reads_and_recovers",
        |fs| {
            let root = fs.path();
            let cfg = acme_config(root);
            let broker = Broker::boot(root, &cfg);
            let (lead, dev) = (broker.agent("lead-1"), broker.agent("dev-1"));
            lead.claim();
            dev.claim();
            let before: Vec<Value> = bodies("before", 20)
                .iter()
                .map(|body| lead.send("dev", body, json!({})))
                .collect();

            let filler = fs.fill();
            // Every mutation is refused, and not even its refusal can be recorded.
            for body in bodies("refused", 10) {
                lead.refused(
                    "message.send",
                    json!({"to": "dev", "body": body}),
                    "storage-unavailable",
                );
            }
            lead.refused(
                "decision.raise",
                raise_args("repo.merge", None, json!({"question": "refused-raise"})),
                "storage-unavailable",
            );
            // A hand-off is a delivery record: none is handed out unrecorded.
            dev.refused("message.receive", json!({}), "storage-unavailable");
            // Reads still work and see everything acknowledged.
            let inbox = dev.ok("inbox", json!({}));
            assert_eq!(inbox.as_array().map(Vec::len), Some(20), "{inbox}");
            for id in &before {
                assert_eq!(
                    lead.trail_kinds(id.as_str().expect("an id")),
                    ["message.sent"]
                );
            }
            let agents = broker.reader(0).ok("agents", json!({}));
            assert_eq!(agents.as_array().map(Vec::len), Some(7), "{agents}");

            // Space freed: mutations work again, nothing was lost or invented.
            std::fs::remove_file(filler).expect("free the space");
            for body in bodies("after", 3) {
                lead.send("dev", &body, json!({}));
            }
            let received = dev.ok("message.receive", json!({}));
            assert_eq!(received.as_array().map(Vec::len), Some(23), "{received}");
            // The client heard a static code; the operator reads the cause.
            let log = broker.close();
            assert!(
                log.lines().any(|l| {
                    l.contains(" ERROR ")
            && l.contains(
                " code=\"storage-unavailable\" what=\"the store\" cause=\"store unavailable: "
            )
                }),
                "{log}"
            );

            let mut expected = bodies("before", 20);
            expected.extend(bodies("after", 3));
            assert_eq!(stored_bodies(root), expected);
            let db = open_db(root);
            assert_eq!(
                count(
                    &db,
                    "SELECT count(*) FROM decisions WHERE question = 'refused-raise'",
                    []
                ),
                0
            );
            assert_eq!(count(&db, "SELECT count(*) FROM deliveries", []), 23);
            assert_eq!(count(&db, "SELECT count(*) FROM refusals", []), 0);
            // The refusals on the full disk were counted, not written one
            // by one: the counts of the three kinds (send, raise, receive)
            // went into the space of the released disk reserve.
            assert_eq!(
                count(
                    &db,
                    "SELECT coalesce(sum(count), 0) FROM refusal_counts",
                    []
                ),
                12
            );
            drop(db);
            // 7 launches, 2 claims, 23 sends of two records, 23 deliveries,
            // 3 refusal counts.
            assert_eq!(assert_whole_transactions(root), 7 + 2 + 23 * 2 + 23 + 3);
            Broker::boot(root, &cfg).close();
        },
    );
}

/// Boots a broker on `root` with `cfg`, expecting exactly the refusal
/// line `{"ok":false,"error":code}` and exit 2; returns its stderr.
#[track_caller]
fn boot_refused_log(root: &Path, cfg: &Value, code: &str) -> String {
    let mut broker = Broker::spawn(root);
    broker.send(&boot_line(cfg).to_string());
    let line = broker.line().expect("a refusal line");
    assert_eq!(line, format!(r#"{{"error":"{code}","ok":false}}"#));
    assert_eq!(broker.wait(), 2);
    broker.stderr()
}

/// Whether one line of `log` is an error naming `code`, `what` and a
/// cause that contains `cause`.
fn logged(log: &str, code: &str, what: &str, cause: &str) -> bool {
    log.lines().any(|l| {
        l.contains(" ERROR ")
            && l.contains(&format!(" code=\"{code}\" what=\"{what}\" cause=\""))
            && l.split(" cause=").nth(1).is_some_and(|c| c.contains(cause))
    })
}

#[test]
fn a_storage_failure_reaches_the_client_as_its_code_and_the_log_with_its_cause() {
    let _serial = serial();
    // The runtime over a store that fails on demand, in this process (its
    // logs are captured here), then the real broker on a full disk.
    storage_failure_over_a_failing_store();
    Tmpfs::with(
        "4m",
        "a_storage_failure_reaches_the_client_as_its_code_and_the_log_with_its_cause",
        storage_failure_on_a_full_disk,
    );
}

/// Every log line of this process, as text, once [`captured_logs`] ran.
static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Installs this process's log subscriber (text, no colour, `info`), which
/// writes into [`LOGS`], and returns what it holds so far.
fn captured_logs() -> String {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        struct Sink;
        impl Write for Sink {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                LOGS.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(|| Sink)
            .init();
    });
    String::from_utf8_lossy(&LOGS.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
}

/// The real runtime over the in-memory fakes, with a store that fails every
/// write from the send on: the client gets the static code, the log the
/// store's cause and no body.
fn storage_failure_over_a_failing_store() {
    let (broker, booted, store, _dir) = over_a_fake_store();
    let lead = Client::new(&booted.socket, booted.launches[0].cap.expose());
    lead.call("role.claim", json!({})).expect("claimed");
    store.set_unavailable(true);
    let send = json!({"cap": booted.launches[0].cap.expose(), "verb": "message.send",
                      "args": {"to": "dev", "body": "refused"}});
    let answer = support::raw(&booted.socket, send.to_string().as_bytes());
    assert_eq!(answer, json!({"ok": false, "error": "storage-unavailable"}));
    store.set_unavailable(false);
    broker.close().expect("closes");
    let log = captured_logs();
    assert!(
        logged(
            &log,
            "storage-unavailable",
            "the store",
            "failure injected by a test"
        ),
        "{log}"
    );
    assert!(!log.contains("refused\""), "no body in the log: {log}");
}

/// The real runtime over the in-memory fakes (a store that fails on
/// demand), acme's `lead` allowed to send, with its socket's folder.
fn over_a_fake_store() -> (
    mosaic_app::runtime::Broker,
    mosaic_app::runtime::Booted,
    mosaic_ports::fakes::MemoryStore,
    tempfile::TempDir,
) {
    use mosaic_adapters::config::{business_from_json, BootConfig};
    use mosaic_app::runtime::human_proof::BrokerExe;
    use mosaic_app::runtime::start_runtime;
    use mosaic_app::runtime::world::{BrokerIdentity, Ports};
    use mosaic_domain::evidence::{Harness, LaunchRecord};
    use mosaic_domain::{BusinessId, RoleInstance, RunId, Timestamp};
    use mosaic_ports::fakes::{
        FakeCredentials, FakeProcess, FakeProcessTable, ManualClock, MemoryStore, SeededEntropy,
    };
    use mosaic_ports::ExeIdentity;

    captured_logs();
    let business = business_from_json(
        r#"{"id": "acme", "human": "alice",
            "arbiters": {"technical": "lead", "delivery": "lead"},
            "roles": {"lead": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
                      "dev": {"authority": {"withinRole": [], "crossRole": []}}}}"#,
    )
    .expect("business");
    let dir = tempfile::tempdir().expect("a folder for the socket");
    let store = MemoryStore::new();
    let ports = Ports {
        store: store.clone(),
        clock: Arc::new(ManualClock::new(
            Timestamp::from_unix_ms(1_767_225_600_000).expect("time"),
        )),
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
            namespaces: mosaic_ports::fakes::HOST_NAMESPACES,
        },
    };
    let config = BootConfig {
        data_root: dir.path().to_owned(),
        businesses: vec![business],
        launches: vec![LaunchRecord {
            business: BusinessId::parse("acme").expect("id"),
            role: RoleInstance::parse("lead").expect("role"),
            run: RunId::parse("lead-1").expect("run"),
            harness: Harness::Pi,
            address: None,
            pid: 4242,
            start_time: 17,
        }],
        ..BootConfig::default()
    };
    let (broker, booted) = start_runtime(ports, config).expect("the runtime starts over fakes");
    (broker, booted, store, dir)
}

/// Every request of a batch whose commit fails hears `storage-unavailable`
/// on its own connection, in its order, from the writer that answers it
/// directly; none of them is kept.
#[test]
fn every_request_of_a_failed_batch_is_answered_storage_unavailable() {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    const CONNECTIONS: usize = 6;
    const LINES: usize = 8;
    let _serial = serial();
    let (broker, booted, store, _dir) = over_a_fake_store();
    let cap = booted.launches[0].cap.expose().to_owned();
    let lead = Client::new(&booted.socket, &cap);
    lead.call("role.claim", json!({})).expect("claimed");
    let kept = store.records().len();
    // Every batch these requests can form fails, however they are grouped.
    for _ in 0..CONNECTIONS * LINES {
        store.fail_next_commit();
    }
    let connections: Vec<_> = (0..CONNECTIONS)
        .map(|k| {
            let lines: String = (0..LINES)
                .map(|i| {
                    let args = json!({"to": "dev", "body": format!("c{k}-{i}")});
                    format!(
                        "{}\n",
                        json!({"cap": cap, "verb": "message.send", "args": args})
                    )
                })
                .collect();
            let socket = booted.socket.clone();
            std::thread::spawn(move || {
                let mut stream = UnixStream::connect(socket).expect("connect");
                stream
                    .set_read_timeout(Some(support::WAIT))
                    .expect("timeout");
                stream.write_all(lines.as_bytes()).expect("write");
                stream
                    .shutdown(std::net::Shutdown::Write)
                    .expect("half-close");
                let mut answers = String::new();
                stream.read_to_string(&mut answers).expect("the answers");
                answers
            })
        })
        .collect();
    let refused = "{\"ok\":false,\"error\":\"storage-unavailable\"}\n";
    for (k, connection) in connections.into_iter().enumerate() {
        let answers = connection.join().expect("a connection's answers");
        assert_eq!(answers, refused.repeat(LINES), "connection {k}");
    }
    assert_eq!(
        store.records().len(),
        kept,
        "nothing of a failed batch is kept"
    );
    // What is left armed fails one lone request each; then a send commits.
    let mut failed_alone = 0;
    while lead.call("message.send", json!({"to": "dev", "body": "after"}))
        == Err(Refusal::StorageUnavailable)
    {
        failed_alone += 1;
        assert!(failed_alone <= CONNECTIONS * LINES, "the failures ran out");
    }
    assert_eq!(
        store.records().len(),
        kept + 2,
        "the send after them is kept"
    );
    broker.close().expect("closes");
}

/// The same over the real broker on a full tmpfs, then its boots on the
/// full and on the read-only file system.
fn storage_failure_on_a_full_disk(fs: &Tmpfs) {
    let root = fs.path();
    let cfg = acme_config(root);
    let broker = Broker::boot(root, &cfg);
    let lead = broker.agent("lead-1");
    lead.claim();
    fs.fill();
    // The client hears the static code and nothing else.
    let send = json!({"cap": lead.cap, "verb": "message.send",
                      "args": {"to": "dev", "body": "refused"}});
    let answer = support::raw(&broker.socket, send.to_string().as_bytes());
    assert_eq!(answer, json!({"ok": false, "error": "storage-unavailable"}));
    let log = broker.close();
    // The operator reads what failed and SQLite's reason.
    assert!(
        logged(
            &log,
            "storage-unavailable",
            "the store",
            "database or disk is full"
        ),
        "{log}"
    );
    assert!(!log.contains("refused\""), "no body in the log: {log}");

    // A boot on the full disk (filled again, the broker's released reserve
    // included): what failed first (the lock or the store) is logged with
    // its cause, then the refused boot.
    let filler = fs.fill();
    let log = boot_refused_log(root, &cfg, "storage-unavailable");
    let full = [
        "No space left on device (os error 28)",
        "database or disk is full",
    ];
    assert!(
        log.lines().any(|l| l.contains(" ERROR ")
            && l.contains(" code=\"storage-unavailable\" what=\"")
            && full.iter().any(|cause| l.contains(cause))),
        "{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("the boot was refused code=\"storage-unavailable\"")),
        "{log}"
    );
    std::fs::remove_file(filler).expect("free the space");

    // Nor on a read-only file system.
    fs.remount("ro");
    let log = boot_refused_log(root, &cfg, "storage-unavailable");
    fs.remount("rw");
    assert!(
        logged(
            &log,
            "storage-unavailable",
            "creating the writer lock",
            "Read-only file system (os error 30)"
        ),
        "{log}"
    );
    Broker::boot(root, &cfg).close();
}

#[test]
fn a_broker_closed_on_a_full_disk_keeps_what_it_acknowledged() {
    let _serial = serial();
    Tmpfs::with(
        "4m",
        "a_broker_closed_on_a_full_disk_keeps_what_it_acknowledged",
        |fs| {
            let root = fs.path();
            let cfg = acme_config(root);
            let broker = Broker::boot(root, &cfg);
            let lead = broker.agent("lead-1");
            lead.claim();
            for body in bodies("kept", 5) {
                lead.send("dev", &body, json!({}));
            }
            fs.fill();
            lead.refused(
                "message.send",
                json!({"to": "dev", "body": "refused"}),
                "storage-unavailable",
            );
            // Close cannot checkpoint into a full disk; the WAL keeps the writes.
            broker.close();
            // The broker released its disk reserve; filled again, the disk
            // has no room left for a broker to start: not even its lock.
            let filler = fs.fill();
            Broker::boot_refused(root, &cfg, "storage-unavailable");
            std::fs::remove_file(filler).expect("free the space");

            let broker = Broker::boot(root, &cfg);
            broker.close();
            assert_eq!(stored_bodies(root), bodies("kept", 5));
            assert_whole_transactions(root);
        },
    );
}

#[test]
fn a_browser_request_whose_authorization_cannot_be_made_durable_is_never_granted() {
    let _serial = serial();
    Tmpfs::with(
        "4m",
        "a_browser_request_whose_authorization_cannot_be_made_durable_is_never_granted",
        |fs| {
            let root = fs.path();
            let broker = boot_shop(root, &["browser.snapshot"]);
            let ui = Ui::of(&broker);
            let web = broker.agent("web-1");
            let mut pane = ui.listen("pane-1", true);
            let asked = {
                let web = web.clone();
                move || {
                    web.call(
                        "browser.request",
                        json!({"action": "snapshot", "parameters": {}, "timeoutMs": 10_000}),
                    )
                }
            };
            let filler = fs.fill();
            let asking = std::thread::spawn(asked.clone());
            // The request reaches the pane while its authorization syncs; the sync
            // fails, so the pane is told to drop it and may not claim it.
            let request = pane.next_request();
            assert_eq!(
                request["type"],
                json!("browser-control-request"),
                "{request}"
            );
            let id = request["properties"]["requestId"].clone();
            let claim = json!({"requestId": id, "clientId": "pane-1"});
            assert_eq!(
                ui.post("/api/browser-control/claim", &claim),
                json!({"granted": false})
            );
            let cancel = pane.next_request();
            assert_eq!(
                cancel,
                json!({"type": "browser-control-cancel", "properties": {"requestId": id}})
            );
            assert_eq!(
                asking.join().expect("agent"),
                Err(Refusal::StorageUnavailable)
            );

            // Space freed: the next request is granted, and only it is recorded.
            std::fs::remove_file(filler).expect("free the space");
            let asking = std::thread::spawn(asked);
            let id = pane.next_request()["properties"]["requestId"].clone();
            let claim = json!({"requestId": id, "clientId": "pane-1"});
            let token = ui.post("/api/browser-control/claim", &claim)["claimToken"].clone();
            let result =
                json!({"requestId": id, "claimToken": token, "ok": true, "data": {"title": "t"}});
            assert_eq!(
                ui.post("/api/browser-control/result", &result),
                json!({"matched": true})
            );
            assert_eq!(asking.join().expect("agent"), Ok(json!({"title": "t"})));
            broker.close();
            let db = open_db(root);
            let allowed = "SELECT count(*) FROM actions_allowed WHERE action = 'browser.snapshot'";
            assert_eq!(count(&db, allowed, []), 1);
            let completed = "SELECT count(*) FROM observations WHERE kind = 'browser.completed'";
            assert_eq!(count(&db, completed, []), 1);
            drop(db);
            assert_whole_transactions(root);
        },
    );
}

#[test]
fn deleting_the_socket_leaves_the_broker_running_unreachable_until_it_restarts() {
    let _serial = serial();
    let root = data_root();
    let cfg = acme_config(root.path());
    let mut broker = Broker::boot(root.path(), &cfg);
    let lead = broker.agent("lead-1");
    lead.claim();
    let id = lead.send("dev", "before", json!({}));
    std::fs::remove_file(&broker.socket).expect("delete the socket");

    // Nobody new reaches it: nothing is sent.
    lead.refused(
        "message.send",
        json!({"to": "dev", "body": "unsent"}),
        "broker-unavailable",
    );
    // It still runs: the host's channel answers, and it still holds the
    // data root against a second broker.
    let arch = broker.bind_ok(&launch("acme", "arch", "arch-2"));
    arch.refused("role.claim", json!({}), "broker-unavailable");
    let mut second = Broker::spawn(root.path());
    assert_eq!(
        second.host(&boot_line(&cfg)),
        json!({"ok": false, "error": "lock-held"})
    );
    assert_eq!(second.wait(), 2);

    // Close finds the socket already gone, which is what it wanted: a clean
    // close, exit 0, the lock removed.
    broker.send(r#"{"op":"close"}"#);
    assert_eq!(broker.wait(), 0, "{}", broker.stderr());
    assert_gone(root.path());

    // A restart serves again, with everything acknowledged.
    let broker = Broker::boot(root.path(), &cfg);
    assert_eq!(
        broker
            .agent("lead-1")
            .trail_kinds(id.as_str().expect("an id")),
        ["message.sent"]
    );
    broker.close();
    assert_eq!(stored_bodies(root.path()), ["before"]);
    assert_whole_transactions(root.path());
}

#[test]
fn deleting_the_wal_under_a_running_broker_then_closing_keeps_everything() {
    let _serial = serial();
    let root = data_root();
    let cfg = acme_config(root.path());
    let broker = Broker::boot(root.path(), &cfg);
    let (lead, dev) = (broker.agent("lead-1"), broker.agent("dev-1"));
    lead.claim();
    dev.claim();
    for body in bodies("before", 3) {
        lead.send("dev", &body, json!({}));
    }
    let wal = root.path().join("bus").join("bus.sqlite-wal");
    std::fs::remove_file(&wal).expect("delete the WAL");

    // SQLite keeps writing to the open (now nameless) WAL: writes and reads
    // go on as before.
    let after: Vec<Value> = bodies("after", 3)
        .iter()
        .map(|body| lead.send("dev", body, json!({})))
        .collect();
    assert_eq!(
        lead.trail_kinds(after[2].as_str().expect("an id")),
        ["message.sent"]
    );
    let received = dev.ok("message.receive", json!({}));
    assert_eq!(received.as_array().map(Vec::len), Some(6), "{received}");
    assert!(!wal.exists(), "no new WAL appears");

    // A clean close checkpoints that WAL into the database file.
    broker.close();
    let mut expected = bodies("before", 3);
    expected.extend(bodies("after", 3));
    assert_eq!(stored_bodies(root.path()), expected);
    assert_whole_transactions(root.path());
    Broker::boot(root.path(), &cfg).close();
}

/// A data-loss hazard, pinned as it is: once the WAL
/// file is deleted under a running broker, everything written since the
/// last checkpoint lives only in a nameless file. A crash then loses all of
/// it, acknowledged writes included; `unlock`'s evidence copy cannot save
/// it, and the verified open cannot notice, because what is left is a
/// consistent older store. On a data root that never checkpointed, nothing
/// is left at all and the next boot refuses `schema-mismatch`.
#[test]
fn deleting_the_wal_then_crashing_keeps_every_write_acknowledged_after_the_deletion() {
    let _serial = serial();
    let root = data_root();
    let cfg = acme_config(root.path());
    let broker = Broker::boot(root.path(), &cfg);
    let lead = broker.agent("lead-1");
    lead.claim();
    // Never checkpointed: these live only in the WAL when it is deleted.
    let mut acknowledged: Vec<Value> = bodies("in-wal", 3)
        .iter()
        .map(|body| lead.send("dev", body, json!({})))
        .collect();
    std::fs::remove_file(root.path().join("bus").join("bus.sqlite-wal")).expect("delete the WAL");
    // The first commit after the deletion finds the WAL's name gone and
    // copies every frame into the database file before it is acknowledged.
    acknowledged.extend(
        bodies("nameless-wal", 3)
            .iter()
            .map(|body| lead.send("dev", body, json!({}))),
    );
    broker.kill();
    unlock(root.path());

    let broker = Broker::boot(root.path(), &cfg);
    let reader = broker.reader(0);
    for id in &acknowledged {
        assert_eq!(
            reader.trail_kinds(id.as_str().expect("an id")),
            ["message.sent"]
        );
    }
    broker.close();
    let mut expected = bodies("in-wal", 3);
    expected.extend(bodies("nameless-wal", 3));
    assert_eq!(stored_bodies(root.path()), expected);
    assert_whole_transactions(root.path());
}
