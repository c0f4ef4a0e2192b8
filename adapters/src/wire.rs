//! The socket's JSON (docs/protocol.md says it for clients), and nothing
//! else: no I/O, no clock, no randomness.
//!
//! Layout (each verb's argument type, whose keys the parser allows and
//! whose schema the MCP tools publish, is the client crate's,
//! `mosaic_client::wire::args`):
//! - [`json`]: strict JSON text to `serde_json::Value` (UTF-8, one value,
//!   no duplicate keys, bounded depth);
//! - [`request`]: one request line `{"cap","verb","args"}` to a typed
//!   [`WireRequest`], and a [`Call`] to the domain [`Command`] or the read
//!   [`Query`] the runtime serves;
//! - [`reply`]: the response line and the answers, built as the client
//!   crate's wire shapes (`mosaic_client::wire`: decisions, messages, the
//!   inbox, agents rows, tasks, trail records, closed decisions, a page of
//!   changes), so
//!   each end encodes and decodes the same types;
//! - [`bounded`]: how a read's answer stays within what a client takes,
//!   whatever agents send (the human's inbox cut, the array reads listed
//!   while they fit);
//! - [`browser`]: `browser.request`'s arguments, the pane routes' bodies
//!   and the SSE events; [`host`]: the host channel.
//!
//! The runtime's loop over one connection, in full:
//!
//! ```no_run
//! # use mosaic_adapters::wire::{self, Dispatch, Presenter, UuidKind};
//! # use mosaic_domain::Refusal;
//! # fn caller_of(_: &Presenter) -> Result<(), Refusal> { Ok(()) }
//! # fn line() -> Vec<u8> { Vec::new() }
//! let answer = (|| {
//!     let envelope = wire::Envelope::parse(&line())?;
//!     // A capability names the caller; a human claim must pass the process proof.
//!     let _caller = caller_of(envelope.presenter())?;
//!     let call = envelope.into_call()?; // record a refusal with the caller here
//!     match call.into_dispatch(|| [7; 16], |_uuid| Ok(UuidKind::Decision))? {
//!         Dispatch::Command(command) => { /* driver.call(now, &caller, command) */ }
//!         Dispatch::Query(query) => { /* read the store */ }
//!     }
//!     Ok::<_, Refusal>(serde_json::json!({}))
//! })();
//! let response = wire::response(answer); // then write it and "\n"
//! ```
//!
//! [`Command`]: mosaic_domain::bus::Command

pub mod bounded;
pub mod browser;
pub mod json;
pub mod reply;
pub mod request;

pub mod host;

pub use json::parse_json;
pub use reply::{
    agent_json, agent_row, change_page, changes_json, closed_row, decision_json, decision_view,
    err, inbox, inbox_json, inbox_text, message_facts_json, message_facts_view, message_json,
    message_view, ok, ok_text, raised, record, record_json, reply_json, response, task_json,
    task_row, text_of, value_of, with_calls, Exited, LastCall, RunLife, Usage,
};
pub use request::{
    parse_request, Call, Dispatch, Envelope, Presenter, Query, SubjectRef, UuidKind, UuidRef, Verb,
    WireRequest, MAX_REQUEST_BYTES,
};
