//! What `/proc` says of a running broker: its threads and their states,
//! its open files and its memory, and whether it has gone quiet.

use std::path::PathBuf;

use super::{wait_for, Broker};

/// One thread of a process as `/proc/<pid>/task/<tid>` shows it: its id,
/// its state letter (`R`, `S`, `D`, …) and its time on a CPU so far (the
/// first field of its `schedstat`, in nanoseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcTask {
    /// The thread's id.
    pub tid: u32,
    /// Its state letter.
    pub state: char,
    /// Nanoseconds on a CPU.
    pub run_ns: u64,
}

/// The threads of process `pid` (a thread that ends while it is read is
/// left out), by id.
pub fn proc_tasks(pid: u32) -> Vec<ProcTask> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let mut tasks: Vec<ProcTask> = std::fs::read_dir(&dir)
        .expect("the broker's threads in /proc")
        .flatten()
        .filter_map(|entry| {
            let tid = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let schedstat = std::fs::read_to_string(entry.path().join("schedstat")).ok()?;
            // The name in parentheses may hold anything; the state follows it.
            let state = stat[stat.rfind(')')? + 1..].trim_start().chars().next()?;
            let run_ns = schedstat.split_whitespace().next()?.parse().ok()?;
            Some(ProcTask { tid, state, run_ns })
        })
        .collect();
    tasks.sort_by_key(|t| t.tid);
    tasks
}

impl Broker {
    /// The broker process's resident set now, in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the broker's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// The broker's peak resident set since it started or since the last
    /// [`Broker::reset_peak_rss`], in KiB (`VmHWM`).
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the broker's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
    }

    /// Sets the broker's peak resident set back to what it holds now
    /// (`5` into `/proc/<pid>/clear_refs`), so the next
    /// [`Broker::peak_rss_kib`] is the peak of what came after.
    #[track_caller]
    pub fn reset_peak_rss(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5")
            .expect("reset the broker's peak resident set");
    }

    /// How many files the broker has open (its `/proc/<pid>/fd`): every
    /// connection it holds is one.
    pub fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("the broker's open files in /proc")
            .count()
    }

    /// The broker's thread count (`Threads:` of `/proc/<pid>/status`).
    pub fn threads(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the broker's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("Threads")
    }

    /// Waits until the broker is quiet: two scans in a row find every one
    /// of its threads asleep (`S`) with the same CPU time, so none ran in
    /// between. Bytes waiting in one of its sockets, a wake-up handed from
    /// one of its threads to another or a commit keep some thread runnable
    /// or in the disk, so a quiet broker has handled everything it had been
    /// sent before the wait began.
    #[track_caller]
    pub fn wait_quiet(&self) {
        let pid = self.pid();
        let mut previous: Option<Vec<ProcTask>> = None;
        wait_for("the broker goes quiet", || {
            let scan = proc_tasks(pid);
            let quiet = scan.iter().all(|t| t.state == 'S');
            let same = quiet && previous.as_ref() == Some(&scan);
            previous = quiet.then_some(scan);
            same
        });
    }
}

/// Every descendant of `pid` whose command name is `comm`.
pub fn descendants_named(pid: u32, comm: &str) -> Vec<u32> {
    let mut parents = std::collections::HashMap::new();
    let mut names = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let ppid = stat[close + 2..]
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.insert(p, ppid);
            names.insert(p, stat[open + 1..close].to_owned());
        }
    }
    let under = |mut p: u32| loop {
        match parents.get(&p) {
            Some(&parent) if parent == pid => return true,
            Some(&parent) if parent > 1 => p = parent,
            Some(_) | None => return false,
        }
    };
    names
        .iter()
        .filter(|(p, name)| name.as_str() == comm && under(**p))
        .map(|(p, _)| *p)
        .collect()
}
