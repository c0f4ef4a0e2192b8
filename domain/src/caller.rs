//! Who is calling: the [`Caller`] the runtime established (from a
//! capability or the human proof) and the [`AgentRef`] of an agent's
//! capability. A leaf: every other module may use it, and it uses only the
//! ids and the verb table's caller kinds.

use crate::verb::CallerKind;
use crate::{BusinessId, EventId, RoleInstance, RunId};

/// An agent acting under a capability: a run holding (or trying to hold) a role.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentRef {
    /// The role instance the capability is bound to.
    pub role: RoleInstance,
    /// The run the capability is bound to.
    pub run: RunId,
}

/// Who is calling, as the runtime established it (from a capability or the
/// human proof). A socket request never declares this itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// An agent run, through its capability.
    Agent {
        /// The capability's business.
        business: BusinessId,
        /// The capability's role and run.
        agent: AgentRef,
    },
    /// A read-only capability of one business (the web UI).
    Reader {
        /// The capability's business.
        business: BusinessId,
    },
    /// The business's human, after the process proof. `input` is the id of
    /// the `human.input` event this request records.
    Human {
        /// The business the human addressed.
        business: BusinessId,
        /// The id for this request's `human.input` event.
        input: EventId,
    },
}

impl Caller {
    /// The caller's kind, as the verb table lists callers.
    pub fn kind(&self) -> CallerKind {
        match self {
            Caller::Agent { .. } => CallerKind::Agent,
            Caller::Reader { .. } => CallerKind::Reader,
            Caller::Human { .. } => CallerKind::Human,
        }
    }

    /// The caller's business.
    pub fn business(&self) -> &BusinessId {
        match self {
            Caller::Agent { business, .. }
            | Caller::Reader { business }
            | Caller::Human { business, .. } => business,
        }
    }
}
