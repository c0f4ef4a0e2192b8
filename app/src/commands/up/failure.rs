//! Why `up` (or `up --dry-run`) could not start, and the one line it then
//! prints: `{"ok":false,"error":CODE}`, plus `"role"` when one agent is at
//! fault, `"reference"` when a reference of the business is, and `"why"`,
//! a sentence of what to change, where `up` has one.

use mosaic_domain::{Refusal, RoleInstance};
use serde_json::{json, Value};

use crate::commands::team::TeamError;
use crate::runtime::BootFailure;

/// Why `up` could not start: a static code, and what it concerns.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) code: Refusal,
    pub(super) role: Option<RoleInstance>,
    pub(super) reference: Option<String>,
    /// What to change, in one sentence of `up`'s own words.
    pub(super) why: Option<String>,
}

impl From<Refusal> for Failure {
    fn from(refusal: Refusal) -> Self {
        Failure {
            code: refusal,
            role: None,
            reference: None,
            why: None,
        }
    }
}

impl From<TeamError> for Failure {
    fn from(error: TeamError) -> Self {
        Failure {
            code: error.refusal,
            role: error.role,
            reference: error.reference,
            why: error.why,
        }
    }
}

impl From<BootFailure> for Failure {
    fn from(failure: BootFailure) -> Self {
        Failure {
            code: failure.refusal,
            role: None,
            reference: failure.reference,
            why: None,
        }
    }
}

impl Failure {
    /// `code`, for the agent `role`.
    pub(super) fn of(role: &RoleInstance, code: Refusal) -> Self {
        Failure {
            role: Some(role.clone()),
            ..Failure::from(code)
        }
    }

    /// `code`, with the sentence `why`.
    pub(super) fn because(code: Refusal, why: String) -> Self {
        Failure {
            why: Some(why),
            ..Failure::from(code)
        }
    }

    /// Logs it, then gives its line.
    pub(super) fn line(self) -> Value {
        tracing::error!(
            code = self.code.code(),
            role = self.role.as_ref().map(RoleInstance::as_str),
            reference = self.reference.as_deref(),
            why = self.why.as_deref(),
            "up could not start"
        );
        let mut line = json!({"ok": false, "error": self.code.code()});
        if let Some(role) = self.role {
            line["role"] = json!(role.as_str());
        }
        if let Some(reference) = self.reference {
            line["reference"] = json!(reference);
        }
        if let Some(why) = self.why {
            line["why"] = json!(why);
        }
        line
    }
}
