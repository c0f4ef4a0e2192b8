//! `mosaic-app`: the wiring of mosaic-bus. The binary (`src/main.rs`) parses
//! subcommands; this library holds what the binary, the benchmarks and the
//! tests share: [`driver`], the runtime loop around the domain bus.
#![warn(missing_docs, unreachable_pub)]

pub mod broker;
pub mod browser;
pub mod call;
pub mod demo;
pub mod driver;
pub mod feed;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod host;
pub mod human;
pub mod human_proof;
mod pipeline;
pub mod reads;
pub mod up;
pub mod world;
