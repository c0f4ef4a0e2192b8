//! Crash consistency with real processes: eight clients send
//! `message.send` and `decision.*` at full speed while the broker (a real
//! `mosaic-bus broker` child) is killed with SIGKILL at random moments.
//! After each crash the operator runs `mosaic-bus unlock`, the host boots
//! the broker again on the same data root with the same launch records
//! (new capabilities, handed to the clients), and the clients carry on.
//!
//! Every request is recorded with its outcome: acknowledged (with the id
//! the broker returned), refused (a static code), `outcome-unknown` or
//! `broker-unavailable`. Afterwards, on the closed store and through a
//! rebooted broker's `trail`:
//! - every acknowledged request is in the store exactly once (a send by
//!   its message id and its body marker, a raise by its decision id and
//!   its question marker, a resolve or withdraw by its decision event);
//! - a refused or `broker-unavailable` request is not in the store (its
//!   refusal is, for a refusal the broker recorded);
//! - an `outcome-unknown` request is in the store at most once, and
//!   `trail` of its id says the same as the store;
//! - no transaction is half-applied, `quick_check` is `ok`, and the broker
//!   boots on the store again (a verified open).
//!
//! A message or decision id is drawn by the broker, so each request carries
//! a unique marker (`c3-r17`: client 3, its request 17) as its body or
//! question, by which an unanswered one is found again.
//!
//! The default run crashes the broker 3 times. The long run:
//!
//! ```sh
//! MOSAIC_CRASH_ROUNDS=20 cargo test -p mosaic-app --test crash -- --nocapture
//! ```
//!
//! `MOSAIC_CRASH_SEED=N` replays another seed (the kill moments and each
//! client's choices; thread interleaving is the scheduler's). The run
//! prints one JSON summary line to stderr.
//!
//! A second leg crashes the broker while agents wait on `changes`
//! four waiters, each its own role, hold `changes {since}`
//! waits while four senders send them messages; after each SIGKILL,
//! `unlock` and reboot every waiter asks again from the cursor of its last
//! answered wait. In the end each waiter must have been told of exactly
//! the messages stored for its role, once each and in store order (every
//! acknowledged send among them), and of nothing else. It follows the same
//! `MOSAIC_CRASH_ROUNDS` and `MOSAIC_CRASH_SEED`:
//!
//! ```sh
//! MOSAIC_CRASH_ROUNDS=20 cargo test -p mosaic-app --test crash changes_waiters -- --nocapture
//! ```
//!
//! The first leg is [`writers`], the second [`waiters`] (each in `crash/`);
//! the broker's business, the seeds and the helpers they share are here,
//! and the kill loop both run is `support::crash`.

#[path = "support/mod.rs"]
mod support;

#[path = "crash/waiters.rs"]
mod waiters;
#[path = "crash/writers.rs"]
mod writers;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;

use mosaic_client::socket::Client;
use mosaic_domain::Refusal;
use serde_json::{json, Map, Value};

use support::crash::{Campaign, Rng};
use support::{assert_whole_transactions, config, count, launch, open_db, Broker, WAIT};

/// Concurrent clients, each its own role and run.
const CLIENTS: usize = 8;

/// The seed of the default run.
const DEFAULT_SEED: u64 = 0x5eed_0009;

/// Client `i`'s role: `w0` is the technical arbiter, `w1` the delivery one.
fn role(i: usize) -> String {
    format!("w{i}")
}

/// Client `i`'s run.
fn run(i: usize) -> String {
    format!("r{i}")
}

/// `crash`: every role sends within role and merges cross-role, so a raise
/// routes to `w1` (delivery) or `w0` (technical), or to the human when the
/// raiser is that arbiter.
fn business() -> Value {
    let roles: Map<String, Value> = (0..CLIENTS)
        .map(|i| {
            (
                role(i),
                json!({"authority": {"withinRole": ["message.send"], "crossRole": ["repo.merge"]}}),
            )
        })
        .collect();
    json!({
        "id": "crash",
        "human": "carol",
        "arbiters": {"technical": "w0", "delivery": "w1"},
        "roles": roles,
    })
}

fn launches() -> Vec<Value> {
    (0..CLIENTS)
        .map(|i| launch("crash", &role(i), &run(i)))
        .collect()
}

/// `mosaic-bus verify` recomputes the hash chain over every record of the
/// closed store, crashes and all: `ok`, at the ledger's size.
#[track_caller]
fn assert_chain_verifies(root: &std::path::Path, ledger_rows: i64) {
    let out = std::process::Command::new(support::BIN)
        .arg("verify")
        .arg("--db")
        .arg(root.join("bus").join("bus.sqlite"))
        .output()
        .expect("run mosaic-bus verify");
    let line: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(out.status.code(), Some(0), "verify: {line}");
    assert_eq!(line["ok"], json!(true), "{line}");
    assert_eq!(line["size"], json!(ledger_rows), "{line}");
}

/// The broker generation the clients talk to.
struct Live {
    epoch: usize,
    caps: HashMap<String, String>,
}

/// How one request ended, as its client saw it.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// `{"ok":true}` with this result.
    Acked(Value),
    /// `{"ok":false}` with this code.
    Refused(Refusal),
    /// Sent, but no answer: the broker may or may not have acted.
    Unknown,
    /// Nothing was sent.
    Unavailable,
}

/// What the clients and the crashing host share.
struct Shared {
    socket: PathBuf,
    live: Mutex<Live>,
    changed: Condvar,
    stop: AtomicBool,
    /// Open decisions an arbiter may resolve: (id, index of the routed client).
    routed: Mutex<Vec<(String, usize)>>,
}

impl Shared {
    /// The current generation and `run`'s capability in it, or `None` once
    /// the clients are told to stop.
    fn current(&self, run: &str) -> Option<(usize, String)> {
        if self.stop.load(Ordering::SeqCst) {
            return None;
        }
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let cap = live.caps.get(run).expect("a capability per run").clone();
        Some((live.epoch, cap))
    }

    /// Waits until a generation after `epoch` is published (or the stop).
    fn wait_past(&self, epoch: usize) {
        let deadline = Instant::now() + WAIT;
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        while live.epoch <= epoch && !self.stop.load(Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no new broker within {WAIT:?}");
            live = self
                .changed
                .wait_timeout(live, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Publishes a new generation's capabilities.
    fn publish(&self, caps: HashMap<String, String>) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.epoch += 1;
        live.caps = caps;
        self.changed.notify_all();
    }

    fn halt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        self.changed.notify_all();
    }

    /// Takes a random open decision routed to client `i`.
    fn take_routed(&self, i: usize, rng: &mut Rng) -> Option<String> {
        let mut routed = self.routed.lock().unwrap_or_else(PoisonError::into_inner);
        let mine: Vec<usize> = (0..routed.len()).filter(|&k| routed[k].1 == i).collect();
        if mine.is_empty() {
            return None;
        }
        let k = mine[rng.below(mine.len() as u64) as usize];
        Some(routed.swap_remove(k).0)
    }
}
