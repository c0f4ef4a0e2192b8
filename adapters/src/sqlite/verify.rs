//! The verification of a store and the notes kept outside it: the
//! open-time checks (integrity, the schema pin, WAL mode, and the ledger
//! pass beside them), [`verify_file`] offline and read-only, and whether a
//! store extends a note ([`Verification::check`]).

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::chain;
use super::pass::{Cut, Pass, Walked};
use super::verdict::{open_failure, Broken, OpenError};
use mosaic_ports::StoreHead;

/// Whether `path` still names something, asked without its times.
///
/// Any stat that reports a file's mtime or ctime (`std::fs::metadata`,
/// `fstat`) marks the inode on filesystems with multigrain timestamps (ext4,
/// XFS, btrfs on Linux 6.13 and later): its next write then takes a fresh
/// fine-grained time, so the inode is dirty and every commit's fsync also
/// writes it. Asked after each commit, that costs the WAL about 60–80 µs a
/// commit on these machines. A `statx` for the type alone leaves the mark
/// alone; a kernel without `statx` gets the plain stat.
pub(super) fn names_a_file(path: &Path) -> bool {
    use rustix::fs::{statx, AtFlags, StatxFlags, CWD};
    match statx(CWD, path, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::TYPE) {
        Ok(_) => true,
        Err(rustix::io::Errno::NOENT) => false,
        Err(_) => std::fs::symlink_metadata(path).is_ok(),
    }
}

/// What the open-time checks found, and what they cost.
pub(super) struct Verified {
    pub(super) walked: Walked,
    pub(super) cost: OpenCost,
}

/// How long the open-time checks took: the boot log names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenCost {
    /// The whole verified open: the checks below, side by side.
    pub open: Duration,
    /// `PRAGMA quick_check` and `PRAGMA foreign_key_check`.
    pub integrity: Duration,
    /// The schema digest, the version, the journal mode and the ledger
    /// pass, which runs beside the integrity checks: the two overlap.
    pub ledger: Duration,
    /// Ledger rows checked.
    pub rows: u64,
}

/// The integrity and schema checks on `conn`, and the ledger pass
/// ([`pass`]) beside them on connections from `connect`: the pass's own
/// threads start at once, and this thread joins them once its checks pass
/// (each check is one CPU's work, and the open waits for all of them). The
/// failures are reported in the order that gives the most precise code:
/// integrity, schema, then the ledger (a file with no `meta` or no ledger
/// cannot even be cut, and is refused for its schema).
pub(super) fn check_store(
    conn: &Connection,
    journal: Journal,
    connect: &(dyn Fn() -> Result<Connection, OpenError> + Sync),
    cut: Cut,
) -> Result<Verified, Broken> {
    let started = Instant::now();
    let pass = connect()
        .map_err(Broken::from)
        .and_then(|reader| Pass::plan(&reader, cut));
    let planned = pass.as_ref().ok();
    let checked = std::thread::scope(|scope| {
        let workers: Vec<_> = match planned {
            Some(pass) => (0..cut.workers().min(pass.ranges()))
                .map(|_| scope.spawn(|| pass.work(connect)))
                .collect(),
            None => Vec::new(),
        };
        let checked = check_integrity_and_schema(conn, journal);
        match (&checked, planned) {
            (Ok(_), Some(pass)) => pass.work(connect),
            (Err(_), Some(pass)) => pass.stop(),
            (_, None) => {}
        }
        for worker in workers {
            worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
        checked
    });
    let (integrity, schema) = checked?;
    let (walked, ended) = pass?.finish()?;
    let pass_took = ended.map_or(Duration::ZERO, |ended| ended - started);
    Ok(Verified {
        cost: OpenCost {
            open: started.elapsed(),
            integrity,
            ledger: schema + pass_took,
            rows: walked.chain.size,
        },
        walked,
    })
}

/// Where the WAL mode check looks.
#[derive(Debug, Clone, Copy)]
pub(super) enum Journal {
    /// `PRAGMA journal_mode`, on a connection that can use the WAL.
    Pragma,
    /// What the file's header says (bytes 18 and 19 are 2 in WAL mode):
    /// an immutable connection reports no WAL mode whatever the file is.
    Header(bool),
}

/// `quick_check`, the schema pin, the version, WAL mode and
/// `foreign_key_check`, in that order; what the integrity checks and the
/// schema checks took.
fn check_integrity_and_schema(
    conn: &Connection,
    journal: Journal,
) -> Result<(Duration, Duration), OpenError> {
    let started = Instant::now();
    let quick: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(open_failure)?;
    if quick != "ok" {
        return Err(OpenError::IntegrityFailed);
    }
    let mut integrity = started.elapsed();
    let started = Instant::now();
    let mut master = conn
        .prepare("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master")
        .map_err(open_failure)?;
    let rows = master
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .map_err(open_failure)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(open_failure)?;
    let digest = mosaic_schema::sha256_hex(mosaic_schema::canonical_master(rows).as_bytes());
    if digest != mosaic_schema::MASTER_SHA256 {
        return Err(OpenError::SchemaMismatch);
    }
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = ?1",
            [mosaic_schema::VERSION_KEY],
            |r| r.get(0),
        )
        .optional()
        .map_err(open_failure)?;
    if version.as_deref() != Some(mosaic_schema::VERSION) {
        return Err(OpenError::SchemaMismatch);
    }
    let wal = match journal {
        Journal::Pragma => conn
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .map_err(open_failure)?
            .eq_ignore_ascii_case("wal"),
        Journal::Header(wal) => wal,
    };
    if !wal {
        return Err(OpenError::SchemaMismatch);
    }
    let schema = started.elapsed();
    let started = Instant::now();
    let dangling: Option<String> = conn
        .query_row("PRAGMA foreign_key_check", [], |r| r.get(0))
        .optional()
        .map_err(open_failure)?;
    if dangling.is_some() {
        return Err(OpenError::IntegrityFailed);
    }
    integrity += started.elapsed();
    Ok((integrity, schema))
}

/// A store file verified offline and read-only ([`verify_file`]): every
/// open-time check passed and the whole chain was recomputed.
#[derive(Debug)]
pub struct Verification {
    conn: Connection,
    head: StoreHead,
}

/// How a store falls short of a note kept outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteMismatch {
    /// The store is shorter than the note's size: `truncated`.
    Truncated,
    /// The store's hash at the note's size differs, or the note is of
    /// another store: `forked`.
    Forked,
}

impl NoteMismatch {
    /// The static code `mosaic-bus verify` reports.
    pub fn code(self) -> &'static str {
        match self {
            NoteMismatch::Truncated => "truncated",
            NoteMismatch::Forked => "forked",
        }
    }
}

impl Verification {
    /// The chain's head.
    pub fn head(&self) -> &StoreHead {
        &self.head
    }

    /// Whether this store extends `note`: the same store, at least its
    /// size, and the same hash at that size.
    ///
    /// # Errors
    /// [`OpenError::Unavailable`] when the file cannot be read.
    pub fn check(&self, note: &StoreHead) -> Result<Option<NoteMismatch>, OpenError> {
        if note.store_id != self.head.store_id {
            return Ok(Some(NoteMismatch::Forked));
        }
        if note.size > self.head.size {
            return Ok(Some(NoteMismatch::Truncated));
        }
        let hash = match i64::try_from(note.size) {
            Ok(0) => chain::genesis(&self.head.store_id),
            Ok(seq) => self
                .conn
                .query_row("SELECT hash FROM ledger WHERE seq = ?1", [seq], |r| {
                    r.get(0)
                })
                .map_err(open_failure)?,
            Err(_) => return Ok(Some(NoteMismatch::Truncated)),
        };
        Ok((hash != note.hash).then_some(NoteMismatch::Forked))
    }
}

/// Verifies the store file at `path` without writing to it: every
/// open-time check, and the whole chain recomputed, on a read-only
/// connection. With no WAL beside the file, the connection is immutable,
/// so SQLite creates no WAL or SHM either; with a WAL and its SHM (a
/// running broker's file) it reads them; a WAL without its SHM is refused,
/// since reading it would create one.
///
/// # Errors
/// [`OpenError::WrongState`] when `path` is not a file;
/// [`OpenError::Unavailable`] when it cannot be read (or a WAL has no
/// SHM); `IntegrityFailed` (with the first record that does not check) or
/// `SchemaMismatch` when a check fails.
pub fn verify_file(path: &Path) -> Result<Verification, Broken> {
    verify_file_cut(path, Cut::here())
}

/// [`verify_file`] with the ledger pass cut as `cut` says: the verdict, and
/// the record it names, must not depend on the cut, and the tests check
/// that they do not.
///
/// # Errors
/// As [`verify_file`].
pub fn verify_file_cut(path: &Path, cut: Cut) -> Result<Verification, Broken> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(_) => return Err(OpenError::WrongState.into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(OpenError::WrongState.into())
        }
        Err(e) => return Err(OpenError::Unavailable(Box::new(e)).into()),
    }
    let (conn, wal) = read_only(path)?;
    let verified = check_store(&conn, Journal::Header(wal), &|| Ok(read_only(path)?.0), cut)?;
    Ok(Verification {
        conn,
        head: verified.walked.chain,
    })
}

/// A read-only connection to the existing file at `path` that creates
/// nothing beside it, and whether its header says WAL mode. With no WAL
/// beside the file it is immutable; with a WAL and its SHM (a running
/// broker's file) it reads them; a WAL without its SHM is refused, since
/// reading it would create one.
pub(super) fn read_only(path: &Path) -> Result<(Connection, bool), OpenError> {
    let beside = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        names_a_file(Path::new(&p))
    };
    let query = match (beside("-wal"), beside("-shm")) {
        (false, _) => "immutable=1",
        (true, true) => "mode=ro",
        (true, false) => {
            return Err(OpenError::Unavailable(
                "a WAL without its SHM beside the file".into(),
            ))
        }
    };
    let mut header = [0_u8; 100];
    let wal = {
        use std::io::Read as _;
        let mut file =
            std::fs::File::open(path).map_err(|e| OpenError::Unavailable(Box::new(e)))?;
        file.read_exact(&mut header).is_ok() && header[18] == 2 && header[19] == 2
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(format!("{}?{query}", file_uri(path)), flags)
        .map_err(open_failure)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
        .map_err(open_failure)?;
    conn.pragma_update(None, "trusted_schema", false)
        .map_err(open_failure)?;
    conn.pragma_update(None, "query_only", true)
        .map_err(open_failure)?;
    Ok((conn, wal))
}

/// `path` as an SQLite `file:` URI: every byte but the unreserved ones
/// and `/` percent-encoded, so `?`, `#` and `%` in a name stay in the name.
fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}
