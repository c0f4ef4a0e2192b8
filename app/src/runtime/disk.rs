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
//! again before each batch (a few system calls: the file's and the
//! filesystem's sizes); once it has it, agents are served again, that
//! batch included. Each transition is logged once, with why.
//!
//! A broker that finds no room for its reserve at boot serves everyone
//! (it has nothing to release) and warns; its first write that fails for
//! lack of space makes it short all the same.

use mosaic_domain::bus::Caller;
use mosaic_domain::{Refusal, Timestamp};
use mosaic_ports::{StoreError, StoreReaders};

use super::driver::Driver;
use super::job::Job;
use super::pipeline::Proven;

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
/// of those is only counted. A new launch is not bound; a run's end, the
/// host's word that frees a role, is recorded.
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
        // An end frees a role for the next run: small, and served.
        Job::End { .. } => WhenShort::Serve,
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
    /// When it began.
    since: Timestamp,
    /// How many jobs were refused in it.
    refused: u64,
}

impl DiskSpace {
    /// At boot: takes the store's reserve; without room for it, warns and
    /// serves everyone until a write fails for lack of space.
    pub(super) fn boot<S: StoreReaders>(driver: &mut Driver<S>) -> Self {
        match driver.store_mut().take_reserve() {
            Ok(()) => {}
            Err(StoreError::Full(_)) => tracing::warn!(
                "no room for the disk reserve: if the disk fills up, the human's requests \
                 may be refused storage-unavailable too"
            ),
            Err(e) => mosaic_adapters::cause::log(
                Refusal::StorageUnavailable,
                "taking the disk reserve",
                &e,
            ),
        }
        Self { short: None }
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
            since: now,
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

    /// While short: tries to take the reserve again, and serves agents
    /// again when it has it. Only no room keeps it short quietly; another
    /// failure is logged with its cause each time.
    pub(super) fn try_return<S: StoreReaders>(&mut self, driver: &mut Driver<S>) {
        let Some(short) = &self.short else {
            return;
        };
        match driver.store_mut().take_reserve() {
            Ok(()) => {
                tracing::warn!(
                    since = short.since.to_string().as_str(),
                    refused = short.refused,
                    "space returned: the disk reserve is taken again and agents are served again"
                );
                self.short = None;
            }
            Err(StoreError::Full(_)) => {}
            Err(e) => mosaic_adapters::cause::log(
                Refusal::StorageUnavailable,
                "taking the disk reserve again",
                &e,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use mosaic_domain::bus::{Caller, Command};
    use mosaic_domain::evidence::{AgentRef, Harness, LaunchRecord};
    use mosaic_domain::{BusinessId, EventId, Refusal, RoleInstance, RunId, Timestamp};
    use mosaic_ports::fakes::MemoryStore;
    use tokio::sync::oneshot;

    use super::{when_short, DiskSpace, WhenShort};
    use crate::runtime::driver::Driver;
    use crate::runtime::job::{Job, ReplyTo};
    use crate::runtime::pipeline::Proven;

    fn acme() -> BusinessId {
        BusinessId::parse("acme").expect("a business id")
    }

    fn agent() -> Caller {
        Caller::Agent {
            business: acme(),
            agent: AgentRef {
                role: RoleInstance::parse("dev").expect("a role"),
                run: RunId::parse("dev-1").expect("a run"),
            },
        }
    }

    fn human() -> Caller {
        Caller::Human {
            business: acme(),
            input: EventId::from_random([1; 16]),
        }
    }

    fn request(who: Proven) -> Job {
        Job::Request {
            who,
            verb: "message.send",
            call: Err(Refusal::BadRequest),
            reply: ReplyTo::Task(oneshot::channel().0),
            early: None,
        }
    }

    fn command(caller: Caller) -> Job {
        Job::Command {
            caller,
            command: Command::LaunchRevoke,
            reply: ReplyTo::Task(oneshot::channel().0),
        }
    }

    #[test]
    fn only_the_human_is_served_and_the_rest_is_counted_with_its_code() {
        let proven = Proven::Human {
            business: acme(),
            proof: Ok(()),
        };
        assert!(matches!(when_short(&request(proven)), WhenShort::Serve));
        assert!(matches!(
            when_short(&request(Proven::Known(human()))),
            WhenShort::Serve
        ));
        assert!(matches!(when_short(&command(human())), WhenShort::Serve));

        let agent_request = request(Proven::Known(agent()));
        assert!(matches!(
            when_short(&agent_request),
            WhenShort::Count {
                caller: Some(Caller::Agent { .. }),
                verb: "message.send",
                refusal: Refusal::StorageUnavailable,
            }
        ));
        assert!(matches!(
            when_short(&command(agent())),
            WhenShort::Count {
                caller: Some(Caller::Agent { .. }),
                refusal: Refusal::StorageUnavailable,
                ..
            }
        ));
        // A failed proof and a read's refusal keep their own code.
        let failed = request(Proven::Human {
            business: acme(),
            proof: Err(Refusal::HumanProofFailed),
        });
        assert!(matches!(
            when_short(&failed),
            WhenShort::Count {
                caller: None,
                refusal: Refusal::HumanProofFailed,
                ..
            }
        ));
        let read_refused = Job::Refuse {
            caller: agent(),
            verb: "trail",
            refusal: Refusal::UnknownReference,
            reply: ReplyTo::Task(oneshot::channel().0),
        };
        assert!(matches!(
            when_short(&read_refused),
            WhenShort::Count {
                verb: "trail",
                refusal: Refusal::UnknownReference,
                ..
            }
        ));
        let bind = Job::Bind {
            record: LaunchRecord {
                business: acme(),
                role: RoleInstance::parse("dev").expect("a role"),
                run: RunId::parse("dev-2").expect("a run"),
                harness: Harness::Pi,
                address: None,
                pid: 42,
                start_time: 7,
            },
            reply: ReplyTo::Task(oneshot::channel().0),
        };
        assert!(matches!(when_short(&bind), WhenShort::Refuse));
    }

    #[test]
    fn a_full_disk_releases_the_reserve_once_and_space_returning_takes_it_again() {
        let store = MemoryStore::new();
        let mut driver = Driver::open(Vec::new(), store.clone()).expect("a driver");
        let now = Timestamp::from_unix_ms(1_000).expect("a time");
        let mut space = DiskSpace::boot(&mut driver);
        assert!(store.holds_reserve() && !space.is_short());

        store.set_full(true);
        assert!(space.ran_out(&mut driver, now), "the first time: retry");
        assert!(!store.holds_reserve() && space.is_short());
        assert!(!space.ran_out(&mut driver, now), "short already: no retry");
        space.try_return(&mut driver);
        assert!(space.is_short(), "still full");

        store.set_full(false);
        space.try_return(&mut driver);
        assert!(store.holds_reserve() && !space.is_short());
    }

    #[test]
    fn no_room_at_boot_serves_everyone_without_a_reserve() {
        let store = MemoryStore::new();
        store.set_full(true);
        let mut driver = Driver::open(Vec::new(), store.clone()).expect("a driver");
        let space = DiskSpace::boot(&mut driver);
        assert!(!store.holds_reserve() && !space.is_short());
    }
}
