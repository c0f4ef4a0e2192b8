//! The data root and the single-writer lock against real files, real
//! `flock`s and real processes (`hold_lock` takes the lock as a broker does
//! and is killed with SIGKILL to leave it behind as a crash does).
//!
//! Every test works in its own private folder under the system temp dir and
//! removes it at the end. The tests run one at a time ([`serial`]): a child
//! spawned by one test inherits, between its fork and its exec, every open
//! file of the test process, and with it any `flock` another test has just
//! dropped, which would make that test see `lock-held` by chance. The foreign-owner cases `chown` to uid 65534, so
//! they need root (as CI runs).

use std::fs::DirBuilder;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use mosaic_adapters::fs::{
    check_private_file, check_private_socket, create_private_file, unlock, DataRoot, WriterLock,
};
use mosaic_adapters::procfs::ProcFs;
use mosaic_domain::{Refusal, Timestamp};
use mosaic_ports::fakes::{FakeProcess, FakeProcessTable};
use mosaic_ports::ProcessTable;

// --- Harness ----------------------------------------------------------------

/// Held for the whole of each test, so no test forks while another one
/// relies on a dropped `flock` being free. A failed test only poisons it.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A private folder (mode 0700) under the temp dir, removed on drop.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mosaic-data-root-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .expect("create the scratch folder");
        Self { dir }
    }

    /// A new data root `name` inside the scratch folder, mode 0700.
    fn root(&self, name: &str) -> PathBuf {
        let root = self.dir.join(name);
        DirBuilder::new()
            .mode(0o700)
            .create(&root)
            .expect("create a data root");
        root
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[track_caller]
fn refused<T: std::fmt::Debug>(result: Result<T, Refusal>, expected: Refusal) {
    match result {
        Err(refusal) => assert_eq!(refusal, expected, "wrong refusal"),
        Ok(value) => panic!("expected {expected}, got Ok({value:?})"),
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).expect("lstat").mode() & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Gives `path` to uid/gid 65534 (nobody). Needs root.
#[track_caller]
fn give_away(path: &Path) {
    std::os::unix::fs::lchown(path, Some(65534), Some(65534))
        .expect("chown to 65534 (these tests run as root)");
}

fn own_identity() -> (u32, u64) {
    let me = ProcFs::new().current().expect("read our own /proc entry");
    (me.pid, me.start_time)
}

fn time(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("a canonical timestamp")
}

/// A `hold_lock` child that has taken the lock of `root`.
struct Holder {
    child: Child,
    stdin: ChildStdin,
    pid: u32,
    start_time: u64,
}

impl Holder {
    /// Spawns `hold_lock root` and waits for its `locked PID START` line.
    fn spawn(root: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hold_lock"))
            .arg(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn hold_lock");
        let stdin = child.stdin.take().expect("stdin");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read hold_lock's line");
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.first(), Some(&"locked"), "hold_lock said {line:?}");
        let pid: u32 = fields[1].parse().expect("pid");
        assert_eq!(pid, child.id());
        Self {
            pid,
            start_time: fields[2].parse().expect("start time"),
            child,
            stdin,
        }
    }

    /// SIGKILL, then reap: afterwards the pid is free and the lock is left.
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        let status = self.child.wait().expect("reap");
        assert!(!status.success());
        drop(self.stdin);
    }
}

// --- The data root ----------------------------------------------------------

#[test]
fn bus_is_created_0700_and_the_lock_file_is_0600() {
    let _serial = serial();
    let scratch = Scratch::new("modes");
    let root = DataRoot::open(scratch.root("d")).expect("open");
    assert_eq!(root.bus_dir(), scratch.dir.join("d/bus"));
    assert_eq!(root.db_path(), scratch.dir.join("d/bus/bus.sqlite"));
    assert_eq!(root.lock_path(), scratch.dir.join("d/bus/writer.lock"));
    assert_eq!(root.socket_path(), scratch.dir.join("d/bus/bus.sock"));
    assert_eq!(mode(root.bus_dir()), 0o700);

    let (pid, start) = own_identity();
    let lock = WriterLock::acquire(&root, pid, start).expect("acquire");
    assert_eq!(lock.path(), root.lock_path());
    assert_eq!(mode(&root.lock_path()), 0o600);
    assert_eq!(
        std::fs::read_to_string(root.lock_path()).expect("read"),
        format!("{pid} {start}\n")
    );
    assert_eq!(check_private_file(&root.lock_path()), Ok(()));

    // Reopening an existing, correct root is fine and changes nothing.
    let again = DataRoot::open(root.root()).expect("reopen");
    assert_eq!(mode(again.bus_dir()), 0o700);

    lock.release().expect("release");
    assert!(!root.lock_path().exists(), "a clean close removes the lock");
}

#[test]
fn a_root_open_to_group_or_other_writes_is_unsafe() {
    let _serial = serial();
    let scratch = Scratch::new("root-modes");
    let path = scratch.root("d");
    for unsafe_mode in [0o770, 0o720, 0o702, 0o777] {
        chmod(&path, unsafe_mode);
        refused(DataRoot::open(&path), Refusal::UnsafePath);
    }
    assert!(!path.join("bus").exists(), "a refused root is left alone");
    // Readable by others is not a risk to the bus: only write bits count.
    chmod(&path, 0o755);
    DataRoot::open(&path).expect("a 0755 root is fine");
}

#[test]
fn a_missing_or_symlinked_or_non_directory_root_is_unsafe() {
    let _serial = serial();
    let scratch = Scratch::new("root-kinds");
    refused(
        DataRoot::open(scratch.dir.join("missing")),
        Refusal::UnsafePath,
    );

    let real = scratch.root("real");
    let link = scratch.dir.join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    refused(DataRoot::open(&link), Refusal::UnsafePath);

    let file = scratch.dir.join("file");
    std::fs::write(&file, b"").expect("write");
    refused(DataRoot::open(&file), Refusal::UnsafePath);
}

#[test]
fn a_symlinked_bus_is_unsafe() {
    let _serial = serial();
    let scratch = Scratch::new("bus-link");
    let path = scratch.root("d");
    let elsewhere = scratch.root("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, path.join("bus")).expect("symlink");
    refused(DataRoot::open(&path), Refusal::UnsafePath);
    // A dangling link is refused too, and nothing is created through it.
    std::fs::remove_dir(&elsewhere).expect("rmdir");
    refused(DataRoot::open(&path), Refusal::UnsafePath);
    assert!(!elsewhere.exists());
}

#[test]
fn a_bus_with_any_mode_but_0700_is_unsafe() {
    let _serial = serial();
    let scratch = Scratch::new("bus-modes");
    let path = scratch.root("d");
    DataRoot::open(&path).expect("create bus/");
    for unsafe_mode in [0o750, 0o701, 0o705, 0o500, 0o1700] {
        chmod(&path.join("bus"), unsafe_mode);
        refused(DataRoot::open(&path), Refusal::UnsafePath);
        // Refused, never repaired.
        assert_eq!(mode(&path.join("bus")), unsafe_mode);
    }
    chmod(&path.join("bus"), 0o700);
    DataRoot::open(&path).expect("0700 again");

    // A `bus` that is a file is no directory.
    let other = scratch.root("e");
    std::fs::write(other.join("bus"), b"").expect("write");
    refused(DataRoot::open(&other), Refusal::UnsafePath);
}

#[test]
fn foreign_owned_paths_are_unsafe() {
    let _serial = serial();
    let scratch = Scratch::new("owners");

    let path = scratch.root("root-owner");
    give_away(&path);
    refused(DataRoot::open(&path), Refusal::UnsafePath);

    let path = scratch.root("bus-owner");
    let root = DataRoot::open(&path).expect("open");
    give_away(root.bus_dir());
    refused(DataRoot::open(&path), Refusal::UnsafePath);

    let path = scratch.root("lock-owner");
    let root = DataRoot::open(&path).expect("open");
    drop(create_private_file(&root.lock_path()).expect("create"));
    give_away(&root.lock_path());
    let (pid, start) = own_identity();
    refused(WriterLock::acquire(&root, pid, start), Refusal::UnsafePath);
    refused(
        unlock(&root, &ProcFs::new(), time("2026-01-01T00:00:00.000Z")),
        Refusal::UnsafePath,
    );
    assert!(root.lock_path().exists(), "a refused lock is left in place");

    let db = root.db_path();
    drop(create_private_file(&db).expect("create"));
    assert_eq!(check_private_file(&db), Ok(()));
    give_away(&db);
    refused(check_private_file(&db), Refusal::UnsafePath);
}

#[test]
fn private_files_must_be_regular_0600_and_not_symlinks() {
    let _serial = serial();
    let scratch = Scratch::new("private");
    let root = DataRoot::open(scratch.root("d")).expect("open");
    let db = root.db_path();
    refused(check_private_file(&db), Refusal::StorageUnavailable);

    let file = create_private_file(&db).expect("create");
    assert_eq!(mode(&db), 0o600);
    drop(file);
    refused(create_private_file(&db), Refusal::UnsafePath);
    for unsafe_mode in [0o640, 0o604, 0o700, 0o400, 0o4600] {
        chmod(&db, unsafe_mode);
        refused(check_private_file(&db), Refusal::UnsafePath);
    }
    chmod(&db, 0o600);
    assert_eq!(check_private_file(&db), Ok(()));

    let link = root.bus_dir().join("link.sqlite");
    std::os::unix::fs::symlink(&db, &link).expect("symlink");
    refused(check_private_file(&link), Refusal::UnsafePath);
    refused(create_private_file(&link), Refusal::UnsafePath);
    refused(check_private_file(root.bus_dir()), Refusal::UnsafePath);

    // A socket passes the socket check, not the file check, and the other
    // way round.
    let socket = root.socket_path();
    let listener = UnixListener::bind(&socket).expect("bind");
    chmod(&socket, 0o600);
    assert_eq!(check_private_socket(&socket), Ok(()));
    refused(check_private_file(&socket), Refusal::UnsafePath);
    refused(check_private_socket(&db), Refusal::UnsafePath);
    chmod(&socket, 0o660);
    refused(check_private_socket(&socket), Refusal::UnsafePath);
    drop(listener);
}

#[test]
fn an_unsafe_existing_lock_file_is_refused_before_any_flock() {
    let _serial = serial();
    let scratch = Scratch::new("lock-kinds");
    let root = DataRoot::open(scratch.root("d")).expect("open");
    let (pid, start) = own_identity();

    // A symlink where the lock belongs, even to a perfectly private file.
    let target = root.bus_dir().join("target");
    drop(create_private_file(&target).expect("create"));
    std::os::unix::fs::symlink(&target, root.lock_path()).expect("symlink");
    refused(WriterLock::acquire(&root, pid, start), Refusal::UnsafePath);
    std::fs::remove_file(root.lock_path()).expect("rm");

    drop(create_private_file(&root.lock_path()).expect("create"));
    chmod(&root.lock_path(), 0o644);
    refused(WriterLock::acquire(&root, pid, start), Refusal::UnsafePath);
}

// --- The single writer ------------------------------------------------------

#[test]
fn a_second_acquire_while_the_first_is_held_gets_lock_held() {
    let _serial = serial();
    let scratch = Scratch::new("second");
    let root = DataRoot::open(scratch.root("d")).expect("open");
    let (pid, start) = own_identity();
    let first = WriterLock::acquire(&root, pid, start).expect("first");
    refused(WriterLock::acquire(&root, pid, start), Refusal::LockHeld);
    // The refused attempt left the holder's record alone.
    assert_eq!(
        std::fs::read_to_string(root.lock_path()).expect("read"),
        format!("{pid} {start}\n")
    );
    first.release().expect("release");
    let next = WriterLock::acquire(&root, pid, start).expect("after a clean close");
    next.release().expect("release");
}

#[test]
fn another_process_holding_the_lock_gives_lock_held() {
    let _serial = serial();
    let scratch = Scratch::new("other-process");
    let path = scratch.root("d");
    let root = DataRoot::open(&path).expect("open");
    let holder = Holder::spawn(&path);
    assert_eq!(
        std::fs::read_to_string(root.lock_path()).expect("read"),
        format!("{} {}\n", holder.pid, holder.start_time)
    );
    let (pid, start) = own_identity();
    refused(WriterLock::acquire(&root, pid, start), Refusal::LockHeld);

    // Closing its stdin makes it release cleanly: the file goes with it.
    let Holder {
        mut child, stdin, ..
    } = holder;
    drop(stdin);
    assert!(child.wait().expect("reap").success());
    assert!(!root.lock_path().exists());
    WriterLock::acquire(&root, pid, start)
        .expect("free again")
        .release()
        .expect("release");
}

#[test]
fn a_dropped_lock_is_left_behind_as_stale() {
    let _serial = serial();
    let scratch = Scratch::new("dropped");
    let root = DataRoot::open(scratch.root("d")).expect("open");
    let (pid, start) = own_identity();
    drop(WriterLock::acquire(&root, pid, start).expect("acquire"));
    assert!(root.lock_path().exists(), "drop is not a clean close");
    refused(WriterLock::acquire(&root, pid, start), Refusal::StaleLock);
}

#[test]
fn a_broker_killed_with_sigkill_leaves_a_stale_lock_that_is_never_reclaimed() {
    let _serial = serial();
    let scratch = Scratch::new("sigkill");
    let path = scratch.root("d");
    let root = DataRoot::open(&path).expect("open");
    let holder = Holder::spawn(&path);
    let record = format!("{} {}\n", holder.pid, holder.start_time);
    holder.kill();

    assert!(root.lock_path().exists(), "SIGKILL leaves the lock");
    let (pid, start) = own_identity();
    for _ in 0..2 {
        refused(WriterLock::acquire(&root, pid, start), Refusal::StaleLock);
        // No reclaim: the file, its record and its mode are untouched.
        assert_eq!(
            std::fs::read_to_string(root.lock_path()).expect("read"),
            record
        );
        assert_eq!(mode(&root.lock_path()), 0o600);
    }
}

// --- unlock -----------------------------------------------------------------

/// Known bytes for each database file, all different.
const DB_FILES: [(&str, &[u8]); 3] = [
    ("bus.sqlite", b"SQLite format 3\0 main database bytes"),
    (
        "bus.sqlite-wal",
        b"\x37\x7f\x06\x82 write-ahead log bytes\0\xff",
    ),
    ("bus.sqlite-shm", b"shared memory index \x00\x01\x02"),
];

fn write_db_files(root: &DataRoot) {
    for (name, bytes) in DB_FILES {
        let path = root.bus_dir().join(name);
        drop(create_private_file(&path).expect("create"));
        std::fs::write(&path, bytes).expect("write");
    }
}

/// Everything in `bus/` but evidence folders, with each regular file's
/// bytes: what `unlock` must leave alone.
fn bus_listing(root: &DataRoot) -> Vec<(String, Option<Vec<u8>>)> {
    let mut entries: Vec<_> = std::fs::read_dir(root.bus_dir())
        .expect("read bus/")
        .map(|entry| {
            let entry = entry.expect("entry");
            let name = entry.file_name().into_string().expect("utf-8 name");
            let meta = entry.path().symlink_metadata().expect("lstat");
            let bytes = meta
                .file_type()
                .is_file()
                .then(|| std::fs::read(entry.path()).expect("read"));
            (name, bytes)
        })
        .collect();
    entries.sort();
    entries
}

#[test]
fn unlock_refuses_while_the_broker_lives_and_preserves_evidence_after_sigkill() {
    let _serial = serial();
    let scratch = Scratch::new("unlock");
    let path = scratch.root("d");
    let root = DataRoot::open(&path).expect("open");
    write_db_files(&root);
    std::fs::write(root.bus_dir().join("notes.txt"), b"not ours to remove").expect("write");
    let listener = UnixListener::bind(root.socket_path()).expect("bind");
    chmod(&root.socket_path(), 0o600);

    let holder = Holder::spawn(&path);
    let now = time("2026-05-06T07:08:09.123Z");
    let before = bus_listing(&root);
    refused(unlock(&root, &ProcFs::new(), now), Refusal::LockHeld);
    assert_eq!(
        bus_listing(&root),
        before,
        "a refused unlock touches nothing"
    );
    holder.kill();

    let evidence = unlock(&root, &ProcFs::new(), now).expect("unlock after SIGKILL");
    assert_eq!(
        evidence,
        root.bus_dir().join("evidence-2026-05-06T07-08-09-123Z")
    );
    assert_eq!(mode(&evidence), 0o700);
    let mut copied: Vec<String> = std::fs::read_dir(&evidence)
        .expect("read evidence")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .collect();
    copied.sort();
    assert_eq!(
        copied,
        ["bus.sqlite", "bus.sqlite-shm", "bus.sqlite-wal"],
        "exactly the DB, WAL and SHM"
    );
    for (name, bytes) in DB_FILES {
        assert_eq!(
            std::fs::read(evidence.join(name)).expect("copy"),
            bytes,
            "{name} copy"
        );
        assert_eq!(mode(&evidence.join(name)), 0o600, "{name} copy mode");
        assert_eq!(
            std::fs::read(root.bus_dir().join(name)).expect("original"),
            bytes,
            "{name} original"
        );
    }

    // Only the lock and the socket are gone.
    let expected: Vec<_> = before
        .into_iter()
        .filter(|(name, _)| name != "writer.lock" && name != "bus.sock")
        .chain([(
            "evidence-2026-05-06T07-08-09-123Z".to_owned(),
            None::<Vec<u8>>,
        )])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(bus_listing(&root), expected);
    drop(listener);

    // Nothing left to unlock; a new broker starts.
    refused(unlock(&root, &ProcFs::new(), now), Refusal::NoLock);
    let (pid, start) = own_identity();
    WriterLock::acquire(&root, pid, start)
        .expect("a broker starts again")
        .release()
        .expect("release");
    assert!(evidence.join("bus.sqlite").exists(), "evidence is kept");
}

#[test]
fn unlock_checks_the_recorded_process_even_when_nobody_holds_the_flock() {
    let _serial = serial();
    let scratch = Scratch::new("unlock-proof");
    let root = DataRoot::open(scratch.root("d")).expect("open");
    let now = time("2026-05-06T07:08:09.123Z");

    // The record names this very process (alive, same start time), but its
    // flock is gone: still not provably dead.
    let (pid, start) = own_identity();
    drop(WriterLock::acquire(&root, pid, start).expect("acquire"));
    refused(unlock(&root, &ProcFs::new(), now), Refusal::LockHeld);
    assert!(root.lock_path().exists());
    assert!(!root
        .bus_dir()
        .join("evidence-2026-05-06T07-08-09-123Z")
        .exists());
    std::fs::remove_file(root.lock_path()).expect("test cleanup");

    // Same pid, another start time: the pid was reused, the broker is gone.
    drop(WriterLock::acquire(&root, pid, start + 1).expect("acquire"));
    let evidence = unlock(&root, &ProcFs::new(), now).expect("unlock");
    assert!(!root.lock_path().exists());
    assert_eq!(
        std::fs::read_dir(&evidence).expect("evidence").count(),
        0,
        "no database files, nothing copied"
    );

    // The same rule through a synthetic table.
    let table = FakeProcessTable::new().with(FakeProcess::new(4242, 1).start_time(7));
    assert_eq!(table.process(4242).map(|p| p.start_time).ok(), Some(7));
    drop(WriterLock::acquire(&root, 4242, 7).expect("acquire"));
    refused(unlock(&root, &table, now), Refusal::LockHeld);
    table.insert(FakeProcess::new(4242, 1).start_time(8));
    unlock(&root, &table, time("2026-05-06T07:08:09.124Z")).expect("pid reused");
    drop(WriterLock::acquire(&root, 4242, 7).expect("acquire"));
    table.remove(4242);
    unlock(&root, &table, time("2026-05-06T07:08:09.125Z")).expect("gone");
}

#[test]
fn unlock_refuses_a_lock_it_cannot_read_and_touches_nothing() {
    let _serial = serial();
    let scratch = Scratch::new("unlock-malformed");
    let root = DataRoot::open(scratch.root("d")).expect("open");
    write_db_files(&root);
    let table = FakeProcessTable::new();
    for content in [&b""[..], b"4242\n", b"4242 7", b"x 7\n", b"4242 7 8\n"] {
        std::fs::write(root.lock_path(), content).expect("write");
        chmod(&root.lock_path(), 0o600);
        let before = bus_listing(&root);
        refused(
            unlock(&root, &table, time("2026-05-06T07:08:09.123Z")),
            Refusal::StaleLock,
        );
        assert_eq!(bus_listing(&root), before);
    }
}

#[test]
fn unlock_refuses_a_socket_path_that_is_no_socket() {
    let _serial = serial();
    let scratch = Scratch::new("unlock-socket");
    let root = DataRoot::open(scratch.root("d")).expect("open");
    drop(WriterLock::acquire(&root, 4242, 7).expect("acquire"));
    std::fs::write(root.socket_path(), b"a regular file").expect("write");
    let before = bus_listing(&root);
    refused(
        unlock(
            &root,
            &FakeProcessTable::new(),
            time("2026-05-06T07:08:09.123Z"),
        ),
        Refusal::UnsafePath,
    );
    assert_eq!(bus_listing(&root), before);
}
