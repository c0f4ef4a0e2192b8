//! The `/proc` implementation of the [`ProcessTable`] port.
//!
//! A process is read from three files of `/proc/<pid>/`: `stat` (parent and
//! start time), `status` (real uid) and the `exe` link. Between those reads
//! the pid could be reused, so `stat` is read again at the end and the read
//! only succeeds when both start times agree: a different start time means
//! the process we began with is gone.
//!
//! The `stat` line is `pid (comm) state ppid ...`, and `comm` is chosen by
//! whoever named the executable: it may hold spaces, `)` and even newlines.
//! The fields are therefore split only after the *last* `)` of the line.
//!
//! The executable's identity is `stat` of the `exe` link, followed: the
//! kernel resolves that link to the very file the process mapped at `exec`,
//! so its device and inode stay those of the running image even after
//! another file was renamed or copied over its path, or it was deleted
//! (where the link's text, the path, would read the same, or `… (deleted)`).
//! It is bracketed by two `stat` reads like a process.
//!
//! Errors: a missing file (`ENOENT`) or a vanished process (`ESRCH`) is
//! [`ProcessError::Gone`]; `EACCES` on `environ` and `EACCES` or `EPERM` on
//! `exe` are [`ProcessError::Denied`];
//! everything else, including text that does not parse, is
//! [`ProcessError::Unreadable`] with the cause attached as its source (never
//! shown on the wire).

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use mosaic_ports::process::Environ;
use mosaic_ports::{ExeIdentity, ProcessError, ProcessInfo, ProcessTable};

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

    fn file(&self, pid: u32, name: &str) -> PathBuf {
        self.root.join(pid.to_string()).join(name)
    }

    /// `(ppid, start_time)` from `/proc/<pid>/stat`.
    fn stat(&self, pid: u32) -> Result<Stat, ProcessError> {
        let bytes = std::fs::read(self.file(pid, "stat")).map_err(gone_or_unreadable)?;
        parse_stat(pid, &bytes).map_err(|e| ProcessError::Unreadable(Box::new(e)))
    }
}

impl ProcessTable for ProcFs {
    fn process(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        let first = self.stat(pid)?;
        let status = std::fs::read(self.file(pid, "status")).map_err(gone_or_unreadable)?;
        let uid = parse_real_uid(&status).map_err(|e| ProcessError::Unreadable(Box::new(e)))?;
        // The link is unreadable for kernel threads and for other users'
        // processes without ptrace rights; that is "unknown", not an error.
        let exe = std::fs::read_link(self.file(pid, "exe")).ok();
        let last = self.stat(pid)?;
        if last != first {
            // The pid now names another process: ours has exited.
            return Err(ProcessError::Gone);
        }
        Ok(ProcessInfo {
            pid,
            ppid: first.ppid,
            uid,
            start_time: first.start_time,
            exe,
        })
    }

    fn environ(&self, pid: u32) -> Result<Environ, ProcessError> {
        let bytes = std::fs::read(self.file(pid, "environ")).map_err(environ_error)?;
        Ok(parse_environ(&bytes))
    }

    fn exe_identity(&self, pid: u32) -> Result<ExeIdentity, ProcessError> {
        let first = self.stat(pid)?;
        // `metadata` follows the link: the file mapped at exec, not its path.
        let exe = std::fs::metadata(self.file(pid, "exe"));
        let last = self.stat(pid)?;
        if last != first {
            // The pid now names another process: ours has exited.
            return Err(ProcessError::Gone);
        }
        // The process is still there, so a missing link means it has no
        // executable (a kernel thread), not that it is gone.
        let exe = exe.map_err(exe_error)?;
        Ok(ExeIdentity {
            dev: exe.dev(),
            ino: exe.ino(),
        })
    }
}

/// The fields of a `stat` line that the port reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    ppid: u32,
    start_time: u64,
}

/// Why a `/proc` file's text could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ParseError(&'static str);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unparsable /proc text: {}", self.0)
    }
}

impl std::error::Error for ParseError {}

fn gone_or_unreadable(e: io::Error) -> ProcessError {
    if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
        ProcessError::Gone
    } else {
        ProcessError::Unreadable(Box::new(e))
    }
}

/// `EACCES` on `environ` is the one failure callers treat differently.
fn environ_error(e: io::Error) -> ProcessError {
    if e.kind() == io::ErrorKind::PermissionDenied {
        ProcessError::Denied
    } else {
        gone_or_unreadable(e)
    }
}

/// The kernel hides another user's executable (`EACCES`, or `EPERM` from
/// the ptrace check); anything else about a live process's `exe` link is
/// unreadable.
fn exe_error(e: io::Error) -> ProcessError {
    if e.kind() == io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::EPERM) {
        ProcessError::Denied
    } else {
        ProcessError::Unreadable(Box::new(e))
    }
}

/// Parses `pid (comm) state ppid ... starttime ...`, splitting fields only
/// after the last `)`, so no command name can shift them. Field numbers are
/// those of `proc(5)`: ppid is field 4, starttime field 22.
fn parse_stat(pid: u32, bytes: &[u8]) -> Result<Stat, ParseError> {
    let open = bytes
        .iter()
        .position(|&b| b == b'(')
        .ok_or(ParseError("stat without '('"))?;
    let close = bytes
        .iter()
        .rposition(|&b| b == b')')
        .ok_or(ParseError("stat without ')'"))?;
    if close < open {
        return Err(ParseError("stat with ')' before '('"));
    }
    let head = std::str::from_utf8(&bytes[..open]).map_err(|_| ParseError("stat pid"))?;
    if head.trim_end().parse::<u32>() != Ok(pid) {
        return Err(ParseError("stat of another pid"));
    }
    let tail = std::str::from_utf8(&bytes[close + 1..]).map_err(|_| ParseError("stat fields"))?;
    // `fields[0]` is field 3 (state).
    let fields: Vec<&str> = tail.split_ascii_whitespace().collect();
    let field = |n: usize| {
        fields
            .get(n - 3)
            .copied()
            .ok_or(ParseError("stat too short"))
    };
    Ok(Stat {
        ppid: field(4)?.parse().map_err(|_| ParseError("stat ppid"))?,
        start_time: field(22)?
            .parse()
            .map_err(|_| ParseError("stat starttime"))?,
    })
}

/// The real uid: the first number of the `Uid:` line of `status`.
fn parse_real_uid(bytes: &[u8]) -> Result<u32, ParseError> {
    bytes
        .split(|&b| b == b'\n')
        .find_map(|line| line.strip_prefix(b"Uid:"))
        .and_then(|rest| std::str::from_utf8(rest).ok())
        .and_then(|rest| rest.split_ascii_whitespace().next())
        .and_then(|real| real.parse().ok())
        .ok_or(ParseError("status Uid"))
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
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::{Command, Stdio};

    #[test]
    fn stat_fields_are_taken_after_the_last_paren() {
        let line = b"4242 (a) (1 2 3) x) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 200 18446744073709551615\n";
        assert_eq!(
            parse_stat(4242, line),
            Ok(Stat {
                ppid: 17,
                start_time: 98765
            })
        );
    }

    #[test]
    fn stat_with_a_newline_in_comm_parses() {
        let line = b"7 (x\n) 9) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0\n";
        assert_eq!(
            parse_stat(7, line),
            Ok(Stat {
                ppid: 1,
                start_time: 55
            })
        );
    }

    #[test]
    fn malformed_stat_is_refused() {
        assert!(parse_stat(1, b"").is_err());
        assert!(parse_stat(1, b"1 (x S 0 1").is_err());
        assert!(parse_stat(1, b"1 (x) S 0 1 1 0").is_err());
        assert!(parse_stat(2, b"1 (x) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0").is_err());
        assert!(parse_stat(1, b"1 (x) S zero 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5").is_err());
    }

    #[test]
    fn os_errors_map_to_the_port_errors() {
        let kind = |e: ProcessError| match e {
            ProcessError::Gone => "Gone",
            ProcessError::Denied => "Denied",
            ProcessError::Unreadable(_) => "Unreadable",
        };
        let os = io::Error::from_raw_os_error;
        assert_eq!(kind(environ_error(os(libc::EACCES))), "Denied");
        assert_eq!(kind(environ_error(os(libc::ENOENT))), "Gone");
        assert_eq!(kind(environ_error(os(libc::ESRCH))), "Gone");
        assert_eq!(kind(environ_error(os(libc::EIO))), "Unreadable");
        assert_eq!(kind(gone_or_unreadable(os(libc::EACCES))), "Unreadable");
        assert_eq!(kind(gone_or_unreadable(os(libc::ESRCH))), "Gone");
    }

    #[test]
    fn real_uid_is_the_first_uid() {
        let status = b"Name:\tcat\nState:\tS\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n";
        assert_eq!(parse_real_uid(status), Ok(1000));
        assert!(parse_real_uid(b"Name:\tx\n").is_err());
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

    /// The real table against the port's suite: this test process stays
    /// alive; a reaped child's pid is free; a child whose command name is
    /// `m) (1 2) (z` must be reported exactly; and, where the kernel refuses
    /// root a foreign process's environment (no `CAP_SYS_PTRACE`), a child
    /// running as uid 65534 is the denied case.
    /// The device and inode of the file at `path` now, links followed.
    fn identity_of(path: &Path) -> ExeIdentity {
        let meta = std::fs::metadata(path).expect("metadata");
        ExeIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    #[test]
    fn proc_table_conforms() {
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

        let mut foreign = None;
        if ProcFs::new().current().expect("self").uid == 0 {
            let (child, stdin) = echoing_child(Command::new("/bin/cat").uid(65534).gid(65534));
            // Our own reading of its environ tells whether the kernel refuses
            // us here; the suite then checks that the adapter agrees.
            let denied = matches!(
                std::fs::read(format!("/proc/{}/environ", child.id())),
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied
            );
            foreign = Some((child, stdin, denied));
        }

        let (name, value) = std::env::vars_os().next().expect("an environment variable");
        let fixture = ProcessFixture {
            alive: std::process::id(),
            gone,
            env_var: (name.into_encoded_bytes(), value.into_encoded_bytes()),
            denied: foreign
                .as_ref()
                .and_then(|(child, _, denied)| denied.then_some(child.id())),
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
        };
        let outcome = std::panic::catch_unwind(|| run(ProcFs::new, &fixture));

        drop(stdin);
        odd.wait().expect("reap the odd child");
        if let Some((mut child, stdin, _)) = foreign {
            drop(stdin);
            child.wait().expect("reap the foreign child");
        }
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
    fn exe_errors_map_to_the_port_errors() {
        let os = io::Error::from_raw_os_error;
        assert!(matches!(exe_error(os(libc::EACCES)), ProcessError::Denied));
        assert!(matches!(exe_error(os(libc::EPERM)), ProcessError::Denied));
        assert!(matches!(
            exe_error(os(libc::ENOENT)),
            ProcessError::Unreadable(_)
        ));
    }

    #[test]
    fn own_process_is_readable() {
        let me = ProcFs::new().current().expect("self");
        assert_eq!(me.pid, std::process::id());
        assert_eq!(me.start_time, start_time_of(me.pid));
    }
}
