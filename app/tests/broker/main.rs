//! `mosaic-bus broker`, black-box: the real binary booted over its host IPC
//! in a private data root, spoken to through its socket with
//! `mosaic_client::socket::Client`. One test per rule of starting,
//! stopping and the client protocol (docs/host.md, docs/protocol.md).
//!
//! - [`host`]: boot, bad boots, the lock, the socket's mode, `bindLaunch`,
//!   protocol failures, end of stdin and signals;
//! - [`verbs`]: every verb of the spec's table with its rules and refusals;
//! - [`inbox`]: the human inbox's order, and the runs that exited;
//! - [`restart`]: what survives a close and a boot on the same data root;
//! - [`ends`]: the host's `endRun`, what an ended run is answered, and the
//!   boot that ends a run whose process is gone;
//! - [`changes`]: the change feed's waits, audiences and cursors;
//! - [`text`]: the decision text rule and verbatim message bodies;
//! - [`connections`]: several requests on one connection, the idle
//!   deadline, and a close with connections open;
//! - [`replies`]: answers the writer writes itself, in each connection's
//!   order under group commit.
//!
//! Bad input on the socket is `broker_bad_input.rs`.

#[path = "../support/mod.rs"]
mod support;

mod changes;
mod connections;
mod ends;
mod host;
mod inbox;
mod replies;
mod restart;
mod text;
mod verbs;
