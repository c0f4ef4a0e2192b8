//! What agents and user interfaces link to talk to a mosaic-bus broker,
//! and the wire shapes both ends of a connection share.
//!
//! Modules:
//! - [`socket`]: the synchronous [`Client`](socket::Client) (one
//!   connection per call) and [`Session`](socket::Session) (connections
//!   kept open between calls), and the limits of a line that the broker
//!   frames with too;
//! - [`cap`]: where a client process finds its capability (an inherited
//!   descriptor or a private file) and the socket;
//! - [`views`]: the shared reads over a session;
//! - [`mcp`]: `mosaic-bus mcp`, the MCP server on stdio that serves the
//!   agent verbs as tools over one session;
//! - [`wire`]: the shapes both ends read and write, each defined once:
//!   each verb's argument type (whose keys the broker's parser allows and
//!   whose schema the MCP tools publish) and the line `up` tells its
//!   console what each harness agent is doing.
//!
//! # Which way the dependency goes
//!
//! A shape that the broker writes and a client reads has one definition,
//! here, and the broker's adapters (`mosaic-adapters`) depend on this
//! crate to use it; this crate depends on the domain alone of the
//! workspace. So a client links neither the store nor the HTTP server:
//! no rusqlite, axum, hyper or procfs (`tests/tests/rooms.rs` checks the
//! dependency tree).
//!
//! Every failure is a [`Refusal`](mosaic_domain::Refusal) with a static
//! code; no OS or driver text becomes one.
#![warn(missing_docs, unreachable_pub)]

pub mod cap;
pub mod mcp;
pub mod socket;
pub mod views;
pub mod wire;
