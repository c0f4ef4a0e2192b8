//! Browser control (DESIGN.md §4, `spec/browser-control.md`): the hub that
//! drives the domain's [`BrowserRequests`] machine, the HTTP/SSE server the
//! panes connect to, and the agent's side of `browser.request`.
//!
//! One request's life:
//! 1. the agent's `browser.request` is authorized on the writer like any
//!    action (`action.allowed` is staged) — see `broker.rs`;
//! 2. once it is staged, and while its commit syncs, [`BrowserHub::start`]
//!    hands it to the machine with the clients connected right now: nobody
//!    able to serve is an immediate `no-browser-client` (answered once the
//!    authorization is durable); otherwise a `browser-control-request`
//!    event goes to each of them over its SSE stream;
//! 3. a pane claims (`POST /api/browser-control/claim`); the claim waits
//!    for the authorization to be durable (the writer says so; at most
//!    until the request's deadline), so no pane acts on an authority a
//!    crash could still take back; then the first claim of a client the
//!    request was delivered to wins a fresh claim token. An authorization
//!    whose commit failed aborts the request (a cancel to whoever might
//!    act on it) and refuses every claim;
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
//! Every route needs the UI token (`Authorization: Bearer`, or `?token=`
//! for page loads and `EventSource`). The hub's state sits behind one
//! mutex that is never held across an await.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use mosaic_adapters::http_drain::{self, Body as BoundedRead, BoundedBody, Step};
use mosaic_adapters::socket::Disconnect;
use mosaic_adapters::wire::browser::{
    action_parameters, cancel_event, claim_body, claim_reply, heartbeat_event, request_event,
    result_body, result_reply, BrowserCall, MAX_CLAIM_BODY, MAX_RESULT_BODY,
};
use mosaic_domain::browser::{
    effective_timeout, BrowserAction, BrowserEffect, BrowserRequests, ClaimReply, ClientInfo,
};
use mosaic_domain::{BrowserRequestId, Capability, ClientId, Refusal, Timestamp};
use mosaic_ports::Entropy;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::Stream;

use crate::cause::logged;
use crate::world::{until, SharedEntropy, Time};

/// How often every connected client gets a `heartbeat` event.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// A result larger than this (as JSON) is stored as a file under the data
/// root; the agent gets its path, size and digest.
const INLINE_RESULT_LIMIT: usize = 1024 * 1024;
/// The pane client, served at `/pane`.
const PANE_HTML: &str = include_str!("../../web/pane.html");
/// The test fixtures, served at `/fixtures/NAME` (same origin as the pane,
/// so it can act on them).
const FIXTURES: [(&str, &str); 6] = [
    ("index.html", include_str!("../../web/fixtures/index.html")),
    (
        "clicks.html",
        include_str!("../../web/fixtures/clicks.html"),
    ),
    ("form.html", include_str!("../../web/fixtures/form.html")),
    ("long.html", include_str!("../../web/fixtures/long.html")),
    ("big.html", include_str!("../../web/fixtures/big.html")),
    ("noise.html", include_str!("../../web/fixtures/noise.html")),
];

/// One connected client's event stream.
struct Pane {
    /// Which connection of this client id is current.
    connection: u64,
    capable: bool,
    events: mpsc::UnboundedSender<Arc<str>>,
}

struct HubState {
    machine: BrowserRequests<Value>,
    clients: BTreeMap<ClientId, Pane>,
    waiters: HashMap<BrowserRequestId, oneshot::Sender<Result<Value, Refusal>>>,
    /// Each live request's authorization (`None` while its commit syncs,
    /// then whether it is durable) and its deadline.
    authorities: HashMap<BrowserRequestId, (watch::Receiver<Option<bool>>, Timestamp)>,
    connections: u64,
    entropy: SharedEntropy,
}

/// Whether bytes hold a secret (a loaded service token) that must never be
/// emitted or stored.
pub type Secrets = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// The browser request machine with its clients and waiting agents.
pub struct BrowserHub {
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
pub struct Pending {
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
    ) -> Self {
        Self {
            secrets,
            time,
            state: Mutex::new(HubState {
                machine: BrowserRequests::new(),
                clients: BTreeMap::new(),
                waiters: HashMap::new(),
                authorities: HashMap::new(),
                connections: 0,
                entropy,
            }),
            wake: Notify::new(),
            files,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a client's event stream (replacing an older stream of the
    /// same id); its first event is a `heartbeat`.
    fn connect(&self, id: ClientId, capable: bool) -> (u64, mpsc::UnboundedReceiver<Arc<str>>) {
        let (events, stream) = mpsc::unbounded_channel();
        let _ = events.send(Arc::from(heartbeat_event()));
        let mut state = self.lock();
        state.connections += 1;
        let connection = state.connections;
        state.clients.insert(
            id,
            Pane {
                connection,
                capable,
                events,
            },
        );
        (connection, stream)
    }

    /// Forgets a client's stream, unless a newer one replaced it.
    fn disconnect(&self, id: &ClientId, connection: u64) {
        let mut state = self.lock();
        if state
            .clients
            .get(id)
            .is_some_and(|p| p.connection == connection)
        {
            state.clients.remove(id);
        }
    }

    /// Delivers a request to every client able to serve it. Its claims
    /// wait until `authority` says whether its authorization is durable.
    ///
    /// # Errors
    /// `credential-leak` when its parameters hold a secret (no event is
    /// sent); `no-browser-client` at once when nobody can serve it;
    /// `storage-unavailable` when no request id can be drawn.
    pub fn start(
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
        let clients: Vec<ClientInfo> = state
            .clients
            .iter()
            .map(|(id, pane)| ClientInfo {
                id: id.clone(),
                capable: pane.capable,
            })
            .collect();
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

    /// Ends a live request as `browser-aborted`.
    pub fn abort(&self, id: BrowserRequestId) {
        let mut state = self.lock();
        state.machine.handle_abort(id);
        drain(&mut state);
    }

    /// A claim: the winner's token, or `None`. It waits for its request's
    /// authorization to be durable, at most until the request's deadline;
    /// a failed one is refused.
    async fn claim(&self, id: BrowserRequestId, client: &ClientId) -> Option<String> {
        let authority = self.lock().authorities.get(&id).cloned();
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
        if !state.clients.contains_key(client) {
            return None;
        }
        let token = state.entropy.claim_token().ok()?;
        match state.machine.handle_claim(id, client, token) {
            ClaimReply::Granted(token) => Some(token.expose()),
            ClaimReply::Refused => None,
        }
    }

    /// A posted result: whether it settled its request.
    fn result(&self, body: &[u8]) -> Result<bool, Refusal> {
        let body = result_body(body)?;
        let mut state = self.lock();
        let matched = state
            .machine
            .handle_result(body.request, &body.token, body.outcome);
        drain(&mut state);
        Ok(matched)
    }

    /// Times out every request past its deadline at `now`; returns the
    /// next deadline.
    fn expire(&self, now: Timestamp) -> Option<Timestamp> {
        let mut state = self.lock();
        state.machine.handle_timeout(now);
        drain(&mut state);
        state.machine.next_deadline()
    }

    /// Sends a heartbeat to every client and forgets those whose stream is
    /// gone.
    fn heartbeat(&self) {
        let beat: Arc<str> = Arc::from(heartbeat_event());
        self.lock()
            .clients
            .retain(|_, pane| pane.events.send(Arc::clone(&beat)).is_ok());
    }

    /// How many clients are connected, and how many of them declared
    /// `browser=1`.
    fn census(&self) -> (usize, usize) {
        let state = self.lock();
        let capable = state.clients.values().filter(|p| p.capable).count();
        (state.clients.len(), capable)
    }

    /// Runs deadlines and heartbeats, both on the hub's clock, until the
    /// hub is dropped by everyone else.
    pub async fn run_timers(self: Arc<Self>) {
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
                let event: Arc<str> = Arc::from(request_event(&request, &action, claim_by));
                send_to(&state.clients, &to, &event);
            }
            BrowserEffect::Settle { request, outcome } => {
                state.authorities.remove(&request);
                if let Some(waiter) = state.waiters.remove(&request) {
                    let _ = waiter.send(outcome);
                }
            }
            BrowserEffect::Cancel { request, to } => {
                let event: Arc<str> = Arc::from(cancel_event(&request));
                send_to(&state.clients, &to, &event);
            }
        }
    }
}

fn send_to(clients: &BTreeMap<ClientId, Pane>, to: &[ClientId], event: &Arc<str>) {
    for id in to {
        if let Some(pane) = clients.get(id) {
            let _ = pane.events.send(Arc::clone(event));
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
pub async fn request(
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
pub fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes a new private file (0600 in a 0700 folder); returns its path.
fn store(files: &Path, name: &str, bytes: &[u8]) -> Result<String, Refusal> {
    use std::io::Write;
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(files)
        .map_err(logged(
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
pub fn no_client_sentence(hub: &BrowserHub, action: &BrowserAction) -> String {
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

/// The HTTP server's shared state.
#[derive(Clone)]
struct Server {
    hub: Arc<BrowserHub>,
    token: Arc<Capability>,
}

/// Binds browser control on a loopback address (port 0 picks a free one).
///
/// # Errors
/// `bad-config` for an address that is not `127.0.0.1:PORT` (or another
/// loopback address); `broker-unavailable` when it cannot be bound.
pub fn bind(listen: &str) -> Result<std::net::TcpListener, Refusal> {
    let address: SocketAddr = listen.parse().map_err(|_| Refusal::BadConfig)?;
    if !address.ip().is_loopback() {
        return Err(Refusal::BadConfig);
    }
    let listener = std::net::TcpListener::bind(address).map_err(logged(
        Refusal::BrokerUnavailable,
        "binding browser control",
    ))?;
    listener.set_nonblocking(true).map_err(logged(
        Refusal::BrokerUnavailable,
        "binding browser control",
    ))?;
    Ok(listener)
}

/// Serves browser control on `listener` until `stop` completes.
///
/// # Errors
/// `broker-unavailable` when the listener cannot be used.
pub async fn serve(
    listener: std::net::TcpListener,
    hub: Arc<BrowserHub>,
    token: Capability,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Refusal> {
    let listener = tokio::net::TcpListener::from_std(listener).map_err(logged(
        Refusal::BrokerUnavailable,
        "serving browser control",
    ))?;
    let server = Server {
        hub,
        token: Arc::new(token),
    };
    let app = Router::new()
        .route("/pane", get(pane))
        .route("/fixtures/{name}", get(fixture))
        .route("/api/events", get(events))
        .route(
            "/api/browser-control/claim",
            post(claim).layer(DefaultBodyLimit::max(MAX_CLAIM_BODY)),
        )
        // Read under its own bound (`read_bounded`), so a 413 survives.
        .route("/api/browser-control/result", post(result))
        .layer(middleware::from_fn_with_state(server.clone(), authorize))
        .layer(middleware::from_fn(harden))
        .with_state(server);
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
        .map_err(logged(
            Refusal::BrokerUnavailable,
            "serving browser control",
        ))
}

/// The UI token, as `Authorization: Bearer` or `?token=`; 401 otherwise.
async fn authorize(State(server): State<Server>, request: Request, next: Next) -> Response {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let query = request
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("token=")));
    let presented = bearer.or(query).and_then(|t| Capability::parse(t).ok());
    match presented {
        Some(token) if token.ct_eq(&server.token) => next.run(request).await,
        Some(_) | None => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "bad-capability"})),
        )
            .into_response(),
    }
}

/// Every response, refusals included: no referrer leaves a page of ours
/// (the pane's URL carries the UI token), and no body is sniffed into
/// another type than the one it declares.
async fn harden(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    response
}

fn html(body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// The pane's Content-Security-Policy: its own script and style only by
/// their hashes (no other inline code runs), requests to its own origin
/// only; the view may frame (and the pane probe) whatever http or https
/// page an agent opens, which is the pane's job; images of its captures
/// are `data:` and `blob:` URLs; no plugins, no `<base>`, no form posts.
fn pane_policy() -> &'static str {
    static POLICY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        let hash = |tag: &str| {
            let open = format!("<{tag}>");
            let body = PANE_HTML
                .split_once(&open)
                .and_then(|(_, rest)| rest.split_once(&format!("</{tag}>")))
                .map_or("", |(body, _)| body);
            let digest = Sha256::digest(body.as_bytes());
            format!(
                "'sha256-{}'",
                base64::engine::general_purpose::STANDARD.encode(digest)
            )
        };
        format!(
            "default-src 'self'; script-src {}; style-src {}; img-src 'self' data: blob:; \
             frame-src 'self' http: https:; connect-src 'self' http: https:; \
             object-src 'none'; base-uri 'none'; form-action 'none'",
            hash("script"),
            hash("style")
        )
    })
}

async fn pane() -> Response {
    let mut response = html(PANE_HTML);
    if let Ok(policy) = header::HeaderValue::from_str(pane_policy()) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

async fn fixture(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    match FIXTURES.iter().find(|(n, _)| *n == name) {
        Some((_, body)) => html(body),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn bad_request(refusal: Refusal) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": refusal.code()})),
    )
        .into_response()
}

/// `GET /api/events?browser=1&clientId=ID`: the client's SSE stream.
async fn events(
    State(server): State<Server>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(id) = query.get("clientId").and_then(|c| ClientId::parse(c).ok()) else {
        return bad_request(Refusal::BadRequest);
    };
    let capable = query.get("browser").is_some_and(|b| b == "1");
    let (connection, stream) = server.hub.connect(id.clone(), capable);
    let stream = EventStream {
        events: UnboundedReceiverStream::new(stream),
        hub: Arc::clone(&server.hub),
        client: id,
        connection,
    };
    Sse::new(stream).into_response()
}

/// A client's events; dropping it (the connection closed) forgets the
/// client.
struct EventStream {
    events: UnboundedReceiverStream<Arc<str>>,
    hub: Arc<BrowserHub>,
    client: ClientId,
    connection: u64,
}

impl Stream for EventStream {
    type Item = Result<Event, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.events)
            .poll_next(cx)
            .map(|line| line.map(|line| Ok(Event::default().data(&*line))))
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.hub.disconnect(&self.client, self.connection);
    }
}

/// `POST /api/browser-control/claim {requestId, clientId}`.
async fn claim(State(server): State<Server>, body: Bytes) -> Response {
    match claim_body(&body) {
        Ok((id, client)) => match server.hub.claim(id, &client).await {
            Some(token) => Json(claim_reply(Some(&token))).into_response(),
            None => Json(claim_reply(None)).into_response(),
        },
        Err(refusal) => bad_request(refusal),
    }
}

/// `POST /api/browser-control/result {requestId, claimToken, ok, data?, error?}`,
/// at most [`MAX_RESULT_BODY`]: a larger one is answered 413 once what is
/// left of it was read (bounded), so the pane reads the 413 and follows up
/// with `browser-result-too-large`.
async fn result(State(server): State<Server>, body: axum::body::Body) -> Response {
    match read_bounded(body, MAX_RESULT_BODY).await {
        BoundedRead::Whole(body) => match server.hub.result(&body) {
            Ok(matched) => Json(result_reply(matched)).into_response(),
            Err(refusal) => bad_request(refusal),
        },
        BoundedRead::TooLarge { to_the_end } => {
            let mut response = StatusCode::PAYLOAD_TOO_LARGE.into_response();
            if !to_the_end {
                // Unread input is left: the client must not send another
                // request on this connection.
                response.headers_mut().insert(
                    header::CONNECTION,
                    header::HeaderValue::from_static("close"),
                );
            }
            response
        }
        BoundedRead::Cut => bad_request(Refusal::BadRequest),
    }
}

/// Reads `body` up to `limit` bytes; past it, reads and discards the rest,
/// at most [`http_drain::MAX_DRAIN`] bytes within
/// [`http_drain::DRAIN_DEADLINE`] (see [`http_drain`] for why).
async fn read_bounded(body: axum::body::Body, limit: usize) -> BoundedRead {
    use tokio_stream::StreamExt;
    let mut bounded = BoundedBody::new(limit, http_drain::MAX_DRAIN);
    let mut data = body.into_data_stream();
    let mut drain_until = None;
    loop {
        let next = match drain_until {
            None => data.next().await,
            Some(until) => match tokio::time::timeout_at(until, data.next()).await {
                Ok(next) => next,
                Err(_elapsed) => break,
            },
        };
        match next {
            Some(Ok(chunk)) => {
                if bounded.handle_chunk(&chunk) == Step::Stop {
                    break;
                }
            }
            Some(Err(_)) => break,
            None => {
                bounded.handle_end();
                break;
            }
        }
        if drain_until.is_none() && bounded.is_draining() {
            drain_until = Some(tokio::time::Instant::now() + http_drain::DRAIN_DEADLINE);
        }
    }
    bounded.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_ports::fakes::{ManualClock, SeededEntropy};

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
        let clock = ManualClock::new(Timestamp::from_unix_ms(1_767_225_600_000).unwrap());
        let hub = BrowserHub::new(
            std::env::temp_dir(),
            Arc::new(|_: &[u8]| false),
            Time::new(Arc::new(clock.clone())),
            SharedEntropy::new(Box::new(SeededEntropy::new(7))),
        );
        let pane = ClientId::parse("pane-1").expect("a client id");
        // Its events are not read here; the hub keeps the client all the
        // same, as it does until a stream disconnects.
        let _ = hub.connect(pane.clone(), true);
        let (durable, authority) = watch::channel(None);
        let snapshot = BrowserAction::Snapshot { selector: None };
        let Pending { id, .. } = hub.start(snapshot, TIMEOUT, authority).expect("delivered");
        (hub, pane, id, durable, clock)
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
        let claim = hub.claim(id, &pane);
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
        assert_eq!(hub.claim(id, &pane).await, None);
        drop(durable);
        let (hub, pane, id, durable, _clock) = delivered();
        drop(durable);
        assert_eq!(hub.claim(id, &pane).await, None, "a writer that is gone");
    }

    #[tokio::test]
    async fn a_claim_waits_for_its_authorization_at_most_until_the_clock_reaches_the_deadline() {
        let (hub, pane, id, _durable, clock) = delivered();
        let claim = hub.claim(id, &pane);
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
}
