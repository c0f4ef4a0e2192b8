//! What `/proc` says about a process's threads: their state, their CPU
//! time, what a sleeping one waits in; and the one wait the change-feed
//! figures need: until a process has gone quiet.
//!
//! "Quiet" is a condition, not a pause: every thread looked at is asleep
//! (`S`), in two scans one after the other, and no thread's CPU time moved
//! between them. A request that sits unread in a socket, a wake-up passed
//! from one thread to another or a commit in progress keeps some thread
//! runnable (`R`) or in the disk (`D`), and a thread that ran between the
//! scans shows in its CPU time; so once a broker is quiet it has done
//! everything it was given.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::output::Failure;

/// What a thread blocked in a Unix stream read waits in (`wchan`).
pub const UNIX_READ: &str = "unix_stream_read_generic";

/// The clock of `utime` and `stime` in `/proc/<pid>/stat`: `USER_HZ`, which
/// Linux fixes at 100 for every architecture (`sysconf(_SC_CLK_TCK)`).
pub const TICKS_PER_S: f64 = 100.0;

/// One thread of a process.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its id.
    pub tid: u32,
    /// Its name (`comm`).
    pub comm: String,
    /// Its state letter (`R`, `S`, `D`, …).
    pub state: char,
    /// Nanoseconds it has spent on a CPU (`schedstat`).
    pub run_ns: u64,
}

/// `/proc/<pid>` (or `/proc/self` for `None`).
pub fn proc_dir(pid: Option<u32>) -> PathBuf {
    match pid {
        Some(pid) => PathBuf::from(format!("/proc/{pid}")),
        None => PathBuf::from("/proc/self"),
    }
}

/// The fields of a `stat` line after the `(comm)`, whose name may hold
/// spaces and parentheses: field 3 (the state) comes first.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// Every thread of the process at `dir`, as far as they can be read (a
/// thread that ends while it is read is left out).
///
/// # Errors
/// When the task directory cannot be listed.
pub fn tasks(dir: &Path) -> Result<Vec<Task>, Failure> {
    let entries = std::fs::read_dir(dir.join("task"))
        .map_err(|_| Failure::new("cannot list a process's threads in /proc"))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let (Ok(stat), Ok(schedstat), Ok(comm)) = (
            std::fs::read_to_string(path.join("stat")),
            std::fs::read_to_string(path.join("schedstat")),
            std::fs::read_to_string(path.join("comm")),
        ) else {
            continue;
        };
        let Some(state) = stat_fields(&stat)
            .and_then(|f| f.first().copied())
            .and_then(|s| s.chars().next())
        else {
            continue;
        };
        let Some(run_ns) = schedstat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
        else {
            continue;
        };
        out.push(Task {
            tid,
            comm: comm.trim_end().to_owned(),
            state,
            run_ns,
        });
    }
    out.sort_by_key(|t| t.tid);
    Ok(out)
}

/// What the thread `tid` of the process at `dir` sleeps in (`wchan`), or
/// `None` when the kernel does not say.
pub fn wchan(dir: &Path, tid: u32) -> Option<String> {
    std::fs::read_to_string(dir.join("task").join(tid.to_string()).join("wchan"))
        .ok()
        .filter(|w| !w.is_empty() && w != "0")
}

/// The process's CPU time so far, `utime + stime` of `/proc/<pid>/stat`,
/// in ticks of [`TICKS_PER_S`] (every thread, those that ended included).
///
/// # Errors
/// When the stat line cannot be read or parsed.
pub fn cpu_ticks(dir: &Path) -> Result<u64, Failure> {
    let stat = std::fs::read_to_string(dir.join("stat"))
        .map_err(|_| Failure::new("cannot read a process's /proc stat"))?;
    let fields = stat_fields(&stat).ok_or(Failure::new("a /proc stat line without its name"))?;
    // utime and stime are fields 14 and 15; the slice starts at field 3.
    let field = |n: usize| -> Result<u64, Failure> {
        fields
            .get(n - 3)
            .and_then(|v| v.parse().ok())
            .ok_or(Failure::new("a /proc stat line without utime or stime"))
    };
    Ok(field(14)? + field(15)?)
}

/// The process's CPU time from its live threads' `schedstat`, in
/// nanoseconds: finer than [`cpu_ticks`], but blind to threads that ended.
///
/// # Errors
/// When the threads cannot be listed.
pub fn run_ns(dir: &Path) -> Result<u64, Failure> {
    Ok(tasks(dir)?.iter().map(|t| t.run_ns).sum())
}

/// How many file descriptors the process at `dir` has open.
///
/// # Errors
/// When its `fd` directory cannot be listed.
pub fn fd_count(dir: &Path) -> Result<usize, Failure> {
    Ok(std::fs::read_dir(dir.join("fd"))
        .map_err(|_| Failure::new("cannot list a process's open files in /proc"))?
        .count())
}

/// The soft limit on open files of the process at `dir`, from its
/// `limits` (`None` for unlimited or unreadable).
pub fn nofile_soft(dir: &Path) -> Option<u64> {
    let limits = std::fs::read_to_string(dir.join("limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Raises this process's soft limit on open files to its hard limit, so
/// it can hold a thousand sockets; returns the soft limit now in force.
pub fn raise_nofile() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        // Without it the figure fails on its own later, and says so.
        let _ = setrlimit(Resource::Nofile, limit);
    }
    getrlimit(Resource::Nofile).current
}

/// Waits until the process at `dir` is quiet (see the module docs),
/// looking only at the threads `watched` selects; fails after `within`.
///
/// # Errors
/// `what` when it does not go quiet in time, or its threads cannot be read.
pub fn wait_quiet(
    dir: &Path,
    watched: impl Fn(&Task) -> bool,
    within: Duration,
    what: &'static str,
) -> Result<(), Failure> {
    let deadline = Instant::now() + within;
    let mut previous: Option<Vec<(u32, u64)>> = None;
    loop {
        let scan: Vec<Task> = tasks(dir)?.into_iter().filter(|t| watched(t)).collect();
        let asleep = scan.iter().all(|t| t.state == 'S');
        let times: Vec<(u32, u64)> = scan.iter().map(|t| (t.tid, t.run_ns)).collect();
        if asleep && previous.as_ref() == Some(&times) {
            return Ok(());
        }
        previous = asleep.then_some(times);
        if Instant::now() > deadline {
            return Err(Failure::new(what));
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let line = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14";
        let fields = stat_fields(line).expect("fields");
        assert_eq!(fields[0], "S");
        // utime (14) and stime (15).
        assert_eq!(fields[14 - 3], "11");
        assert_eq!(fields[15 - 3], "12");
    }

    #[test]
    fn this_process_reads_as_itself() {
        let dir = proc_dir(None);
        let me = tasks(&dir).expect("threads");
        assert!(me.iter().any(|t| t.tid == std::process::id()));
        assert!(fd_count(&dir).expect("fds") >= 3);
        cpu_ticks(&dir).expect("cpu");
    }

    #[test]
    fn a_thread_blocked_on_a_socket_reads_as_asleep_in_its_read() {
        use std::io::{Read, Write};
        let (mut a, mut b) = std::os::unix::net::UnixStream::pair().expect("a pair");
        let (started, has_started) = std::sync::mpsc::channel();
        let reader = std::thread::Builder::new()
            .name("probe-reader".into())
            .spawn(move || {
                started.send(()).expect("the test waits for this");
                let mut byte = [0u8; 1];
                a.read_exact(&mut byte).map(|()| byte[0])
            })
            .expect("a thread");
        // A thread is named before its closure runs, so once it has said it
        // started, /proc lists it under its name; it lives until it reads
        // the byte written below. Looking it up before that signal raced
        // its start: an empty selection of threads reads as quiet.
        has_started.recv().expect("the reader started");
        let dir = proc_dir(None);
        let tid = tasks(&dir)
            .expect("threads")
            .into_iter()
            .find(|t| t.comm == "probe-reader")
            .expect("the reader")
            .tid;
        // What the test waits for: the reader asleep, its run time still.
        wait_quiet(
            &dir,
            |t| t.tid == tid,
            Duration::from_secs(60),
            "the reader never slept",
        )
        .expect("quiet");
        if let Some(w) = wchan(&dir, tid) {
            assert_eq!(w, UNIX_READ);
        }
        b.write_all(&[7]).expect("write");
        assert_eq!(reader.join().expect("joined").expect("read"), 7);
    }
}
