//! The shared reads, for S4 and S5: `views(client)` over a capability's
//! [`Client`]. Neither caller ever opens `bus.sqlite`; everything goes
//! through the broker, scoped to the capability's business. A `Views`
//! keeps its connection open between reads ([`Session`]), so a UI that
//! refreshes its lists pays for one connect, not one per read.
//!
//! ```no_run
//! use mosaic_client::socket::Client;
//! use mosaic_client::views::views;
//! # fn main() -> Result<(), mosaic_domain::Refusal> {
//! let read = views(Client::new("/srv/mosaic/bus/bus.sock", "<64 hex capability>"));
//! let inbox = read.inbox()?;
//! let trail = read.trail("vikunja:3/41")?;
//! # Ok(()) }
//! ```

use mosaic_domain::Refusal;
use mosaic_domain::Verb;
use serde_json::{json, Value};

use crate::socket::{Client, Session};

/// Read projections over one capability's client, sharing one connection
/// while they are called in turn.
#[derive(Debug)]
pub struct Views {
    session: Session,
}

/// The read projections for `client`'s capability (and its socket and
/// timeout).
pub fn views(client: Client) -> Views {
    Views {
        session: Session::new(client),
    }
}

impl Views {
    /// `inbox`: open decisions routed to the caller (with their
    /// `authorization` context, which a UI must show when offering
    /// resolution) and unread messages, each tagged with `type`.
    ///
    /// # Errors
    /// The broker's refusal, or the client's (`outcome-unknown`, …).
    pub fn inbox(&self) -> Result<Vec<Value>, Refusal> {
        self.list(Verb::Inbox.as_str(), json!({}))
    }

    /// `tasks`: the newest state of each task, tombstones included. A task
    /// missing here is unknown, not open or done.
    ///
    /// # Errors
    /// As [`Views::inbox`].
    pub fn tasks(&self) -> Result<Vec<Value>, Refusal> {
        self.list(Verb::Tasks.as_str(), json!({}))
    }

    /// `agents`: every bound run with its role, harness and whether it holds
    /// or was revoked from its role.
    ///
    /// # Errors
    /// As [`Views::inbox`].
    pub fn agents(&self) -> Result<Vec<Value>, Refusal> {
        self.list(Verb::Agents.as_str(), json!({}))
    }

    /// `trail`: every record filed under a task ref, decision id or message
    /// id, in broker write order.
    ///
    /// # Errors
    /// As [`Views::inbox`].
    pub fn trail(&self, subject: &str) -> Result<Vec<Value>, Refusal> {
        self.list(Verb::Trail.as_str(), json!({ "subject": subject }))
    }

    fn list(&self, verb: &str, args: Value) -> Result<Vec<Value>, Refusal> {
        match self.session.call(verb, args)? {
            Value::Array(items) => Ok(items),
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Object(_) => Err(Refusal::BadRequest),
        }
    }
}
