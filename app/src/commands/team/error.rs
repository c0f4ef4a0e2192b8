//! Why a team configuration is refused ([`TeamError`]): its static code,
//! and where one is known the business reference at fault, the agent, and
//! a sentence saying what to change. `up` prints them on its failure line.

use mosaic_adapters::config::ConfigError;
use mosaic_domain::{Refusal, RoleInstance};

/// A refused team configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamError {
    /// The code.
    pub refusal: Refusal,
    /// The business's reference at fault, as [`ConfigError`] names it.
    pub reference: Option<String>,
    /// The agent at fault, when the refusal names one.
    pub role: Option<RoleInstance>,
    /// What is wrong and how to mend it, in one sentence of our own (no
    /// value of the configuration but numbers and the role).
    pub why: Option<String>,
}

impl TeamError {
    /// `refusal`, with the sentence `why`.
    pub(crate) fn because(refusal: Refusal, why: String) -> Self {
        TeamError {
            refusal,
            reference: None,
            role: None,
            why: Some(why),
        }
    }
}

impl From<Refusal> for TeamError {
    fn from(refusal: Refusal) -> Self {
        TeamError {
            refusal,
            reference: None,
            role: None,
            why: None,
        }
    }
}

impl From<ConfigError> for TeamError {
    fn from(error: ConfigError) -> Self {
        TeamError {
            refusal: error.refusal,
            reference: error.reference,
            role: None,
            why: None,
        }
    }
}

impl From<TeamError> for Refusal {
    fn from(error: TeamError) -> Self {
        error.refusal
    }
}
