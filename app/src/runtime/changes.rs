//! `changes`, the one way in: the socket's connections and the fuzz
//! harness both ask [`page`], which checks the caller, then answers at once
//! without `since`, or waits on the [`Feed`](super::feed::Feed) beside the
//! writer (reading the store below its memory on a reader connection).
//! Reading changes records nothing; a refusal is recorded by whoever asked,
//! on the writer.

use std::sync::Arc;
use std::time::Duration;

use mosaic_domain::bus::Caller;
use mosaic_domain::changes::Watcher;
use mosaic_domain::Refusal;
use mosaic_ports::StoreReaders;

use super::feed::{self, history, Ended, Page, Waited};
use super::reads::Reads;
use super::world::Time;

/// A `changes` call: who asks, after which cursor, and how long it waits.
pub(crate) struct Asked {
    pub(crate) caller: Caller,
    pub(crate) since: Option<u64>,
    pub(crate) wait: Duration,
}

/// Answers `changes`: at once without `since`, else when a change
/// concerning the caller lies after it, or at the wait's end. An agent's
/// wait takes one of its run's seats ([`feed::WAITS_PER_RUN`]), and ends
/// like a timeout when a newer wait of the run takes it. A caller that
/// disconnects (`gone`) ends its wait; its answer is the empty page at
/// `since`, which nobody may read.
///
/// # Errors
/// The caller's refusal (`not-holder`, `not-authorized`), for the asker to
/// record; `storage-unavailable` when the store below the feed's memory
/// cannot be read; `broker-unavailable` once the read side is closed.
pub(crate) async fn page<S: StoreReaders + Send + 'static>(
    reads: &Arc<Reads<S>>,
    time: &Time,
    asked: Asked,
    gone: impl std::future::Future<Output = ()>,
) -> Result<Page, Refusal> {
    let Asked {
        caller,
        since,
        wait,
    } = asked;
    let watcher = reads
        .view()
        .ok_or(Refusal::BrokerUnavailable)?
        .watcher(&caller)?;
    let Some(since) = since else {
        return Ok(Page {
            cursor: reads.feed().head(),
            changes: Vec::new(),
        });
    };
    let seat = match &caller {
        Caller::Agent { business, agent } => {
            Some(reads.feed().seat(&(business.clone(), agent.run.clone())))
        }
        // The web UI's readers and the human are not agents' runs.
        Caller::Reader { .. } | Caller::Human { .. } => None,
    };
    let (_seat, superseded) = match seat {
        Some((seat, superseded)) => (Some(seat), Some(superseded)),
        None => (None, None),
    };
    let ended = async move {
        let superseded = async move {
            match superseded {
                // Told, or its seat went away with the feed: either way done.
                Some(superseded) => drop(superseded.await),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = gone => Ended::Gone,
            () = superseded => Ended::Superseded,
        }
    };
    let below = |after, upto| below(reads, &watcher, after, upto);
    let waited = feed::wait(reads.feed(), time, &watcher, since, wait, ended, below);
    match waited.await? {
        Waited::Page(page) => Ok(page),
        Waited::Gone => Ok(Page {
            cursor: since,
            changes: Vec::new(),
        }),
    }
}

/// One page of [`history`] on a reader connection, as a task while it
/// waits for one.
async fn below<S: StoreReaders + Send + 'static>(
    reads: &Arc<Reads<S>>,
    watcher: &Watcher,
    after: u64,
    upto: u64,
) -> Result<Page, Refusal> {
    let permit = reads.permit().await?;
    let (reads, watcher) = (Arc::clone(reads), watcher.clone());
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        reads.with_store(|_, store| history(store, &watcher, after, upto))
    })
    .await
    .unwrap_or(Err(Refusal::BrokerUnavailable))
}
