//! The data root and the single-writer lock.
//!
//! Layout under a data root `D` (which the operator creates and owns):
//!
//! ```text
//! D/                          exists, real directory, ours, no group/other write
//! D/bus/                      created here with mode 0700, never chmod-ed
//! D/bus/bus.sqlite(-wal,-shm) the evidence store (adapters::sqlite), 0600
//! D/bus/writer.lock           "pid start_time\n" of the broker that holds it, 0600
//! D/bus/bus.sock              the socket (adapters::socket), 0600
//! D/bus/evidence-<time>/      copies made by `mosaic-bus unlock`, 0700 / 0600
//! ```
//!
//! Single writer: a broker creates `writer.lock` exclusively and holds an
//! `flock` on it for its whole life. A clean close unlinks the file while it
//! still holds the lock ([`WriterLock::release`]); a crash leaves the file
//! behind with nobody holding the `flock`, and the next start refuses with
//! `stale-lock`. Nothing here ever reclaims a stale lock by itself: only the
//! operator's [`unlock`] does, after proving that the recorded broker is gone
//! and after copying the database files into an evidence folder.
//!
//! Every failure is a [`Refusal`] with a static code; OS errors are mapped,
//! never shown. Only two libc calls are needed beyond `std` (`geteuid`,
//! `flock`); each sits in its own small function.

use std::fs::{DirBuilder, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::cause::logged;
use mosaic_domain::{Refusal, Timestamp};
use mosaic_ports::{ProcessError, ProcessTable};

/// Held while the process's umask is narrowed (`socket::bind_private`
/// sets 0177 around its `bind`) and while a private folder is made: under
/// that umask a folder made with mode 0700 would come out 0600. Files are
/// made 0600, which that umask leaves alone.
pub(crate) static UMASK_LOCK: Mutex<()> = Mutex::new(());

/// Makes the folder `path` with mode 0700 (and its missing parents, with
/// the same mode, when `recursive`), never while another thread of this
/// process has the umask narrowed (`socket::bind_private`). What the
/// process's own umask leaves of 0700 is what the folder gets.
///
/// # Errors
/// What `mkdir` fails with.
pub fn create_private_dir(path: &Path, recursive: bool) -> io::Result<()> {
    let _umask = UMASK_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    DirBuilder::new()
        .recursive(recursive)
        .mode(0o700)
        .create(path)
}

/// The database file, relative to `bus/`.
const DB_FILE: &str = "bus.sqlite";
/// The files of the database that `unlock` preserves, in this order.
const DB_FILES: [&str; 3] = ["bus.sqlite", "bus.sqlite-wal", "bus.sqlite-shm"];
/// The lock file, relative to `bus/`.
const LOCK_FILE: &str = "writer.lock";
/// The socket, relative to `bus/`.
const SOCKET_FILE: &str = "bus.sock";
/// The longest lock content we accept: two 20-digit numbers, a space and a
/// newline fit well within it.
const LOCK_CONTENT_MAX: u64 = 64;

/// A verified data root: it exists, is a real directory owned by this
/// process's effective uid without group or other write permission, and its
/// `bus/` is a real directory of ours with mode exactly 0700.
#[derive(Debug, Clone)]
pub struct DataRoot {
    root: PathBuf,
    bus: PathBuf,
}

impl DataRoot {
    /// Verifies the data root `path` and creates `bus/` (mode 0700) in it if
    /// absent.
    ///
    /// # Errors
    /// `unsafe-path` when the root is missing, is a symlink or not a
    /// directory, belongs to another uid, or is group- or other-writable;
    /// or when `bus/` cannot be created, or exists and is not a real
    /// directory of ours with mode exactly 0700.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Refusal> {
        let root = path.as_ref().to_path_buf();
        let meta = std::fs::symlink_metadata(&root)
            .map_err(|_| unsafe_path(&root, "the data root cannot be examined"))?;
        if !meta.file_type().is_dir() || !owned(&meta) || meta.mode() & 0o022 != 0 {
            return Err(unsafe_path(
                &root,
                "the data root is not a directory of ours that only we can write",
            ));
        }
        let bus = root.join("bus");
        // Created with its final mode; an existing one is checked as is and
        // never repaired, so a mode we did not set is always refused.
        match create_private_dir(&bus, false) {
            Ok(()) => sync_dir(&root)?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                crate::cause::log(Refusal::UnsafePath, "creating bus/ in the data root", &e);
                return Err(Refusal::UnsafePath);
            }
        }
        check_private_dir(&bus)?;
        Ok(Self { root, bus })
    }

    /// The data root itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `bus/`.
    pub fn bus_dir(&self) -> &Path {
        &self.bus
    }

    /// `bus/bus.sqlite`.
    pub fn db_path(&self) -> PathBuf {
        self.bus.join(DB_FILE)
    }

    /// `bus/writer.lock`.
    pub fn lock_path(&self) -> PathBuf {
        self.bus.join(LOCK_FILE)
    }

    /// `bus/bus.sock`.
    pub fn socket_path(&self) -> PathBuf {
        Self::socket_path_of(&self.root)
    }

    /// Where the socket of the data root `root` is, whether or not it
    /// exists yet (`up --dry-run` names it without making anything).
    pub fn socket_path_of(root: &Path) -> PathBuf {
        root.join("bus").join(SOCKET_FILE)
    }
}

/// Checks that `path` is a regular file (not a symlink) owned by this
/// process's effective uid with mode exactly 0600.
///
/// # Errors
/// `unsafe-path` when it is anything else; `storage-unavailable` when it
/// does not exist or cannot be examined.
pub fn check_private_file(path: &Path) -> Result<(), Refusal> {
    check_private(path, Kind::File)
}

/// Checks that `path` is a Unix socket (not a symlink) owned by this
/// process's effective uid with mode exactly 0600.
///
/// # Errors
/// As [`check_private_file`].
pub fn check_private_socket(path: &Path) -> Result<(), Refusal> {
    check_private(path, Kind::Socket)
}

/// Creates `path` as a new regular file with mode 0600 (never following a
/// symlink, never reusing an existing file) and checks the result, since a
/// umask could have taken bits away.
///
/// # Errors
/// `unsafe-path` when something exists at `path` or the new file is not
/// exactly 0600; `storage-unavailable` for other I/O failures.
pub fn create_private_file(path: &Path) -> Result<File, Refusal> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| io_refusal("creating a private file", &e))?;
    if !is_private(
        &file
            .metadata()
            .map_err(|e| io_refusal("reading a new private file's metadata", &e))?,
        Kind::File,
    ) {
        // We created it a moment ago, so removing it touches nothing else.
        let _ = std::fs::remove_file(path);
        return Err(Refusal::UnsafePath);
    }
    Ok(file)
}

/// The writer lock of one data root, held for the life of a broker.
///
/// Dropping it releases the `flock` but leaves the file, exactly as a crash
/// would; only [`WriterLock::release`] is a clean close.
#[derive(Debug)]
pub struct WriterLock {
    file: File,
    path: PathBuf,
    bus: PathBuf,
}

impl WriterLock {
    /// Takes the single-writer lock for the broker `pid`, whose `/proc` start
    /// time is `start_time`: creates `bus/writer.lock` exclusively (mode
    /// 0600), holds an exclusive `flock` on it and records
    /// `"{pid} {start_time}\n"`, synced to disk.
    ///
    /// # Errors
    /// - `lock-held` when another open lock (of a live broker) holds it;
    /// - `stale-lock` when the file exists but nobody holds it: a broker
    ///   crashed, and only `mosaic-bus unlock` may clear that;
    /// - `unsafe-path` when the existing file is a symlink, not a regular
    ///   file, not ours or not exactly 0600;
    /// - `storage-unavailable` for other I/O failures.
    pub fn acquire(root: &DataRoot, pid: u32, start_time: u64) -> Result<WriterLock, Refusal> {
        let path = root.lock_path();
        // A second round only when a broker released the lock between our
        // create and our open.
        for _ in 0..2 {
            let created = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path);
            match created {
                Ok(file) => return Self::fill(file, path, root.bus.clone(), pid, start_time),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_refusal("creating the writer lock", &e)),
            }
            let Some(file) = open_lock(&path)? else {
                continue;
            };
            return if try_lock_exclusive(&file)
                .map_err(|e| io_refusal("taking the writer lock's flock", &e))?
            {
                // Nobody holds it: left over from a crash. Dropping the file
                // releases our flock; the file stays exactly as it is.
                Err(Refusal::StaleLock)
            } else {
                Err(Refusal::LockHeld)
            };
        }
        Err(Refusal::LockHeld)
    }

    /// Locks, checks and writes a lock file this process just created.
    fn fill(
        mut file: File,
        path: PathBuf,
        bus: PathBuf,
        pid: u32,
        start_time: u64,
    ) -> Result<WriterLock, Refusal> {
        match try_lock_exclusive(&file) {
            Ok(true) => {}
            // Only `unlock` takes the flock of a file it did not create; it
            // found our file empty and refuses, and we step back.
            Ok(false) => {
                let _ = std::fs::remove_file(&path);
                return Err(Refusal::LockHeld);
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(io_refusal("taking the writer lock's flock", &e));
            }
        }
        let written = file
            .metadata()
            .map_err(|e| io_refusal("reading the writer lock's metadata", &e))
            .and_then(|meta| {
                if is_private(&meta, Kind::File) {
                    Ok(())
                } else {
                    Err(Refusal::UnsafePath)
                }
            })
            .and_then(|()| {
                file.write_all(format!("{pid} {start_time}\n").as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(|e| io_refusal("writing the writer lock", &e))
            })
            .and_then(|()| sync_dir(&bus));
        match written {
            Ok(()) => Ok(WriterLock { file, path, bus }),
            Err(refusal) => {
                // We hold the flock on a file we created: removing it
                // cannot disturb anybody else's lock.
                let _ = std::fs::remove_file(&path);
                Err(refusal)
            }
        }
    }

    /// `bus/writer.lock`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The clean close: unlinks the lock file while the `flock` is still
    /// held, then releases it. Only removes the file if the path still names
    /// the file this lock holds.
    ///
    /// # Errors
    /// `unsafe-path` when the path now names another file (which is left in
    /// place); `storage-unavailable` when the file cannot be removed.
    pub fn release(self) -> Result<(), Refusal> {
        let held = self
            .file
            .metadata()
            .map_err(|e| io_refusal("reading the writer lock's metadata", &e))?;
        match std::fs::symlink_metadata(&self.path) {
            Ok(now) if same_file(&now, &held) => {
                std::fs::remove_file(&self.path)
                    .map_err(|e| io_refusal("removing the writer lock", &e))?;
                sync_dir(&self.bus)
            }
            Ok(_) => Err(Refusal::UnsafePath),
            // Gone already: nothing left to clean.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_refusal("examining the writer lock's path", &e)),
        }
        // `self.file` drops here, after the unlink: the flock goes last.
    }
}

/// The operator's way out of a `stale-lock`: proves the recorded broker is
/// gone, preserves the database files as evidence, then removes the lock and
/// the socket — and nothing else. Returns the evidence folder.
///
/// Steps, each a precondition of the next:
/// 1. open `bus/writer.lock` (no symlinks; regular, ours, 0600) and take its
///    `flock` without waiting; holding it keeps a new broker out until we
///    are done;
/// 2. parse `"pid start_time\n"`; read that pid from `processes`: a process
///    with the same start time is the broker itself, still alive;
/// 3. check that `bus/bus.sock`, if present, is a socket of ours;
/// 4. create `bus/evidence-<now>/` (0700; `:` and `.` of the timestamp
///    become `-`) and copy whichever of `bus.sqlite`, `bus.sqlite-wal` and
///    `bus.sqlite-shm` exist into it (0600), syncing files and folder;
/// 5. remove the socket, then the lock file (the socket first, so a broker
///    that starts the moment the lock is gone cannot lose its new socket).
///
/// The originals stay where they are, and the evidence folder is never
/// removed, also when a later step fails.
///
/// # Errors
/// - `bad-request` when there is no `writer.lock`: nothing to unlock;
/// - `lock-held` when the `flock` is held, or the recorded process still
///   lives with the recorded start time, or it cannot be proved gone
///   (its `/proc` entry is unreadable);
/// - `stale-lock` when the lock's content is not `pid start_time`: the
///   recorded broker cannot be identified, so nothing is touched (inspect
///   and remove by hand);
/// - `unsafe-path` when the lock, the socket or a database file is a
///   symlink or of the wrong type, owner or mode;
/// - `storage-unavailable` when the evidence cannot be written (for example
///   the folder for this instant exists already) or a removal fails.
pub fn unlock(
    root: &DataRoot,
    processes: &dyn ProcessTable,
    now: Timestamp,
) -> Result<PathBuf, Refusal> {
    let lock_path = root.lock_path();
    let mut lock = open_lock(&lock_path)?.ok_or(Refusal::NoLock)?;
    if !try_lock_exclusive(&lock)
        .map_err(|e| io_refusal("taking the crashed broker's flock", &e))?
    {
        return Err(Refusal::LockHeld);
    }
    let (pid, start_time) = read_record(&mut lock)?;
    match processes.process(pid) {
        Ok(info) if info.start_time == start_time => return Err(Refusal::LockHeld),
        // Another process reuses the pid: ours has exited.
        Ok(_) | Err(ProcessError::Gone) => {}
        Err(ProcessError::Denied | ProcessError::Unreadable(_)) => return Err(Refusal::LockHeld),
    }
    let socket = root.socket_path();
    let socket_present = match std::fs::symlink_metadata(&socket) {
        Ok(meta) if meta.file_type().is_socket() && owned(&meta) => true,
        Ok(_) => return Err(Refusal::UnsafePath),
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(io_refusal("examining the socket", &e)),
    };

    let evidence = preserve(root, now)?;

    if socket_present {
        std::fs::remove_file(&socket).map_err(|e| io_refusal("removing the socket", &e))?;
    }
    std::fs::remove_file(&lock_path).map_err(|e| io_refusal("removing the writer lock", &e))?;
    sync_dir(&root.bus)?;
    drop(lock);
    Ok(evidence)
}

/// Copies the database files into a new evidence folder, durably.
fn preserve(root: &DataRoot, now: Timestamp) -> Result<PathBuf, Refusal> {
    let name = format!("evidence-{now}").replace([':', '.'], "-");
    let folder = root.bus.join(name);
    create_private_dir(&folder, false).map_err(logged(
        Refusal::StorageUnavailable,
        "creating the evidence folder",
    ))?;
    check_private_dir(&folder)?;
    for name in DB_FILES {
        let source = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(root.bus.join(name))
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_refusal("opening a store file to preserve it", &e)),
        };
        let meta = source
            .metadata()
            .map_err(|e| io_refusal("reading a store file's metadata", &e))?;
        if !meta.file_type().is_file() || !owned(&meta) {
            return Err(Refusal::UnsafePath);
        }
        let mut copy = create_private_file(&folder.join(name))?;
        io::copy(&mut &source, &mut copy)
            .and_then(|_| copy.sync_all())
            .map_err(logged(
                Refusal::StorageUnavailable,
                "copying a store file into the evidence folder",
            ))?;
    }
    sync_dir(&folder)?;
    sync_dir(&root.bus)?;
    Ok(folder)
}

/// Opens an existing lock file for `flock`, refusing symlinks and files that
/// are not private. `None` when there is no lock file.
fn open_lock(path: &Path) -> Result<Option<File>, Refusal> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_refusal("opening the writer lock", &e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| io_refusal("reading the writer lock's metadata", &e))?;
    if is_private(&meta, Kind::File) {
        Ok(Some(file))
    } else {
        Err(Refusal::UnsafePath)
    }
}

/// Reads `"pid start_time\n"` (decimal, one space, one newline, nothing
/// else).
fn read_record(file: &mut File) -> Result<(u32, u64), Refusal> {
    let mut text = String::new();
    file.take(LOCK_CONTENT_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|_| Refusal::StaleLock)?;
    let line = text.strip_suffix('\n').ok_or(Refusal::StaleLock)?;
    let (pid, start) = line.split_once(' ').ok_or(Refusal::StaleLock)?;
    let decimal = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !decimal(pid) || !decimal(start) {
        return Err(Refusal::StaleLock);
    }
    Ok((
        pid.parse().map_err(|_| Refusal::StaleLock)?,
        start.parse().map_err(|_| Refusal::StaleLock)?,
    ))
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    File,
    Socket,
}

fn check_private(path: &Path, kind: Kind) -> Result<(), Refusal> {
    let meta =
        std::fs::symlink_metadata(path).map_err(|e| io_refusal("examining a private file", &e))?;
    if is_private(&meta, kind) {
        Ok(())
    } else {
        Err(unsafe_path(
            path,
            "not ours, of mode 0600, of the right type",
        ))
    }
}

fn is_private(meta: &Metadata, kind: Kind) -> bool {
    let file_type = meta.file_type();
    let right_type = match kind {
        Kind::File => file_type.is_file(),
        Kind::Socket => file_type.is_socket(),
    };
    right_type && owned(meta) && meta.mode() & 0o7777 == 0o600
}

/// Checks that `path` is a directory (not a symlink) owned by this
/// process's effective uid with mode exactly 0700.
///
/// # Errors
/// `unsafe-path` otherwise, or when it cannot be examined.
pub fn check_private_dir(path: &Path) -> Result<(), Refusal> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|_| unsafe_path(path, "the folder cannot be examined"))?;
    if meta.file_type().is_dir() && owned(&meta) && meta.mode() & 0o7777 == 0o700 {
        Ok(())
    } else {
        Err(unsafe_path(path, "not a folder of ours of mode 0700"))
    }
}

/// A new folder of mode 0700 under the temporary directory, named
/// `PREFIX` and random letters, kept (not removed on drop): a default
/// data root, a secrets folder. Made 0700 at `mkdir`, not left to the
/// umask, so no other user ever lists it.
///
/// # Errors
/// `storage-unavailable` when it cannot be made (the cause is logged).
pub fn create_private_temp_dir(prefix: &str) -> Result<PathBuf, Refusal> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map(tempfile::TempDir::keep)
        .map_err(logged(
            Refusal::StorageUnavailable,
            "creating a private folder",
        ))
}

/// `path` as a log field may show it: a folder name can hold an escape
/// sequence (an agent may have made it, under a path the config names), so
/// each control or format character becomes a visible token.
pub fn neutral_path(path: &Path) -> String {
    mosaic_domain::text::neutralise(&path.to_string_lossy()).into_owned()
}

/// `unsafe-path`, logged with the path and why it may not be used (a
/// path of the data root or a folder the operator chose: no secret).
fn unsafe_path(path: &Path, why: &'static str) -> Refusal {
    tracing::warn!(
        code = Refusal::UnsafePath.code(),
        path = &*neutral_path(path),
        why,
        "refused a path"
    );
    Refusal::UnsafePath
}

fn owned(meta: &Metadata) -> bool {
    meta.uid() == effective_uid()
}

fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Makes a folder's entries (a created or removed file) durable.
fn sync_dir(path: &Path) -> Result<(), Refusal> {
    File::open(path)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| io_refusal("syncing a folder", &e))
}

/// Maps an OS error onto a static code, logging `what` failed and why: a
/// path we may not use is `unsafe-path`, everything else
/// `storage-unavailable`.
fn io_refusal(what: &'static str, e: &io::Error) -> Refusal {
    let code = match e.raw_os_error() {
        Some(
            libc::ELOOP | libc::EACCES | libc::EPERM | libc::ENOTDIR | libc::EEXIST | libc::EISDIR,
        ) => Refusal::UnsafePath,
        Some(_) | None => Refusal::StorageUnavailable,
    };
    crate::cause::log(code, what, e);
    code
}

/// This process's effective uid, the owner every path must have.
fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Tries `flock(LOCK_EX | LOCK_NB)`: `Ok(true)` when taken, `Ok(false)` when
/// another open file description holds it.
fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    use rustix::fs::{flock, FlockOperation};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(text: &[u8]) -> Result<(u32, u64), Refusal> {
        let dir = std::env::temp_dir().join(format!(
            "mosaic-fs-record-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("lock");
        std::fs::write(&path, text).expect("write");
        let got = read_record(&mut File::open(&path).expect("open"));
        std::fs::remove_dir_all(&dir).expect("clean");
        got
    }

    #[test]
    fn lock_records_parse_strictly() {
        assert_eq!(record(b"42 123456\n"), Ok((42, 123_456)));
        for bad in [
            &b""[..],
            b"42 123456",
            b"42  123456\n",
            b"42\n",
            b"-1 5\n",
            b"42 +5\n",
            b"42 5\n\n",
            b"99999999999 5\n",
            b"42 5 6\n",
        ] {
            assert_eq!(
                record(bad),
                Err(Refusal::StaleLock),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = format!("1 {}\n", "0".repeat(80));
        assert_eq!(record(long.as_bytes()), Err(Refusal::StaleLock));
    }

    #[test]
    fn evidence_names_have_no_colons_or_dots() {
        let t = Timestamp::parse("2026-03-04T05:06:07.089Z").expect("time");
        assert_eq!(
            format!("evidence-{t}").replace([':', '.'], "-"),
            "evidence-2026-03-04T05-06-07-089Z"
        );
    }
}
