//! An agent's environment as its plan holds it: every variable by name,
//! each with its value or with the launch value it takes ([`AtLaunch`]),
//! and the allow-list of `up`'s own variables that pass ([`allowed`]).
//! The plan composes it (`plan::env_of`); nothing else adds to it.

use std::collections::BTreeMap;
use std::ffi::OsString;

use crate::commands::team::AgentSpec;

/// The variables of `up`'s environment every agent gets, when set: its
/// home (in a sandbox its own instead), its language and its terminal's
/// kind. With `PATH`, the agents' own (this executable's folder first),
/// that is the whole fixed list: nothing else of `up`'s environment
/// reaches an agent (no `LC_*`, no `SSH_AUTH_SOCK`, no `DISPLAY`) unless
/// its configuration names it in `env`.
pub const BASE_ENV: [&str; 3] = ["HOME", "LANG", "TERM"];

/// A value only a launch knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtLaunch {
    /// The change feed's cursor, taken before the spawn.
    Since,
    /// The number of the capability's descriptor.
    CapFd,
}

/// One variable's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// Known when the plan is made.
    Set(OsString),
    /// Given by the launch.
    AtLaunch(AtLaunch),
}

/// The whole environment of one agent's command, by name (the order a
/// child's environment has anyway).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Env(BTreeMap<OsString, Value>);

impl Env {
    /// Sets `name` to `value`, over any value it had.
    pub(crate) fn set(&mut self, name: OsString, value: OsString) {
        self.0.insert(name, Value::Set(value));
    }

    /// Sets `name` to what the launch gives, over any value it had.
    pub(crate) fn set_at_launch(&mut self, name: OsString, value: AtLaunch) {
        self.0.insert(name, Value::AtLaunch(value));
    }

    /// Every variable, by name.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&OsString, &Value)> {
        self.0.iter()
    }
}

/// The variables of `vars` (`up`'s environment) that `spec`'s agent
/// gets: those [`BASE_ENV`] or its `env` name, except any that holds a
/// service token (`secret`).
pub(crate) fn allowed<'a>(
    spec: &'a AgentSpec,
    vars: &'a [(OsString, OsString)],
    secret: &'a [String],
) -> impl Iterator<Item = (OsString, OsString)> + 'a {
    vars.iter()
        .filter(|(name, _)| {
            let Some(name) = name.to_str() else {
                return false;
            };
            let wanted = BASE_ENV.contains(&name) || spec.env.iter().any(|n| n == name);
            wanted && !secret.iter().any(|s| s == name)
        })
        .cloned()
}
