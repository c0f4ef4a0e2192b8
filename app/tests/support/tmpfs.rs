//! A tmpfs for the tests of a full disk: mounted on a fresh folder as
//! root, or, without root (or where `mount` is refused), in a re-run of the
//! whole test inside a child of the test binary that is root of its own
//! user and mount namespaces; unmounted (lazily) when dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` mounted on a new directory (mode 0700, so it can be a
/// data root), unmounted again when dropped.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

/// Set in a test's re-run inside its own namespaces (see [`Tmpfs::with`]):
/// the file the child creates once the test's body has passed there.
const IN_NAMESPACE: &str = "MOSAIC_TMPFS_IN_NAMESPACE";

impl Tmpfs {
    /// Runs `body` on a tmpfs of `size` mounted for the test `test` (its
    /// name, as the harness filters on). Where this process may not mount
    /// (not root, or `mount` refused), the whole test runs again in a child
    /// process of this binary that is root of its own user and mount
    /// namespaces (`unshare --user --map-root-user --mount`), where
    /// mounting a tmpfs is allowed; a failure in the child fails the test
    /// here.
    pub fn with(size: &str, test: &str, body: impl FnOnce(&Tmpfs)) {
        Self::with_options(&format!("size={size}"), test, body);
    }

    /// As [`Tmpfs::with`], with the mount's `options` (`size=16m,nr_inodes=2048`).
    pub fn with_options(options: &str, test: &str, body: impl FnOnce(&Tmpfs)) {
        let passed = std::env::var_os(IN_NAMESPACE);
        match Self::mount_here(options) {
            Some(fs) => {
                body(&fs);
                if let Some(passed) = passed {
                    std::fs::write(passed, test).expect("mark the child's pass");
                }
            }
            None => {
                assert!(
                    passed.is_none(),
                    "cannot mount a tmpfs even as root of a new user namespace"
                );
                Self::in_namespace(test);
            }
        }
    }

    /// Runs the test `test` again in a child that is root of its own user
    /// and mount namespaces, and fails unless it passed there.
    fn in_namespace(test: &str) {
        // The child marks its pass, so a name that matches no test fails.
        let marks = tempfile::tempdir().expect("a directory for the mark");
        let mark = marks.path().join("passed");
        let exe = std::env::current_exe().expect("this test binary");
        let status = Command::new("unshare")
            .args(["--user", "--map-root-user", "--mount", "--"])
            .arg(exe)
            .args([test, "--exact", "--test-threads=1", "--nocapture"])
            .env(IN_NAMESPACE, &mark)
            .status()
            .expect("run unshare (util-linux)");
        assert!(
            status.success(),
            "{test} failed in its user namespace ({status}); without root, the tmpfs \
             tests need unprivileged user namespaces"
        );
        assert_eq!(
            std::fs::read_to_string(&mark).ok().as_deref(),
            Some(test),
            "{test} did not run in its user namespace"
        );
    }

    /// Mounts one here, or returns `None` when this process may not.
    fn mount_here(options: &str) -> Option<Tmpfs> {
        if !rustix::process::geteuid().is_root() {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("mosaic-faults-")
            .tempdir()
            .expect("a mount point");
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("{options},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status();
        match mounted {
            Ok(status) if status.success() => Some(Tmpfs { dir }),
            Ok(_) | Err(_) => None,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `mount -o remount,bind,MODE`: the mount point read-only or writable
    /// again (a bind remount, which a user namespace may do too).
    #[track_caller]
    pub fn remount(&self, mode: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,bind,{mode}")])
            .arg(self.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {mode}");
    }

    /// Fills the file system with `filler` until not one more byte fits.
    #[track_caller]
    pub fn fill(&self) -> PathBuf {
        let filler = self.path().join("filler");
        let mut file = std::fs::File::create(&filler).expect("create the filler");
        for chunk in [64 * 1024, 4096, 512, 1] {
            let bytes = vec![0u8; chunk];
            loop {
                match file.write(&bytes) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                    Err(e) => panic!("filling the disk: {e}"),
                }
            }
        }
        filler
    }
}

impl Tmpfs {
    /// Takes every free file (inode) of the file system: empty files in a
    /// new folder, made until one more cannot be. Returns the folder.
    #[track_caller]
    pub fn fill_files(&self) -> PathBuf {
        let folder = self.path().join("files");
        std::fs::create_dir(&folder).expect("a folder for the files");
        for n in 0_u64.. {
            match std::fs::File::create(folder.join(n.to_string())) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                Err(e) => panic!("taking the files: {e}"),
            }
        }
        folder
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a broker left running by a failed assertion must not keep
        // the mount alive.
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}
