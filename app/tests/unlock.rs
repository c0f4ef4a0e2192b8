//! `mosaic-bus unlock --data-root D`, end to end: the real binary against
//! real files and the real `/proc`.
//!
//! Tests run one at a time ([`serial`]): the binary spawned by one test
//! inherits, until its exec, the files another test has open, and with them
//! a `flock` that test may rely on having dropped.

use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use mosaic_adapters::fs::{create_private_file, DataRoot, WriterLock};
use mosaic_adapters::procfs::ProcFs;
use serde_json::{json, Value};

fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A private data root (mode 0700) under the temp dir, removed on drop.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mosaic-unlock-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .expect("create the data root");
        Self { dir }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `mosaic-bus ARGS`: its single stdout line as JSON, and its exit code.
#[track_caller]
fn mosaic_bus(args: &[&std::ffi::OsStr]) -> (Value, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_mosaic-bus"))
        .args(args)
        .output()
        .expect("run mosaic-bus");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    assert_eq!(stdout.lines().count(), 1, "one line, got {stdout:?}");
    assert!(out.stderr.is_empty(), "stderr: {:?}", out.stderr);
    (
        serde_json::from_str(&stdout).expect("a JSON line"),
        out.status.code().expect("an exit code"),
    )
}

#[track_caller]
fn unlock(root: &Path) -> (Value, i32) {
    mosaic_bus(&["unlock".as_ref(), "--data-root".as_ref(), root.as_os_str()])
}

/// A pid with no process: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("/bin/true").spawn().expect("spawn");
    let pid = child.id();
    child.wait().expect("reap");
    pid
}

const DB_FILES: [(&str, &[u8]); 3] = [
    ("bus.sqlite", b"SQLite format 3\0 database"),
    ("bus.sqlite-wal", b"wal \x00\xff bytes"),
    ("bus.sqlite-shm", b"shm bytes"),
];

#[test]
fn unlock_refuses_a_live_broker_then_preserves_evidence_and_clears_the_lock() {
    let _serial = serial();
    let scratch = Scratch::new("e2e");
    let root = DataRoot::open(&scratch.dir).expect("open");
    for (name, bytes) in DB_FILES {
        let path = root.bus_dir().join(name);
        drop(create_private_file(&path).expect("create"));
        std::fs::write(&path, bytes).expect("write");
    }
    let listener = UnixListener::bind(root.socket_path()).expect("bind");

    // A live broker (this test process) holds the lock.
    let me = ProcFs::new().current().expect("self");
    let held = WriterLock::acquire(&root, me.pid, me.start_time).expect("acquire");
    assert_eq!(
        unlock(&scratch.dir),
        (json!({"ok": false, "error": "lock-held"}), 2)
    );
    // Its flock gone but its process alive with the recorded start time:
    // still refused.
    drop(held);
    assert_eq!(
        unlock(&scratch.dir),
        (json!({"ok": false, "error": "lock-held"}), 2)
    );
    assert!(root.lock_path().exists());
    assert!(root.socket_path().exists());
    std::fs::remove_file(root.lock_path()).expect("test setup");

    // A crashed broker: its pid is free.
    drop(WriterLock::acquire(&root, dead_pid(), me.start_time).expect("acquire"));
    let (reply, code) = unlock(&scratch.dir);
    assert_eq!(code, 0, "{reply}");
    let object = reply.as_object().expect("an object");
    assert_eq!(object.len(), 2, "{reply}");
    assert_eq!(object.get("ok"), Some(&json!(true)));
    let evidence = PathBuf::from(object["evidence"].as_str().expect("a path"));
    assert_eq!(evidence.parent(), Some(root.bus_dir()));
    let name = evidence.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(
        name.starts_with("evidence-") && name.ends_with('Z'),
        "{name}"
    );
    assert!(!name.contains([':', '.']), "{name}");
    assert_eq!(
        std::fs::symlink_metadata(&evidence).expect("lstat").mode() & 0o7777,
        0o700
    );
    for (name, bytes) in DB_FILES {
        assert_eq!(std::fs::read(evidence.join(name)).expect("copy"), bytes);
        assert_eq!(
            std::fs::read(root.bus_dir().join(name)).expect("original"),
            bytes
        );
    }
    assert!(!root.lock_path().exists(), "the lock is removed");
    assert!(!root.socket_path().exists(), "the socket is removed");
    drop(listener);

    // Nothing left to unlock.
    assert_eq!(
        unlock(&scratch.dir),
        (json!({"ok": false, "error": "no-lock"}), 2)
    );
    assert!(evidence.join("bus.sqlite").exists(), "evidence is kept");
}

#[test]
fn unlock_refuses_an_unsafe_root_and_bad_arguments() {
    let _serial = serial();
    let scratch = Scratch::new("unsafe");
    std::fs::set_permissions(&scratch.dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    assert_eq!(
        unlock(&scratch.dir),
        (json!({"ok": false, "error": "unsafe-path"}), 2)
    );
    assert!(!scratch.dir.join("bus").exists());

    let refused = (json!({"ok": false, "error": "bad-request"}), 2);
    assert_eq!(mosaic_bus(&["unlock".as_ref()]), refused);
    assert_eq!(
        mosaic_bus(&["unlock".as_ref(), "--data-root".as_ref()]),
        refused
    );
    assert_eq!(
        mosaic_bus(&[
            "unlock".as_ref(),
            "--root".as_ref(),
            scratch.dir.as_os_str()
        ]),
        refused
    );

    // The `=` form reaches the same checks.
    let mut flag = std::ffi::OsString::from("--data-root=");
    flag.push(&scratch.dir);
    assert_eq!(
        mosaic_bus(&["unlock".as_ref(), flag.as_os_str()]),
        (json!({"ok": false, "error": "unsafe-path"}), 2)
    );
}

#[test]
fn help_documents_unlock() {
    let _serial = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_mosaic-bus"))
        .args(["unlock", "--help"])
        .output()
        .expect("run");
    let help = String::from_utf8(out.stdout).expect("utf-8");
    assert!(out.status.success());
    for word in [
        "mosaic-bus unlock --data-root <D>",
        "lock-held",
        "stale-lock",
        "bad-request",
        "no-lock",
        "unsafe-path",
    ] {
        assert!(help.contains(word), "help lacks {word}");
    }
}
