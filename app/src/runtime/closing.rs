//! How a broker closes: the parts a close stops, shared by the [`Broker`]
//! and its watchdog, which closes the broker itself when one of its
//! internal parts dies.
//!
//! The disk reserve's promise is that the human is served; a broker whose
//! writer thread or socket server died can serve nobody, and one left
//! half-alive would answer `broker-unavailable` forever and keep the
//! writer lock, so that the next broker on the data root says
//! `stale-lock`. So a part that dies reports it ([`Watch`], a guard whose
//! drop without [`Watch::ended`] is the report), and the watchdog thread
//! closes the broker exactly as [`Closing::close_all`] does for the host
//! (stop serving, let the writer end, close the store, remove the socket
//! and the lock), then tells the host ([`Closing::on_failure`]), which
//! should end as after its own close. A close from the host and one from
//! the watchdog take their turns; each part is stopped once.
//!
//! [`Broker`]: super::Broker

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use mosaic_adapters::cause::logged;
use mosaic_adapters::fs::WriterLock;
use mosaic_domain::Refusal;
use tokio::sync::oneshot;

use super::browsing::Serving;
use super::feed::Feed;
use super::job::Job;
use super::launch::Registry;

/// The watchdog thread's name.
pub const WATCHDOG_THREAD: &str = "mosaic-watchdog";

/// An internal part of the broker that died.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The writer thread, which alone writes the store.
    Writer,
    /// The socket server, which alone accepts the agents' and the human's
    /// connections.
    SocketServer,
}

impl Failure {
    /// Its name in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Writer => "writer",
            Failure::SocketServer => "socket-server",
        }
    }
}

/// What the host is told when a part died.
type Hook = Box<dyn FnOnce(Failure) + Send>;

/// What the watchdog hears.
enum Heard {
    Failed(Failure),
    /// The broker closed: the watchdog ends.
    Closed,
}

/// Every part a close stops, each taken once.
pub(super) struct Closing {
    pub(super) jobs: Mutex<Option<mpsc::Sender<Job>>>,
    pub(super) writer: Mutex<Option<JoinHandle<()>>>,
    pub(super) runtime: Mutex<Option<tokio::runtime::Runtime>>,
    pub(super) stop: Mutex<Option<oneshot::Sender<()>>>,
    pub(super) server: Mutex<Option<tokio::task::JoinHandle<Result<(), Refusal>>>>,
    pub(super) browser: Mutex<Option<Serving>>,
    pub(super) lock: Mutex<Option<WriterLock>>,
    pub(super) socket: PathBuf,
    pub(super) registry: Arc<Registry>,
    /// Closed first on shutdown, so no wait for changes holds it up.
    pub(super) feed: Arc<Feed>,
    /// Set once a close began: a part that ends after it ended on purpose.
    closing: AtomicBool,
    /// One close at a time.
    turn: Mutex<()>,
    /// The first part that died, and who to tell.
    failed: Mutex<Failed>,
    heard: Mutex<Option<mpsc::Sender<Heard>>>,
    watchdog: Mutex<Option<JoinHandle<()>>>,
}

/// The failure so far, and the hooks waiting for one.
#[derive(Default)]
struct Failed {
    first: Option<Failure>,
    told: bool,
    hooks: Vec<Hook>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Closing {
    /// The parts of a broker serving `socket`, none started yet, with its
    /// watchdog running.
    ///
    /// # Errors
    /// `broker-unavailable` when the watchdog thread cannot start.
    pub(super) fn start(
        socket: PathBuf,
        registry: Arc<Registry>,
        feed: Arc<Feed>,
    ) -> Result<Arc<Self>, Refusal> {
        let (heard, hearing) = mpsc::channel();
        let closing = Arc::new(Self {
            jobs: Mutex::new(None),
            writer: Mutex::new(None),
            runtime: Mutex::new(None),
            stop: Mutex::new(None),
            server: Mutex::new(None),
            browser: Mutex::new(None),
            lock: Mutex::new(None),
            socket,
            registry,
            feed,
            closing: AtomicBool::new(false),
            turn: Mutex::new(()),
            failed: Mutex::new(Failed::default()),
            heard: Mutex::new(Some(heard)),
            watchdog: Mutex::new(None),
        });
        // The watchdog holds the parts only weakly: a broker dropped
        // without a failure is closed by its own drop.
        let parts = Arc::downgrade(&closing);
        let watchdog = std::thread::Builder::new()
            .name(WATCHDOG_THREAD.into())
            .spawn(move || {
                while let Ok(Heard::Failed(failure)) = hearing.recv() {
                    let Some(parts) = parts.upgrade() else { return };
                    parts.close_failed(failure);
                }
            })
            .map_err(logged(
                Refusal::BrokerUnavailable,
                "starting the broker's watchdog",
            ))?;
        *locked(&closing.watchdog) = Some(watchdog);
        Ok(closing)
    }

    /// A guard for `part`: dropped without [`Watch::ended`] (a panic, an
    /// early end), it reports that `part` died, unless the broker is
    /// closing.
    pub(super) fn watch(self: &Arc<Self>, part: Failure) -> Watch {
        Watch {
            part,
            parts: Arc::downgrade(self),
            ended: false,
        }
    }

    /// Whether a close began.
    pub(super) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// `part` died: the watchdog closes the broker, unless a close began.
    pub(super) fn fail(&self, part: Failure) {
        if self.is_closing() {
            return;
        }
        {
            let mut failed = locked(&self.failed);
            if failed.first.is_some() {
                return;
            }
            failed.first = Some(part);
        }
        tracing::error!(
            code = Refusal::BrokerUnavailable.code(),
            part = part.as_str(),
            "a part of the broker died: the broker closes, as if the host had closed it"
        );
        if let Some(heard) = locked(&self.heard).as_ref() {
            let _ = heard.send(Heard::Failed(part));
        }
    }

    /// The part that died, if one did.
    pub(super) fn failure(&self) -> Option<Failure> {
        locked(&self.failed).first
    }

    /// Calls `hook` once the broker closed after a part died (at once, on
    /// this thread, if it already did).
    pub(super) fn on_failure(&self, hook: Hook) {
        let mut failed = locked(&self.failed);
        match (failed.first, failed.told) {
            (Some(failure), true) => {
                drop(failed);
                hook(failure);
            }
            (Some(_) | None, false) | (None, true) => failed.hooks.push(hook),
        }
    }

    /// The watchdog's close after `failure`, then the hooks.
    fn close_failed(&self, failure: Failure) {
        let closed = self.close_all();
        if let Err(refusal) = closed {
            tracing::error!(code = refusal.code(), "the close after a part died failed");
        }
        let hooks = {
            let mut failed = locked(&self.failed);
            failed.told = true;
            std::mem::take(&mut failed.hooks)
        };
        for hook in hooks {
            hook(failure);
        }
    }

    /// Stops serving, lets requests in flight finish, lets the writer end
    /// (which closes the store), and removes the socket and the writer
    /// lock. Each part is stopped once, whoever closes first.
    ///
    /// # Errors
    /// `storage-unavailable` when the socket or the lock cannot be removed.
    pub(super) fn close_all(&self) -> Result<(), Refusal> {
        let _turn = locked(&self.turn);
        self.closing.store(true, Ordering::SeqCst);
        self.feed.close();
        if let Some(stop) = locked(&self.stop).take() {
            let _ = stop.send(());
        }
        let runtime = locked(&self.runtime).take();
        if let (Some(runtime), Some(browser)) = (runtime.as_ref(), locked(&self.browser).take()) {
            let _ = browser.stop.send(());
            // Open event streams would hold a graceful shutdown forever.
            browser.server.abort();
            let _ = runtime.block_on(browser.server);
        }
        let server = locked(&self.server).take();
        if let (Some(runtime), Some(server)) = (runtime.as_ref(), server) {
            let _ = runtime.block_on(server);
        }
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
        self.registry.write().map(|mut r| r.clear()).ok();
        drop(locked(&self.jobs).take());
        if let Some(writer) = locked(&self.writer).take() {
            let _ = writer.join();
        }
        let Some(lock) = locked(&self.lock).take() else {
            return Ok(());
        };
        // A socket someone already deleted is as good as removed.
        let socket = match std::fs::remove_file(&self.socket) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            removed => removed,
        };
        let released = lock.release();
        socket.map_err(logged(Refusal::StorageUnavailable, "removing the socket"))?;
        released
    }

    /// Ends the watchdog, once the broker closed. Never called on the
    /// watchdog's own thread (the watchdog holds no [`super::Broker`]).
    pub(super) fn end_watchdog(&self) {
        if let Some(heard) = locked(&self.heard).take() {
            let _ = heard.send(Heard::Closed);
        }
        if let Some(watchdog) = locked(&self.watchdog).take() {
            if watchdog.thread().id() != std::thread::current().id() {
                let _ = watchdog.join();
            }
        }
    }
}

/// A part's guard: see [`Closing::watch`].
pub(super) struct Watch {
    part: Failure,
    parts: std::sync::Weak<Closing>,
    ended: bool,
}

impl Watch {
    /// The part ended as it should (the broker is closing).
    pub(super) fn ended(mut self) {
        self.ended = true;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        if let Some(parts) = self.parts.upgrade() {
            parts.fail(self.part);
        }
    }
}
