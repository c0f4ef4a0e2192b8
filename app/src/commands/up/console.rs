//! `up --console`: the human's console in the foreground, on `up`'s own
//! terminal, over the business `up` launched.
//!
//! `up` runs its own binary's `console` subcommand as a child that
//! inherits the terminal (standard input, output and error) and stays in
//! `up`'s process group, the terminal's foreground one. The console is
//! proven exactly as `mosaic-bus console` is: it re-executes itself once
//! with a fresh nonce (any nonce in `up`'s environment is removed first),
//! and the broker checks its `/proc` ancestry. That ancestry is the
//! console, `up` and whatever started `up`: `up` is not a launch and
//! carries no run marker, so the proof passes, while a console started
//! under an agent still fails it.
//!
//! So that nothing scribbles over the console, the agents' lines go to
//! their runs' files only ([`super::output`]), and while the console is
//! open `up`'s own standard error (its log lines) goes to a log file,
//! `<dataRoot>/up-XXXXXX.log` (created new, mode 0600, kept after the
//! run), which the first line's `log` names: it holds `up`'s own lines
//! only. The agents get `MOSAIC_CONSOLE=1`: the human sits at a
//! console and can answer a gated decision now.
//!
//! The console quitting (`q`) stops `up` as SIGINT does. A signal to `up`
//! first ends the console (SIGTERM, on which it restores the terminal and
//! exits), then the agents. `up` killed outright ends the console too: it
//! is started with `--parent PID` and asks the kernel for SIGTERM when
//! that process dies (`PR_SET_PDEATHSIG`). `--notify CMD` is passed on. While the console is open, `up` keeps serving
//! after every agent has exited.
//!
//! # The private channel
//!
//! What the harness agents are doing ([`super::harness::activity`]), and
//! each run's life, reach the console through a FIFO in a private folder
//! (0700), named by the console's hidden `--activity PATH`: a thread of
//! `up` opens its end once the console has opened its own, removes the
//! folder (both ends are open, nothing else needs the name), and writes
//! the table at once and after each change, until the console is gone.
//! A console that never opens it leaves the folder to [`Console`]'s drop.
//! A FIFO rather than an inherited descriptor, because the console
//! re-executes itself for its proof and nothing else of ours should cross
//! that.
//!
//! Orders come back through a second FIFO in the same folder,
//! [`ORDERS_FIFO`] (`orders`), which `up` holds open for reading and
//! writing from before the console starts (so opening it never waits, and
//! its end never comes), and which the console opens for writing before
//! it opens `activity`, so it is open before the folder goes. A thread of
//! `up` reads one order per line, at most [`MAX_ORDER_LINE`] bytes, and
//! hands each to the supervising loop; a line that is
//! no order is logged and skipped. Both lines' shapes, the lives on the
//! activity line and the orders, are `mosaic_client::wire::life`'s: the
//! protocol is documented there, once.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use mosaic_adapters::cause::logged;
use mosaic_client::wire::life::{Order, MAX_ORDER_LINE, ORDERS_FIFO};
use mosaic_domain::{BusinessId, Refusal};

use super::harness::activity::Activities;

use crate::commands::signals::{Event, Signals};
use crate::runtime::human_proof::NONCE_ENV;

/// The variable set to `1` in every agent's environment under `--console`.
pub const CONSOLE_ENV: &str = "MOSAIC_CONSOLE";

/// Creates `up`'s log file: new, private, in the data root, kept after
/// the run.
pub(super) fn open_log(data_root: &Path) -> Result<(File, PathBuf), Refusal> {
    let file = tempfile::Builder::new()
        .prefix("up-")
        .suffix(".log")
        .tempfile_in(data_root)
        .map_err(logged(
            Refusal::StorageUnavailable,
            "creating up's log file",
        ))?;
    let kept = file
        .keep()
        .map_err(logged(Refusal::StorageUnavailable, "keeping up's log file"))?;
    Ok(kept)
}

/// The console `up` runs on its terminal.
#[derive(Debug)]
pub(super) struct Console {
    child: Child,
    /// `up`'s own standard error, while it points at the log file.
    terminal: Option<OwnedFd>,
    status: Option<ExitStatus>,
    /// The private folder of the activity FIFO, until the feed opens it.
    feed: PathBuf,
}

impl Console {
    /// Starts `console` for `business` on `socket`, on this terminal (with
    /// `--notify CMD` when given, and `activities` fed to it), then points
    /// this process's standard error at `log`. `None` (logged) when it
    /// could not.
    pub(super) fn open(
        socket: &Path,
        business: &BusinessId,
        log: &File,
        notify: Option<&str>,
        activities: &Activities,
        orders: impl Fn(Order) -> bool + Send + 'static,
    ) -> Option<Console> {
        Self::start(socket, business, log, notify, activities, orders)
            .inspect_err(|e| {
                tracing::error!(cause = e.to_string().as_str(), "opening the console failed");
            })
            .ok()
    }

    fn start(
        socket: &Path,
        business: &BusinessId,
        log: &File,
        notify: Option<&str>,
        activities: &Activities,
        orders: impl Fn(Order) -> bool + Send + 'static,
    ) -> io::Result<Console> {
        let exe = std::env::current_exe()?;
        let feed = tempfile::Builder::new()
            .prefix("up-console-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()?;
        let fifo = feed.path().join("activity");
        let orders_path = feed.path().join(ORDERS_FIFO);
        for name in [&fifo, &orders_path] {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                name,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )?;
        }
        // Read and write: the open does not wait for a writer, and the
        // console closing its end is no end of it.
        let fifo_orders = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&orders_path)?;
        read_orders(fifo_orders, orders)?;
        let mut command = Command::new(exe);
        command
            .arg("console")
            .arg("--socket")
            .arg(socket)
            .args(["--business", business.as_str()])
            // The console asks the kernel for SIGTERM when this process
            // ends, however it ends (`kill -9` too), and restores the
            // terminal. This runs on `up`'s main thread, whose end is the
            // process's, so the signal is not sent early.
            .arg("--parent")
            .arg(std::process::id().to_string())
            .env_remove(NONCE_ENV);
        if let Some(notify) = notify {
            command.args(["--notify", notify]);
        }
        command.arg("--activity").arg(&fifo);
        let child = command.spawn()?;
        let activities = activities.clone();
        let folder = feed.path().to_path_buf();
        // Opening blocks until the console opens its end; a console that
        // never does leaves this thread waiting until `up` ends.
        std::thread::spawn(move || {
            let fed = std::fs::OpenOptions::new()
                .write(true)
                .open(&fifo)
                .and_then(|end| {
                    drop(feed);
                    activities.feed(end)
                });
            if let Err(e) = fed {
                tracing::debug!(cause = e.to_string().as_str(), "the console's feed ended");
            }
        });
        let mut console = Console {
            child,
            terminal: None,
            status: None,
            feed: folder,
        };
        let terminal = rustix::io::dup(std::io::stderr())?;
        rustix::stdio::dup2_stderr(log)?;
        console.terminal = Some(terminal);
        Ok(console)
    }

    /// Whether the console has exited (reaping it).
    pub(super) fn exited(&mut self) -> bool {
        if self.status.is_none() {
            match self.child.try_wait() {
                Ok(None) => return false,
                Ok(Some(status)) => self.status = Some(status),
                // Not ours to wait for any more: as good as gone.
                Err(_) => self.status = Some(ExitStatus::default()),
            }
            self.restore_stderr();
        }
        true
    }

    /// Whether it exited non-zero on its own: it could not open (the
    /// proof failed, or there is no terminal).
    pub(super) fn failed(&self) -> bool {
        self.status.is_some_and(|s| !s.success())
    }

    /// Ends the console: SIGTERM (it restores the terminal and exits), then
    /// SIGKILL after `grace` or a second signal.
    pub(super) fn stop(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        signals: &mut Signals,
        grace: Duration,
    ) {
        if self.exited() {
            return;
        }
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + grace;
        while !self.exited() {
            let left = deadline.saturating_duration_since(Instant::now());
            let next = runtime.block_on(async { tokio::time::timeout(left, signals.next()).await });
            if matches!(next, Ok(Event::Stop) | Err(_)) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                self.status = Some(ExitStatus::default());
                self.restore_stderr();
                return;
            }
        }
        // Ended by our signal: not a failure of its own.
        self.status = Some(ExitStatus::default());
    }

    /// Points standard error back at the terminal, once the console is gone.
    fn restore_stderr(&mut self) {
        if let Some(terminal) = self.terminal.take() {
            let _ = rustix::stdio::dup2_stderr(&terminal);
        }
    }
}

/// Starts the thread that reads the console's orders from `fifo` and
/// hands each to `hand` (the supervising loop), until it answers `false`
/// (that loop is gone).
fn read_orders(fifo: File, hand: impl Fn(Order) -> bool + Send + 'static) -> io::Result<()> {
    use std::io::{BufRead, Read};
    std::thread::Builder::new()
        .name("up-console-orders".into())
        .spawn(move || {
            let mut lines = io::BufReader::new(fifo);
            let mut text = Vec::new();
            let limit = u64::try_from(MAX_ORDER_LINE).unwrap_or(u64::MAX);
            // Inside a line longer than the bound, skipped to its end.
            let mut skipping = false;
            loop {
                text.clear();
                match (&mut lines).take(limit).read_until(b'\n', &mut text) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let whole = text.ends_with(b"\n");
                if skipping || !whole {
                    if !skipping {
                        tracing::warn!("the console sent a line too long for an order");
                    }
                    skipping = !whole;
                    continue;
                }
                match serde_json::from_slice::<Order>(&text) {
                    Ok(order) => {
                        if !hand(order) {
                            return;
                        }
                    }
                    Err(_) => tracing::warn!("the console sent a line that is no order"),
                }
            }
        })
        .map(drop)
}

impl Drop for Console {
    fn drop(&mut self) {
        if !self.exited() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.restore_stderr();
        // Gone already once the feed opened it.
        let _ = std::fs::remove_dir_all(&self.feed);
    }
}
