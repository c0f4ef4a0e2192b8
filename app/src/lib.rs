//! `mosaic-app`: the broker's runtime and the programs of mosaic-bus.
//!
//! Two rooms, and one rule between them:
//! - [`runtime`]: the broker itself, everything that runs inside a broker
//!   process whoever started it: boot and the verified open, connections,
//!   the request pipeline, the writer's group commit, the read side and
//!   the change feed, the human proof, browser control's hub. Generic over
//!   its ports, so the fakes run it as well as the real adapters.
//! - [`commands`]: the programs a person starts, one module per
//!   subcommand with its `clap` declaration beside it (`broker`, `up`,
//!   `call`, `human`, `mcp`, `demo`, `unlock`).
//!
//! A command uses the runtime; the runtime never uses a command. The
//! binary (`src/main.rs`) only parses and dispatches.
#![warn(missing_docs, unreachable_pub)]

pub mod commands;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod runtime;
