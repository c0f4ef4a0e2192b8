//! Browser control over HTTP and SSE (docs/browser.md): the axum server the
//! panes connect to, on loopback, and [`SseTransport`], the
//! [`BrowserTransport`] whose clients are its event streams.
//!
//! The server is transport only. Every route needs the UI token
//! (`Authorization: Bearer`, or `?token=` for page loads and
//! `EventSource`), compared in constant time; every answer carries
//! `Referrer-Policy: no-referrer` and `X-Content-Type-Options: nosniff`;
//! `/pane` carries a Content-Security-Policy built from the hashes of its
//! own script and style. Claims (4 KiB) and results (16 MiB, read under a
//! bounded drain so a 413 reaches the pane, see [`crate::http_drain`]) are
//! parsed here and handed to the runtime through the
//! [`BrowserControl`] seam; the runtime sends events through the
//! transport. `GET /api/events` registers a client for as long as its
//! stream is open.
//!
//! The accept loop is ours, on hyper's connection builder, so that every
//! resource a peer without the token can hold is bounded: request headers
//! must arrive within [`HEADER_DEADLINE`] (5 s) and a claim or result,
//! body included, within [`BODY_DEADLINE`] (10 s, else 408
//! `request-timeout`); at most [`MAX_HTTP_CONNECTIONS`] connections at
//! once (512, far below the broker's descriptor budget), of which at most
//! [`MAX_HTTP_UNAUTHENTICATED`] (128) have not yet presented the UI token,
//! and at most [`MAX_EVENT_STREAMS`] (128) event streams. A connection
//! beyond a cap is answered 503 `broker-unavailable` and closed unread. The
//! kernel queues up to `ACCEPT_BACKLOG` (1024) connections for the loop.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
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
use axum::{Extension, Json, Router};
use base64::Engine;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use mosaic_domain::browser::ClientInfo;
use mosaic_domain::{Capability, ClientId, Refusal};
use mosaic_ports::{BrowserControl, BrowserTransport, PaneEvent, TransportError};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::Stream;

use crate::cause::logged;
use crate::http_drain::{read_bounded, Body as Bounded};
use crate::wire::browser::{
    cancel_event, claim_body, claim_reply, heartbeat_event, request_event, result_body,
    result_reply, MAX_CLAIM_BODY, MAX_RESULT_BODY,
};

/// How long a client has to send a request's whole header, from the
/// connection's start or from the previous answer: a connection that sends
/// `GET / HTTP/1.1` and no more is closed then.
pub const HEADER_DEADLINE: Duration = Duration::from_secs(5);

/// How long a claim or a result may take, its body included: ample for
/// 16 MiB over loopback, and a bound on a client that trickles its body.
/// Past it: 408 `request-timeout`, and the connection closes.
pub const BODY_DEADLINE: Duration = Duration::from_secs(10);

/// How many connections the HTTP port holds at once: each pane needs an
/// event stream and a connection or two for its claims and results, so a
/// hundred racing panes fit, and 512 stays far below the broker's
/// descriptor budget whatever floods the port.
pub const MAX_HTTP_CONNECTIONS: usize = 512;

/// How many of those may not yet have presented the UI token: a flood
/// without the token takes at most these places, and the rest stay free
/// for panes that proved themselves. A connection leaves this count with
/// its first request that carries the token, so a hundred panes claiming
/// at once on new connections still fit.
pub const MAX_HTTP_UNAUTHENTICATED: usize = 128;

/// How many event streams (`GET /api/events`) are open at once, each one
/// connection held for as long as the pane lives: room for a hundred
/// panes (the benchmark's racing hundred).
pub const MAX_EVENT_STREAMS: usize = 128;

/// How long the accept loop pauses after a failed `accept` (for example
/// `EMFILE`), so a persistent error does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How many connections the kernel queues for `accept`. Over TCP a full
/// queue drops the SYN, and the client sends it again a second later (then
/// three, then seven): a burst that outruns the accept loop by 128, std's
/// queue, made every 130th connection of a flood wait a second. Twice the
/// connection cap queues a burst of every connection the port may hold
/// and as many more turned away; past the cap each is answered 503 at once,
/// so the queue drains in milliseconds.
const ACCEPT_BACKLOG: i32 = 2 * MAX_HTTP_CONNECTIONS as i32;

/// The pane client, served at `/pane`.
const PANE_HTML: &str = include_str!("../../web/pane.html");
/// The test fixtures, served at `/fixtures/NAME` (same origin as the pane,
/// so it can act on them).
const FIXTURES: [(&str, &str); 7] = [
    ("index.html", include_str!("../../web/fixtures/index.html")),
    (
        "clicks.html",
        include_str!("../../web/fixtures/clicks.html"),
    ),
    ("form.html", include_str!("../../web/fixtures/form.html")),
    ("long.html", include_str!("../../web/fixtures/long.html")),
    ("big.html", include_str!("../../web/fixtures/big.html")),
    ("noise.html", include_str!("../../web/fixtures/noise.html")),
    (
        "private.html",
        include_str!("../../web/fixtures/private.html"),
    ),
];

/// One connected client's event stream.
struct Pane {
    /// Which connection of this client id is current.
    connection: u64,
    capable: bool,
    events: mpsc::UnboundedSender<Arc<str>>,
}

/// The clients connected now, each by its current event stream: the
/// [`BrowserTransport`] of the real broker. An event is encoded once as its
/// SSE data line, however many clients it goes to.
#[derive(Default)]
pub struct SseTransport {
    clients: Mutex<(u64, BTreeMap<ClientId, Pane>)>,
}

impl std::fmt::Debug for SseTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseTransport").finish_non_exhaustive()
    }
}

impl SseTransport {
    /// No client yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, BTreeMap<ClientId, Pane>)> {
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a client's event stream (replacing an older stream of the
    /// same id, whose capability dies with it); its first event is a
    /// `heartbeat`. Returns the connection's number and its events.
    pub fn connect(&self, id: ClientId, capable: bool) -> (u64, mpsc::UnboundedReceiver<Arc<str>>) {
        let (events, stream) = mpsc::unbounded_channel();
        let _ = events.send(Arc::from(heartbeat_event()));
        let mut clients = self.lock();
        clients.0 += 1;
        let connection = clients.0;
        clients.1.insert(
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
    pub fn disconnect(&self, id: &ClientId, connection: u64) {
        let mut clients = self.lock();
        if clients
            .1
            .get(id)
            .is_some_and(|p| p.connection == connection)
        {
            clients.1.remove(id);
        }
    }
}

/// An event's SSE data line.
fn encode(event: &PaneEvent) -> Arc<str> {
    Arc::from(match event {
        PaneEvent::Request {
            request,
            action,
            claim_by,
        } => request_event(request, action, *claim_by),
        PaneEvent::Cancel { request } => cancel_event(request),
        PaneEvent::Heartbeat => heartbeat_event(),
    })
}

impl BrowserTransport for SseTransport {
    fn clients(&self) -> Vec<ClientInfo> {
        self.lock()
            .1
            .iter()
            .map(|(id, pane)| ClientInfo {
                id: id.clone(),
                capable: pane.capable,
            })
            .collect()
    }

    fn is_connected(&self, client: &ClientId) -> bool {
        self.lock().1.contains_key(client)
    }

    fn send(&self, client: &ClientId, event: PaneEvent) -> Result<(), TransportError> {
        self.send_all(std::slice::from_ref(client), &event)
            .is_empty()
            .then_some(())
            .ok_or(TransportError::Gone)
    }

    fn send_all(&self, to: &[ClientId], event: &PaneEvent) -> Vec<ClientId> {
        let line = encode(event);
        let mut clients = self.lock();
        let mut gone = Vec::new();
        for id in to {
            let sent = clients
                .1
                .get(id)
                .is_some_and(|pane| pane.events.send(Arc::clone(&line)).is_ok());
            if !sent {
                // A stream whose receiver is gone is a client gone.
                clients.1.remove(id);
                gone.push(id.clone());
            }
        }
        gone
    }
}

/// The HTTP server's shared state.
#[derive(Clone)]
struct Server {
    control: Arc<dyn BrowserControl<Value>>,
    transport: Arc<SseTransport>,
    token: Arc<Capability>,
    /// The places of event streams ([`MAX_EVENT_STREAMS`]).
    streams: Arc<Semaphore>,
    /// The pane, told which private addresses it may go to.
    pane: Arc<str>,
}

/// A connection's place among those that have not presented the UI token
/// ([`MAX_HTTP_UNAUTHENTICATED`]), given back by its first request that
/// does.
#[derive(Clone)]
struct Unproven(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl Unproven {
    /// The connection presented the token: its place is free.
    fn proven(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
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
    let listener = std::net::TcpListener::bind(address)
        .and_then(|listener| {
            // Listening again only sets the queue's length.
            socket2::SockRef::from(&listener).listen(ACCEPT_BACKLOG)?;
            listener.set_nonblocking(true)?;
            Ok(listener)
        })
        .map_err(logged(
            Refusal::BrokerUnavailable,
            "binding browser control",
        ))?;
    Ok(listener)
}

/// Serves browser control on `listener` until `stop` completes: the
/// routes, the UI token, the body limits and the SSE framing. Claims and
/// results go to `control`; event streams are `transport`'s. The pane is
/// told the private addresses it may go to, `allowed` (each `host:port`),
/// and refuses every other.
///
/// # Errors
/// `broker-unavailable` when the listener cannot be used.
pub async fn serve(
    listener: std::net::TcpListener,
    control: Arc<dyn BrowserControl<Value>>,
    transport: Arc<SseTransport>,
    token: Capability,
    allowed: Vec<String>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Refusal> {
    let listener = tokio::net::TcpListener::from_std(listener).map_err(logged(
        Refusal::BrokerUnavailable,
        "serving browser control",
    ))?;
    let server = Server {
        control,
        transport,
        token: Arc::new(token),
        streams: Arc::new(Semaphore::new(MAX_EVENT_STREAMS)),
        pane: pane_allowing(&allowed).into(),
    };
    let app = Router::new()
        .route("/pane", get(pane))
        .route("/fixtures/{name}", get(fixture))
        .route("/api/events", get(events))
        .route(
            "/api/browser-control/claim",
            post(claim)
                .layer(DefaultBodyLimit::max(MAX_CLAIM_BODY))
                .layer(middleware::from_fn(body_deadline)),
        )
        // Read under its own bound (`read_bounded`), so a 413 survives.
        .route(
            "/api/browser-control/result",
            post(result).layer(middleware::from_fn(body_deadline)),
        )
        .layer(middleware::from_fn_with_state(server.clone(), authorize))
        .layer(middleware::from_fn(harden))
        .with_state(server);
    accept_loop(listener, app, stop).await;
    Ok(())
}

/// Accepts connections until `stop` completes, each within the caps (see
/// the module documentation), then lets every connection finish its
/// answer in flight and returns once all are closed.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    stop: impl std::future::Future<Output = ()>,
) {
    let all = Arc::new(Semaphore::new(MAX_HTTP_CONNECTIONS));
    let unproven = Arc::new(Semaphore::new(MAX_HTTP_UNAUTHENTICATED));
    let (closing, closing_seen) = watch::channel(false);
    // Every connection task holds a clone of `live` until it is done, so
    // the channel closes when none is left.
    let (live, mut all_done) = mpsc::channel::<()>(1);
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((tcp, _peer)) = accepted else {
            tokio::select! {
                biased;
                () = &mut stop => break,
                () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
            }
            continue;
        };
        let places = Arc::clone(&all)
            .try_acquire_owned()
            .ok()
            .zip(Arc::clone(&unproven).try_acquire_owned().ok());
        let Some((place, unproven_place)) = places else {
            busy(&tcp);
            continue;
        };
        let unproven = Unproven(Arc::new(Mutex::new(Some(unproven_place))));
        let service = TowerToHyperService::new(app.clone().layer(Extension(unproven)));
        let mut closing = closing_seen.clone();
        let live = live.clone();
        tokio::spawn(async move {
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_DEADLINE);
            let connection = builder.serve_connection(TokioIo::new(tcp), service);
            let mut connection = std::pin::pin!(connection);
            let closed = async move {
                // The guard `wait_for` returns must not live across an await.
                let _closed = closing.wait_for(|closing| *closing).await.is_ok();
            };
            tokio::select! {
                _ = connection.as_mut() => {}
                () = closed => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop(place);
            drop(live);
        });
    }
    drop(listener);
    closing.send_replace(true);
    drop(live);
    let _all_closed = all_done.recv().await;
}

/// Answers a connection beyond a cap `503 broker-unavailable` without
/// waiting (a peer whose buffer is full loses only the explanation) and
/// closes it unread.
fn busy(tcp: &tokio::net::TcpStream) {
    let body = format!(r#"{{"error":"{}"}}"#, Refusal::BrokerUnavailable.code());
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tcp.try_write(answer.as_bytes());
}

/// A claim or a result must be whole, and answered, within
/// [`BODY_DEADLINE`]; past it the client hears 408 `request-timeout` and
/// the connection closes (its unread body is of no use).
async fn body_deadline(request: Request, next: Next) -> Response {
    match tokio::time::timeout(BODY_DEADLINE, next.run(request)).await {
        Ok(response) => response,
        Err(_elapsed) => (
            StatusCode::REQUEST_TIMEOUT,
            [(header::CONNECTION, "close")],
            Json(json!({"error": Refusal::RequestTimeout.code()})),
        )
            .into_response(),
    }
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
        Some(token) if token.ct_eq(&server.token) => {
            if let Some(unproven) = request.extensions().get::<Unproven>() {
                unproven.proven();
            }
            next.run(request).await
        }
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

/// The pane's one line that names the private addresses it may go to,
/// filled in when it is served (it is no script, so the policy's hashes
/// stay those of the file).
const ALLOW_PRIVATE: &str = r#"<meta name="mosaic-allow-private" content="">"#;

/// The pane, its [`ALLOW_PRIVATE`] line naming `allowed`, separated by
/// spaces and escaped for an attribute.
fn pane_allowing(allowed: &[String]) -> String {
    let escape = |text: &str| {
        text.replace('&', "&amp;")
            .replace('"', "&quot;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let names: Vec<String> = allowed.iter().map(|a| escape(a)).collect();
    let line = format!(
        r#"<meta name="mosaic-allow-private" content="{}">"#,
        names.join(" ")
    );
    PANE_HTML.replacen(ALLOW_PRIVATE, &line, 1)
}

fn html(body: impl Into<axum::body::Body>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body.into(),
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

async fn pane(State(server): State<Server>) -> Response {
    let mut response = html(server.pane.to_string());
    if let Ok(policy) = header::HeaderValue::from_str(pane_policy()) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

async fn fixture(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    match FIXTURES.iter().find(|(n, _)| *n == name) {
        Some((_, body)) => html(*body),
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
    let Ok(place) = Arc::clone(&server.streams).try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": Refusal::BrokerUnavailable.code()})),
        )
            .into_response();
    };
    let capable = query.get("browser").is_some_and(|b| b == "1");
    let (connection, stream) = server.transport.connect(id.clone(), capable);
    let stream = EventStream {
        events: UnboundedReceiverStream::new(stream),
        transport: Arc::clone(&server.transport),
        client: id,
        connection,
        _place: place,
    };
    Sse::new(stream).into_response()
}

/// A client's events; dropping it (the connection closed) forgets the
/// client.
struct EventStream {
    events: UnboundedReceiverStream<Arc<str>>,
    transport: Arc<SseTransport>,
    client: ClientId,
    connection: u64,
    /// Its place among [`MAX_EVENT_STREAMS`], free when the stream ends.
    _place: OwnedSemaphorePermit,
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
        self.transport.disconnect(&self.client, self.connection);
    }
}

/// `POST /api/browser-control/claim {requestId, clientId}`.
async fn claim(State(server): State<Server>, body: Bytes) -> Response {
    match claim_body(&body) {
        Ok(Some((id, client))) => match server.control.claim(id, client).await {
            Some(token) => Json(claim_reply(Some(&token.expose()))).into_response(),
            None => Json(claim_reply(None)).into_response(),
        },
        // An id of another form names no request delivered to anyone.
        Ok(None) => Json(claim_reply(None)).into_response(),
        Err(refusal) => bad_request(refusal),
    }
}

/// `POST /api/browser-control/result {requestId, claimToken, ok, data?, error?}`,
/// at most [`MAX_RESULT_BODY`]: a larger one is answered 413 once what is
/// left of it was read (bounded), so the pane reads the 413 and follows up
/// with `browser-result-too-large`.
async fn result(State(server): State<Server>, body: axum::body::Body) -> Response {
    match read_bounded(body, MAX_RESULT_BODY).await {
        Bounded::Whole(body) => match result_body(&body) {
            Ok(body) => {
                // An id or token of another form matches no request.
                let matched = body.claim.is_some_and(|(request, token)| {
                    server.control.result(request, &token, body.outcome)
                });
                Json(result_reply(matched)).into_response()
            }
            Err(refusal) => bad_request(refusal),
        },
        Bounded::TooLarge { to_the_end } => {
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
        Bounded::Cut => bad_request(Refusal::BadRequest),
    }
}
