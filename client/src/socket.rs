//! A client of the broker's Unix socket: one request line
//! `{"cap","verb","args"}` out, one response line in, and what of a
//! line the broker's server (`mosaic_adapters::socket`) reads and writes
//! alike, defined here once for both ends: its limits and the refusal
//! line ([`error_line`]).
//!
//! - `client`: the synchronous [`Client`] (no tokio), one connection per
//!   call, used by the CLI and by code that has no runtime;
//! - `session`: the synchronous [`Session`], a [`Client`] that keeps its
//!   connection open between calls (the MCP server, the views);
//! - `connector`: how a client inside `up`'s sandbox, which may not make
//!   a Unix socket, gets its connections from the sandbox's supervisor.

mod client;
pub mod connector;
mod session;

use std::time::Duration;

use mosaic_domain::Refusal;

pub use client::{broker_wait, parse_response, Client};
pub use session::Session;

/// The longest request line, in bytes before its `\n`: 64 KiB. A line of
/// exactly this length is accepted; one byte more is `request-too-large`.
pub const MAX_REQUEST: usize = 64 * 1024;

/// The longest response line the [`Client`] accepts, in bytes before its
/// `\n`: 4 MiB. One byte more is `response-too-large`.
pub const MAX_RESPONSE: usize = 4 * 1024 * 1024;

/// How long a connection may take to deliver each request line: the first
/// from the accept, each next one from the previous answer. Between
/// requests it is the idle deadline: a connection that sent nothing of a
/// next line by then is closed.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);

/// The [`Client`]'s default total time for one call: connect, send, answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The refusal line for `refusal`, without the trailing `\n`:
/// `{"ok":false,"error":"<code>"}`, as the broker writes it and
/// [`parse_response`] reads it.
///
/// Codes are static kebab-case ASCII (the domain tests that), so the line
/// needs no JSON library and no escaping.
pub fn error_line(refusal: Refusal) -> Vec<u8> {
    format!(r#"{{"ok":false,"error":"{}"}}"#, refusal.code()).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_are_the_literal_json_and_read_back_as_their_refusal() {
        assert_eq!(
            error_line(Refusal::RequestTooLarge),
            br#"{"ok":false,"error":"request-too-large"}"#.to_vec()
        );
        for &refusal in Refusal::ALL {
            let value: serde_json::Value =
                serde_json::from_slice(&error_line(refusal)).expect("valid JSON");
            assert_eq!(
                value,
                serde_json::json!({"ok": false, "error": refusal.code()})
            );
            assert_eq!(parse_response(&error_line(refusal)), Err(refusal));
        }
    }
}
