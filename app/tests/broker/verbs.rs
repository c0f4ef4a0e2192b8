//! Every verb of the spec's table, its rules and its refusals, through the
//! socket of a real broker.
//!
//! One file of `verbs/` per group of verbs: [`roles`], [`decisions`],
//! [`messages`], [`emit_and_reads`] (the event, the launch switch and the
//! reads) and [`unknowns`] (unknown things, businesses and readers); the
//! helpers they share are here.

mod decisions;
mod emit_and_reads;
mod messages;
mod roles;
mod unknowns;

use std::path::Path;

use serde_json::{json, Value};

use crate::support::{
    acme, acme_launches, config, data_root, decision, globex, launch, launch_pid, message,
    raise_args, start_time, without_last_at, Agent, Broker,
};

/// A UUID that names nothing.
const NOBODY: &str = "00000000-0000-4000-8000-000000000000";

/// acme with every run of [`acme_launches`] and one reader.
fn acme_broker(root: &Path) -> Broker {
    Broker::boot(root, &config(root, &[acme()], &acme_launches(), &["acme"]))
}

fn by(role: &str, run: &str) -> Value {
    json!({"role": role, "run": run})
}

/// Agents of `broker` that claimed their roles, in the order given.
fn claimed<const N: usize>(broker: &Broker, runs: [&str; N]) -> [Agent; N] {
    runs.map(|run| {
        let agent = broker.agent(run);
        agent.claim();
        agent
    })
}

/// The `message.sent` trail record of a message as `message.receive` shows it.
fn sent(message: &Value) -> Value {
    let mut record = json!({"kind": "message.sent", "business": "acme"});
    crate::support::merge(&mut record, message.clone());
    record
}

/// The trail records of `kind`.
#[track_caller]
fn of_kind(agent: &Agent, subject: &str, kind: &str) -> Vec<Value> {
    agent
        .trail(subject)
        .into_iter()
        .filter(|r| r["kind"] == kind)
        .collect()
}
