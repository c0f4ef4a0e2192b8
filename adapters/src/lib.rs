//! The I/O adapters of mosaic-bus: each implements one port of
//! `mosaic-ports` against a real resource and maps driver errors onto the
//! port's error type, so no raw driver or OS text reaches the wire.
//!
//! Modules: `sqlite` (the evidence store), `fs` (data root, writer lock,
//! `unlock`), `procfs` (the process table), `system` (clock, entropy),
//! `config` (business and boot JSON), `wire` (the socket's and the host
//! channel's JSON), `socket` (the Unix socket server), `credentials` (file
//! and environment token sources and the token store), `sys` (the calls with
//! no safe form, the workspace's only `unsafe` code: what `up`'s sandbox
//! sheds of what it inherited, and the terminal's width of a character), `http_drain` (an HTTP body read under
//! a limit whose 413 survives: the rest is drained, bounded), `http`
//! (browser control's axum server and the SSE transport), `cause` (where an
//! error becomes a wire code and its cause is logged).
//!
//! What a client links (the socket client, the capability file, the
//! views, the MCP server) is the client crate, `mosaic-client`; the shapes
//! both ends of the socket share (a line's limits and its refusal line,
//! each verb's argument type) are defined there once, and used here.
#![warn(missing_docs, unreachable_pub)]

pub mod cause;
pub mod config;
pub mod credentials;
pub mod fs;
pub mod http;
pub mod http_drain;
pub mod procfs;
pub mod socket;
pub mod sqlite;
pub mod sys;
pub mod system;
pub mod wire;
