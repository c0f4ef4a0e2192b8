//! The side-effect-free core of mosaic-bus.
//!
//! Layout:
//! - [`ids`], [`time`]: strict newtypes with one text form each, and the
//!   broker clock rule;
//! - [`refusal`]: the one [`Refusal`] type with a static code and a meaning
//!   per variant;
//! - [`verb`]: the verb table, one row per socket verb (name, callers, read
//!   or write, meaning);
//! - [`business`]: the normalized business definition and the action classes;
//! - [`text`]: what a decision's words may hold, and the one neutraliser
//!   that makes any untrusted text drawable;
//! - [`journal`]: the undo journal that lets a machine stage a change and
//!   drop it when the store does not commit;
//! - [`ending`]: how a run ends (its cause, its process's exit) and the
//!   record of it, which frees the role the run held;
//! - the machines: [`claims`] (role claims, launches and ended runs), [`decisions`]
//!   (routing and lifecycle), [`authority`] (single-use approvals),
//!   [`messages`] (delivery ownership), [`browser`] (browser requests), and
//!   [`bus`], which composes the persistent ones into the broker's verbs.
//!
//! The driving loop, for every persistent machine: `handle_*` validates an
//! input against the current state and either refuses (state untouched) or
//! stages the change and queues the evidence it implies; the runtime drains
//! that evidence with `poll_effect`, commits it to the store, and then calls
//! `handle_committed` (keep) or `handle_rolled_back` (restore). Rebuilding
//! after a restart replays stored evidence through the same `apply` function
//! that live inputs use, so the rebuilt state cannot differ from the live one.
//!
//! Nothing here does I/O, reads a clock or draws randomness: `now`, ids and
//! capabilities are inputs.
#![warn(missing_docs, unreachable_pub)]

pub mod browser;
pub mod business;
pub mod ids;
pub mod refusal;
pub mod text;
pub mod time;
pub mod verb;

pub use business::{ActionClass, Business, BusinessSpec, InvalidBusiness};
pub use ids::{
    Action, BrowserRequestId, BusinessId, Capability, ClaimToken, ClientId, DecisionId, EventId,
    HumanName, MessageId, RoleInstance, RunId, Target, TaskRef,
};
pub use refusal::Refusal;
pub use time::{BrokerClock, Date, Timestamp};
pub use verb::{CallerKind, Verb};
pub mod authority;
pub mod bus;
pub mod caller;
pub mod changes;
pub mod claims;
pub mod command;
pub mod decisions;
pub mod ending;
pub mod evidence;
pub mod fuzzing;
pub mod journal;
pub mod log_windows;
pub mod messages;
pub mod refusal_counts;
