//! The synchronous client: one connection per call, no runtime, no retry;
//! and the pieces of a call that [`Session`](super::Session) shares.

use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mosaic_domain::{Refusal, Verb};
use serde::Serialize;
use serde_json::{Map, Value};
use socket2::{Domain, SockAddr, Socket, Type};

use super::{CLIENT_TIMEOUT, MAX_REQUEST, MAX_RESPONSE};

/// The size of the buffer a response is read through.
const READ_CHUNK: usize = 64 * 1024;

/// Below this much time left a call counts as timed out: the kernel's
/// socket timeouts count in microseconds, and a zero timeout would mean
/// "wait forever".
const TIMEOUT_GRAIN: Duration = Duration::from_millis(1);

/// Stands in for a deadline too far away to represent.
const FAR_FUTURE: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// A client of the broker's socket, holding the socket path and one
/// capability.
///
/// Each call opens one connection, writes one request line and reads one
/// response line, all within one total timeout (5 s unless
/// [`Client::with_timeout`] says otherwise). A call is never retried: after
/// the request was sent, a lost connection or a timeout is
/// `outcome-unknown`, because the broker may or may not have acted.
///
/// Synchronous and `std`-based (plus `socket2` for a connect that cannot
/// block), so it needs no tokio runtime. Its `Debug` form never shows the
/// capability. A caller that makes many calls over time keeps one
/// connection instead with a [`Session`](super::Session) of this client.
#[derive(Clone)]
pub struct Client {
    path: PathBuf,
    cap: String,
    timeout: Duration,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("path", &self.path)
            .field("cap", &"<redacted>")
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The request line's shape, in the wire's field order.
#[derive(Serialize)]
struct Request<'a> {
    cap: &'a str,
    verb: &'a str,
    args: &'a Value,
}

impl Client {
    /// A client of the socket at `path` that presents the capability
    /// `cap` (its text, as handed out by the broker). Connects nowhere yet.
    pub fn new(path: impl Into<PathBuf>, cap: impl Into<String>) -> Client {
        Client {
            path: path.into(),
            cap: cap.into(),
            timeout: CLIENT_TIMEOUT,
        }
    }

    /// The same client with another total time per call, for verbs that
    /// legitimately take longer (a browser action).
    #[must_use]
    pub fn with_timeout(self, timeout: Duration) -> Client {
        Client { timeout, ..self }
    }

    /// The socket this client calls.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Calls `verb` with `args`: sends `{"cap":…,"verb":…,"args":…}` and
    /// returns the `result` of an `{"ok":true,"result":…}` answer.
    ///
    /// # Errors
    /// - `request-too-large` when the request line would exceed 64 KiB;
    ///   nothing was sent;
    /// - `broker-unavailable` when the socket cannot be reached; nothing was
    ///   sent;
    /// - the broker's refusal for an `{"ok":false,"error":CODE}` answer, and
    ///   `bad-request` when CODE is not one this build knows;
    /// - as [`Client::call_line`] otherwise, and `outcome-unknown` when the
    ///   answer is not a response object.
    pub fn call(&self, verb: &str, args: Value) -> Result<Value, Refusal> {
        parse_response(&self.call_verbatim(verb, args)?)
    }

    /// As [`Client::call`], but returns the broker's response line as it
    /// came (without its `\n`), for a caller that shows it whole: a
    /// refusal may carry more than its code (`browser.request` adds its
    /// HTTP status class and a sentence).
    ///
    /// # Errors
    /// As [`Client::call`], except that a refusal is in the line.
    pub fn call_verbatim(&self, verb: &str, args: Value) -> Result<Vec<u8>, Refusal> {
        let line = self.request_line(verb, &args)?;
        let client = Client {
            timeout: self.timeout_for(verb, &args),
            ..self.clone()
        };
        client.call_line(&line)
    }

    /// The request line for `verb` and `args`, without its `\n`.
    ///
    /// # Errors
    /// `request-too-large` beyond [`MAX_REQUEST`]; `bad-request` if it
    /// cannot be written.
    pub(super) fn request_line(&self, verb: &str, args: &Value) -> Result<Vec<u8>, Refusal> {
        let request = Request {
            cap: &self.cap,
            verb,
            args,
        };
        let line = serde_json::to_vec(&request).map_err(|_| Refusal::BadRequest)?;
        if line.len() > MAX_REQUEST {
            return Err(Refusal::RequestTooLarge);
        }
        Ok(line)
    }

    /// The total time one call of `verb` with `args` may take: this
    /// client's timeout, or, for a verb that waits at the broker, that
    /// wait plus [`CLIENT_TIMEOUT`] when it is longer.
    pub(super) fn timeout_for(&self, verb: &str, args: &Value) -> Duration {
        match args.as_object().and_then(|args| broker_wait(verb, args)) {
            Some(wait) => self.timeout.max(wait + CLIENT_TIMEOUT),
            None => self.timeout,
        }
    }

    /// This client's total time for one call.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends `line` and a `\n` as they are, and returns the response line
    /// without its `\n`. For tests and tools that speak raw bytes; `line`
    /// is not checked.
    ///
    /// # Errors
    /// - `broker-unavailable` when the connection cannot be made (no socket,
    ///   nobody listening, the broker's accept queue full until the call's
    ///   timeout); nothing was sent;
    /// - `response-too-large` when the response exceeds 4 MiB before its
    ///   `\n`;
    /// - `outcome-unknown` when the connection ends, fails or times out
    ///   before a whole response line arrived.
    pub fn call_line(&self, line: &[u8]) -> Result<Vec<u8>, Refusal> {
        let deadline = deadline_after(self.timeout);
        let socket = connect(&self.path, deadline)?;
        let request = with_newline(line);
        // A failed send is not the end: a broker that refuses a request
        // (too large, foreign, busy) answers and closes while we still
        // write, and its answer is waiting to be read. With no answer, the
        // read below reports `outcome-unknown`.
        let _sent = send_all(&socket, &request, deadline);
        read_line(&socket, deadline).map(|(line, _)| line)
    }
}

/// The moment `timeout` from now.
pub(super) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).unwrap_or_else(|| now + FAR_FUTURE)
}

/// `line` and its `\n`, as the wire carries it.
pub(super) fn with_newline(line: &[u8]) -> Vec<u8> {
    let mut request = Vec::with_capacity(line.len() + 1);
    request.extend_from_slice(line);
    request.push(b'\n');
    request
}

/// How long `verb` may wait at the broker before it answers, beyond the
/// usual [`CLIENT_TIMEOUT`]: `browser.request` waits for a pane for its
/// own timeout (its `timeoutMs`, or the action's default, clamped to
/// 1–120 s), `changes` for a change for its own (`timeoutMs`, or 30 s,
/// clamped to 1–120 s); every other verb is answered at once (`None`). A
/// client waits for that plus [`CLIENT_TIMEOUT`].
pub fn broker_wait(verb: &str, args: &Map<String, Value>) -> Option<Duration> {
    use mosaic_domain::browser::{DEFAULT_TIMEOUT, MAX_TIMEOUT, MIN_TIMEOUT, OPEN_TIMEOUT};
    let timeout_ms = args.get("timeoutMs").and_then(Value::as_u64);
    if verb == Verb::Changes.as_str() {
        return Some(mosaic_domain::changes::wait(timeout_ms));
    }
    if verb != Verb::BrowserRequest.as_str() {
        return None;
    }
    let default = if args.get("action").and_then(Value::as_str) == Some("open") {
        OPEN_TIMEOUT
    } else {
        DEFAULT_TIMEOUT
    };
    Some(
        timeout_ms
            .map_or(default, Duration::from_millis)
            .clamp(MIN_TIMEOUT, MAX_TIMEOUT),
    )
}

/// Connects, waiting for room in the broker's accept queue until
/// `deadline` at the latest: a Unix socket connects at once while the
/// queue has room, fails at once when nobody listens, and otherwise waits
/// beside every other connecting process (`SO_SNDTIMEO` bounds that wait;
/// `EAGAIN` when it runs out). Waiting is not a retry: nothing was sent. A
/// client that gave up at once would lose to any flood that keeps the
/// queue full, since the flood's own connects wait and take each free
/// place first.
///
/// In a process that adopted a connector or a bridge
/// ([`super::connector`]), the connection comes through it instead,
/// whatever `path` says.
pub(super) fn connect(path: &Path, deadline: Instant) -> Result<Socket, Refusal> {
    if let Some(connector) = super::connector::adopted() {
        return super::connector::ask(connector, deadline);
    }
    if let Some(bridged) = super::connector::through_bridge(deadline) {
        return bridged;
    }
    let address = SockAddr::unix(path).map_err(|_| Refusal::BrokerUnavailable)?;
    let socket =
        Socket::new(Domain::UNIX, Type::STREAM, None).map_err(|_| Refusal::BrokerUnavailable)?;
    let wait = time_left(deadline).ok_or(Refusal::BrokerUnavailable)?;
    socket
        .set_write_timeout(Some(wait))
        .and_then(|()| socket.connect(&address))
        .map_err(|_| Refusal::BrokerUnavailable)?;
    Ok(socket)
}

/// The time left until `deadline`, or `None` when it has (all but) passed.
pub(super) fn time_left(deadline: Instant) -> Option<Duration> {
    Some(deadline.saturating_duration_since(Instant::now())).filter(|left| *left >= TIMEOUT_GRAIN)
}

/// Sends all of `bytes` before `deadline`. `MSG_NOSIGNAL`: a broker that
/// closed the connection is an error here, never a `SIGPIPE` that kills the
/// calling process.
pub(super) fn send_all(
    socket: &Socket,
    mut bytes: &[u8],
    deadline: Instant,
) -> Result<(), Refusal> {
    while !bytes.is_empty() {
        let left = time_left(deadline).ok_or(Refusal::OutcomeUnknown)?;
        socket
            .set_write_timeout(Some(left))
            .map_err(|_| Refusal::OutcomeUnknown)?;
        match socket.send_with_flags(bytes, libc::MSG_NOSIGNAL) {
            Ok(0) => return Err(Refusal::OutcomeUnknown),
            Ok(sent) => bytes = bytes.get(sent..).unwrap_or_default(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Refusal::OutcomeUnknown),
        }
    }
    Ok(())
}

/// Reads one response line before `deadline`: its bytes before the first
/// `\n`, at most [`MAX_RESPONSE`] of them, and whether nothing came after
/// the `\n` (a connection that is to carry another request must hold no
/// stray bytes). Never reads more than `MAX_RESPONSE + 1` bytes.
pub(super) fn read_line(socket: &Socket, deadline: Instant) -> Result<(Vec<u8>, bool), Refusal> {
    let mut line = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let left = time_left(deadline).ok_or(Refusal::OutcomeUnknown)?;
        socket
            .set_read_timeout(Some(left))
            .map_err(|_| Refusal::OutcomeUnknown)?;
        let room = (MAX_RESPONSE + 1 - line.len()).min(READ_CHUNK);
        let read = match (&*socket).read(&mut chunk[..room]) {
            // The broker closed before a whole line: it may have acted.
            Ok(0) => return Err(Refusal::OutcomeUnknown),
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A timeout (`WouldBlock`) or a reset: the same uncertainty.
            Err(_) => return Err(Refusal::OutcomeUnknown),
        };
        let got = &chunk[..read];
        if let Some(end) = got.iter().position(|&byte| byte == b'\n') {
            line.extend_from_slice(&got[..end]);
            return Ok((line, end + 1 == got.len()));
        }
        line.extend_from_slice(got);
        if line.len() > MAX_RESPONSE {
            return Err(Refusal::ResponseTooLarge);
        }
    }
}

/// Reads a response line: `{"ok":true,"result":R}` is `Ok(R)`,
/// `{"ok":false,"error":C}` the refusal C (`bad-request` when C is unknown
/// or not a string). Anything else is `outcome-unknown`: the broker's answer
/// cannot be understood, so whether it acted cannot be told.
pub fn parse_response(line: &[u8]) -> Result<Value, Refusal> {
    let Ok(Value::Object(mut response)) = serde_json::from_slice::<Value>(line) else {
        return Err(Refusal::OutcomeUnknown);
    };
    let Some(Value::Bool(ok)) = response.get("ok") else {
        return Err(Refusal::OutcomeUnknown);
    };
    if *ok {
        return response.remove("result").ok_or(Refusal::OutcomeUnknown);
    }
    let code = response.get("error").and_then(Value::as_str);
    Err(code
        .and_then(Refusal::from_code)
        .unwrap_or(Refusal::BadRequest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn responses_parse_strictly() {
        assert_eq!(
            parse_response(br#"{"ok":true,"result":{"a":[1]}}"#),
            Ok(json!({"a": [1]}))
        );
        assert_eq!(
            parse_response(br#"{"ok":true,"result":null}"#),
            Ok(Value::Null)
        );
        assert_eq!(
            parse_response(br#"{"ok":false,"error":"role-held"}"#),
            Err(Refusal::RoleHeld)
        );
        assert_eq!(
            parse_response(br#"{"ok":false,"error":"no-such-code"}"#),
            Err(Refusal::BadRequest)
        );
        assert_eq!(
            parse_response(br#"{"ok":false,"error":7}"#),
            Err(Refusal::BadRequest)
        );
        for unclear in [
            &b""[..],
            b"not json",
            b"[]",
            br#"{"ok":"yes","result":1}"#,
            br#"{"result":1}"#,
            br#"{"ok":true}"#,
        ] {
            assert_eq!(parse_response(unclear), Err(Refusal::OutcomeUnknown));
        }
    }

    #[test]
    fn requests_keep_the_wire_field_order() {
        let args = json!({"b": 1, "a": 2});
        let line = serde_json::to_vec(&Request {
            cap: "k",
            verb: "inbox",
            args: &args,
        })
        .expect("serializes");
        assert_eq!(line, br#"{"cap":"k","verb":"inbox","args":{"a":2,"b":1}}"#);
    }

    #[test]
    fn debug_never_shows_the_capability() {
        let shown = format!("{:?}", Client::new("/x/bus.sock", "secret-cap-text"));
        assert!(!shown.contains("secret-cap-text"), "{shown}");
    }

    #[test]
    fn a_call_waits_for_the_broker_s_wait_plus_the_usual_margin() {
        let secs = Duration::from_secs;
        let client = Client::new("/x/bus.sock", "k");
        assert_eq!(client.timeout_for("inbox", &json!({})), secs(5));
        let open = json!({"action": "open"});
        assert_eq!(client.timeout_for("browser.request", &open), secs(50));
        let back = json!({"action": "back", "timeoutMs": 999_999});
        assert_eq!(client.timeout_for("browser.request", &back), secs(125));
        assert_eq!(client.timeout_for("changes", &json!({})), secs(35));
        // A longer timeout of the client's own stands.
        let patient = client.with_timeout(secs(60));
        assert_eq!(patient.timeout_for("changes", &json!({})), secs(60));
    }

    #[test]
    fn a_waiting_verb_waits_for_its_own_clamped_timeout() {
        let secs = Duration::from_secs;
        let wait = |verb, args: Value| broker_wait(verb, args.as_object().expect("object"));
        assert_eq!(wait("inbox", json!({"timeoutMs": 90_000})), None);
        assert_eq!(
            wait("browser.request", json!({"action": "click"})),
            Some(secs(20))
        );
        assert_eq!(
            wait("browser.request", json!({"action": "open"})),
            Some(secs(45))
        );
        assert_eq!(
            wait(
                "browser.request",
                json!({"action": "click", "timeoutMs": 500})
            ),
            Some(secs(1))
        );
        assert_eq!(
            wait(
                "browser.request",
                json!({"action": "open", "timeoutMs": 999_999})
            ),
            Some(secs(120))
        );
        assert_eq!(wait("changes", json!({})), Some(secs(30)));
        assert_eq!(
            wait("changes", json!({"timeoutMs": 2_500})),
            Some(Duration::from_millis(2_500))
        );
        assert_eq!(wait("changes", json!({"timeoutMs": 1})), Some(secs(1)));
        assert_eq!(
            wait("changes", json!({"timeoutMs": 999_999})),
            Some(secs(120))
        );
    }
}
