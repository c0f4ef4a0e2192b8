//! One wire request's path, the same for the socket's connections and the
//! fuzz harness. (The trusted in-process API, `Broker::authorize` and
//! `record_event`, is not a wire request: its typed commands go straight
//! to the writer as `Job::Command`.)
//!
//! 1. [`admit`]: the envelope (cap, verb, the shape of args), the service
//!    token guard on the line as sent and as decoded, the caller (a
//!    capability's binding, or a human still to be proven), then the call's
//!    arguments. A refusal before a caller is known is answered and never
//!    recorded; one after it is recorded as that caller's.
//! 2. [`route`] says where it goes ([`Route`]): an agent's or reader's
//!    read runs beside the writer ([`read_now`]) on a reader handle, and
//!    `changes` waits beside it ([`super::changes::page`]); only their
//!    refusals are recorded.
//! 3. A human request is proven beside the writer ([`Prover::prove`]),
//!    bounded in time, so a stalled `/proc` read holds up only itself; a
//!    proven human's read or wait then runs beside the writer too
//!    ([`human_beside`]).
//! 4. Everything else is staged on the writer ([`stage_request`]): the
//!    proven caller, then the call dispatched to the driver (a command) or
//!    to the read side (a read with no view to run beside the writer
//!    yet), or the refusal recorded.
//!
//! The writer commits the batch afterwards ([`commit_batch`]; see
//! [`super::driver`]); no answer goes out before its batch is durable.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mosaic_adapters::socket::Peer;
use mosaic_adapters::wire::browser::BrowserCall;
use mosaic_adapters::wire::{self, Call, Dispatch, Envelope, Presenter};
use mosaic_domain::browser::{AddressPolicy, BrowserAction};
use mosaic_domain::bus::Caller;
use mosaic_domain::log_windows::{LogWindows, Suppressed};
use mosaic_domain::{BusinessId, Capability, EventId, Refusal};
use mosaic_ports::{Entropy, EvidenceStore, ProcessTable, StoreReaders};
use serde_json::Value;

use super::driver::Driver;
use super::human_proof::{self, HumanClaim};
use super::reads::{self, Reads, View};
use super::world::{until, BrokerIdentity, SharedEntropy, Time};
use mosaic_adapters::cause::logged;

/// Who a request is from, as far as the connection's handler can tell.
pub(crate) enum Who {
    /// A capability the broker issued.
    Known(Caller),
    /// The human CLI, still to be proven ([`Prover::prove`]) from the
    /// connection's kernel credentials.
    Human {
        peer: Peer,
        nonce: String,
        business: BusinessId,
    },
}

/// Who a request is from, as the writer gets it: a capability's caller, or
/// the human CLI with the outcome of its proof, which ran beside the writer.
#[derive(Clone)]
pub(crate) enum Proven {
    /// A capability the broker issued.
    Known(Caller),
    /// The human CLI of `business` (not yet checked to exist: that comes
    /// after the proof, so a failed proof reveals nothing about businesses).
    Human {
        business: BusinessId,
        proof: Result<(), Refusal>,
    },
}

/// How long a human proof may take, on the clock: a proof held up (a stalled
/// read of a process's environment) is refused when it is over, and holds
/// up only its own request.
pub(crate) const PROOF_LIMIT: Duration = Duration::from_secs(2);

/// How many human proofs run at once; more wait for a turn, within their
/// [`PROOF_LIMIT`].
const PROOFS: usize = 4;

/// Runs human proofs beside the writer: the process table's reads never
/// block the writer, and so never any other request.
pub(crate) struct Prover {
    processes: Arc<dyn ProcessTable>,
    identity: BrokerIdentity,
    time: Time,
    turns: Arc<tokio::sync::Semaphore>,
    log: Arc<ProofLog>,
}

impl Prover {
    pub(crate) fn new(
        processes: Arc<dyn ProcessTable>,
        identity: BrokerIdentity,
        time: Time,
    ) -> Self {
        Self {
            processes,
            identity,
            log: Arc::new(ProofLog::new(time.clone())),
            time,
            turns: Arc::new(tokio::sync::Semaphore::new(PROOFS)),
        }
    }

    /// Whether a human line from `peer` may take a place in the human's
    /// reserve: the checks that need no proof
    /// ([`human_proof::may_be_human`]), three reads of `/proc/<pid>/ns`.
    pub(crate) fn may_be_human(&self, peer: Peer) -> bool {
        peer.pid.is_some_and(|pid| {
            human_proof::may_be_human(
                &*self.processes,
                pid,
                peer.uid,
                self.identity.uid,
                &self.identity.namespaces,
            )
            .is_ok()
        })
    }

    /// Proves `who` if it is the human, on a blocking thread, against the
    /// launches of `view` (every launch is in the view before its binding
    /// is answered); a proof not done within [`PROOF_LIMIT`] fails.
    pub(crate) async fn prove<S: StoreReaders>(&self, reads: &Reads<S>, who: Who) -> Proven {
        let (peer, nonce, business) = match who {
            Who::Known(caller) => return Proven::Known(caller),
            Who::Human {
                peer,
                nonce,
                business,
            } => (peer, nonce, business),
        };
        let deadline = self.time.now().saturating_add(PROOF_LIMIT);
        // Set when this future ends, done or not: at the limit, or when its
        // request goes away. The walk asks before each read, so the
        // blocking thread stops at its next read instead of going on.
        let abandoned = GiveUpOnDrop(Arc::new(AtomicBool::new(false)));
        let flag = Arc::clone(&abandoned.0);
        let proof = async {
            let _turn = self
                .turns
                .acquire()
                .await
                .map_err(|_| Refusal::BrokerUnavailable)?;
            let view = reads.view().ok_or(Refusal::BrokerUnavailable)?;
            let (processes, identity) = (Arc::clone(&self.processes), self.identity.clone());
            let log = Arc::clone(&self.log);
            tokio::task::spawn_blocking(move || {
                let abandoned = || flag.load(Ordering::SeqCst);
                prove_now(&*processes, &identity, &view, peer, nonce, &abandoned, &log)
            })
            .await
            .unwrap_or(Err(Refusal::HumanProofFailed))
        };
        let proof = tokio::select! {
            proof = proof => proof,
            () = until(&self.time, deadline) => {
                self.log.refused(("proof-limit", ""), || {
                    tracing::warn!(
                        code = Refusal::HumanProofFailed.code(),
                        limit_ms = PROOF_LIMIT.as_millis() as u64,
                        "human proof refused: it took longer than its limit"
                    );
                });
                Err(Refusal::HumanProofFailed)
            }
        };
        drop(abandoned);
        Proven::Human { business, proof }
    }
}

/// The log of refused human proofs, bounded under a flood
/// ([`LogWindows`]): the first refusal of each cause (a
/// [`human_proof::ProofFailure::cause`] with its
/// [`human_proof::ProofFailure::detail`], or `proof-limit`) in a window of
/// a second is logged with its reason, the rest are counted, and a window
/// that left any out ends in one summary line with their count: logged at
/// the next refused proof after the window, or when the log is dropped
/// (with the broker's runtime, at shutdown).
pub(crate) struct ProofLog {
    time: Time,
    windows: Mutex<LogWindows<Cause>>,
}

/// What refused proofs are counted under: a static name and a detail of a
/// fixed set (`""` when none).
type Cause = (&'static str, &'static str);

impl ProofLog {
    pub(crate) fn new(time: Time) -> Self {
        Self {
            time,
            windows: Mutex::new(LogWindows::default()),
        }
    }

    /// A proof refused for `cause`: logs `line` if it is the first of its
    /// window, or counts it; logs the summaries of the windows now over.
    pub(crate) fn refused(&self, cause: Cause, line: impl FnOnce()) {
        let now = self.time.now();
        let (logged, ended) = {
            let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
            let ended = windows.close(now);
            (windows.note(now, cause), ended)
        };
        summarize(ended);
        if logged {
            line();
        }
    }
}

impl Drop for ProofLog {
    fn drop(&mut self) {
        let windows = self
            .windows
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        summarize(windows.close_all());
    }
}

/// One summary line per window that left refused proofs out of the log.
fn summarize(ended: Vec<Suppressed<Cause>>) {
    for window in ended {
        let (cause, detail) = window.cause;
        tracing::warn!(
            code = Refusal::HumanProofFailed.code(),
            cause,
            detail,
            since = window.since.to_string().as_str(),
            suppressed = window.count,
            "human proofs refused and not logged one by one"
        );
    }
}

/// Tells a proof's blocking thread to stop when dropped.
struct GiveUpOnDrop(Arc<AtomicBool>);

impl Drop for GiveUpOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The human proof of one request, synchronously: the peer must be this
/// broker's executable with the request's nonce, and neither it nor an
/// ancestor an agent (a bound launch of `view`, or a run marker). Given up
/// at the next read once `abandoned()` says so.
///
/// # Errors
/// `human-proof-failed`, whatever the reason (logged in `log`).
pub(crate) fn prove_now(
    processes: &dyn ProcessTable,
    identity: &BrokerIdentity,
    view: &View,
    peer: Peer,
    nonce: String,
    abandoned: &(dyn Fn() -> bool + Sync),
    log: &ProofLog,
) -> Result<(), Refusal> {
    let peer_pid = peer.pid.ok_or(Refusal::HumanProofFailed)?;
    let claim = HumanClaim {
        peer_pid,
        peer_uid: peer.uid,
        broker_uid: identity.uid,
        exe: identity.exe.clone(),
        namespaces: identity.namespaces,
        nonce,
    };
    human_proof::check_until(
        processes,
        &claim,
        &|pid, start| view.is_launch(pid, start),
        abandoned,
    )
    .map_err(|failure| {
        log.refused((failure.cause(), failure.detail()), || {
            tracing::warn!(
                code = Refusal::HumanProofFailed.code(),
                peer = claim.peer_pid,
                reason = failure.to_string().as_str(),
                "human proof refused"
            );
        });
        Refusal::HumanProofFailed
    })
}

/// Whether bytes hold a loaded service token.
pub(crate) type Secrets<'a> = dyn Fn(&[u8]) -> bool + 'a;

/// A request past its envelope: who it is from and what it asks (or why
/// its arguments were refused, which is recorded as that caller's).
pub(crate) struct Admitted {
    pub(crate) who: Who,
    pub(crate) verb: &'static str,
    pub(crate) call: Result<Call, Refusal>,
}

impl Admitted {
    /// Refuses a `browser.request` that would send the human's browser to
    /// an address `policy` refuses (`browser-address-refused`): its call
    /// becomes that refusal, which the writer records as any argument's.
    fn check_address(&mut self, policy: &AddressPolicy) {
        if let Ok(Call::BrowserRequest(call)) = &self.call {
            if let BrowserAction::Open { url, .. } = &call.action {
                if let Err(refusal) = policy.check(url) {
                    self.call = Err(refusal);
                }
            }
        }
    }
}

/// Step 1 of every request. `secrets` says whether bytes hold a loaded
/// service token (`None` when none is loaded: nothing to look for);
/// `lookup` is the capability registry; `browser` says where the human's
/// browser may be sent (a `browser.request` elsewhere is admitted as its
/// refusal, [`Admitted::check_address`]).
///
/// # Errors
/// The envelope's refusal, `credential-leak` for a line that is not even an
/// envelope but holds a token, and `bad-capability`: none is recorded.
pub(crate) fn admit(
    line: &[u8],
    peer: Peer,
    secrets: Option<&Secrets<'_>>,
    lookup: impl FnOnce(&Capability) -> Option<Caller>,
    browser: &AddressPolicy,
) -> Result<Admitted, Refusal> {
    let leaks = |bytes: &[u8]| secrets.is_some_and(|secrets| secrets(bytes));
    let raw_leak = leaks(line);
    let envelope = match Envelope::parse(line) {
        Ok(envelope) => envelope,
        Err(_) if raw_leak => return Err(Refusal::CredentialLeak),
        Err(refusal) => return Err(refusal),
    };
    // Decoded, `\u0067…` is the token itself; written out again, it is in
    // clear (a token's characters are never escaped).
    let leaked = raw_leak
        || envelope
            .args()
            .is_some_and(|args| secrets.is_some() && leaks(args.to_string().as_bytes()));
    let who = match envelope.presenter() {
        Presenter::Capability(cap) => Who::Known(lookup(cap).ok_or(Refusal::BadCapability)?),
        Presenter::Human { nonce, business } => Who::Human {
            peer,
            nonce: nonce.clone(),
            business: business.clone(),
        },
    };
    let verb = envelope.verb().as_str();
    // A line that holds a token is refused as its caller's request, so the
    // writer records the refusal, not the line.
    let call = if leaked {
        Err(Refusal::CredentialLeak)
    } else {
        envelope.into_call()
    };
    let mut admitted = Admitted { who, verb, call };
    admitted.check_address(browser);
    Ok(admitted)
}

/// Where an admitted request goes: the one routing of the socket's
/// connections and of the fuzz harness ([`route`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Route<'a> {
    /// An agent's or reader's `changes`: waited on the change feed
    /// ([`super::changes::page`]) beside the writer.
    Feed {
        caller: &'a Caller,
        since: Option<u64>,
        timeout_ms: Option<u64>,
    },
    /// An agent's or reader's read: run beside the writer ([`read_now`]).
    Read { caller: &'a Caller, call: &'a Call },
    /// An agent's `browser.request`: authorized on the writer, then
    /// carried to a pane.
    Browser {
        caller: &'a Caller,
        call: &'a BrowserCall,
    },
    /// The human's `changes`: proven, then waited on the feed as the
    /// business's when [`human_beside`] says so, else staged on the writer.
    HumanFeed {
        since: Option<u64>,
        timeout_ms: Option<u64>,
    },
    /// The human's read: proven, then run beside the writer when
    /// [`human_beside`] says so, else staged on the writer.
    HumanRead,
    /// Everything else, a refusal of the arguments included: proven when
    /// the human's, then staged on the writer ([`stage_request`]).
    Writer,
}

/// Where `admitted` goes ([`Route`]), the choice that begins step 2. Only
/// the caller and the call decide; a refusal of the arguments always goes
/// to the writer, which records it.
pub(crate) fn route(admitted: &Admitted) -> Route<'_> {
    match (&admitted.who, &admitted.call) {
        (Who::Known(caller), Ok(Call::Changes { since, timeout_ms })) => Route::Feed {
            caller,
            since: *since,
            timeout_ms: *timeout_ms,
        },
        (Who::Human { .. }, Ok(Call::Changes { since, timeout_ms })) => Route::HumanFeed {
            since: *since,
            timeout_ms: *timeout_ms,
        },
        (Who::Known(caller @ Caller::Agent { .. }), Ok(Call::BrowserRequest(call))) => {
            Route::Browser { caller, call }
        }
        (Who::Known(caller), Ok(call)) if call.is_read() => Route::Read { caller, call },
        (Who::Human { .. }, Ok(call)) if call.is_read() => Route::HumanRead,
        (Who::Known(_) | Who::Human { .. }, Ok(_) | Err(_)) => Route::Writer,
    }
}

/// The caller a proven human's read or wait runs as beside the writer:
/// the business's human, when the proof passed for a business the read
/// side `knows`. `None` sends the request to the writer, which records it
/// as it records any human request's. A read records nothing, so it draws
/// no `human.input` id: the caller's is zero.
pub(crate) fn human_beside(
    who: &Proven,
    knows: impl FnOnce(&BusinessId) -> bool,
) -> Option<Caller> {
    match who {
        Proven::Human {
            business,
            proof: Ok(()),
        } if knows(business) => Some(Caller::Human {
            business: business.clone(),
            input: EventId::from_random([0; 16]),
        }),
        Proven::Human { .. } | Proven::Known(_) => None,
    }
}

/// Step 2: an agent's or reader's read on a reader handle of `store`,
/// answered as the socket's text.
///
/// # Errors
/// The read's refusal, for the writer to record.
pub(crate) fn read_now<S: EvidenceStore>(
    view: &View,
    store: &S,
    caller: &Caller,
    call: Call,
) -> Result<String, Refusal> {
    let business = caller.business().clone();
    // Every verb is admitted from the verb table before its dispatch.
    call.verb().admit(caller.kind())?;
    // A run that ended reads nothing either.
    view.check_live(caller)?;
    // A read draws no fresh id.
    match call.into_dispatch(|| [0; 16], |uuid| reads::kind_of(store, &business, uuid))? {
        Dispatch::Query(query) => reads::read_text(view, store, caller, query),
        Dispatch::Command(_) => Err(Refusal::BadRequest),
    }
}

/// Step 4, on the writer: names the caller (a human whose proof passed,
/// with a fresh `human.input` id), then stages the call in the open batch,
/// or its refusal. Returns the provisional answer.
pub(crate) fn stage_request<S: StoreReaders>(
    writer: Writer<'_, S>,
    who: Proven,
    verb: &'static str,
    call: Result<Call, Refusal>,
) -> Result<Value, Refusal> {
    let Writer {
        driver,
        world,
        reads,
    } = writer;
    let now = world.time.now();
    let caller = match who {
        Proven::Known(caller) => Ok(caller),
        Proven::Human { business, proof } => proof.and_then(|()| {
            // An unknown business is refused only after the proof.
            driver
                .bus()
                .business(&business)
                .ok_or(Refusal::BadRequest)?;
            let input = world.entropy.event_id().map_err(logged(
                Refusal::StorageUnavailable,
                "drawing a human input id",
            ))?;
            Ok(Caller::Human { business, input })
        }),
    };
    match (caller, call) {
        (Ok(caller), Ok(call)) => execute(
            Writer {
                driver,
                world,
                reads,
            },
            &caller,
            verb,
            call,
        ),
        (Ok(caller), Err(refusal)) => Err(driver.stage_refusal(now, Some(&caller), verb, refusal)),
        // A failed proof is evidence too, of nobody in particular.
        (Err(refusal), Ok(_) | Err(_)) => Err(driver.stage_refusal(now, None, verb, refusal)),
    }
}

/// Commits the open batch with one sync and, when it changed machine state,
/// publishes the new [`View`] before any of its answers goes out, so a
/// caller reads at least its own writes; then hands its changes to the
/// feed, which wakes their waiters. Returns what every answer of the
/// batch must be joined with (`storage-unavailable` when the commit failed).
///
/// # Errors
/// As [`Driver::finish`].
pub(crate) fn commit_batch<S: StoreReaders>(
    driver: &mut Driver<S>,
    reads: &Reads<S>,
) -> Result<(), Refusal> {
    let durable = driver.finish();
    if driver.take_changed_machines() {
        let (roles, exits, calls) = reads
            .view()
            .map(|v| (v.roles(), v.exits(), v.calls()))
            .unwrap_or_default();
        reads.publish(View::of(driver.bus(), roles, exits, calls));
    }
    let (head, changes) = driver.take_changes();
    reads.feed().publish(head, changes);
    reads.feed().publish_ends(driver.take_ends());
    durable
}

/// What the writer thread reads from the world besides its store.
pub(crate) struct WriterWorld {
    pub(crate) time: Time,
    pub(crate) entropy: SharedEntropy,
}

/// What the writer thread works with.
pub(crate) struct Writer<'a, S> {
    pub(crate) driver: &'a mut Driver<S>,
    pub(crate) world: &'a mut WriterWorld,
    pub(crate) reads: &'a Reads<S>,
}

/// Runs one parsed call in the open batch. Every refusal is recorded: the
/// driver stages the bus's own, and this stages those that come before the
/// bus or from a read.
fn execute<S: StoreReaders>(
    writer: Writer<'_, S>,
    caller: &Caller,
    verb: &str,
    call: Call,
) -> Result<Value, Refusal> {
    let Writer {
        driver,
        world,
        reads,
    } = writer;
    let now = world.time.now();
    let fresh = match world.entropy.uuid_bytes() {
        Ok(fresh) => fresh,
        Err(e) => {
            let refusal = logged(Refusal::StorageUnavailable, "drawing an id")(e);
            return Err(driver.stage_refusal(now, Some(caller), verb, refusal));
        }
    };
    let business = caller.business().clone();
    // Every verb is admitted from the verb table before its dispatch (the
    // bus admits a command again, by the same row).
    if let Err(refusal) = call.verb().admit(caller.kind()) {
        return Err(driver.stage_refusal(now, Some(caller), verb, refusal));
    }
    let dispatch = call.into_dispatch(
        || fresh,
        |uuid| reads::kind_of(driver.store(), &business, uuid),
    );
    match dispatch {
        Ok(Dispatch::Command(command)) => driver
            .stage_call(now, caller, verb, command)
            .map(|reply| wire::reply_json(&reply)),
        // Reads run beside the writer (the human's too, once proven); one
        // comes here only when the read side had no view for it.
        Ok(Dispatch::Query(query)) => reads
            .view()
            .ok_or(Refusal::StorageUnavailable)
            .and_then(|view| {
                view.check_live(caller)?;
                reads::read(&view, driver.store(), caller, query)
            })
            .map_err(|r| driver.stage_refusal(now, Some(caller), verb, r)),
        Err(refusal) => Err(driver.stage_refusal(now, Some(caller), verb, refusal)),
    }
}

#[cfg(test)]
mod tests {
    use mosaic_domain::evidence::AgentRef;
    use mosaic_domain::{CallerKind, RoleInstance, RunId, Verb};

    use super::*;

    /// Arguments each verb accepts, for the verbs that need some; every
    /// other verb takes `{}`.
    const ARGS: [(&str, &str); 11] = [
        (
            "role.revoke",
            r#"{"role":"dev","decision":"05050505-0505-4505-8505-050505050505"}"#,
        ),
        (
            "decision.raise",
            r#"{"action":"repo.merge","question":"May I?","options":[{"key":"yes","text":"Yes"}],"recommendation":"yes","blocking":false}"#,
        ),
        (
            "decision.resolve",
            r#"{"id":"05050505-0505-4505-8505-050505050505","choice":"yes"}"#,
        ),
        (
            "decision.seen",
            r#"{"id":"05050505-0505-4505-8505-050505050505"}"#,
        ),
        (
            "decision.withdraw",
            r#"{"id":"05050505-0505-4505-8505-050505050505"}"#,
        ),
        ("message.send", r#"{"to":"dev","body":"hello"}"#),
        (
            "message.read",
            r#"{"id":"08080808-0808-4808-8808-080808080808"}"#,
        ),
        (
            "event.emit",
            r#"{"kind":"action.allowed","body":{"action":"routine"}}"#,
        ),
        ("run.end", r#"{"run":"dev-0a0b0c0d"}"#),
        ("trail", r#"{"subject":"vikunja:3/41"}"#),
        ("browser.request", r#"{"action":"back"}"#),
    ];

    /// The reads of the verb table, as the spec lists them.
    const READS: [&str; 6] = ["inbox", "tasks", "agents", "trail", "head", "history"];

    fn acme() -> BusinessId {
        BusinessId::parse("acme").expect("a business id")
    }

    /// The caller of each kind behind the one capability a line carries.
    fn caller(kind: CallerKind) -> Option<Caller> {
        match kind {
            CallerKind::Agent => Some(Caller::Agent {
                business: acme(),
                agent: AgentRef {
                    role: RoleInstance::parse("dev").expect("a role"),
                    run: RunId::parse("r-dev").expect("a run"),
                },
            }),
            CallerKind::Reader => Some(Caller::Reader { business: acme() }),
            CallerKind::Human => None,
        }
    }

    /// `verb` with `args` from a caller of `kind`, admitted.
    fn admitted(verb: Verb, kind: CallerKind, args: &str) -> Admitted {
        let line = match kind {
            CallerKind::Agent | CallerKind::Reader => format!(
                r#"{{"cap":"{}","verb":"{verb}","args":{args}}}"#,
                "b".repeat(64)
            ),
            CallerKind::Human => format!(
                r#"{{"human":{{"nonce":"{}"}},"business":"acme","verb":"{verb}","args":{args}}}"#,
                "0".repeat(32)
            ),
        };
        let peer = Peer {
            uid: 1000,
            pid: Some(200),
        };
        admit(
            line.as_bytes(),
            peer,
            None,
            |_| caller(kind),
            &AddressPolicy::default(),
        )
        .unwrap_or_else(|refusal| panic!("{line} is admitted: {refusal}"))
    }

    /// Where a route leads, by name.
    fn place(route: Route<'_>) -> &'static str {
        match route {
            Route::Feed { .. } => "feed",
            Route::Read { .. } => "read",
            Route::Browser { .. } => "browser",
            Route::HumanFeed { .. } => "human feed",
            Route::HumanRead => "human read",
            Route::Writer => "writer",
        }
    }

    #[test]
    fn every_verb_from_every_caller_kind_routes_where_the_spec_says() {
        let kinds = [CallerKind::Agent, CallerKind::Reader, CallerKind::Human];
        for &verb in Verb::ALL {
            let args = ARGS
                .iter()
                .find(|(name, _)| *name == verb.as_str())
                .map_or("{}", |(_, args)| args);
            for kind in kinds {
                let sent = admitted(verb, kind, args);
                assert!(
                    sent.call.is_ok(),
                    "{verb}'s sample arguments parse: add them to ARGS"
                );
                let name = verb.as_str();
                let human = kind == CallerKind::Human;
                let expected = if name == "changes" {
                    if human {
                        "human feed"
                    } else {
                        "feed"
                    }
                } else if READS.contains(&name) {
                    if human {
                        "human read"
                    } else {
                        "read"
                    }
                } else if name == "browser.request" && kind == CallerKind::Agent {
                    "browser"
                } else {
                    "writer"
                };
                assert_eq!(place(route(&sent)), expected, "{verb} from {kind:?}");
                // Arguments refused go to the writer, which records them.
                let refused = admitted(verb, kind, r#"{"unknown":1}"#);
                assert_eq!(refused.call.as_ref().err(), Some(&Refusal::UnknownKey));
                assert_eq!(place(route(&refused)), "writer", "refused {verb}");
            }
        }
    }

    #[test]
    fn a_route_carries_the_caller_and_the_call_it_was_given() {
        let wait = admitted(
            Verb::Changes,
            CallerKind::Reader,
            r#"{"since":7,"timeoutMs":2000}"#,
        );
        let Route::Feed {
            caller: waiter,
            since,
            timeout_ms,
        } = route(&wait)
        else {
            panic!("a reader's changes waits on the feed");
        };
        assert_eq!(
            (waiter, since, timeout_ms),
            (&Caller::Reader { business: acme() }, Some(7), Some(2000))
        );
        let human = admitted(Verb::Changes, CallerKind::Human, r#"{"since":3}"#);
        assert!(matches!(
            route(&human),
            Route::HumanFeed {
                since: Some(3),
                timeout_ms: None
            }
        ));
        let read = admitted(
            Verb::Trail,
            CallerKind::Agent,
            r#"{"subject":"vikunja:3/41"}"#,
        );
        let Route::Read { caller: by, call } = route(&read) else {
            panic!("an agent's trail runs beside the writer");
        };
        assert_eq!(Some(by.clone()), caller(CallerKind::Agent));
        assert_eq!(Ok(call), read.call.as_ref());
    }

    #[test]
    fn a_proven_human_reads_beside_the_writer_only_for_a_business_it_knows() {
        let proven = |proof| Proven::Human {
            business: acme(),
            proof,
        };
        let beside = human_beside(&proven(Ok(())), |b| *b == acme());
        assert_eq!(
            beside,
            Some(Caller::Human {
                business: acme(),
                input: EventId::from_random([0; 16]),
            })
        );
        assert_eq!(human_beside(&proven(Ok(())), |_| false), None);
        assert_eq!(
            human_beside(&proven(Err(Refusal::HumanProofFailed)), |_| true),
            None
        );
        let agent = caller(CallerKind::Agent).expect("an agent");
        assert_eq!(human_beside(&Proven::Known(agent), |_| true), None);
    }
}
