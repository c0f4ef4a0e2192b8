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
//! Space is not only lost to a failed write: an agent can fill the disk
//! before the broker writes anything, leave its junk behind for the next
//! run, or take the filesystem's files (inodes) instead of its bytes. So
//! the room beside the reserve (as much space as the reserve, and files to
//! spare: [`mosaic_ports::EvidenceStore::check_room`]) is checked at boot,
//! before each launch is bound, and whenever the host asks
//! ([`Job::Room`], before it starts a run). Without it, or without room
//! for the reserve itself at boot, the broker is short as above, the
//! reserve kept if it is held (released at the first write that fails for
//! lack of space), until the reserve is taken again with room beside it.

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
/// of those is only counted. A new launch is not bound, and the host
/// asking whether it may start a run is told no; a run's end, the host's
/// word that frees a role, is recorded.
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
        Job::Bind { .. } | Job::Room { .. } => WhenShort::Refuse,
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
    /// Whether the reserve may still be held: short for want of room
    /// beside it, before any write failed, it is kept for the human's
    /// writes.
    reserve_held: bool,
}

impl DiskSpace {
    /// At boot: takes the store's reserve and checks the room beside it;
    /// without either, agents are refused until both are there again.
    pub(super) fn boot<S: StoreReaders>(driver: &mut Driver<S>, now: Timestamp) -> Self {
        let mut space = Self { short: None };
        match driver.store_mut().take_reserve() {
            Ok(()) => {
                space.check(driver, now);
            }
            Err(StoreError::Full(_)) => {
                tracing::error!(
                    code = Refusal::StorageUnavailable.code(),
                    "no room for the disk reserve (space or files): only the human's requests \
                     are served; agents' requests are refused storage-unavailable until there is \
                     room"
                );
                space.short = Some(Short {
                    since: now,
                    refused: 0,
                    reserve_held: false,
                });
            }
            Err(e) => mosaic_adapters::cause::log(
                Refusal::StorageUnavailable,
                "taking the disk reserve",
                &e,
            ),
        }
        space
    }

    /// Whether only the human is served.
    pub(super) fn is_short(&self) -> bool {
        self.short.is_some()
    }

    /// Whether agents may be served: the room beside the reserve is
    /// measured now (while not short already). Without it the broker goes
    /// short, keeping its reserve; a measure that fails is logged and
    /// answers no, leaving the rest as it is.
    pub(super) fn check<S: StoreReaders>(
        &mut self,
        driver: &mut Driver<S>,
        now: Timestamp,
    ) -> bool {
        if self.short.is_some() {
            return false;
        }
        match driver.store_mut().check_room() {
            Ok(()) => true,
            Err(StoreError::Full(_)) => {
                tracing::error!(
                    code = Refusal::StorageUnavailable.code(),
                    "too little room on the disk (space or files): only the human's requests are \
                     served now; agents' requests are refused storage-unavailable until there is \
                     room"
                );
                self.short = Some(Short {
                    since: now,
                    refused: 0,
                    reserve_held: true,
                });
                false
            }
            Err(e) => {
                mosaic_adapters::cause::log(
                    Refusal::StorageUnavailable,
                    "measuring the room on the disk",
                    &e,
                );
                false
            }
        }
    }

    /// A batch failed for lack of space: releases the reserve and goes
    /// short. Returns whether to stage the batch again, under
    /// [`when_short`]: only when the reserve may have been held, so that
    /// its release may give the retry its room.
    pub(super) fn ran_out<S: StoreReaders>(
        &mut self,
        driver: &mut Driver<S>,
        now: Timestamp,
    ) -> bool {
        let already = match &self.short {
            Some(Short {
                reserve_held: false,
                ..
            }) => return false,
            Some(Short {
                reserve_held: true, ..
            }) => true,
            None => false,
        };
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
        if already {
            tracing::warn!(
                reserve_released = released,
                "the disk is full: the disk reserve is released for the human's requests"
            );
        } else {
            tracing::error!(
                code = Refusal::StorageUnavailable.code(),
                reserve_released = released,
                "the disk is full: only the human's requests are served now; agents' \
                 requests are refused storage-unavailable until space returns"
            );
        }
        let short = self.short.get_or_insert(Short {
            since: now,
            refused: 0,
            reserve_held: false,
        });
        short.reserve_held = false;
        true
    }

    /// Notes `count` jobs refused because the disk is short.
    pub(super) fn refused(&mut self, count: u64) {
        if let Some(short) = &mut self.short {
            short.refused += count;
        }
    }

    /// While short: tries to take the reserve again and checks the room
    /// beside it, and serves agents again when both are there. Only no
    /// room keeps it short quietly; another failure is logged with its
    /// cause each time.
    pub(super) fn try_return<S: StoreReaders>(&mut self, driver: &mut Driver<S>) {
        let Some(short) = &self.short else {
            return;
        };
        let store = driver.store_mut();
        match store.take_reserve().and_then(|()| store.check_room()) {
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
    use mosaic_ports::EvidenceStore as _;
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
        let room = Job::Room {
            reply: ReplyTo::Task(oneshot::channel().0),
        };
        assert!(matches!(when_short(&room), WhenShort::Refuse));
    }

    #[test]
    fn a_full_disk_releases_the_reserve_once_and_space_returning_takes_it_again() {
        let store = MemoryStore::new();
        let mut driver = Driver::open(Vec::new(), store.clone()).expect("a driver");
        let now = Timestamp::from_unix_ms(1_000).expect("a time");
        let mut space = DiskSpace::boot(&mut driver, now);
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
    fn no_room_at_boot_refuses_agents_until_the_reserve_is_taken_again() {
        let store = MemoryStore::new();
        store.set_full(true);
        let mut driver = Driver::open(Vec::new(), store.clone()).expect("a driver");
        let now = Timestamp::from_unix_ms(1_000).expect("a time");
        let mut space = DiskSpace::boot(&mut driver, now);
        assert!(!store.holds_reserve() && space.is_short());
        assert!(!space.check(&mut driver, now), "no room: no launch");
        // Nothing to release: a failed write is not tried again.
        assert!(!space.ran_out(&mut driver, now));
        space.try_return(&mut driver);
        assert!(space.is_short(), "still full");

        store.set_full(false);
        space.try_return(&mut driver);
        assert!(store.holds_reserve() && !space.is_short());
        assert!(space.check(&mut driver, now), "room again");
    }

    #[test]
    fn too_little_room_beside_the_reserve_goes_short_keeping_it_for_the_human() {
        let store = MemoryStore::new();
        let mut driver = Driver::open(Vec::new(), store.clone()).expect("a driver");
        let now = Timestamp::from_unix_ms(1_000).expect("a time");
        let mut space = DiskSpace::boot(&mut driver, now);
        assert!(space.check(&mut driver, now), "room at first");

        // An agent filled the disk; the broker has written nothing yet.
        store.set_full(true);
        assert!(!space.check(&mut driver, now), "a launch is refused");
        assert!(
            space.is_short() && store.holds_reserve(),
            "the reserve is kept"
        );
        space.try_return(&mut driver);
        assert!(space.is_short(), "held, but no room beside it");
        // The human's write then fails: the reserve gives it room, once.
        assert!(space.ran_out(&mut driver, now), "released: retry");
        assert!(!store.holds_reserve() && space.is_short());
        assert!(!space.ran_out(&mut driver, now), "nothing left to release");

        store.set_full(false);
        space.try_return(&mut driver);
        assert!(store.holds_reserve() && !space.is_short());
    }

    #[test]
    fn a_full_disk_at_boot_with_a_reserve_left_whole_keeps_it_and_refuses_agents() {
        let store = MemoryStore::new();
        let mut driver = Driver::open(Vec::new(), store.clone()).expect("a driver");
        driver
            .store_mut()
            .take_reserve()
            .expect("an earlier run's reserve");
        store.set_full(true);
        let now = Timestamp::from_unix_ms(1_000).expect("a time");
        let space = DiskSpace::boot(&mut driver, now);
        assert!(store.holds_reserve() && space.is_short());
    }
}
