//! [`Broker`]: a running broker, and its synchronous API for the process
//! that started it (binding launches, ending runs and hearing of their
//! ends, what the host notes of each run, the trusted adapter calls,
//! close). Built by [`super::boot`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use mosaic_adapters::cause::logged;
use mosaic_adapters::credentials::{CredentialStatus, CredentialStore, Service};
use mosaic_adapters::wire::{Exited, Usage};
use mosaic_domain::authority::Grant;
use mosaic_domain::bus::{BodyField, Command, EventBody, Reply};
use mosaic_domain::evidence::{Ending, LaunchRecord, RunEnd, Subject};
use mosaic_domain::{Action, Capability, DecisionId, Refusal, RunId, Target};
use mosaic_ports::Entropy;
use serde_json::Value;
use tokio::sync::broadcast;

use super::calls::Calls;
use super::closing::{Closing, Failure};
use super::exits::Exits;
use super::feed::Feed;
use super::job::{ask_blocking, Job};
use super::launch::{agent_binding, IssuedLaunch, LaunchCheck, Registry};
use super::places::{Places, RunPlaces};
use super::world::{SharedEntropy, Time};

/// A running broker.
///
/// Its parts are set once, by the boot that built it.
pub struct Broker {
    /// What a close stops, shared with the watchdog.
    pub(super) closing: Arc<Closing>,
    /// Whether this handle closed the broker already.
    pub(super) closed: bool,
    pub(super) registry: Arc<Registry>,
    pub(super) socket: PathBuf,
    pub(super) entropy: Mutex<SharedEntropy>,
    pub(super) credentials: Arc<CredentialStore>,
    pub(super) time: Time,
    pub(super) launch_check: LaunchCheck,
    pub(super) feed: Arc<Feed>,
    /// The exits hosts noted, which `agents` reads.
    pub(super) exits: Arc<Exits>,
    /// Each run's budget of places.
    pub(super) places: Arc<Places>,
    /// What each run last asked, and the feed's cursor it reached.
    pub(super) calls: Arc<Calls>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// The socket path.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// The change feed's cursor now: an agent's loop that waits for
    /// `changes` from it misses nothing committed after this call. `up`
    /// gives it to each run it launches (`MOSAIC_BUS_SINCE`).
    pub fn feed_cursor(&self) -> u64 {
        self.feed.head()
    }

    /// The furthest cursor the broker answered `run`'s `changes` with
    /// (asked with a `since`), if it asked: every change concerning the
    /// run up to it was handed to the run. `up` waits for a sleeping run's
    /// work from there.
    pub fn seen_cursor(&self, run: &RunId) -> Option<u64> {
        self.calls.seen(run)
    }

    /// Binds a launch the host performed and issues its capability. A run
    /// bound again (with the identical record) gets a new capability; its
    /// old one stops working.
    ///
    /// # Errors
    /// The process check's refusal (`launch-not-running`,
    /// `launch-start-mismatch`, `launch-foreign-user`), then the binding's
    /// (`launch-mismatch`, `launch-revoked`, `unknown-role`, `bad-config`,
    /// `storage-unavailable`); the broker keeps running.
    pub fn bind_launch(&self, record: LaunchRecord) -> Result<IssuedLaunch, Refusal> {
        let fields = (
            record.business.clone(),
            record.role.clone(),
            record.run.clone(),
        );
        let pid = record.pid;
        let bound = self.bind(record);
        let (business, role, run) = (fields.0.as_str(), fields.1.as_str(), fields.2.as_str());
        match &bound {
            Ok(_) => tracing::info!(business, role, run, pid, "launch bound"),
            Err(refusal) => tracing::warn!(
                code = refusal.code(),
                business,
                role,
                run,
                pid,
                "bindLaunch refused"
            ),
        }
        bound
    }

    /// [`Broker::bind_launch`] before it is logged.
    fn bind(&self, record: LaunchRecord) -> Result<IssuedLaunch, Refusal> {
        self.launch_check.check(&record)?;
        ask_blocking(self.jobs().as_ref(), |reply| Job::Bind {
            record: record.clone(),
            reply,
        })?;
        let cap = self
            .entropy
            .lock()
            .map_err(|_| Refusal::BrokerUnavailable)?
            .capability()
            .map_err(logged(Refusal::StorageUnavailable, "drawing a capability"))?;
        let binding = agent_binding(&record);
        let mut registry = self
            .registry
            .write()
            .map_err(|_| Refusal::BrokerUnavailable)?;
        registry.retain(|_, b| b != &binding);
        registry.insert(cap.clone(), binding);
        Ok(IssuedLaunch {
            business: record.business,
            run: record.run,
            cap,
        })
    }

    /// `run`'s places: how many connections to the broker it may hold at
    /// once (64 unless set: [`RunPlaces::set_cap`]; set it before the run
    /// starts), and the handle through which the host counts in the same
    /// budget, and in the broker's, the other descriptors it holds for the
    /// run ([`RunPlaces::try_take`]). Kept for the broker's life, and the
    /// same for a run bound again.
    pub fn run_places(&self, run: &RunId) -> RunPlaces {
        self.places.of(run)
    }

    /// Whether agents may be served now: the room on the data root's disk
    /// (as much free space as the disk reserve, and free files to spare),
    /// measured now, and the reserve held. A host asks before it starts a
    /// run; without room, the broker refuses agents until there is, and
    /// keeps serving the human.
    ///
    /// # Errors
    /// `storage-unavailable` without room (or when the disk cannot be
    /// measured); `broker-unavailable` once the broker closed.
    pub fn check_disk(&self) -> Result<(), Refusal> {
        ask_blocking(self.jobs().as_ref(), |reply| Job::Room { reply })
    }

    /// The host reaped `run`'s process: `agents` says from now on that it
    /// exited, with its exit code or the signal that killed it. Kept in
    /// memory only (a restarted broker asks the process table instead).
    /// This ends nothing: a run whose program may start again inside it
    /// lives on; [`Broker::end_run`] ends it.
    pub fn note_exit(&self, run: &RunId, status: Option<i32>, signal: Option<i32>) {
        tracing::info!(run = run.as_str(), status, signal, "agent exited");
        self.exits.note(run.clone(), Exited { status, signal });
    }

    /// Ends `run` for its host (what `{"op":"endRun"}` does): records
    /// `session.ended` with `ending` (made by `Ending::of_exit` from the
    /// process's status or signal, or `Ending::new` for `budget` and the
    /// others), which frees the role the run held in the same transaction;
    /// from then on its capability is refused `run-ended`. Returns once
    /// the end is durable.
    ///
    /// # Errors
    /// `unknown-reference` for a run this broker never bound, `run-ended`
    /// for a run that ended already, `bad-request` for the causes only the
    /// broker records (`human`, `revoked`), `storage-unavailable`.
    pub fn end_run(&self, run: &RunId, ending: Ending) -> Result<(), Refusal> {
        let ended = ask_blocking(self.jobs().as_ref(), |reply| Job::End {
            run: run.clone(),
            ending,
            reply,
        });
        let (cause, status, signal) = (ending.cause().as_str(), ending.status(), ending.signal());
        match &ended {
            Ok(()) => tracing::info!(run = run.as_str(), cause, status, signal, "run ended"),
            Err(refusal) => tracing::warn!(
                code = refusal.code(),
                run = run.as_str(),
                cause,
                "endRun refused"
            ),
        }
        ended
    }

    /// Every end of a run committed from now on, in commit order, whoever
    /// asked for it: the host ([`Broker::end_run`]), the human's `run.end`,
    /// a human-approved revoke (cause `revoked`). A host that runs the
    /// run stops it on hearing of an end it did not ask for. A receiver
    /// more than [`super::feed::ENDS_KEPT`] ends behind misses the oldest
    /// (`RecvError::Lagged`); `agents` has every end.
    pub fn ended_runs(&self) -> broadcast::Receiver<RunEnd> {
        self.feed.subscribe_ends()
    }

    /// The host started `run`'s program again inside the run: `agents`
    /// counts it (`restarts`). Kept in memory only.
    pub fn note_restart(&self, run: &RunId) {
        tracing::info!(run = run.as_str(), "the run's program started again");
        self.exits.note_restart(run.clone());
    }

    /// What `run` has used so far, as its harness's event stream reports
    /// it (the whole run's, not a difference): `agents` shows it
    /// (`usage`). Kept in memory only.
    ///
    /// # Errors
    /// `bad-request` for a cost that is negative or not a number.
    pub fn note_usage(&self, run: &RunId, usage: Usage) -> Result<(), Refusal> {
        if !usage.cost_usd.is_finite() || usage.cost_usd < 0.0 {
            return Err(Refusal::BadRequest);
        }
        self.exits.note_usage(run.clone(), usage);
        Ok(())
    }

    /// The trusted adapter API `authorize(cap, action, {decision, target})`
    /// (never a socket verb): checks that the capability's run holds its
    /// role and that `action` on `target` is within-role or approved by
    /// `decision`, spends that approval, and records `action.allowed`, in
    /// one transaction. It is not itself an external executor: a caller must
    /// not treat an earlier grant as authority after an await or a holder
    /// change.
    ///
    /// # Errors
    /// `bad-capability`, `not-holder`, and the authorization refusals
    /// (`not-authorized`, `decision-consumed`, `decision-mismatch`, …).
    pub fn authorize(
        &self,
        cap: &Capability,
        action: Action,
        target: Option<Target>,
        decision: Option<DecisionId>,
    ) -> Result<Grant, Refusal> {
        match self.trusted(
            cap,
            Command::Authorize {
                action,
                target,
                decision,
            },
        )? {
            Reply::Authorized(grant) => Ok(grant),
            Reply::Claimed(_)
            | Reply::Done
            | Reply::Decision(_)
            | Reply::Sent { .. }
            | Reply::Received(_) => Err(Refusal::BadRequest),
        }
    }

    /// The trusted adapter API `record_event(cap, {kind, body, subject})`:
    /// stamps the capability's identity, in its own transaction. `body` must
    /// be a JSON object; a `task_ref` in it must equal a task `subject`;
    /// `task.created` needs `body.request` (a human input of this business)
    /// and `body.requirement`. Human input, launch control, the bus's own
    /// kinds and `browser.*` (the broker's own record of a browser
    /// request's outcome) refuse.
    ///
    /// # Errors
    /// `bad-capability`, `not-holder`, `bad-request` for a body or subject
    /// breaking the rules, `not-authorized` for a reserved kind, and
    /// `unknown-reference` / `cross-business` for a `request` that names no
    /// human input of this business.
    pub fn record_event(
        &self,
        cap: &Capability,
        kind: &str,
        body: &Value,
        subject: Option<Subject>,
    ) -> Result<(), Refusal> {
        let kind = Action::parse(kind)?;
        // The body's rules are the domain's (`Command::record_event`); only
        // reading JSON is done here.
        let object = body.as_object().ok_or(Refusal::BadRequest)?;
        let field = |name: &str| match object.get(name) {
            None => BodyField::Absent,
            Some(value) => value.as_str().map_or(BodyField::NotText, BodyField::Text),
        };
        let body = EventBody {
            text: body.to_string(),
            task_ref: field("task_ref"),
            requirement: field("requirement"),
            request: field("request"),
        };
        let command = Command::record_event(kind, body, subject)?;
        self.trusted(cap, command).map(|_| ())
    }

    /// The trusted adapter API `credentials.use(key, service, callback)`:
    /// calls `callback` with the token of `service` for `key`
    /// (`business/instance`, or `business/@sync` for the read-only tracker
    /// identity). Only that in-process callback sees the token; it must not
    /// spawn children with it, log it or persist it. Socket clients never
    /// reach this.
    ///
    /// # Errors
    /// - `unknown-reference`: no such credential;
    /// - `credential-expired`: a Vikunja token from midnight UTC of its
    ///   expiry date (the callback is not called);
    /// - `service-failed`: the callback failed (none of its error is kept);
    /// - `credential-leak`: the returned value (keys included) contains a
    ///   loaded token; it is dropped.
    pub fn use_credential<E>(
        &self,
        key: &str,
        service: Service,
        callback: impl FnOnce(&[u8]) -> Result<Value, E>,
    ) -> Result<Value, Refusal> {
        let value = self
            .credentials
            .use_token(key, service, self.time.now(), callback)?;
        if self
            .credentials
            .contains_known_token(value.to_string().as_bytes())
        {
            return Err(Refusal::CredentialLeak);
        }
        Ok(value)
    }

    /// The trusted adapter API `credentials.status()`: metadata only
    /// (valid, expiring, expired, rotation-due) for a notifier.
    pub fn credential_status(&self) -> Vec<CredentialStatus> {
        self.credentials.status(self.time.now())
    }

    fn trusted(&self, cap: &Capability, command: Command) -> Result<Reply, Refusal> {
        let binding = self
            .registry
            .read()
            .ok()
            .and_then(|r| r.get(cap).cloned())
            .ok_or(Refusal::BadCapability)?;
        ask_blocking(self.jobs().as_ref(), |reply| Job::Command {
            caller: binding.caller(),
            command,
            reply,
        })
    }

    /// The writer's queue, while the broker serves.
    fn jobs(&self) -> Option<std::sync::mpsc::Sender<Job>> {
        self.closing
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Calls `failed` once, on a thread of the broker's own, if an internal
    /// part of the broker dies (its writer thread or its socket server):
    /// by then the broker has closed itself as [`Broker::close`] would (it
    /// serves nobody, its store is closed, its socket and writer lock are
    /// removed), and [`Broker::close`] answers `broker-unavailable`. The
    /// host should then end, as after its own close. Called at once when
    /// that happened already; never when the broker closes normally.
    pub fn on_failure(&self, failed: impl FnOnce(Failure) + Send + 'static) {
        self.closing.on_failure(Box::new(failed));
    }

    /// Stops serving, lets requests in flight finish, closes the store, and
    /// removes the socket and the writer lock.
    ///
    /// # Errors
    /// `storage-unavailable` when the socket or the lock cannot be removed;
    /// `broker-unavailable` when the broker had closed itself already,
    /// because a part of it died ([`Broker::on_failure`]).
    pub fn close(mut self) -> Result<(), Refusal> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<(), Refusal> {
        // `close` and then `Drop` both come here; only the first closes.
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        let closed = self.closing.close_all();
        self.closing.end_watchdog();
        let socket = &*self.socket.to_string_lossy();
        match (&closed, self.closing.failure()) {
            (Ok(()), None) => tracing::info!(socket, "broker closed"),
            (Ok(()), Some(failure)) => tracing::error!(
                code = Refusal::BrokerUnavailable.code(),
                socket,
                part = failure.as_str(),
                "the broker had closed itself: a part of it died"
            ),
            (Err(refusal), _) => {
                tracing::error!(code = refusal.code(), socket, "the broker's close failed")
            }
        }
        match self.closing.failure() {
            Some(_) => closed.and(Err(Refusal::BrokerUnavailable)),
            None => closed,
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // A broker dropped without `close` (an error path, a panic unwinding)
        // still closes cleanly; only a crash leaves the lock behind.
        let _ = self.shut_down();
    }
}
