//! Nothing an agent writes can take the disk from the human: the room on
//! the data root's disk, space and files (inodes), is checked at boot,
//! before each launch is bound, and when the host asks
//! (`Broker::check_disk`), and without it agents are refused
//! `storage-unavailable` until the reserve is taken again, while the human
//! is served. A real `mosaic-bus broker` child on a small tmpfs, the human
//! CLI run detached from outside, and `verify` on the store afterwards.
//!
//! The tmpfs is mounted as root, or in a re-run of the test inside its own
//! user and mount namespaces (`support::tmpfs`). Tests run one at a time:
//! they mount file systems, and a broker spawned by one test must not
//! inherit another test's files.

#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};

use mosaic_adapters::config::boot_from_value;
use mosaic_app::runtime::start_broker;
use mosaic_domain::Refusal;
use serde_json::{json, Value};

use support::detached::{detached, Pending};
use support::tmpfs::Tmpfs;
use support::{acme, acme_launches, config, launch, stand_in, Broker, BIN};

fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The human CLI from outside, detached from this test: its answer line.
fn human(socket: &Path, verb: &str, args: Value) -> Value {
    let mut command = detached();
    command.arg(BIN).arg("human").arg(socket);
    let request = json!({"business": "acme", "verb": verb, "args": args});
    Pending::start(&mut command)
        .finish(format!("{request}\n").as_bytes())
        .ok()
}

/// `mosaic-bus verify` passes on the data root's store.
#[track_caller]
fn verified(root: &Path) {
    let verify = Command::new(BIN)
        .args(["verify", "--db"])
        .arg(root.join("bus/bus.sqlite"))
        .output()
        .expect("mosaic-bus verify");
    assert!(
        verify.status.success(),
        "verify: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

/// A launch record of the second stand-in, which no boot launch names.
fn another_launch(run: &str) -> Value {
    let mut record = launch("acme", "dev", run);
    record["pid"] = stand_in(1).pid.into();
    record["startTime"] = stand_in(1).start_time.into();
    record
}

/// An agent that took every free file of the disk: the next launch is
/// refused `storage-unavailable` (the room is measured before it is
/// bound), and from then on every agent's write, while the human's
/// `message.send` and `launch.revoke` are served; once the files are
/// freed, agents and launches are served again.
#[test]
fn without_files_to_spare_launches_and_agents_are_refused_and_the_human_served() {
    let _serial = serial();
    Tmpfs::with_options(
        "size=16m,nr_inodes=4096",
        "without_files_to_spare_launches_and_agents_are_refused_and_the_human_served",
        |fs| {
            let root = fs.path().join("data");
            support::up::private_dir(&root);
            let cfg = config(&root, &[acme()], &acme_launches(), &["acme"]);
            let mut broker = Broker::boot(&root, &cfg);
            let lead = broker.agent("lead-1");
            lead.claim();
            lead.send("human", "with files to spare", json!({}));

            let files = fs.fill_files();
            assert_eq!(
                broker.bind_launch(&another_launch("dev-3")),
                json!({"ok": false, "error": "storage-unavailable"})
            );
            lead.refused(
                "message.send",
                json!({"to": "human", "body": "without files to spare"}),
                "storage-unavailable",
            );
            let sent = human(
                &broker.socket,
                "message.send",
                json!({"to": "lead", "body": "the human, without files"}),
            );
            assert!(sent["id"].is_string(), "{sent}");
            assert_eq!(human(&broker.socket, "launch.revoke", json!({})), json!({}));
            assert_eq!(
                human(&broker.socket, "launch.restore", json!({})),
                json!({})
            );

            std::fs::remove_dir_all(files).expect("free the files");
            lead.send("human", "files freed", json!({}));
            broker.bind_ok(&another_launch("dev-3"));
            let log = broker.close();
            assert!(
                log.contains("too little room on the disk (space or files)"),
                "{log}"
            );
            assert!(log.contains("space returned"), "{log}");
            verified(&root);
        },
    );
}

/// A broker that boots where an earlier run's agent left its junk: the
/// reserve is empty (released when the disk filled) and the disk has less
/// room than the reserve needs. Agents are refused from the start, so the
/// room left is the human's; once the junk is gone, they are served.
#[test]
fn a_broker_booted_without_room_for_its_reserve_refuses_agents_and_serves_the_human() {
    let _serial = serial();
    Tmpfs::with(
        "8m",
        "a_broker_booted_without_room_for_its_reserve_refuses_agents_and_serves_the_human",
        |fs| {
            let root = fs.path().join("data");
            support::up::private_dir(&root);
            let cfg = config(&root, &[acme()], &acme_launches(), &["acme"]);
            Broker::boot(&root, &cfg).close();
            // What a full disk left: the reserve released, the disk full
            // but for a gap smaller than the reserve.
            let reserve = root.join("bus").join(mosaic_adapters::sqlite::RESERVE_FILE);
            std::fs::write(&reserve, b"").expect("empty the reserve");
            let gap = fs.path().join("gap");
            std::fs::write(&gap, vec![0_u8; 256 * 1024]).expect("the gap");
            let junk = fs.fill();
            std::fs::remove_file(&gap).expect("open the gap");

            let broker = Broker::boot(&root, &cfg);
            let lead = broker.agent("lead-1");
            lead.refused("role.claim", json!({}), "storage-unavailable");
            let sent = human(
                &broker.socket,
                "message.send",
                json!({"to": "lead", "body": "the human, on the junk"}),
            );
            assert!(sent["id"].is_string(), "{sent}");

            std::fs::remove_file(junk).expect("remove the junk");
            lead.claim();
            let inbox = lead.ok("inbox", json!({}));
            assert!(
                inbox.to_string().contains("the human, on the junk"),
                "{inbox}"
            );
            assert!(
                std::fs::metadata(&reserve).expect("the reserve").len() > 0,
                "the reserve is taken again"
            );
            let log = broker.close();
            assert!(log.contains("no room for the disk reserve"), "{log}");
            verified(&root);
        },
    );
}

/// The host's own check before it starts a run: `Broker::check_disk`
/// answers `storage-unavailable` while the disk has no files to spare,
/// and `ok` again once it has.
#[test]
fn the_host_asks_the_broker_for_room_before_it_starts_a_run() {
    let _serial = serial();
    Tmpfs::with_options(
        "size=16m,nr_inodes=4096",
        "the_host_asks_the_broker_for_room_before_it_starts_a_run",
        |fs| {
            let root = fs.path().join("data");
            support::up::private_dir(&root);
            let config = boot_from_value(json!({
                "dataRoot": root,
                "businesses": {"acme": acme()},
                "launches": [],
                "readers": ["acme"],
                "repoRoots": [],
            }))
            .expect("a boot configuration");
            let (broker, _booted) = start_broker(config).expect("the broker starts");
            assert_eq!(broker.check_disk(), Ok(()));
            let files = fs.fill_files();
            assert_eq!(broker.check_disk(), Err(Refusal::StorageUnavailable));
            std::fs::remove_dir_all(files).expect("free the files");
            assert_eq!(broker.check_disk(), Ok(()));
            broker.close().expect("a clean close");
        },
    );
}
