//! The `/proc` implementation of the [`ProcessTable`] port, on the
//! [`procfs`] crate.
//!
//! A process is opened once, as a descriptor of its `/proc/<pid>` folder
//! ([`procfs::process::Process`]), and every file is read relative to that
//! descriptor: `stat` (parent and start time), `status` (real uid), the
//! `exe` link and `environ`. The kernel ties the descriptor to the process,
//! not to its number: once that process has been reaped, every read through
//! it fails (`ENOENT` or `ESRCH`, both [`ProcessError::Gone`]), even when
//! the pid already names another process. So one call never mixes two
//! processes, and a pid reused during a read is `Gone`, not the newcomer.
//!
//! What the crate parses: the `stat` line, split after its *last* `)`
//! (the command name is chosen by whoever named the executable and may hold
//! spaces, `)` and newlines; the unit tests below hold the crate to that),
//! and `status` (the real uid is the first number of its `Uid:` line).
//!
//! What stays hand-written, because the crate cannot express it:
//! - `environ`, read up to [`MAX_ENVIRON`] and refused past it:
//!   [`procfs::process::Process::environ`] returns a hash map,
//!   which loses the kernel's order, merges repeated names and drops an
//!   entry without `=`; the port wants the pairs in kernel order, and a
//!   bare name kept (with an empty value) so that a presence check errs on
//!   the side of seeing it. We open the file through the crate and split
//!   it ourselves ([`parse_environ`]).
//! - The executable's identity: the crate reads the `exe` link's text (a
//!   path), which keeps naming a path after another file was renamed or
//!   copied over it, or reads `… (deleted)`. The identity is `fstat` of the
//!   link *opened* (`O_PATH`, followed) through the crate: the kernel
//!   resolves it to the very file the process mapped at `exec`, so device
//!   and inode are those of the running image. `O_PATH` needs no read
//!   permission on the file, only the kernel's ptrace check on the link.
//! - The namespaces: `fstat` of the `ns/pid`, `ns/mnt` and `ns/user` links
//!   opened the same way; the crate's `namespaces` reads the links' text
//!   through a path, not through the pinned descriptor.
//!
//! Errors: a missing file (`ENOENT`) or a vanished process (`ESRCH`) is
//! [`ProcessError::Gone`]; `EACCES` on `environ` and `EACCES` or `EPERM` on
//! `exe` or a namespace link are [`ProcessError::Denied`];
//! everything else, including text that does not parse, is
//! [`ProcessError::Unreadable`] with the cause attached as its source (never
//! shown on the wire).

use std::fmt;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use mosaic_ports::process::{Environ, MAX_ENVIRON};
use mosaic_ports::{ExeIdentity, NamespaceId, Namespaces, ProcessError, ProcessInfo, ProcessTable};
use procfs::process::Process;
use procfs::ProcError;
use rustix::fs::OFlags;

/// The process table of the running kernel, read from a procfs mount.
#[derive(Debug, Clone)]
pub struct ProcFs {
    root: PathBuf,
}

impl Default for ProcFs {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcFs {
    /// The table behind `/proc`.
    pub fn new() -> Self {
        Self {
            root: PathBuf::from("/proc"),
        }
    }

    /// This process, as the kernel reports it. Its `start_time` is what the
    /// writer lock records.
    ///
    /// # Errors
    /// [`ProcessError::Unreadable`] when `/proc` cannot be read.
    pub fn current(&self) -> Result<ProcessInfo, ProcessError> {
        self.process(std::process::id())
    }

    /// The process `pid` names now, pinned (see the module docs).
    fn open(&self, pid: u32) -> Result<Process, ProcessError> {
        // Pids are positive `i32`s; a larger number names no process.
        if i32::try_from(pid).is_err() {
            return Err(ProcessError::Gone);
        }
        Process::new_with_root(self.root.join(pid.to_string())).map_err(Fault::Read.map())
    }
}

/// The namespace of `kind` (`pid`, `mnt`, `user`) of an opened process:
/// `fstat` of its `ns/<kind>` link opened (`O_PATH`, followed), which the
/// kernel resolves to the namespace itself, as for `exe`.
fn namespace(process: &Process, kind: &str) -> Result<NamespaceId, ProcessError> {
    let meta = process
        .open_relative_flags(format!("ns/{kind}"), OFlags::PATH | OFlags::CLOEXEC)
        .map_err(Fault::Namespace.map())?
        .metadata()
        .map_err(|e| Fault::Namespace.io_error(e))?;
    Ok(NamespaceId {
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

impl ProcessTable for ProcFs {
    fn process(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        read_process(&self.open(pid)?, pid)
    }

    fn environ(&self, pid: u32) -> Result<Environ, ProcessError> {
        let process = self.open(pid)?;
        let file = process
            .open_relative("environ")
            .map_err(Fault::Environ.map())?;
        // One byte past the cap is enough to know it was passed, and no
        // more is read: an environment may be megabytes.
        let mut bytes = Vec::new();
        file.take(u64::try_from(MAX_ENVIRON + 1).unwrap_or(u64::MAX))
            .read_to_end(&mut bytes)
            .map_err(|e| Fault::Environ.io_error(e))?;
        if bytes.len() > MAX_ENVIRON {
            return Err(unexpected("the environment is larger than its cap"));
        }
        Ok(parse_environ(&bytes))
    }

    fn exe_identity(&self, pid: u32) -> Result<ExeIdentity, ProcessError> {
        let process = self.open(pid)?;
        // `O_PATH` without `O_NOFOLLOW` follows the link: the file mapped at
        // exec, not its path.
        let exe = process
            .open_relative_flags("exe", OFlags::PATH | OFlags::CLOEXEC)
            .map_err(Fault::Exe.map())
            .and_then(|file| {
                file.metadata()
                    .map_err(|e| ProcessError::Unreadable(Box::new(e)))
            });
        match exe {
            Ok(meta) => Ok(ExeIdentity {
                dev: meta.dev(),
                ino: meta.ino(),
            }),
            // A missing link means the process has exited, or, while it is
            // still there, that it has no executable (a kernel thread, a
            // zombie): the latter is unreadable, not gone.
            Err(ProcessError::Gone) => match process.stat().map_err(Fault::Read.map()) {
                Ok(_) => Err(unexpected("the process has no executable")),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    fn namespaces(&self, pid: u32) -> Result<Namespaces, ProcessError> {
        // Through the one descriptor of `/proc/<pid>`: a pid reused
        // meanwhile fails as gone instead of naming the newcomer's.
        let process = self.open(pid)?;
        Ok(Namespaces {
            pid: namespace(&process, "pid")?,
            mnt: namespace(&process, "mnt")?,
            user: namespace(&process, "user")?,
        })
    }
}

/// The [`ProcessInfo`] of an opened process. Every read goes through the
/// one descriptor, so all fields belong to the same process.
fn read_process(process: &Process, pid: u32) -> Result<ProcessInfo, ProcessError> {
    let stat = process.stat().map_err(Fault::Read.map())?;
    if u32::try_from(stat.pid) != Ok(pid) {
        return Err(unexpected("stat names another pid"));
    }
    let ppid = u32::try_from(stat.ppid).map_err(|_| unexpected("negative ppid in stat"))?;
    let uid = process.status().map_err(Fault::Read.map())?.ruid;
    // The link is unreadable for kernel threads and for other users'
    // processes without ptrace rights; that is "unknown", not an error.
    let exe = process.exe().ok();
    Ok(ProcessInfo {
        pid,
        ppid,
        uid,
        start_time: stat.starttime,
        exe,
    })
}

/// What `/proc` said that the port cannot report (the source of an
/// [`ProcessError::Unreadable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unexpected(&'static str);

impl fmt::Display for Unexpected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/proc: {}", self.0)
    }
}

impl std::error::Error for Unexpected {}

fn unexpected(what: &'static str) -> ProcessError {
    ProcessError::Unreadable(Box::new(Unexpected(what)))
}

/// Which read failed: a refusal (`EACCES`, `EPERM`) is
/// [`ProcessError::Denied`] only where the port says so, for `environ` and
/// the `exe` link; for `stat` and `status`, which every process may read,
/// it is unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Read,
    Environ,
    Exe,
    Namespace,
}

impl Fault {
    fn map(self) -> impl Fn(ProcError) -> ProcessError {
        move |e| self.port_error(e)
    }

    /// The crate maps `ENOENT` and `ESRCH` to [`ProcError::NotFound`] and
    /// `EACCES`/`EPERM` to [`ProcError::PermissionDenied`] when it knows
    /// the file; an error without a path arrives as [`ProcError::Io`] and
    /// is sorted here the same way.
    fn port_error(self, e: ProcError) -> ProcessError {
        match e {
            ProcError::NotFound(_) => ProcessError::Gone,
            ProcError::PermissionDenied(_) => self.denied(Box::new(e)),
            ProcError::Io(io, _) => self.io_error(io),
            ProcError::Incomplete(_) | ProcError::Other(_) | ProcError::InternalError(_) => {
                ProcessError::Unreadable(Box::new(e))
            }
        }
    }

    /// An OS error while reading.
    fn io_error(self, e: io::Error) -> ProcessError {
        if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
            ProcessError::Gone
        } else if e.kind() == io::ErrorKind::PermissionDenied {
            // Both `EACCES` and `EPERM`.
            self.denied(Box::new(e))
        } else {
            ProcessError::Unreadable(Box::new(e))
        }
    }

    fn denied(self, cause: Box<dyn std::error::Error + Send + Sync>) -> ProcessError {
        match self {
            Fault::Environ | Fault::Exe | Fault::Namespace => ProcessError::Denied,
            Fault::Read => ProcessError::Unreadable(cause),
        }
    }
}

/// Splits `NAME=VALUE\0...` at the first `=` of each entry. An entry without
/// `=` is kept as a name with an empty value rather than dropped, so a check
/// for a variable's presence errs on the side of seeing it.
fn parse_environ(bytes: &[u8]) -> Environ {
    bytes
        .split(|&b| b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| match entry.iter().position(|&b| b == b'=') {
            Some(eq) => (entry[..eq].to_vec(), entry[eq + 1..].to_vec()),
            None => (entry.to_vec(), Vec::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_ports::conformance::process::{run, ProcessFixture};
    use procfs::FromRead;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::{Command, Stdio};

    /// `(ppid, starttime)` of a `stat` line, as the crate parses it.
    fn stat_of(line: &[u8]) -> Option<(i32, u64)> {
        let stat = procfs::process::Stat::from_read(line).ok()?;
        Some((stat.ppid, stat.starttime))
    }

    #[test]
    fn stat_fields_are_taken_after_the_last_paren() {
        let line = b"4242 (a) (1 2 3) x) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(stat_of(line), Some((17, 98765)));
    }

    #[test]
    fn stat_with_a_newline_in_comm_parses() {
        let line =
            b"7 (x\n) 9) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(stat_of(line), Some((1, 55)));
    }

    #[test]
    fn malformed_stat_is_refused() {
        assert_eq!(stat_of(b""), None);
        assert_eq!(stat_of(b"1 (x S 0 1"), None);
        assert_eq!(stat_of(b"1 (x) S 0 1 1 0"), None);
        assert_eq!(
            stat_of(
                b"1 (x) S zero 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
            ),
            None
        );
    }

    #[test]
    fn os_errors_map_to_the_port_errors() {
        let kind = |e: ProcessError| match e {
            ProcessError::Gone => "Gone",
            ProcessError::Denied => "Denied",
            ProcessError::Unreadable(_) => "Unreadable",
        };
        let os = io::Error::from_raw_os_error;
        for fault in [Fault::Read, Fault::Environ, Fault::Exe] {
            assert_eq!(kind(fault.io_error(os(libc::ENOENT))), "Gone");
            assert_eq!(kind(fault.io_error(os(libc::ESRCH))), "Gone");
            assert_eq!(kind(fault.io_error(os(libc::EIO))), "Unreadable");
            assert_eq!(kind(fault.port_error(ProcError::NotFound(None))), "Gone");
            assert_eq!(
                kind(fault.port_error(ProcError::Incomplete(None))),
                "Unreadable"
            );
        }
        for errno in [libc::EACCES, libc::EPERM] {
            assert_eq!(kind(Fault::Environ.io_error(os(errno))), "Denied");
            assert_eq!(kind(Fault::Exe.io_error(os(errno))), "Denied");
            assert_eq!(kind(Fault::Read.io_error(os(errno))), "Unreadable");
        }
        let denied = || ProcError::PermissionDenied(None);
        assert_eq!(kind(Fault::Environ.port_error(denied())), "Denied");
        assert_eq!(kind(Fault::Exe.port_error(denied())), "Denied");
        assert_eq!(kind(Fault::Read.port_error(denied())), "Unreadable");
    }

    /// The uid is the real one, the first number of `status`'s `Uid:`
    /// line. As root, a child whose real uid differs from its effective one
    /// (`setpriv --ruid`) tells them apart; elsewhere both are ours.
    #[test]
    fn uid_is_the_real_uid() {
        let me = ProcFs::new().current().expect("self");
        assert_eq!(me.uid, rustix::process::getuid().as_raw());
        if me.uid != 0 {
            return;
        }
        let (mut child, stdin) =
            echoing_child(Command::new("setpriv").args(["--ruid", "65534", "cat"]));
        let reported = ProcFs::new().process(child.id()).map(|p| p.uid);
        let effective = Process::new(i32::try_from(child.id()).expect("pid"))
            .and_then(|p| p.status())
            .map(|s| s.euid);
        drop(stdin);
        child.wait().expect("reap");
        assert_eq!(effective.expect("status"), 0);
        assert_eq!(reported.expect("process"), 65534);
    }

    /// A process once opened stays that process: after it has been reaped,
    /// every read through its descriptor fails as `Gone`, whatever the pid
    /// names by then. This is why one call cannot mix two processes.
    #[test]
    fn an_opened_process_that_is_reaped_is_gone() {
        let (mut child, stdin) = echoing_child(&mut Command::new("/bin/cat"));
        let pid = child.id();
        let table = ProcFs::new();
        let opened = table.open(pid).expect("open");
        assert_eq!(read_process(&opened, pid).expect("alive").pid, pid);
        drop(stdin);
        child.wait().expect("reap");
        assert!(matches!(
            read_process(&opened, pid),
            Err(ProcessError::Gone)
        ));
        assert!(matches!(
            opened.stat().map_err(Fault::Read.map()),
            Err(ProcessError::Gone)
        ));
    }

    #[test]
    fn environ_splits_at_the_first_equals() {
        let vars = parse_environ(b"A=1\0B=x=y\0EMPTY=\0BARE\0");
        let expected: Environ = vec![
            (b"A".to_vec(), b"1".to_vec()),
            (b"B".to_vec(), b"x=y".to_vec()),
            (b"EMPTY".to_vec(), Vec::new()),
            (b"BARE".to_vec(), Vec::new()),
        ];
        assert_eq!(vars, expected);
    }

    /// The start time of `pid` as an independent reader sees it: the 20th
    /// field after the last `") "` of its `stat` line.
    fn start_time_of(pid: u32) -> u64 {
        let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let after = &line[line.rfind(") ").expect("') '") + 2..];
        after
            .split(' ')
            .nth(19)
            .expect("field 22")
            .parse()
            .expect("number")
    }

    /// Spawns `command` (a `cat`) and waits until it echoes a line, so it
    /// has exec'd: its name, uid and environment are final.
    fn echoing_child(command: &mut Command) -> (std::process::Child, std::process::ChildStdin) {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"ready\n").expect("write");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line, "ready\n");
        (child, stdin)
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "mosaic-procfs-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir(&dir).expect("temp dir");
        dir
    }

    /// The device and inode of the file at `path` now, links followed.
    fn identity_of(path: &Path) -> ExeIdentity {
        let meta = std::fs::metadata(path).expect("metadata");
        ExeIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    /// This process's namespaces, by `stat` of `/proc/self/ns/*`.
    fn own_namespaces() -> Namespaces {
        let id = |kind: &str| {
            let meta = std::fs::metadata(format!("/proc/self/ns/{kind}")).expect("ns");
            NamespaceId {
                dev: meta.dev(),
                ino: meta.ino(),
            }
        };
        Namespaces {
            pid: id("pid"),
            mnt: id("mnt"),
            user: id("user"),
        }
    }

    /// The environment variable that marks the run of
    /// [`proc_table_conforms`] that its root run starts as uid 65534.
    const AS_NOBODY: &str = "MOSAIC_PROCFS_CONFORMANCE_AS_NOBODY";

    /// The real table against the port's suite: this test process stays
    /// alive; a reaped child's pid is free; a child whose command name is
    /// `m) (1 2) (z` must be reported exactly; and pid 1, a process of root
    /// whose environment the kernel refuses to anyone else, is the denied
    /// case (`EACCES` → `Denied`). Root may read every environment, so as
    /// root the test runs itself again as uid 65534 and the suite runs
    /// there: the denied case is checked wherever the test runs.
    #[test]
    fn proc_table_conforms() {
        if ProcFs::new().current().expect("self").uid == 0 {
            let status = Command::new(std::env::current_exe().expect("current_exe"))
                .args(["--exact", "procfs::tests::proc_table_conforms"])
                .args(["--test-threads", "1", "--nocapture"])
                .env(AS_NOBODY, "1")
                .uid(65534)
                .gid(65534)
                .status()
                .expect("run the suite as uid 65534");
            assert!(status.success(), "the suite as uid 65534: {status}");
        } else {
            conforms_here();
        }
    }

    /// [`proc_table_conforms`] as a user other than root.
    fn conforms_here() {
        // The one pid the suite's denied case may use: refused to us, as
        // the suite then checks that the adapter says.
        let denied = 1;
        assert!(
            matches!(
                std::fs::read(format!("/proc/{denied}/environ")),
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied
            ),
            "pid {denied}'s environment is readable here: run this test as a \
             user other than pid 1's"
        );
        let current_exe = std::env::current_exe().expect("current_exe");
        let dir = temp_dir("conformance");
        let cat = dir.join("m) (1 2) (z");
        std::os::unix::fs::symlink("/bin/cat", &cat).expect("symlink");
        let (mut odd, stdin) = echoing_child(&mut Command::new(&cat));
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", odd.id())).expect("comm");
        assert_eq!(comm, "m) (1 2) (z\n");

        let mut exited = Command::new("/bin/true").spawn().expect("spawn");
        let gone = exited.id();
        exited.wait().expect("reap");

        let (name, value) = std::env::vars_os().next().expect("an environment variable");
        let fixture = ProcessFixture {
            alive: std::process::id(),
            gone,
            env_var: (name.into_encoded_bytes(), value.into_encoded_bytes()),
            denied,
            expect: vec![ProcessInfo {
                pid: odd.id(),
                ppid: std::process::id(),
                uid: ProcFs::new().current().expect("self").uid,
                start_time: start_time_of(odd.id()),
                exe: std::fs::canonicalize("/bin/cat").ok(),
            }],
            exe_identities: vec![
                // This test process's running image is its `current_exe`.
                (std::process::id(), identity_of(&current_exe)),
                (odd.id(), identity_of(Path::new("/bin/cat"))),
            ],
            // The child shares this process's namespaces.
            namespaces: vec![
                (std::process::id(), own_namespaces()),
                (odd.id(), own_namespaces()),
            ],
            // A process in another PID namespace is app/tests/sandbox.rs's
            // (under bubblewrap, through the human proof).
            elsewhere: None,
        };
        let outcome = std::panic::catch_unwind(|| run(ProcFs::new, &fixture));

        drop(stdin);
        odd.wait().expect("reap the odd child");
        std::fs::remove_dir_all(&dir).expect("clean up");
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }

    /// The decision behind `exe_identity`: a file renamed over the path of a
    /// running executable changes what the path names, not what the process
    /// reports. Reading the link's text, or `stat` of the path, would follow
    /// the replacement.
    #[test]
    fn a_replaced_executable_still_reports_the_running_file() {
        let dir = temp_dir("replaced");
        let path = dir.join("cat");
        std::fs::copy("/bin/cat", &path).expect("copy cat");
        let running = identity_of(&path);
        let (mut child, stdin) = echoing_child(&mut Command::new(&path));
        let replacement = dir.join("cat.new");
        std::fs::copy("/bin/cat", &replacement).expect("copy cat again");
        std::fs::rename(&replacement, &path).expect("rename over it");
        let at_the_path = identity_of(&path);
        assert_ne!(at_the_path, running, "the path names another file now");

        let table = ProcFs::new();
        let reported = table.exe_identity(child.id());
        let path_text = table.process(child.id()).map(|p| p.exe);
        let deleted = format!(
            "{} (deleted)",
            std::fs::canonicalize(&path).expect("path").display()
        );
        drop(stdin);
        child.wait().expect("reap");
        std::fs::remove_dir_all(&dir).expect("clean up");
        assert_eq!(reported.expect("exe_identity"), running);
        // The old process's link text marks its file deleted, but a process
        // started from the path now runs the replacement under the plain
        // path: by path alone that one passes for the original.
        assert_eq!(path_text.expect("process"), Some(PathBuf::from(deleted)));
        // Once reaped, the pid has no executable to report.
        assert!(matches!(
            table.exe_identity(child.id()),
            Err(ProcessError::Gone)
        ));
    }

    #[test]
    fn own_process_is_readable() {
        let me = ProcFs::new().current().expect("self");
        assert_eq!(me.pid, std::process::id());
        assert_eq!(me.start_time, start_time_of(me.pid));
    }
}
