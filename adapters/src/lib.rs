//! The I/O adapters of mosaic-bus: each implements one port of
//! `mosaic-ports` against a real resource and maps driver errors onto the
//! port's error type, so no raw driver or OS text reaches the wire.
//!
//! Planned modules, each with its issue: `sqlite` (the evidence store),
//! `fs` (data root and writer lock), `socket` (Unix socket server and
//! `Client`), `sse` (browser control over HTTP/SSE), `procfs` (the process
//! table), `credentials` (file and environment token sources). None is built
//! yet; this crate exists so the workspace has its final shape.
#![warn(missing_docs, unreachable_pub)]

pub mod config;
pub mod fs;
pub mod procfs;
pub mod socket;
pub mod sqlite;
pub mod system;
pub mod views;
pub mod wire;
