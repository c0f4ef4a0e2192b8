//! A full disk never locks the human out: who is served while the store's
//! filesystem is full, and when that ends.
//!
//! The store keeps a disk reserve beside its file
//! ([`mosaic_ports::EvidenceStore::take_reserve`]), taken at boot. When a
//! batch fails for lack of space, the writer releases the reserve, and the
//! broker is *short*: it stages the batch again with only what
//! [`when_short`] serves (the human's requests, and the counts of
//! refusals), and from then on refuses the rest, an agent's write with
//! `storage-unavailable`, each refusal counted in its window rather than
//! written as a row. While short, the writer tries to take the reserve
//! again at most once every [`RETRY_RESERVE`]; once it has it, agents are
//! served again. Each transition is logged once, with why.

use std::time::Duration;

use mosaic_domain::bus::Caller;
use mosaic_domain::{Refusal, Timestamp};
use mosaic_ports::{StoreError, StoreReaders};

use super::driver::Driver;
use super::pipeline::Proven;
use super::writer::Job;

/// How often a short broker tries to take its reserve again.
pub(super) const RETRY_RESERVE: Duration = Duration::from_secs(1);

/// What becomes of a job while the disk is short.
pub(super) enum WhenShort<'a> {
    /// Staged as always: the human's.
    Serve,
    /// Refused with `refusal`, counted as `caller`'s refusal of `verb`
    /// (written only as its window's count).
    Count {
        caller: Option<&'a Caller>,
        verb: &'a str,
        refusal: Refusal,
    },
    /// Refused `storage-unavailable`, recorded nowhere: a launch's
    /// binding, whose refusals are never recorded.
    Refuse,
}

/// The policy, in one place: what the broker does with `job` while its
/// disk is short. The human is served whatever the verb (`launch.revoke`,
/// `message.send`, `decision.resolve`, the human's reads and refusals);
/// an agent's or reader's request is refused `storage-unavailable`, a
/// failed human proof and a read's refusal keep their own code, and each
/// of those is only counted. A new launch is not bound.
pub(super) fn when_short(job: &Job) -> WhenShort<'_> {
    match job {
        Job::Request { who, verb, .. } => match who {
            Proven::Known(caller) => of_caller(caller, verb, Refusal::StorageUnavailable),
            Proven::Human { proof: Ok(()), .. } => WhenShort::Serve,
            Proven::Human {
                proof: Err(refusal),
                ..
            } => WhenShort::Count {
                caller: None,
                verb,
                refusal: *refusal,
            },
        },
        Job::Refuse {
            caller,
            verb,
            refusal,
            ..
        } => of_caller(caller, verb, *refusal),
        Job::Command {
            caller, command, ..
        } => of_caller(caller, command.verb(), Refusal::StorageUnavailable),
        Job::Bind { .. } => WhenShort::Refuse,
    }
}

/// The human is served; anyone else is refused `refusal`, counted.
fn of_caller<'a>(caller: &'a Caller, verb: &'a str, refusal: Refusal) -> WhenShort<'a> {
    match caller {
        Caller::Human { .. } => WhenShort::Serve,
        Caller::Agent { .. } | Caller::Reader { .. } => WhenShort::Count {
            caller: Some(caller),
            verb,
            refusal,
        },
    }
}

/// Whether the disk is short, and since when.
pub(super) struct DiskSpace {
    short: Option<Short>,
}

/// A short spell.
struct Short {
    /// When the next try to take the reserve again is due.
    next_try: Timestamp,
    /// How many jobs were refused in it.
    refused: u64,
}

impl DiskSpace {
    /// At boot: takes the store's reserve, or starts short when there is
    /// no room for it.
    pub(super) fn boot<S: StoreReaders>(driver: &mut Driver<S>, now: Timestamp) -> Self {
        match driver.store_mut().take_reserve() {
            Ok(()) => Self { short: None },
            Err(e) => {
                log_short(&e, "at boot, the disk reserve could not be taken");
                Self {
                    short: Some(Short {
                        next_try: now.saturating_add(RETRY_RESERVE),
                        refused: 0,
                    }),
                }
            }
        }
    }

    /// Whether only the human is served.
    pub(super) fn is_short(&self) -> bool {
        self.short.is_some()
    }

    /// A batch failed for lack of space: releases the reserve and goes
    /// short. Returns whether to stage the batch again, under
    /// [`when_short`]: only on the way in, when the released reserve may
    /// give the retry its room.
    pub(super) fn ran_out<S: StoreReaders>(
        &mut self,
        driver: &mut Driver<S>,
        now: Timestamp,
    ) -> bool {
        if self.short.is_some() {
            return false;
        }
        let released = driver.store_mut().release_reserve();
        let released = match released {
            Ok(held) => held,
            Err(e) => {
                mosaic_adapters::cause::log(
                    Refusal::StorageUnavailable,
                    "releasing the disk reserve",
                    &e,
                );
                false
            }
        };
        tracing::error!(
            code = Refusal::StorageUnavailable.code(),
            reserve_released = released,
            "the disk is full: only the human's requests are served now; agents' \
             requests are refused storage-unavailable until space returns"
        );
        self.short = Some(Short {
            next_try: now.saturating_add(RETRY_RESERVE),
            refused: 0,
        });
        true
    }

    /// Notes `count` jobs refused because the disk is short.
    pub(super) fn refused(&mut self, count: u64) {
        if let Some(short) = &mut self.short {
            short.refused += count;
        }
    }

    /// How long the writer may wait for a job before it must try to take
    /// the reserve again: `None` when it is not short.
    pub(super) fn wait(&self, now: Timestamp) -> Option<Duration> {
        self.short.as_ref().map(|short| {
            let ms = short.next_try.unix_ms().saturating_sub(now.unix_ms());
            Duration::from_millis(u64::try_from(ms).unwrap_or(0))
        })
    }

    /// While short, once the retry is due: tries to take the reserve again,
    /// and serves agents again when it has it.
    pub(super) fn try_return<S: StoreReaders>(&mut self, driver: &mut Driver<S>, now: Timestamp) {
        let Some(short) = &mut self.short else {
            return;
        };
        if now < short.next_try {
            return;
        }
        match driver.store_mut().take_reserve() {
            Ok(()) => {
                tracing::warn!(
                    refused = short.refused,
                    "space returned: the disk reserve is taken again and agents are served again"
                );
                self.short = None;
            }
            Err(StoreError::Full(_)) => short.next_try = now.saturating_add(RETRY_RESERVE),
            Err(e) => {
                mosaic_adapters::cause::log(
                    Refusal::StorageUnavailable,
                    "taking the disk reserve again",
                    &e,
                );
                short.next_try = now.saturating_add(RETRY_RESERVE);
            }
        }
    }
}

/// Logs going short for `e`'s reason.
fn log_short(e: &StoreError, why: &'static str) {
    mosaic_adapters::cause::log(Refusal::StorageUnavailable, why, e);
    tracing::error!(
        code = Refusal::StorageUnavailable.code(),
        "the disk is full: only the human's requests are served now; agents' requests \
         are refused storage-unavailable until space returns"
    );
}
