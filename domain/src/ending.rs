//! How a run ends: why ([`EndCause`]), how its process ended where that is
//! known ([`Ending`]), and the record of it ([`RunEnd`], the evidence
//! `session.ended`).
//!
//! A run (one launch: its capability, its claim, the decisions it raised)
//! lives until it ends, and it ends once. The record of the end also frees
//! the role the run held (`vacated`), so a run that is gone never keeps a
//! role from the next one, and from then on its capability is refused
//! ([`Ending::refusal`]). The claims machine ([`crate::claims`]) keeps the
//! ends; the bus ends a run for the host, for the human's `run.end` and
//! for a revoke.

use std::fmt;

use crate::caller::AgentRef;
use crate::{BusinessId, Refusal};

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndCause {
    /// Its process (or sandbox) exited with status 0, or how is unknown.
    Exited,
    /// Its process exited with a non-zero status or was killed by a
    /// signal, or its restarts were spent.
    Failed,
    /// The human ended it (`run.end`).
    Human,
    /// A human-approved `role.revoke` revoked it.
    Revoked,
    /// Its budget ran out.
    Budget,
    /// At boot, its recorded process (pid and start time) was gone.
    ProcessGone,
}

impl EndCause {
    /// Every cause, in the order above.
    pub const ALL: [EndCause; 6] = [
        EndCause::Exited,
        EndCause::Failed,
        EndCause::Human,
        EndCause::Revoked,
        EndCause::Budget,
        EndCause::ProcessGone,
    ];

    /// The wire name, for example `process-gone`.
    pub const fn as_str(self) -> &'static str {
        match self {
            EndCause::Exited => "exited",
            EndCause::Failed => "failed",
            EndCause::Human => "human",
            EndCause::Revoked => "revoked",
            EndCause::Budget => "budget",
            EndCause::ProcessGone => "process-gone",
        }
    }

    /// The cause with this wire name.
    ///
    /// # Errors
    /// `bad-request` for any other text.
    pub fn parse(text: &str) -> Result<EndCause, Refusal> {
        EndCause::ALL
            .into_iter()
            .find(|c| c.as_str() == text)
            .ok_or(Refusal::BadRequest)
    }
}

impl fmt::Display for EndCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The highest exit status a process can report (`waitpid` keeps 8 bits).
pub const MAX_STATUS: i32 = 255;
/// The highest signal number (Linux's `SIGRTMAX`).
pub const MAX_SIGNAL: i32 = 64;

/// Why a run ended and, where known, how its process ended: an exit
/// status or the signal that killed it, never both. The cause and the
/// process agree: `exited` is status 0 (or unknown) and no signal;
/// `failed` is a non-zero status or a signal (or, with neither, restarts
/// that were spent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ending {
    cause: EndCause,
    status: Option<i32>,
    signal: Option<i32>,
}

impl Ending {
    /// An ending, checked.
    ///
    /// # Errors
    /// `bad-request` for both a status and a signal, a status outside
    /// 0..=255, a signal outside 1..=64, `exited` with a non-zero status
    /// or a signal, or `failed` with status 0.
    pub fn new(cause: EndCause, status: Option<i32>, signal: Option<i32>) -> Result<Self, Refusal> {
        let in_range = status.is_none_or(|s| (0..=MAX_STATUS).contains(&s))
            && signal.is_none_or(|s| (1..=MAX_SIGNAL).contains(&s));
        let agrees = match cause {
            EndCause::Exited => signal.is_none() && status.is_none_or(|s| s == 0),
            EndCause::Failed => status != Some(0),
            EndCause::Human | EndCause::Revoked | EndCause::Budget | EndCause::ProcessGone => true,
        };
        if !in_range || !agrees || (status.is_some() && signal.is_some()) {
            return Err(Refusal::BadRequest);
        }
        Ok(Self {
            cause,
            status,
            signal,
        })
    }

    /// The ending of a process the host reaped: `exited` for status 0 (or
    /// when neither is known), `failed` for a non-zero status or a signal.
    ///
    /// # Errors
    /// As [`Ending::new`].
    pub fn of_exit(status: Option<i32>, signal: Option<i32>) -> Result<Self, Refusal> {
        let failed = signal.is_some() || status.is_some_and(|s| s != 0);
        let cause = if failed {
            EndCause::Failed
        } else {
            EndCause::Exited
        };
        Self::new(cause, status, signal)
    }

    /// An ending with no process status: the human's, a revoke's, a
    /// spent budget's or a process found gone.
    pub fn of_cause(cause: EndCause) -> Self {
        Self {
            cause,
            status: None,
            signal: None,
        }
    }

    /// Why the run ended.
    pub fn cause(&self) -> EndCause {
        self.cause
    }

    /// The exit status, where the process exited and the host said with
    /// which.
    pub fn status(&self) -> Option<i32> {
        self.status
    }

    /// The signal that killed the process, where one did.
    pub fn signal(&self) -> Option<i32> {
        self.signal
    }

    /// What every later call of the run's capability is refused with:
    /// `run-revoked` for a revoked run (it may never hold its role again),
    /// `run-ended` for every other end.
    pub fn refusal(&self) -> Refusal {
        match self.cause {
            EndCause::Revoked => Refusal::RunRevoked,
            EndCause::Exited
            | EndCause::Failed
            | EndCause::Human
            | EndCause::Budget
            | EndCause::ProcessGone => Refusal::RunEnded,
        }
    }
}

/// `session.ended`: a run ended, once, and freed its role if it held it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd {
    /// The business.
    pub business: BusinessId,
    /// The run and the role it was launched for.
    pub agent: AgentRef,
    /// Why, and how its process ended where known.
    pub ending: Ending,
    /// Whether the run held its role until now: the end frees it, in the
    /// same record (a revoked run's role was freed by the revoke).
    pub vacated: bool,
}
