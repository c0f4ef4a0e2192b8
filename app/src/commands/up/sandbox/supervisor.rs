//! The supervisor `sandbox-exec --control-fd N` becomes inside a run's
//! sandbox, in place of executing the program: it stays, starts the
//! program on `up`'s orders, as often as `up` asks, and reports each exit
//! ([`super::control`] is the protocol). Everything in this file runs in
//! that process, after `sandbox-exec` confined itself (its seccomp
//! filter, Landlock scopes, process cap and keyring) and its main thread
//! took the socket filter too, so each program it starts has the same
//! confinement: a child keeps the filters and scopes of the thread that
//! started it across `fork` and `exec`, and this process starts nothing
//! else but the program. Only the connector's thread
//! ([`super::connector`]), started before the socket filter, makes Unix
//! sockets: the agent's connections to the broker.
//!
//! # Its loop
//!
//! One thread reads `up`'s orders, another per start waits for the
//! program; both hand what they saw to the main thread over one channel,
//! which alone starts, signals and reports. The program leads a process
//! group of its own: `term` and `kill` reach what it started too, and
//! when it exits, what it left behind in its group is killed before the
//! exit is reported, so a new start finds none of it.
//!
//! # What a program gets
//!
//! Its command and environment as `sandbox-exec` was given them, the
//! arguments and variables of the order on top. With `--cap-file` the
//! first `start` (which `up` sends once the capability is sealed) copies
//! the capability into its private file and closes the descriptor;
//! otherwise each program inherits the descriptor, as the one program did
//! before. Each program inherits the agent's end of the connector, named by
//! `MOSAIC_BUS_CONNECTOR_FD`. The control socket is close-on-exec here: no program inherits
//! it.

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;

use super::control::{line, Order, Report, Stdin, MAX_CONTROL_LINE};
use crate::commands::up::harness::capfile;
use mosaic_client::socket::connector::CONNECTOR_FD_ENV;

/// The program `sandbox-exec` was given, as it starts each time.
#[derive(Debug)]
pub(super) struct Program {
    /// The program.
    pub(super) path: OsString,
    /// Its configured arguments.
    pub(super) args: Vec<OsString>,
    /// Variables set over the inherited environment (the proxy's and the
    /// connector's).
    pub(super) env: Vec<(&'static str, String)>,
    /// `--cap-file`: hand the capability over as a file at the first start.
    pub(super) cap_file: bool,
    /// The capability's descriptor.
    pub(super) capability: Option<OwnedFd>,
    /// The agent's end of the connector, inheritable: kept open so that
    /// every start of the program inherits it.
    pub(super) connector: Option<OwnedFd>,
}

/// What the main thread hears.
enum Heard {
    Order(Order),
    /// The order channel ended (`up` is gone, or sent what is no order).
    Closed,
    /// The program ended.
    Exited(io::Result<ExitStatus>),
}

/// Runs the supervisor over `control` until `up` closes it; returns the
/// exit code of `sandbox-exec` (0 then, 127 when it could not begin).
pub(super) fn run(control: OwnedFd, mut program: Program) -> u8 {
    // Only this process speaks to `up`.
    if let Err(e) = rustix::io::fcntl_setfd(&control, rustix::io::FdFlags::CLOEXEC) {
        eprintln!("mosaic-bus sandbox-exec: keeping the control channel: {e}");
        return 127;
    }
    let stream = UnixStream::from(control);
    let mut reports = match stream.try_clone() {
        Ok(writer) => writer,
        Err(e) => {
            eprintln!("mosaic-bus sandbox-exec: keeping the control channel: {e}");
            return 127;
        }
    };
    let (heard, hear) = mpsc::channel();
    let orders = heard.clone();
    let reader = std::thread::Builder::new()
        .name("sandbox-orders".into())
        .spawn(move || read_orders(stream, &orders));
    if let Err(e) = reader {
        eprintln!("mosaic-bus sandbox-exec: reading the control channel: {e}");
        return 127;
    }
    // The running program's pid, which leads its process group.
    let mut running: Option<rustix::process::Pid> = None;
    while let Ok(next) = hear.recv() {
        match next {
            Heard::Order(Order::Start {
                args,
                argv,
                env,
                stdin,
            }) => {
                if running.is_some() {
                    eprintln!("mosaic-bus sandbox-exec: refused a start: the program runs");
                    continue;
                }
                let report = match start(&mut program, argv.as_deref(), &args, &env, &stdin, &heard)
                {
                    Ok(pid) => {
                        running = i32::try_from(pid)
                            .ok()
                            .and_then(rustix::process::Pid::from_raw);
                        Report::Started { pid }
                    }
                    Err(e) => {
                        eprintln!(
                            "mosaic-bus sandbox-exec: starting {}: {e}",
                            program.path.to_string_lossy()
                        );
                        Report::Exited {
                            code: Some(127),
                            signal: None,
                        }
                    }
                };
                if send(&mut reports, &report).is_err() {
                    break;
                }
            }
            Heard::Order(Order::Term {}) => signal(running, rustix::process::Signal::TERM),
            Heard::Order(Order::Kill {}) => signal(running, rustix::process::Signal::KILL),
            Heard::Exited(status) => {
                // What the program left in its group goes with it.
                signal(running.take(), rustix::process::Signal::KILL);
                let report = match status {
                    Ok(status) => {
                        use std::os::unix::process::ExitStatusExt as _;
                        Report::Exited {
                            code: status.code(),
                            signal: status.signal(),
                        }
                    }
                    Err(_) => Report::Exited {
                        code: None,
                        signal: None,
                    },
                };
                if send(&mut reports, &report).is_err() {
                    break;
                }
            }
            Heard::Closed => break,
        }
    }
    signal(running, rustix::process::Signal::KILL);
    0
}

/// Reads `up`'s orders, one per line, until the end, a line too long or
/// one that is no order.
fn read_orders(stream: UnixStream, heard: &mpsc::Sender<Heard>) {
    let mut lines = BufReader::new(stream);
    let mut text = Vec::new();
    loop {
        text.clear();
        let limit = u64::try_from(MAX_CONTROL_LINE).unwrap_or(u64::MAX);
        match (&mut lines).take(limit).read_until(b'\n', &mut text) {
            Ok(0) | Err(_) => break,
            Ok(_) if !text.ends_with(b"\n") => break,
            Ok(_) => match serde_json::from_slice::<Order>(&text) {
                Ok(order) => {
                    if heard.send(Heard::Order(order)).is_err() {
                        return;
                    }
                }
                Err(_) => {
                    eprintln!("mosaic-bus sandbox-exec: the control channel sent what is no order");
                    break;
                }
            },
        }
    }
    let _ = heard.send(Heard::Closed);
}

/// Starts the program once: see the module documentation. Its pid.
fn start(
    program: &mut Program,
    argv: Option<&[String]>,
    args: &[String],
    env: &[(String, String)],
    stdin: &Stdin,
    heard: &mpsc::Sender<Heard>,
) -> io::Result<u32> {
    let mut command = Command::new(&program.path);
    match argv {
        Some(argv) => command.args(argv),
        None => command.args(&program.args),
    };
    command
        .args(args)
        .envs(program.env.iter().map(|(k, v)| (*k, v)))
        .process_group(0);
    if let Some(connector) = &program.connector {
        command.env(CONNECTOR_FD_ENV, connector.as_raw_fd().to_string());
    }
    if program.cap_file {
        if let Some(capability) = program.capability.take() {
            capfile::copy_cap(capability.as_fd(), Path::new(capfile::SANDBOX_CAP_FILE))
                .map_err(|r| io::Error::other(r.code()))?;
            // The file replaces the descriptor.
            drop(capability);
        }
        command
            .env_remove(mosaic_client::cap::CAP_FD_ENV)
            .env(mosaic_client::cap::CAP_FILE_ENV, capfile::SANDBOX_CAP_FILE);
    }
    command.envs(env.iter().map(|(k, v)| (k, v)));
    match stdin {
        Stdin::Null => command.stdin(Stdio::null()),
        Stdin::Text { .. } => command.stdin(Stdio::piped()),
    };
    let mut child = command.spawn()?;
    let mut input = child.stdin.take();
    if let (Some(pipe), Stdin::Text { text, hold }) = (&mut input, stdin) {
        // A program that exits before it reads is reported as it exits.
        let _ = pipe.write_all(text.as_bytes()).and_then(|()| pipe.flush());
        if !hold {
            input = None;
        }
    }
    let pid = child.id();
    let heard = heard.clone();
    std::thread::Builder::new()
        .name("sandbox-program".into())
        .spawn(move || {
            let status = child.wait();
            // Held until the program is gone.
            drop(input);
            let _ = heard.send(Heard::Exited(status));
        })?;
    Ok(pid)
}

/// Sends `signal` to the process group `leader` leads, if any.
fn signal(leader: Option<rustix::process::Pid>, signal: rustix::process::Signal) {
    if let Some(leader) = leader {
        let _ = rustix::process::kill_process_group(leader, signal);
    }
}

/// Writes one report.
fn send(to: &mut UnixStream, report: &Report) -> io::Result<()> {
    to.write_all(line(report).as_bytes())
}
