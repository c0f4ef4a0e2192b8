//! Browser control (docs/browser.md): the hub that
//! drives the domain's [`BrowserRequests`] machine and the agent's side of
//! `browser.request`. The HTTP/SSE server the panes connect to is an adapter
//! (`mosaic_adapters::http`): it calls the hub through the
//! [`BrowserControl`] seam, and the hub reaches the panes through its
//! [`BrowserTransport`] (the SSE adapter's, or a fake).
//!
//! One request's life:
//! 1. the agent's `browser.request` is authorized on the writer like any
//!    action (`action.allowed` is staged), see [`super::writer`] and
//!    [`super::browsing`];
//! 2. once it is staged, and while its commit syncs, [`BrowserHub::start`]
//!    hands it to the machine with the clients connected right now: nobody
//!    able to serve is an immediate `no-browser-client` (answered once the
//!    authorization is durable); otherwise a `browser-control-request`
//!    event goes to each of them over its SSE stream;
//! 3. a pane claims (`POST /api/browser-control/claim`); the first claim
//!    of a connected client the request was delivered to holds the
//!    request's first place, and every later claim is refused at once,
//!    while the authorization may still be syncing, so the losers'
//!    answers never queue in front of the winner's result. The first
//!    claim waits for the authorization to be durable (the writer says
//!    so; at most until the request's deadline), so no pane acts on an
//!    authority a crash could still take back; then it wins a fresh claim
//!    token. A first claim that ends without winning (its client gone, its
//!    connection closed) gives its place up to the next claim. An
//!    authorization whose commit failed aborts the request (a cancel to
//!    whoever might act on it) and refuses every claim;
//! 4. the claimant posts its result with that token
//!    (`POST /api/browser-control/result`); any other post is
//!    `matched:false` and settles nothing;
//! 5. the agent hears the result, or `browser-timeout` at the deadline, or
//!    its request is aborted (`browser-aborted`) when it closes its
//!    connection; an early end sends `browser-control-cancel` to whoever
//!    might act on it;
//! 6. [`finish`] stores a capture's image (and any large result) under the
//!    data root and returns its path instead of the bytes.
//!
//! No service token leaves through here: a request whose parameters hold
//! one is refused (`credential-leak`) before any pane hears of it, and a
//! result that holds one is refused before it is stored or answered (the
//! hub's [`Secrets`], the broker's credential store).
//!
//! The hub's state sits behind one mutex that is never held across an
//! await. The hub takes the transport's lock only inside its own, and the
//! transport never calls the hub, so the two cannot deadlock.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine;
use mosaic_adapters::cause::logged;
use mosaic_adapters::socket::Disconnect;
use mosaic_adapters::wire::browser::{action_parameters, BrowserCall};
use mosaic_domain::browser::{
    effective_timeout, BrowserAction, BrowserEffect, BrowserRequests, ClaimReply, ClientInfo,
    PaneOutcome,
};
use mosaic_domain::{BrowserRequestId, ClaimToken, ClientId, Refusal, Timestamp};
use mosaic_ports::{BrowserControl, BrowserTransport, Claimed, Entropy, PaneEvent};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::{oneshot, watch, Notify};

use super::world::{until, SharedEntropy, Time};

/// How often every connected client gets a `heartbeat` event.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// A result larger than this (as JSON) is stored as a file under the data
/// root; the agent gets its path, size and digest.
const INLINE_RESULT_LIMIT: usize = 1024 * 1024;
struct HubState {
    machine: BrowserRequests<Value>,
    waiters: HashMap<BrowserRequestId, oneshot::Sender<Result<Value, Refusal>>>,
    /// Each live request's authorization (`None` while its commit syncs,
    /// then whether it is durable) and its deadline.
    authorities: HashMap<BrowserRequestId, (watch::Receiver<Option<bool>>, Timestamp)>,
    /// Each pending request's first claim, while it waits for the
    /// authorization to be durable; any other claim is refused at once.
    first_claims: HashMap<BrowserRequestId, ClientId>,
    entropy: SharedEntropy,
    /// The connected clients, and how events reach them.
    transport: Arc<dyn BrowserTransport>,
}

/// Whether bytes hold a secret (a loaded service token) that must never be
/// emitted or stored.
pub(super) type Secrets = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// The browser request machine with its clients and waiting agents.
pub(super) struct BrowserHub {
    state: Mutex<HubState>,
    secrets: Secrets,
    /// Every deadline and heartbeat is this clock's.
    time: Time,
    /// Wakes the deadline task when a request with an earlier deadline
    /// arrives.
    wake: Notify,
    /// Where captures and large results are stored (`<dataRoot>/browser`).
    files: PathBuf,
}

impl std::fmt::Debug for BrowserHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserHub")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

/// A request in flight: its id and the agent's answer to come.
pub(super) struct Pending {
    id: BrowserRequestId,
    answer: oneshot::Receiver<Result<Value, Refusal>>,
}

impl BrowserHub {
    /// A hub storing captures under `files`, emitting and storing nothing
    /// that `secrets` finds, on the runtime's clock and entropy.
    pub(crate) fn new(
        files: PathBuf,
        secrets: Secrets,
        time: Time,
        entropy: SharedEntropy,
        transport: Arc<dyn BrowserTransport>,
    ) -> Self {
        Self {
            secrets,
            time,
            state: Mutex::new(HubState {
                machine: BrowserRequests::new(),
                waiters: HashMap::new(),
                authorities: HashMap::new(),
                first_claims: HashMap::new(),
                entropy,
                transport,
            }),
            wake: Notify::new(),
            files,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Delivers a request to every client able to serve it. Its claims
    /// wait until `authority` says whether its authorization is durable.
    ///
    /// # Errors
    /// `credential-leak` when its parameters hold a secret (no event is
    /// sent); `no-browser-client` at once when nobody can serve it;
    /// `storage-unavailable` when no request id can be drawn.
    pub(super) fn start(
        &self,
        action: BrowserAction,
        timeout: Duration,
        authority: watch::Receiver<Option<bool>>,
    ) -> Result<Pending, Refusal> {
        // What the event carries beyond the action's parameters is ours:
        // an id, the action's name, a time.
        if (self.secrets)(action_parameters(&action).to_string().as_bytes()) {
            return Err(Refusal::CredentialLeak);
        }
        let mut state = self.lock();
        let id = state.entropy.browser_request_id().map_err(logged(
            Refusal::StorageUnavailable,
            "drawing a browser request id",
        ))?;
        let clients: Vec<ClientInfo> = state.transport.clients();
        let now = self.time.now();
        state
            .machine
            .handle_request(now, id, action, timeout, &clients)?;
        let (reply, answer) = oneshot::channel();
        state.waiters.insert(id, reply);
        let deadline = now.saturating_add(timeout);
        state.authorities.insert(id, (authority, deadline));
        drain(&mut state);
        drop(state);
        self.wake.notify_one();
        Ok(Pending { id, answer })
    }

    /// `answer`, or `credential-leak` in its place when it holds a secret.
    pub(super) fn guarded(&self, answer: String) -> String {
        if (self.secrets)(answer.as_bytes()) {
            return mosaic_adapters::wire::err(Refusal::CredentialLeak);
        }
        answer
    }

    /// Ends a live request as `browser-aborted`.
    pub(super) fn abort(&self, id: BrowserRequestId) {
        let mut state = self.lock();
        state.machine.handle_abort(id);
        drain(&mut state);
    }

    /// A claim: the winner's token, or `None`. Only the request's first
    /// claim waits, for its authorization to be durable, at most until the
    /// request's deadline; a failed one is refused. Any claim behind it is
    /// refused at once: the contract lets only the first claim win, and a
    /// loser does nothing whatever the commit's fate.
    async fn claim_after_durable(
        &self,
        id: BrowserRequestId,
        client: ClientId,
    ) -> Option<ClaimToken> {
        let authority = {
            let mut state = self.lock();
            if !state.machine.may_claim(id, &client) || !connected(&state, &client) {
                return None;
            }
            match state.first_claims.get(&id) {
                Some(first) if *first != client => return None,
                Some(_) => {}
                None => {
                    state.first_claims.insert(id, client.clone());
                }
            }
            state.authorities.get(&id).cloned()
        };
        let _place = FirstPlace {
            hub: self,
            id,
            client: &client,
        };
        if let Some((authority, deadline)) = authority {
            let durable = tokio::select! {
                durable = durable(authority) => durable,
                () = until(&self.time, deadline) => false,
            };
            if !durable {
                return None;
            }
        }
        let mut state = self.lock();
        // A claim belongs to a live connection: a client whose stream is
        // gone cannot claim, whatever it was delivered.
        if !connected(&state, &client) {
            return None;
        }
        let token = state.entropy.claim_token().ok()?;
        match state.machine.handle_claim(id, &client, token) {
            ClaimReply::Granted(token) => Some(token),
            ClaimReply::Refused => None,
        }
    }

    /// Times out every request past its deadline at `now`; returns the
    /// next deadline.
    fn expire(&self, now: Timestamp) -> Option<Timestamp> {
        let mut state = self.lock();
        state.machine.handle_timeout(now);
        drain(&mut state);
        state.machine.next_deadline()
    }

    /// Sends a heartbeat to every client (the transport forgets those whose
    /// stream is gone).
    fn heartbeat(&self) {
        let transport = Arc::clone(&self.lock().transport);
        let all: Vec<ClientId> = transport.clients().into_iter().map(|c| c.id).collect();
        transport.send_all(&all, &PaneEvent::Heartbeat);
    }

    /// How many clients are connected, and how many of them declared
    /// `browser=1`.
    fn census(&self) -> (usize, usize) {
        let clients = self.lock().transport.clients();
        let capable = clients.iter().filter(|c| c.capable).count();
        (clients.len(), capable)
    }

    /// Runs deadlines and heartbeats, both on the hub's clock, until the
    /// hub is dropped by everyone else.
    pub(super) async fn run_timers(self: Arc<Self>) {
        let mut beat = self.time.now();
        loop {
            let now = self.time.now();
            if now >= beat {
                self.heartbeat();
                beat = now.saturating_add(HEARTBEAT);
            }
            let next = self.expire(now).map_or(beat, |deadline| deadline.min(beat));
            tokio::select! {
                () = until(&self.time, next) => {}
                () = self.wake.notified() => {}
            }
            if Arc::strong_count(&self) == 1 {
                return;
            }
        }
    }
}

/// A first claim's place, given up when the claim ends: once it won, the
/// machine refuses every other claim by itself; if it lost, the next
/// claim may take the place.
struct FirstPlace<'a> {
    hub: &'a BrowserHub,
    id: BrowserRequestId,
    client: &'a ClientId,
}

impl Drop for FirstPlace<'_> {
    fn drop(&mut self) {
        let mut state = self.hub.lock();
        if state.first_claims.get(&self.id) == Some(self.client) {
            state.first_claims.remove(&self.id);
        }
    }
}

/// Whether `client`'s event stream is open now.
fn connected(state: &HubState, client: &ClientId) -> bool {
    state.transport.is_connected(client)
}

/// The seam the HTTP transport calls: a pane's claim and result.
impl BrowserControl<Value> for BrowserHub {
    fn claim(&self, request: BrowserRequestId, client: ClientId) -> Claimed<'_> {
        Box::pin(self.claim_after_durable(request, client))
    }

    fn result(
        &self,
        request: BrowserRequestId,
        token: &ClaimToken,
        outcome: PaneOutcome<Value>,
    ) -> bool {
        let mut state = self.lock();
        let matched = state.machine.handle_result(request, token, outcome);
        drain(&mut state);
        matched
    }
}

/// Carries the machine's effects out: events to clients, answers to agents.
fn drain(state: &mut HubState) {
    while let Some(effect) = state.machine.poll_effect() {
        match effect {
            BrowserEffect::Deliver {
                request,
                action,
                claim_by,
                to,
            } => {
                let event = PaneEvent::Request {
                    request,
                    action,
                    claim_by,
                };
                state.transport.send_all(&to, &event);
            }
            BrowserEffect::Settle { request, outcome } => {
                state.authorities.remove(&request);
                state.first_claims.remove(&request);
                if let Some(waiter) = state.waiters.remove(&request) {
                    let _ = waiter.send(outcome);
                }
            }
            BrowserEffect::Cancel { request, to } => {
                state
                    .transport
                    .send_all(&to, &PaneEvent::Cancel { request });
            }
        }
    }
}

/// Whether an authorization turned out durable (`false` when its writer
/// went away without saying).
async fn durable(mut authority: watch::Receiver<Option<bool>>) -> bool {
    authority
        .wait_for(Option::is_some)
        .await
        .is_ok_and(|durable| *durable == Some(true))
}

/// The agent's side of a staged `browser.request`: deliver it while its
/// authorization syncs (claims wait for `authority` to say it is durable),
/// wait for the outcome (aborting if the agent leaves first, or if the
/// authorization failed), then store what is too big to answer inline.
/// Returns the request's id (none when it was refused before delivery) and
/// its outcome, the result as JSON text (written once: a snapshot may be a
/// megabyte).
pub(super) async fn request(
    hub: &BrowserHub,
    call: &BrowserCall,
    gone: &Disconnect,
    authority: watch::Receiver<Option<bool>>,
) -> (Option<BrowserRequestId>, Result<String, Refusal>) {
    let timeout = effective_timeout(&call.action, call.timeout_ms);
    let Pending { id, answer } = match hub.start(call.action.clone(), timeout, authority.clone()) {
        Ok(pending) => pending,
        Err(refusal) => return (None, Err(refusal)),
    };
    let outcome = tokio::select! {
        answer = answer => answer.unwrap_or(Err(Refusal::BrowserAborted)),
        () = gone.disconnected() => {
            hub.abort(id);
            Err(Refusal::BrowserAborted)
        }
        false = durable(authority) => {
            hub.abort(id);
            Err(Refusal::BrowserAborted)
        }
    };
    (
        Some(id),
        outcome.and_then(|result| finish(hub, id, &call.action, result)),
    )
}

/// A capture's image, and any result over [`INLINE_RESULT_LIMIT`], become a
/// file under the data root (`browser/<request>.png` or `.json`, mode
/// 0600); the agent gets `{path, bytes, sha256, …}` instead of the bytes.
/// Returns the answer's JSON text.
///
/// # Errors
/// `credential-leak` for a result (or a capture's image) that holds a
/// secret: nothing is stored; `browser-failed` for a malformed capture;
/// `storage-unavailable` when the file cannot be written.
fn finish(
    hub: &BrowserHub,
    id: BrowserRequestId,
    action: &BrowserAction,
    result: Value,
) -> Result<String, Refusal> {
    let files = &hub.files;
    let text = result.to_string();
    if (hub.secrets)(text.as_bytes()) {
        return Err(Refusal::CredentialLeak);
    }
    if let BrowserAction::Capture { .. } = action {
        let Some(data) = result.get("data").and_then(Value::as_str) else {
            return Err(Refusal::BrowserFailed);
        };
        let image = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|_| Refusal::BrowserFailed)?;
        if (hub.secrets)(&image) {
            return Err(Refusal::CredentialLeak);
        }
        let extension = match result.get("mime").and_then(Value::as_str) {
            Some("image/png") => "png",
            Some("image/svg+xml") => "svg",
            Some(_) | None => return Err(Refusal::BrowserFailed),
        };
        let path = store(files, &format!("{id}.{extension}"), &image)?;
        let mut answer = json!({
            "path": path,
            "mime": result["mime"],
            "bytes": image.len(),
            "sha256": hex_digest(&image),
        });
        for key in ["width", "height", "label"] {
            if let Some(value) = result.get(key) {
                answer[key] = value.clone();
            }
        }
        return Ok(answer.to_string());
    }
    if text.len() <= INLINE_RESULT_LIMIT {
        return Ok(text);
    }
    let path = store(files, &format!("{id}.json"), text.as_bytes())?;
    Ok(
        json!({"stored": path, "bytes": text.len(), "sha256": hex_digest(text.as_bytes())})
            .to_string(),
    )
}

/// The SHA-256 of `bytes`, as lowercase hex.
pub(super) fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes a new private file (0600 in a 0700 folder); returns its path.
fn store(files: &Path, name: &str, bytes: &[u8]) -> Result<String, Refusal> {
    use std::io::Write;
    mosaic_adapters::fs::create_private_dir(files, true).map_err(logged(
        Refusal::StorageUnavailable,
        "creating the browser files folder",
    ))?;
    let path = files.join(name);
    let mut file = mosaic_adapters::fs::create_private_file(&path)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(logged(
            Refusal::StorageUnavailable,
            "writing a browser result file",
        ))?;
    Ok(path.to_string_lossy().into_owned())
}

/// The sentence that goes with `no-browser-client`, describing who is
/// connected.
pub(super) fn no_client_sentence(hub: &BrowserHub, action: &BrowserAction) -> String {
    let (all, capable) = hub.census();
    let needs = if action.needs_capable_client() {
        "a pane that opened its event stream with browser=1"
    } else {
        "any connected UI client"
    };
    format!(
        "No browser client can serve `{}`: it needs {needs}, and {all} client(s) are connected, {capable} of them browser-capable. Open the pane (/pane) in the UI, then retry.",
        action.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;

    use mosaic_ports::fakes::{FakeBrowserTransport, ManualClock, SeededEntropy};

    const TIMEOUT: Duration = Duration::from_secs(20);

    /// A hub on a manual clock with one capable pane, a snapshot request
    /// delivered to it, and the writer's side of that request's
    /// authorization.
    fn delivered() -> (
        BrowserHub,
        ClientId,
        BrowserRequestId,
        watch::Sender<Option<bool>>,
        ManualClock,
    ) {
        let (hub, _, id, durable, clock) = delivered_to(&[]);
        (hub, pane(), id, durable, clock)
    }

    fn pane() -> ClientId {
        ClientId::parse("pane-1").expect("a client id")
    }

    /// The same, with `others` connected beside `pane-1` (capable too).
    fn delivered_to(
        others: &[&str],
    ) -> (
        BrowserHub,
        FakeBrowserTransport,
        BrowserRequestId,
        watch::Sender<Option<bool>>,
        ManualClock,
    ) {
        let clock = ManualClock::new(Timestamp::from_unix_ms(1_767_225_600_000).unwrap());
        let transport = FakeBrowserTransport::new();
        transport.connect(pane(), true);
        for other in others {
            transport.connect(ClientId::parse(other).expect("a client id"), true);
        }
        let hub = BrowserHub::new(
            std::env::temp_dir(),
            Arc::new(|_: &[u8]| false),
            Time::new(Arc::new(clock.clone())),
            SharedEntropy::new(Box::new(SeededEntropy::new(7))),
            Arc::new(transport.clone()),
        );
        let (durable, authority) = watch::channel(None);
        let snapshot = BrowserAction::Snapshot { selector: None };
        let Pending { id, .. } = hub.start(snapshot, TIMEOUT, authority).expect("delivered");
        (hub, transport, id, durable, clock)
    }

    /// Polls `claim` once more and says whether it is still waiting.
    async fn still_waiting(claim: &mut Pin<&mut impl std::future::Future>) -> bool {
        tokio::select! {
            biased;
            _ = claim.as_mut() => false,
            () = tokio::task::yield_now() => true,
        }
    }

    #[tokio::test]
    async fn a_claim_is_granted_only_once_its_authorization_is_durable() {
        let (hub, pane, id, durable, _clock) = delivered();
        let claim = hub.claim(id, pane.clone());
        tokio::pin!(claim);
        assert!(
            still_waiting(&mut claim).await,
            "answered before the commit ended"
        );
        durable.send_replace(Some(true));
        assert!(claim.await.is_some(), "the first claim wins once durable");
    }

    #[tokio::test]
    async fn a_claim_on_a_failed_authorization_is_refused() {
        let (hub, pane, id, durable, _clock) = delivered();
        durable.send_replace(Some(false));
        assert_eq!(hub.claim(id, pane.clone()).await, None);
        drop(durable);
        let (hub, pane, id, durable, _clock) = delivered();
        drop(durable);
        assert_eq!(
            hub.claim(id, pane.clone()).await,
            None,
            "a writer that is gone"
        );
    }

    #[tokio::test]
    async fn a_claim_waits_for_its_authorization_at_most_until_the_clock_reaches_the_deadline() {
        let (hub, pane, id, _durable, clock) = delivered();
        let claim = hub.claim(id, pane.clone());
        tokio::pin!(claim);
        assert!(still_waiting(&mut claim).await, "a commit that never ends");
        clock.advance(TIMEOUT - Duration::from_millis(1));
        assert!(
            still_waiting(&mut claim).await,
            "a millisecond before the deadline"
        );
        clock.advance(Duration::from_millis(1));
        let claimed = tokio::time::timeout(TIMEOUT, claim).await;
        assert_eq!(claimed, Ok(None), "given up at the deadline, on the clock");
    }

    #[tokio::test]
    async fn a_claim_behind_the_first_is_refused_at_once_while_the_commit_syncs() {
        let (hub, _transport, id, durable, _clock) = delivered_to(&["pane-2"]);
        let first = hub.claim(id, pane());
        tokio::pin!(first);
        assert!(still_waiting(&mut first).await, "the first claim waits");
        let other = ClientId::parse("pane-2").expect("a client id");
        assert_eq!(
            hub.claim(id, other.clone()).await,
            None,
            "a loser is answered before the commit ends"
        );
        durable.send_replace(Some(true));
        assert!(first.await.is_some(), "the first claim wins once durable");
        assert_eq!(hub.claim(id, other).await, None, "and stays the only one");
    }

    #[tokio::test]
    async fn a_first_claim_that_ends_without_winning_gives_its_place_up() {
        let (hub, transport, id, durable, _clock) = delivered_to(&["pane-2"]);
        let other = ClientId::parse("pane-2").expect("a client id");
        {
            let first = hub.claim(id, pane());
            tokio::pin!(first);
            assert!(still_waiting(&mut first).await, "the first claim waits");
        }
        let second = hub.claim(id, other.clone());
        tokio::pin!(second);
        assert!(
            still_waiting(&mut second).await,
            "the place of a claim whose connection closed is free again"
        );
        transport.disconnect(&other);
        durable.send_replace(Some(true));
        assert_eq!(
            second.await,
            None,
            "its client left before the commit ended"
        );
        assert!(
            hub.claim(id, pane()).await.is_some(),
            "a claim after a first that lost can still win"
        );
    }

    #[tokio::test]
    async fn a_claim_of_a_client_the_request_never_reached_takes_no_place() {
        let (hub, transport, id, durable, _clock) = delivered_to(&[]);
        let stranger = ClientId::parse("pane-9").expect("a client id");
        transport.connect(stranger.clone(), true);
        assert_eq!(hub.claim(id, stranger).await, None);
        durable.send_replace(Some(true));
        assert!(hub.claim(id, pane()).await.is_some());
    }
}
