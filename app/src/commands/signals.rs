//! SIGTERM and SIGINT (and, for `up`, SIGCHLD) as events, for the
//! subcommands that run until told to stop: `broker` and `up`. Each signal
//! is registered before `register` returns, so one sent right after a
//! boot is never missed.

use std::io;

use tokio::signal::unix::{signal, Signal, SignalKind};

/// What a signal means to the one waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    /// SIGINT or SIGTERM: stop.
    Stop,
    /// SIGCHLD: some child changed state.
    ChildExited,
}

/// The registered signals, as streams on the runtime they were registered on.
pub(super) struct Signals {
    term: Signal,
    int: Signal,
    child: Option<Signal>,
}

impl Signals {
    /// Registers SIGTERM and SIGINT, and SIGCHLD with `children`, on
    /// `runtime`.
    pub(super) fn register(runtime: &tokio::runtime::Runtime, children: bool) -> io::Result<Self> {
        let _context = runtime.enter();
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            child: children.then(|| signal(SignalKind::child())).transpose()?,
        })
    }

    /// The next signal. A stream that ends means stop.
    pub(super) async fn next(&mut self) -> Event {
        let child = async {
            match &mut self.child {
                Some(child) => child.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.term.recv() => Event::Stop,
            _ = self.int.recv() => Event::Stop,
            some = child => match some {
                Some(()) => Event::ChildExited,
                None => Event::Stop,
            },
        }
    }

    /// Calls `stop` on a thread of its own, once, at the first SIGTERM or
    /// SIGINT, for a caller that waits on something else meanwhile.
    pub(super) fn on_stop(stop: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        let mut signals = Self::register(&runtime, false)?;
        std::thread::spawn(move || {
            runtime.block_on(signals.next());
            stop();
        });
        Ok(())
    }
}
