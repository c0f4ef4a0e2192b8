//! The shapes both ends of a connection read and write, each defined once
//! with serde, so a field renamed on one side fails to compile or to
//! decode on the other instead of showing as nothing:
//!
//! - [`args`]: each verb's argument type, whose keys the broker's strict
//!   parser allows (`mosaic_adapters::wire`) and whose schema the MCP tools
//!   publish ([`crate::mcp`]);
//! - [`activity`]: the line `up` writes its console about what each
//!   harness agent is doing;
//! - [`life`]: on the same line, each run's life (running, restarting,
//!   ended and why, what it used), and the orders the console sends `up`
//!   back.

pub mod activity;
pub mod args;
pub mod life;
