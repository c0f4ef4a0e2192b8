//! The disk reserve: [`RESERVE_BYTES`] of real blocks in `disk.reserve`,
//! beside the store's file, held while the filesystem has room.
//!
//! An agent whose files share the store's filesystem can fill it; then
//! every commit fails, the human's included. The reserve is space taken in
//! advance: released when a commit fails for lack of space, it gives the
//! store room for the writes the broker still serves (the human's; see
//! `app/src/runtime/disk.rs`), and it is taken again once the filesystem
//! has room for it and as much to spare. On a small filesystem it holds a
//! sixteenth of it, so the reserve never takes what the store needs. The
//! blocks are allocated with `fallocate`, which every filesystem counts as
//! used, tmpfs included; where it is not supported, zeros are written.
//!
//! Space is not all an agent can take: a filesystem out of files (inodes)
//! refuses every new file, the broker's next boot included. A reserve of
//! bytes cannot give inodes back, so the reserve is taken, and the room
//! checked ([`Reserve::check`]), only while the filesystem also has
//! [`FILES_SPARE`] files to spare (or a sixteenth of a small one's).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use mosaic_ports::StoreError;

/// How much space the reserve holds, at most: room for hundreds of the
/// human's commits (each writes a few pages to the WAL, which SQLite then
/// reuses) on a full filesystem.
pub const RESERVE_BYTES: u64 = 4 * 1024 * 1024;

/// The reserve holds at most this share of its filesystem.
const SHARE: u64 = 16;

/// The reserve's file name, in the store file's folder.
pub const RESERVE_FILE: &str = "disk.reserve";

/// The bytes written at a time while the reserve is filled.
const CHUNK: usize = 64 * 1024;

/// How many free files (inodes) the filesystem must have to spare, at
/// most: room for the files a broker and `up` make at their next start
/// (the lock, the socket, the WAL, the logs, each run's folder and files).
pub const FILES_SPARE: u64 = 1024;

/// The filesystem of a file, as `statvfs` tells it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Room {
    /// The bytes an unprivileged process may still write.
    pub(super) free: u64,
    /// The filesystem's size.
    pub(super) total: u64,
    /// The files (inodes) an unprivileged process may still make.
    pub(super) files_free: u64,
    /// The filesystem's files, 0 where it does not count them (btrfs).
    pub(super) files_total: u64,
}

impl Room {
    /// Whether the files to spare are free: [`FILES_SPARE`], or a
    /// [`SHARE`] of a filesystem with fewer; none on a filesystem that
    /// does not count its files.
    fn files_to_spare(&self) -> bool {
        self.files_free >= (self.files_total / SHARE).min(FILES_SPARE)
    }
}

/// Measures the room on the filesystem of a file.
pub(super) type FreeSpace = fn(&File) -> io::Result<Room>;

/// The store's reserve file and whether it is held.
#[derive(Debug)]
pub(super) struct Reserve {
    path: PathBuf,
    held: bool,
    free: FreeSpace,
}

impl Reserve {
    /// The reserve of the store at `db`, not yet taken.
    pub(super) fn beside(db: &Path) -> Self {
        Self {
            path: db.with_file_name(RESERVE_FILE),
            held: false,
            free: free_space,
        }
    }

    /// As [`Reserve::beside`], with the free space measured by `free`.
    #[cfg(test)]
    pub(super) fn measured_by(db: &Path, free: FreeSpace) -> Self {
        Self {
            free,
            ..Self::beside(db)
        }
    }

    /// Whether the reserve is held.
    #[cfg(test)]
    pub(super) fn held(&self) -> bool {
        self.held
    }

    /// Takes the reserve: keeps a whole file an earlier run left, or fills
    /// one when the filesystem has room for it and as much to spare (so
    /// the writes served again do not fill it at once).
    ///
    /// # Errors
    /// [`StoreError::Full`] when there is no such room (then the file holds
    /// nothing); [`StoreError::Unavailable`] when the file cannot be made.
    pub(super) fn take(&mut self) -> Result<(), StoreError> {
        if self.held {
            return Ok(());
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.path)
            .map_err(failure)?;
        let meta = file.metadata().map_err(failure)?;
        if !meta.file_type().is_file() {
            return Err(StoreError::Unavailable(Box::new(NotAFile)));
        }
        let room = (self.free)(&file).map_err(failure)?;
        let size = reserve_size(room.total);
        let allocated = meta.blocks().saturating_mul(512);
        if size > 0 && meta.len() >= size && allocated >= size {
            self.held = true;
            return Ok(());
        }
        let filled = if size == 0
            || room.free.saturating_add(allocated) < 2 * size
            || !room.files_to_spare()
        {
            Err(no_space())
        } else {
            fill(&file, size)
        };
        match filled {
            Ok(()) => {
                self.held = true;
                Ok(())
            }
            Err(e) => {
                // A reserve half made holds space that helps nobody.
                let _ = file.set_len(0);
                Err(failure(e))
            }
        }
    }

    /// Checks the room beside the reserve, whether it is held or not: as
    /// much free space as the reserve holds on this filesystem, and the
    /// files to spare. Changes nothing.
    ///
    /// # Errors
    /// [`StoreError::Full`] without that room; [`StoreError::Unavailable`]
    /// when the store's folder cannot be measured.
    pub(super) fn check(&self) -> Result<(), StoreError> {
        let folder = self.path.parent().unwrap_or_else(|| Path::new("."));
        let folder = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(folder)
            .map_err(failure)?;
        let room = (self.free)(&folder).map_err(failure)?;
        if room.free >= reserve_size(room.total) && room.files_to_spare() {
            Ok(())
        } else {
            Err(failure(no_space()))
        }
    }

    /// Releases the reserve: its file is emptied, so its blocks are free
    /// for the store. Returns whether it was held.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the file cannot be emptied.
    pub(super) fn release(&mut self) -> Result<bool, StoreError> {
        let held = std::mem::take(&mut self.held);
        let emptied = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.path)
            .and_then(|file| file.set_len(0));
        match emptied {
            Ok(()) => Ok(held),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(held),
            Err(e) => {
                self.held = held;
                Err(failure(e))
            }
        }
    }
}

/// The reserve's size on a filesystem of `total` bytes: [`RESERVE_BYTES`],
/// or a [`SHARE`] of a small one, in whole chunks of the fill.
pub(super) fn reserve_size(total: u64) -> u64 {
    let size = RESERVE_BYTES.min(total / SHARE);
    size - size % CHUNK as u64
}

/// Allocates `size` bytes of real blocks in `file`: `fallocate` takes them
/// at once, on tmpfs too (`df` counts them), without writing 4 MiB at each
/// new store's boot; a filesystem without it gets them by writes of zeros.
fn fill(file: &File, size: u64) -> io::Result<()> {
    // A reserve of another size (the filesystem grew or shrank) starts anew.
    file.set_len(0)?;
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, size) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP) => {}
        Err(e) => return Err(e.into()),
    }
    let zeros = vec![0_u8; CHUNK];
    let mut at = 0;
    while at < size {
        file.write_all_at(&zeros, at)?;
        at += CHUNK as u64;
    }
    file.sync_all()
}

/// The room on `file`'s filesystem.
fn free_space(file: &File) -> io::Result<Room> {
    let stats = rustix::fs::fstatvfs(file)?;
    let bytes = |blocks: u64| blocks.saturating_mul(stats.f_frsize);
    Ok(Room {
        free: bytes(stats.f_bavail),
        total: bytes(stats.f_blocks),
        files_free: stats.f_favail,
        files_total: stats.f_files,
    })
}

fn no_space() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

/// The port's error for a failed reserve operation: no space is
/// [`StoreError::Full`], anything else [`StoreError::Unavailable`].
fn failure(e: io::Error) -> StoreError {
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => StoreError::Full(Box::new(e)),
        _ => StoreError::Unavailable(Box::new(e)),
    }
}

/// The source of the error when the reserve's name holds no regular file.
#[derive(Debug)]
struct NotAFile;

impl std::fmt::Display for NotAFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the reserve's name holds something else than a file")
    }
}

impl std::error::Error for NotAFile {}

/// The source of the error when a handle that only reads is asked to
/// take, release or measure a reserve.
#[derive(Debug)]
pub(super) struct ReaderHoldsNoReserve;

impl std::fmt::Display for ReaderHoldsNoReserve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a reader handle holds no disk reserve")
    }
}

impl std::error::Error for ReaderHoldsNoReserve {}

impl ReaderHoldsNoReserve {
    /// What a handle that only reads answers when asked for the reserve.
    pub(super) fn refused() -> Result<(), StoreError> {
        Err(StoreError::Unavailable(Box::new(ReaderHoldsNoReserve)))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use mosaic_domain::evidence::{Evidence, HumanInput, Stamped};
    use mosaic_domain::{BusinessId, EventId, Timestamp};
    use mosaic_ports::{EvidenceStore, StoreError};

    use super::{reserve_size, Reserve, Room, FILES_SPARE, RESERVE_BYTES, RESERVE_FILE};
    use crate::sqlite::SqliteStore;

    /// Human inputs `from..to`, one a millisecond: unique facts that need
    /// nothing else stored.
    fn inputs(from: u16, to: u16) -> Vec<Stamped> {
        (from..to)
            .map(|n| {
                let mut id = [0_u8; 16];
                id[..2].copy_from_slice(&n.to_be_bytes());
                Stamped {
                    at: Timestamp::from_unix_ms(1_000 + i64::from(n)).expect("a test time"),
                    evidence: Evidence::Human(HumanInput {
                        id: EventId::from_random(id),
                        business: BusinessId::parse("acme").expect("a business id"),
                        verb: "message.send".to_owned(),
                        subject: None,
                    }),
                }
            })
            .collect()
    }

    /// The reserve file's length and allocated bytes.
    fn sizes(dir: &Path) -> (u64, u64) {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir.join(RESERVE_FILE)).expect("the reserve file");
        (meta.len(), meta.blocks() * 512)
    }

    /// Caps the database at the pages it has (`None`: lifts the cap), so
    /// the next write that needs a page fails with SQLite's own
    /// `SQLITE_FULL`, as on a full filesystem.
    fn cap_pages(store: &SqliteStore, cap: bool) {
        let pages: i64 = store
            .conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .expect("page count");
        let max = if cap { pages } else { 1 << 30 };
        let _: i64 = store
            .conn
            .query_row(&format!("PRAGMA max_page_count = {max}"), [], |r| r.get(0))
            .expect("max page count");
    }

    #[test]
    fn a_full_store_is_released_retried_and_takes_its_reserve_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store = SqliteStore::create(&dir.path().join("bus.sqlite")).expect("a store");
        store.take_reserve().expect("room for the reserve");
        let (len, allocated) = sizes(dir.path());
        assert!(len > 0 && len <= RESERVE_BYTES, "{len} bytes");
        assert!(allocated >= len, "{allocated} bytes allocated");
        store.commit(&inputs(0, 10)).expect("a write with room");

        cap_pages(&store, true);
        let batch = inputs(10, 400);
        match store.commit(&batch) {
            Err(StoreError::Full(_)) => {}
            other => panic!("a write past the cap must be Full, got {other:?}"),
        }
        assert_eq!(store.head().expect("head"), 10, "nothing of the batch");

        assert!(store.release_reserve().expect("released"), "it was held");
        assert_eq!(sizes(dir.path()), (0, 0), "the reserve's blocks are free");
        // The released space is what the retry writes into.
        cap_pages(&store, false);
        store.commit(&batch).expect("the retried batch");
        assert_eq!(store.head().expect("head"), 400);

        store.take_reserve().expect("room again");
        assert_eq!(sizes(dir.path()).0, len, "the same reserve again");
        let checked = crate::sqlite::verify_file(&dir.path().join("bus.sqlite"));
        assert!(checked.is_ok(), "the chain verifies: {checked:?}");
    }

    #[test]
    fn no_reserve_is_taken_without_room_to_spare() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("bus.sqlite");
        let mut tight = Reserve::measured_by(&db, |_| {
            Ok(Room {
                free: 2 * RESERVE_BYTES - 1,
                total: GIB,
                ..ROOMY
            })
        });
        match tight.take() {
            Err(StoreError::Full(_)) => {}
            other => panic!("no room to spare must be Full, got {other:?}"),
        }
        assert!(!tight.held());
        assert_eq!(sizes(dir.path()), (0, 0), "a failed take holds nothing");

        let mut roomy = Reserve::measured_by(&db, |_| {
            Ok(Room {
                free: 2 * RESERVE_BYTES,
                total: GIB,
                ..ROOMY
            })
        });
        roomy.take().expect("room to spare");
        assert!(roomy.held());
        assert_eq!(sizes(dir.path()).0, RESERVE_BYTES);
        // A whole reserve an earlier run left is kept, even with no room.
        let mut full = Reserve::measured_by(&db, |_| {
            Ok(Room {
                free: 0,
                total: GIB,
                ..ROOMY
            })
        });
        full.take().expect("the whole reserve is kept");
        assert!(full.held());
        assert!(full.release().expect("released"));
        assert!(!full.release().expect("released again"), "none held");
    }

    /// A filesystem of a GiB, for the measured reserves.
    const GIB: u64 = 1 << 30;

    /// A filesystem of a GiB with room for everything.
    const ROOMY: Room = Room {
        free: GIB / 2,
        total: GIB,
        files_free: 1 << 20,
        files_total: 1 << 21,
    };

    #[test]
    fn no_reserve_is_taken_and_no_room_is_seen_without_files_to_spare() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("bus.sqlite");
        let few_files = |_: &std::fs::File| {
            Ok(Room {
                files_free: FILES_SPARE - 1,
                ..ROOMY
            })
        };
        let mut out_of_files = Reserve::measured_by(&db, few_files);
        match out_of_files.take() {
            Err(StoreError::Full(_)) => {}
            other => panic!("too few files must be Full, got {other:?}"),
        }
        assert!(!out_of_files.held());
        match out_of_files.check() {
            Err(StoreError::Full(_)) => {}
            other => panic!("too few files must be Full, got {other:?}"),
        }
        // With the files to spare, the same space is room.
        let files = |_: &std::fs::File| {
            Ok(Room {
                files_free: FILES_SPARE,
                ..ROOMY
            })
        };
        let mut roomy = Reserve::measured_by(&db, files);
        roomy.take().expect("room");
        roomy.check().expect("room beside it");
        // A small filesystem spares a sixteenth of its files; one that
        // counts none (btrfs) spares none.
        let small = |_: &std::fs::File| {
            Ok(Room {
                files_free: 64,
                files_total: 1024,
                ..ROOMY
            })
        };
        Reserve::measured_by(&db, small)
            .check()
            .expect("a sixteenth");
        let uncounted = |_: &std::fs::File| {
            Ok(Room {
                files_free: 0,
                files_total: 0,
                ..ROOMY
            })
        };
        Reserve::measured_by(&db, uncounted)
            .check()
            .expect("no files counted");
    }

    #[test]
    fn the_room_beside_a_held_reserve_is_checked_without_changing_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("bus.sqlite");
        let mut held = Reserve::measured_by(&db, |_| Ok(ROOMY));
        held.take().expect("room");
        let full = Reserve::measured_by(&db, |_| {
            Ok(Room {
                free: RESERVE_BYTES - 1,
                ..ROOMY
            })
        });
        match full.check() {
            Err(StoreError::Full(_)) => {}
            other => panic!("less than the reserve to spare must be Full, got {other:?}"),
        }
        assert_eq!(sizes(dir.path()).0, RESERVE_BYTES, "the reserve is kept");
        Reserve::measured_by(&db, |_| {
            Ok(Room {
                free: RESERVE_BYTES,
                ..ROOMY
            })
        })
        .check()
        .expect("the reserve's size to spare");
        // The real filesystem of a temporary folder has room.
        Reserve::beside(&db).check().expect("room on the real disk");
    }

    #[test]
    fn a_small_filesystem_gets_a_sixteenth() {
        assert_eq!(reserve_size(1 << 40), RESERVE_BYTES);
        assert_eq!(reserve_size(4 << 20), 256 << 10);
        assert_eq!(reserve_size(48 << 20), 3 << 20);
        assert_eq!(reserve_size(1 << 20), 64 << 10);
        assert_eq!(reserve_size(1 << 19), 0);
    }

    #[test]
    fn a_link_at_the_reserve_name_is_never_followed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"the human's file").expect("write");
        std::os::unix::fs::symlink(&target, dir.path().join(RESERVE_FILE)).expect("symlink");
        let mut reserve = Reserve::beside(&dir.path().join("bus.sqlite"));
        match reserve.take() {
            Err(StoreError::Unavailable(_)) => {}
            other => panic!("a link must be refused, got {other:?}"),
        }
        let _ = reserve.release();
        assert_eq!(std::fs::read(&target).expect("read"), b"the human's file");
    }
}
