//! What each harness agent is doing, read from its event stream (Claude
//! Code's stream-json, pi's RPC events) as `up` relays it.

use mosaic_domain::evidence::Harness;
use mosaic_domain::{RoleInstance, RunId};

/// Called by `up`'s relay thread of a harness agent's standard output once
/// per complete line (its newline removed; a line longer than the relay's
/// cap is not passed), in order, after the line is in the transcript; from
/// that agent's own thread, so it must not block for long.
pub(super) fn observe(role: &RoleInstance, run: &RunId, harness: Harness, line: &[u8]) {
    let _ = (role, run, harness, line);
}
