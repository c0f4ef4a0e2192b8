//! What the runtime reads from the world, as ports: [`Ports`] is everything
//! a broker needs besides its configuration, so the same runtime runs over
//! the real adapters ([`super::start_broker`]) and over the
//! in-memory fakes of `mosaic-ports` ([`super::start_runtime`]).
//!
//! Time is the clock's: every timestamp and every deadline (evidence, a
//! browser request's claim-by and timeout, heartbeats, credential expiry)
//! is read from [`Ports::clock`]. The runtime still waits in real time, as
//! it must to do nothing while nothing happens, but [`until`] wakes when a
//! test's clock jumps ([`Clock::on_jump`]), so a test reaches a deadline by
//! moving its clock, never by sleeping.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mosaic_domain::Timestamp;
use mosaic_ports::{Clock, Credentials, Entropy, EntropyError, ProcessTable};
use tokio::sync::Notify;

use super::human_proof::BrokerExe;

/// The ports of one broker.
pub struct Ports<S> {
    /// The evidence store the writer owns; reads open handles of their own
    /// from it ([`mosaic_ports::StoreReaders`]).
    pub store: S,
    /// The only source of time.
    pub clock: Arc<dyn Clock>,
    /// Capabilities, ids, claim tokens and nonces.
    pub entropy: Box<dyn Entropy>,
    /// What the human proof (and a launch's binding) reads about processes.
    pub processes: Arc<dyn ProcessTable>,
    /// Where service-credential references are read from, once, at boot.
    pub credentials: Box<dyn Credentials>,
    /// What a human CLI is compared with.
    pub identity: BrokerIdentity,
}

impl<S> std::fmt::Debug for Ports<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// This broker as the human proof sees it: its user and its executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerIdentity {
    /// The effective uid the broker runs as; a peer of another is refused.
    pub uid: u32,
    /// The executable a human CLI must be: its path and the file itself.
    pub exe: BrokerExe,
    /// The broker's PID, mount and user namespaces: a human CLI must be in
    /// the same.
    pub namespaces: mosaic_ports::Namespaces,
}

/// One entropy source shared by the writer, the browser hub and the
/// in-process API, each drawing under a short lock.
#[derive(Clone)]
pub(crate) struct SharedEntropy(Arc<Mutex<Box<dyn Entropy>>>);

impl SharedEntropy {
    pub(crate) fn new(entropy: Box<dyn Entropy>) -> Self {
        Self(Arc::new(Mutex::new(entropy)))
    }
}

impl Entropy for SharedEntropy {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .fill(buf)
    }
}

/// A clock with the signal its jumps raise.
#[derive(Clone)]
pub(crate) struct Time {
    pub(crate) clock: Arc<dyn Clock>,
    jumped: Arc<Notify>,
}

impl Time {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        let jumped = Arc::new(Notify::new());
        let signal = Arc::clone(&jumped);
        clock.on_jump(Box::new(move || signal.notify_waiters()));
        Self { clock, jumped }
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

/// Waits until the clock reads `deadline` or later: in real time, waking
/// early whenever the clock jumps.
pub(crate) async fn until(time: &Time, deadline: Timestamp) {
    loop {
        // Enabled before the clock is read, so no jump falls in between.
        let jumped = time.jumped.notified();
        tokio::pin!(jumped);
        jumped.as_mut().enable();
        let left = deadline.unix_ms().saturating_sub(time.now().unix_ms());
        let Ok(left) = u64::try_from(left) else {
            return;
        };
        if left == 0 {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(left)) => {}
            () = &mut jumped => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_ports::fakes::ManualClock;

    #[tokio::test]
    async fn a_deadline_is_reached_when_the_clock_jumps_there() {
        let start = Timestamp::from_unix_ms(1_000_000).unwrap();
        let clock = ManualClock::new(start);
        let time = Time::new(Arc::new(clock.clone()));
        let deadline = start.saturating_add(Duration::from_secs(3600));
        let waiting = tokio::spawn({
            let time = time.clone();
            async move { until(&time, deadline).await }
        });
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(1800));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "half way is not there yet");
        clock.advance(Duration::from_secs(1800));
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("woken by the jump, not by an hour of real time")
            .unwrap();
    }

    #[tokio::test]
    async fn a_deadline_already_passed_is_reached_at_once() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(5_000).unwrap());
        let time = Time::new(Arc::new(clock));
        until(&time, Timestamp::from_unix_ms(4_000).unwrap()).await;
        until(&time, Timestamp::from_unix_ms(5_000).unwrap()).await;
    }
}
