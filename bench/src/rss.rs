//! `broker_rss`: the peak resident memory of a broker serving 100
//! connected browser clients. The broker must be a process of its own (the
//! bench's RSS is the bench's), so this figure starts one as a child and
//! speaks the host IPC to it (README, "The broker"):
//! `{"op":"boot","config":{…,"browser":{"listen":"127.0.0.1:0"}}}` on its
//! stdin, the boot reply (socket, capabilities, browser url and UI token)
//! on its stdout, and `{"op":"close"}` at the end.
//!
//! The child is `mosaic-bus broker` when that binary sits next to the bench
//! binary (`cargo build --release -p mosaic-app` first); otherwise, and
//! always under `--quick` (which must not depend on another package's build
//! output), the bench binary itself with `--broker-child`, which runs the
//! same entry point, [`mosaic_app::commands::host::run`]. The figure names which.
//!
//! With the broker booted, the bench connects the browser clients (all
//! capable panes, so every request reaches each stream and is raced for),
//! runs `message.send` requests and browser round trips through it, then
//! has agents work it at once (`message.send` and `inbox` in turn, each
//! agent its own role and thread, while the panes stay connected), and
//! then reads `VmHWM` (the peak RSS over the process's whole life) and
//! `VmRSS` from `/proc/<pid>/status`.

use mosaic_domain::Verb;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mosaic_client::socket::{Client, Session};
use serde_json::{json, Value};

use crate::browser::Remote;
use crate::live::{self, Endpoint, Grants};
use crate::output::{round1, Failure, Fields};
use crate::Ctx;

/// The argument that makes the bench binary act as `mosaic-bus broker`.
pub const CHILD_FLAG: &str = "--broker-child";

/// The target: broker RSS under 40 MiB at 100 clients.
const TARGET_MIB: f64 = 40.0;

/// The longest the bench waits for a host reply or for the child's exit.
const WAIT: Duration = Duration::from_secs(30);

/// Runs the host protocol on this process's stdin and stdout, as
/// `mosaic-bus broker` does; returns its exit code.
pub fn child_main() -> u8 {
    mosaic_app::commands::host::run(
        BufReader::new(std::io::stdin()),
        &mut std::io::stdout().lock(),
    )
}

/// The program to start, its argument and how the figure names it.
pub(crate) fn program(quick: bool) -> Result<(PathBuf, &'static str, &'static str), Failure> {
    let me =
        std::env::current_exe().map_err(|_| Failure::new("cannot find the bench's own binary"))?;
    let sibling = me.with_file_name("mosaic-bus");
    if !quick && sibling.is_file() {
        return Ok((sibling, "broker", "mosaic-bus broker"));
    }
    Ok((
        me,
        CHILD_FLAG,
        "mosaic-bench --broker-child (mosaic_app::commands::host::run, as mosaic-bus broker)",
    ))
}

/// Memory of a process, from `/proc/<pid>/status`, in KiB.
pub(crate) struct Memory {
    pub(crate) hwm_kib: u64,
    pub(crate) rss_kib: u64,
    pub(crate) threads: u64,
}

pub(crate) fn memory(pid: u32) -> Result<Memory, Failure> {
    let status = i32::try_from(pid)
        .map_err(|_| Failure::new("the broker's pid is out of range"))
        .and_then(|pid| {
            procfs::process::Process::new(pid)
                .and_then(|p| p.status())
                .map_err(|_| Failure::new("cannot read the broker's /proc status"))
        })?;
    let field = |kib: Option<u64>| {
        kib.ok_or(Failure::new(
            "the broker's /proc status lacks a memory field",
        ))
    };
    Ok(Memory {
        hwm_kib: field(status.vmhwm)?,
        rss_kib: field(status.vmrss)?,
        threads: status.threads,
    })
}

pub(crate) fn mib(kib: u64) -> Value {
    round1(kib as f64 / 1024.0)
}

/// The broker child and its host channel.
pub(crate) struct Host {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// The child's log lines, when [`Host::spawn_logged`] started it.
    logs: Option<mpsc::Receiver<String>>,
}

/// Forwards each line `from` yields to a channel, on a thread of its own.
fn lines_of(from: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { return };
            if send.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

impl Host {
    pub(crate) fn spawn(program: &Path, arg: &str) -> Result<Self, Failure> {
        Self::start(Command::new(program).arg(arg).stderr(Stdio::inherit()))
    }

    /// As [`Host::spawn`], with the child logging JSON lines at `info` to a
    /// pipe that [`Host::logs`] reads.
    pub(crate) fn spawn_logged(program: &Path, arg: &str) -> Result<Self, Failure> {
        Self::start(
            Command::new(program)
                .arg(arg)
                .env("MOSAIC_LOG", "info")
                .env("MOSAIC_LOG_FORMAT", "json")
                .stderr(Stdio::piped()),
        )
    }

    fn start(command: &mut Command) -> Result<Self, Failure> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|_| Failure::new("cannot start the broker child"))?;
        let stdin = child.stdin.take();
        let lines = child.stdout.take().map(lines_of);
        let logs = child.stderr.take().map(lines_of);
        Ok(Self {
            child: Some(child),
            stdin,
            lines: lines.ok_or(Failure::new("the broker child has no stdout"))?,
            logs,
        })
    }

    /// [`Host::close`], then every line the child logged, parsed (lines
    /// that are not JSON are left out): the child has exited, so its log
    /// pipe has ended.
    pub(crate) fn close_logged(mut self) -> Result<Vec<Value>, Failure> {
        let logs = self.logs.take();
        self.close()?;
        Ok(logs.map_or_else(Vec::new, |logs| {
            logs.iter()
                .filter_map(|line| serde_json::from_str(&line).ok())
                .collect()
        }))
    }

    pub(crate) fn pid(&self) -> Result<u32, Failure> {
        self.child
            .as_ref()
            .map(Child::id)
            .ok_or(Failure::new("the broker child is gone"))
    }

    /// Sends one host line and returns the reply line, parsed.
    pub(crate) fn host(&mut self, message: &Value) -> Result<Value, Failure> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or(Failure::new("the broker child's stdin is closed"))?;
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|_| Failure::new("cannot write to the broker child"))?;
        let line = self
            .lines
            .recv_timeout(WAIT)
            .map_err(|_| Failure::new("the broker child did not reply"))?;
        serde_json::from_str(&line)
            .map_err(|_| Failure::new("the broker child's reply is not JSON"))
    }

    /// Boots the broker on `config`: the reply, which must be `ok`, and the
    /// socket it serves.
    pub(crate) fn boot(&mut self, config: &Value) -> Result<(Value, PathBuf), Failure> {
        let reply = self.host(&json!({"op": "boot", "config": config}))?;
        if reply["ok"] != true {
            return Err(Failure::new("the broker child refused the boot"));
        }
        let socket = reply["path"]
            .as_str()
            .map(PathBuf::from)
            .ok_or(Failure::new("the boot reply has no socket path"))?;
        Ok((reply, socket))
    }

    /// `{"op":"close"}`, then the exit, which must be 0.
    pub(crate) fn close(mut self) -> Result<(), Failure> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or(Failure::new("the broker child's stdin is closed"))?;
        stdin
            .write_all(b"{\"op\":\"close\"}\n")
            .and_then(|()| stdin.flush())
            .map_err(|_| Failure::new("cannot write to the broker child"))?;
        let mut child = self
            .child
            .take()
            .ok_or(Failure::new("the broker child is gone"))?;
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(_)) => return Err(Failure::new("the broker child did not exit 0")),
                Ok(None) if started.elapsed() < WAIT => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(Failure::new("the broker child did not exit after close"));
                }
            }
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `broker_rss`: the broker child's peak RSS with the browser clients
/// connected and traffic served.
///
/// # Errors
/// When the child cannot be started or booted, a client cannot connect, a
/// request fails, or `/proc` cannot be read.
pub fn broker_rss(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let (program, arg, binary) = program(ctx.quick)?;
    let root = live::data_root(ctx, "rss")?;
    let roles: Vec<(String, Grants)> = std::iter::once(("web".to_owned(), Grants::SendAndSnapshot))
        .chain((0..sizes.rss_agents).map(|i| (format!("a{i:02}"), Grants::Send)))
        .collect();
    let config = live::boot_config(&root, &roles, true);
    let mut host = Host::spawn(&program, arg)?;
    let pid = host.pid()?;
    let (reply, socket) = host.boot(&config)?;
    let cap = reply["launches"][0]["cap"]
        .as_str()
        .ok_or(Failure::new("the boot reply has no capability"))?;
    let endpoint = Endpoint::new(
        reply["browser"]["url"]
            .as_str()
            .ok_or(Failure::new("the boot reply has no browser url"))?,
        reply["browser"]["token"]
            .as_str()
            .ok_or(Failure::new("the boot reply has no UI token"))?
            .to_owned(),
    )?;
    let agent = Client::new(&socket, cap);
    agent
        .call(Verb::RoleClaim.as_str(), json!({}))
        .map_err(|r| Failure::refused("role.claim refused", r))?;
    let agents = (1..roles.len())
        .map(|i| {
            let cap = reply["launches"][i]["cap"]
                .as_str()
                .ok_or(Failure::new("the boot reply has no capability"))?;
            let client = Session::new(Client::new(&socket, cap));
            client
                .call(Verb::RoleClaim.as_str(), json!({}))
                .map_err(|r| Failure::refused("role.claim refused", r))?;
            Ok(client)
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    let booted = memory(pid)?;
    let remote = Remote::connect(&endpoint, sizes.rss_clients)?;
    let connected = memory(pid)?;
    live::warm_up(&agent, sizes.rss_sends)?;
    let trips = remote.trips(&agent, sizes.rss_trips)?;
    let served = memory(pid)?;
    let (busy, busy_time) = work(&agents, sizes.rss_agent_requests)?;
    let end = memory(pid)?;
    drop(remote);
    host.close()?;
    let hwm_mib = end.hwm_kib as f64 / 1024.0;
    Ok(vec![
        ("vm_hwm_mib", mib(end.hwm_kib)),
        ("target", Value::from("vm_hwm_mib < 40")),
        ("met", Value::from(hwm_mib < TARGET_MIB)),
        ("clients", Value::from(sizes.rss_clients)),
        ("vm_rss_booted_mib", mib(booted.rss_kib)),
        ("vm_rss_connected_mib", mib(connected.rss_kib)),
        ("vm_rss_served_mib", mib(served.rss_kib)),
        ("vm_hwm_served_mib", mib(served.hwm_kib)),
        ("vm_rss_end_mib", mib(end.rss_kib)),
        ("threads", Value::from(end.threads)),
        ("message_sends", Value::from(sizes.rss_sends)),
        ("browser_trips", Value::from(trips.count())),
        ("browser_rtt_p50_us", round1(trips.percentile_us(50.0))),
        ("busy_agents", Value::from(agents.len())),
        ("busy_requests", Value::from(busy)),
        (
            "busy_requests_per_s",
            round1(busy as f64 / busy_time.as_secs_f64()),
        ),
        ("binary", Value::from(binary)),
        (
            "note",
            Value::from("VmHWM of the broker process (its peak over boot, connections and traffic), from /proc/<pid>/status; every client is a capable pane; _served: after the sends and trips, before the busy agents"),
        ),
    ])
}

/// Every agent at once, each on its own thread: `requests` requests,
/// `message.send` and `inbox` in turn.
///
/// # Errors
/// The first refusal of any agent.
fn work(agents: &[Session], requests: usize) -> Result<(usize, Duration), Failure> {
    let start = Instant::now();
    let results: Vec<Result<(), Failure>> = std::thread::scope(|scope| {
        let handles: Vec<_> = agents
            .iter()
            .map(|agent| {
                scope.spawn(move || {
                    (0..requests).try_for_each(|n| {
                        if n % 2 == 0 {
                            live::send(agent, n)
                        } else {
                            agent
                                .call(Verb::Inbox.as_str(), json!({}))
                                .map(drop)
                                .map_err(|r| Failure::refused("inbox refused", r))
                        }
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or(Err(Failure::new("an agent thread panicked")))
            })
            .collect()
    });
    results.into_iter().collect::<Result<(), Failure>>()?;
    Ok((agents.len() * requests, start.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_of_this_process_is_read() {
        let me = memory(std::process::id()).unwrap();
        assert!(me.rss_kib > 0);
        assert!(me.hwm_kib >= me.rss_kib);
        assert!(me.threads >= 1);
        assert!(memory(u32::MAX).is_err());
    }
}
