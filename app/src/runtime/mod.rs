//! The broker runtime: everything that runs inside a broker process,
//! whoever started it (the host channel, `up`, a test, another team's
//! process). One runtime per data root.
//!
//! [`start_broker`] validates a boot configuration, takes the data root's
//! writer lock, opens (or creates) the verified SQLite store, replays it,
//! binds the boot launches, issues one capability per launch and per
//! reader, binds `bus/bus.sock` and starts serving; [`start_runtime`] does
//! the same over any [`Ports`] (the fakes as well). [`Broker::bind_launch`]
//! binds a later launch; [`Broker::close`] stops serving, closes the
//! store, and removes the socket and the lock.
//!
//! Threads: one writer thread ([`writer`]) owns the [`Driver`] (the only
//! writing store connection) and group-commits: it stages every queued
//! request in arrival order, each in its own savepoint, commits the batch
//! once, and only then answers them. A tokio runtime serves the socket,
//! with one task per connection ([`connection`]) that, for each of its
//! lines in turn, parses the line, finds the caller by capability, and
//! waits for the writer's answer. Reads (`inbox`, `tasks`, `agents`,
//! `trail`) run beside the writer instead, on [`Reads`]' own connections,
//! and `changes` waits beside it on the change feed ([`changes`]).
//! Capabilities live only in this process's memory.
//!
//! The rooms: [`boot`] (from a configuration to a serving broker, and the
//! verified open), [`broker`] (its API and close), [`closing`] (what a
//! close stops, and the watchdog that closes a broker whose writer or
//! socket server died), [`launch`] (capabilities
//! and the launch process check),
//! [`connection`], [`pipeline`] (one request's path), [`writer`], [`driver`]
//! (the store and the bus under group commit), [`reads`], [`changes`] and
//! [`feed`], [`exits`] (whether a run's process still runs), [`calls`] (what
//! each run last asked, and whether it waits), [`places`]
//! (what each run may hold of the socket's places), [`human_proof`], [`browser`] (the hub) and [`browsing`] (its
//! server and the way of a `browser.request`), [`world`] (the ports).

mod boot;
mod broker;
mod browser;
mod browsing;
pub(crate) mod calls;
pub(crate) mod changes;
mod closing;
mod connection;
mod disk;
pub mod driver;
pub(crate) mod exits;
pub mod feed;
pub mod human_proof;
mod job;
mod launch;
pub(crate) mod pipeline;
mod places;
pub(crate) mod reads;
pub mod world;
mod writer;

pub use boot::{open_store, socket_workers, start_broker, start_runtime, BootFailure, Booted};
pub use broker::Broker;
pub use browsing::BrowserEndpoint;
pub use closing::{Failure, WATCHDOG_THREAD};
pub use driver::Driver;
pub use launch::{IssuedLaunch, IssuedReader};
pub use places::{RunPlace, RunPlaces, DEFAULT_CONNECTIONS};
pub use world::{BrokerIdentity, Ports};
pub use writer::WRITER_THREAD;
