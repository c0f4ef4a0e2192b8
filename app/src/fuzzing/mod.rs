//! Plain functions the fuzz targets in `fuzz/` call for the adapters' wire
//! and config parsers and for a whole socket request through the broker's
//! request pipeline; `tests/tests/fuzz_corpus.rs` replays each seed corpus
//! through them, so CI exercises every target. Each panics only when an
//! invariant breaks; that panic is the finding.
//!
//! - [`request_line`]: one socket request line through the broker's own
//!   pipeline (`crate::runtime::pipeline`) over the in-memory ports, against a fixed
//!   business;
//! - [`host_line`]: one line of the host channel (`mosaic-bus broker`);
//! - [`config`]: one normalized business definition;
//! - [`browser_bodies`]: one body posted to the pane's claim or result route.
//!
//! `request_line.rs` holds the first; `parsers.rs` the other three.
//!
//! Behind the feature `fuzzing`, because it runs the runtime over the fakes
//! of `mosaic_ports::fakes`, which the product never carries.
//!

mod parsers;
mod request_line;

pub use parsers::{browser_bodies, config, host_line};
pub use request_line::request_line;
