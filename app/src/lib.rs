//! `mosaic-app`: the broker's runtime and the wiring of mosaic-bus. The
//! binary (`src/main.rs`) parses subcommands; this library holds what the
//! binary, the benchmarks and the tests share: the runtime over its ports
//! ([`world`], [`broker`]: `start_runtime`, and `start_broker` over the real
//! adapters), one request's path (`pipeline`), the writer's loop
//! ([`driver`]), the read side ([`reads`]) and the change feed ([`feed`]),
//! browser control's hub ([`browser`]), the human proof ([`human_proof`]),
//! and the subcommands' bodies ([`host`], [`up`], [`call`], [`human`],
//! [`demo`]).
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
