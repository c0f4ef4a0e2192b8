//! Browser requests: typed `browser.*` actions, their timeouts, and the
//! machine that carries one action to one pane and one answer back
//! (docs/browser.md).
//!
//! Layout:
//! - the action types ([`BrowserAction`] and the checked values it is built
//!   from: [`HttpUrl`], [`Selector`], [`Viewport`], [`ClickText`],
//!   [`InputValue`], [`CaptureLabel`], [`ScrollDirection`]). Every parameter
//!   is validated when its value is built, so an action that exists is one
//!   the broker may emit; there is deliberately no script-evaluation action;
//! - [`effective_timeout`], the timeout rule;
//! - `address.rs`: where the human's browser may be sent;
//! - [`BrowserRequests`], the sans-IO request machine, with its replies
//!   ([`ClaimReply`]), the pane's answer ([`PaneOutcome`]) and its effects
//!   ([`BrowserEffect`]).
//!
//! A request is `Pending` (delivered to N clients) until one of them claims
//! it, then `Claimed` by exactly that client and its claim token. It leaves
//! the machine when it settles: by the claimant's result, by its deadline, or
//! by an abort. A request with no one to deliver to is refused at once and
//! never enters the machine, because a blocked wait followed by a timeout
//! cannot be told apart from a page that hung.
//!
//! The driving loop, in the adapter:
//! 1. parse the agent's parameters into a [`BrowserAction`] (refusing with
//!    `bad-parameters` before anything is emitted), compute
//!    [`effective_timeout`], and call [`BrowserRequests::handle_request`] with
//!    the clients connected right now; an `Err` is the agent's reply;
//! 2. drain [`BrowserRequests::poll_effect`] after every input: `Deliver`
//!    becomes a `browser-control-request` event to each listed client,
//!    `Settle` is the agent's one reply, `Cancel` becomes a
//!    `browser-control-cancel` event;
//! 3. the claim route draws a fresh [`ClaimToken`] and calls
//!    [`BrowserRequests::handle_claim`]; the result route calls
//!    [`BrowserRequests::handle_result`]; an agent that closes its connection
//!    before the reply causes [`BrowserRequests::handle_abort`];
//! 4. a timer set to [`BrowserRequests::next_deadline`] calls
//!    [`BrowserRequests::handle_timeout`].
//!
//! Nothing here reads a clock or draws randomness: `now`, request ids and
//! claim tokens are inputs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::{Action, BrowserRequestId, ClaimToken, ClientId, Refusal, Target, Timestamp};

mod address;
pub use address::{carried_v4, is_public_address, AddressPolicy, AllowedAddress, Host};

/// The longest URL accepted, in bytes.
const MAX_URL_BYTES: usize = 8 * 1024;
/// The longest host accepted, in bytes (the DNS limit). It also keeps every
/// origin well inside [`Target`]'s length limit.
const MAX_HOST_BYTES: usize = 253;
/// The longest selector accepted, in bytes.
const MAX_SELECTOR_BYTES: usize = 1024;
/// The longest visible text a click may look for, in bytes.
const MAX_CLICK_TEXT_BYTES: usize = 1024;
/// The longest value a `type` action may enter, in bytes.
const MAX_INPUT_VALUE_BYTES: usize = 64 * 1024;
/// The longest capture label, in bytes.
const MAX_LABEL_BYTES: usize = 256;
/// The largest viewport side, in CSS pixels.
const MAX_VIEWPORT_SIDE: u32 = 10_000;

/// The timeout of every action but `open` when the agent names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// The timeout of `open` when the agent names none; loading a page takes longer
/// than acting on one.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(45);
/// The shortest timeout an agent can ask for.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest timeout an agent can ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(120);

/// Whether `text` is usable as a single-line parameter: at most `max` bytes
/// and free of control characters.
fn is_line(text: &str, max: usize) -> bool {
    text.len() <= max && !text.chars().any(char::is_control)
}

/// An absolute `http` or `https` URL with a non-empty host, at most 8 KiB,
/// without whitespace or control characters.
///
/// The text is kept as given, because it is what the pane opens; the origin is
/// derived once, in canonical form, because it is what authority is checked
/// against. Anything a browser might read differently from this parser (user
/// info, percent-encoded or non-ASCII hosts, backslashes, empty ports) is
/// refused rather than guessed at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpUrl {
    text: String,
    origin: Target,
    host: Host,
    port: u16,
}

impl HttpUrl {
    /// Parses and checks a URL.
    ///
    /// # Errors
    /// `bad-parameters` for anything but an absolute `http`/`https` URL with a
    /// host: other schemes (`javascript:`, `data:`, `file:`), relative URLs,
    /// user info, malformed hosts or ports, a host a browser would not read
    /// ([`Host::read`]), whitespace, control characters, or more than 8 KiB.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        if text.len() > MAX_URL_BYTES || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Refusal::BadParameters);
        }
        let (scheme, rest) = text.split_once("://").ok_or(Refusal::BadParameters)?;
        let (scheme, default_port) = if scheme.eq_ignore_ascii_case("http") {
            ("http", 80)
        } else if scheme.eq_ignore_ascii_case("https") {
            ("https", 443)
        } else {
            return Err(Refusal::BadParameters);
        };
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (host, port) = split_authority(&rest[..authority_end])?;
        let read = Host::read(host)?;
        let effective = port.unwrap_or(default_port);
        let port = match port {
            Some(port) if port != default_port => format!(":{port}"),
            Some(_) | None => String::new(),
        };
        let origin = format!("{scheme}://{}{port}", host.to_ascii_lowercase());
        let origin = Target::parse(&origin).map_err(|_| Refusal::BadParameters)?;
        Ok(Self {
            text: text.to_owned(),
            origin,
            host: read,
            port: effective,
        })
    }

    /// The host, as a browser reads it.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The port: the URL's, or its scheme's default.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The origin, `scheme://host[:port]`: scheme and host in lowercase, the
    /// scheme's default port left out.
    pub fn origin(&self) -> &Target {
        &self.origin
    }
}

/// Splits an authority into its host (still in the given case) and port.
fn split_authority(authority: &str) -> Result<(&str, Option<u16>), Refusal> {
    // User info never passes the host checks below (`@` is not a host
    // character): it misleads readers of the URL about the host, and
    // credentials in it would land on the evidence trail.
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']').ok_or(Refusal::BadParameters)?;
        let (host, after) = authority.split_at(close + 1);
        let inner = &host[1..close];
        let ipv6_ok = inner.contains(':')
            && inner
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.'));
        if !ipv6_ok {
            return Err(Refusal::BadParameters);
        }
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return Err(Refusal::BadParameters),
        }
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        let host_ok = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
        if !host_ok {
            return Err(Refusal::BadParameters);
        }
        (host, port)
    };
    if host.len() > MAX_HOST_BYTES {
        return Err(Refusal::BadParameters);
    }
    let port = match port {
        Some(digits) => Some(parse_port(digits).ok_or(Refusal::BadParameters)?),
        None => None,
    };
    Ok((host, port))
}

/// A port: 1 to 5 ASCII digits with a value from 1 to 65535.
fn parse_port(digits: &str) -> Option<u16> {
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u16>().ok().filter(|&port| port != 0)
}

/// Declares a checked text parameter: `$check(text)` says whether it is
/// acceptable; anything else is `bad-parameters`.
macro_rules! text_parameter {
    ($(#[$meta:meta])* $name:ident, $check:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub struct $name(String);

        impl $name {
            /// Checks the text.
            ///
            /// # Errors
            /// `bad-parameters` when it breaks the rule above.
            pub fn parse(text: &str) -> Result<Self, Refusal> {
                let check: fn(&str) -> bool = $check;
                if check(text) {
                    Ok(Self(text.to_owned()))
                } else {
                    Err(Refusal::BadParameters)
                }
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
    };
}

text_parameter!(
    /// A CSS selector: non-empty, at most 1 KiB, no control characters.
    ///
    /// The broker does not parse CSS; the pane does. The checks only keep the
    /// value to something a pane can be asked to look up.
    Selector,
    |t| !t.is_empty() && is_line(t, MAX_SELECTOR_BYTES)
);
text_parameter!(
    /// The visible text a click looks for: non-empty, at most 1 KiB, no
    /// control characters.
    ClickText,
    |t| !t.is_empty() && is_line(t, MAX_CLICK_TEXT_BYTES)
);
text_parameter!(
    /// The value a `type` action enters: at most 64 KiB. It may be empty (to
    /// submit a form as it is) and may hold line breaks and tabs, because
    /// text areas take them.
    InputValue,
    |t| t.len() <= MAX_INPUT_VALUE_BYTES
);
text_parameter!(
    /// A capture's label: non-empty, at most 256 bytes, no control characters.
    CaptureLabel,
    |t| !t.is_empty() && is_line(t, MAX_LABEL_BYTES)
);

/// A viewport size in CSS pixels, each side from 1 to 10000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Viewport {
    width: u32,
    height: u32,
}

impl Viewport {
    /// Checks a size. The sides are taken as `u64` so that an adapter can
    /// pass any JSON integer and still get the one refusal.
    ///
    /// # Errors
    /// `bad-parameters` when a side is 0 or above 10000.
    pub fn new(width: u64, height: u64) -> Result<Self, Refusal> {
        let side = |v: u64| {
            u32::try_from(v)
                .ok()
                .filter(|v| (1..=MAX_VIEWPORT_SIDE).contains(v))
                .ok_or(Refusal::BadParameters)
        };
        Ok(Self {
            width: side(width)?,
            height: side(height)?,
        })
    }

    /// The width.
    pub fn width(self) -> u32 {
        self.width
    }

    /// The height.
    pub fn height(self) -> u32 {
        self.height
    }
}

/// What a click is aimed at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClickTarget {
    /// The element the selector finds.
    Selector(Selector),
    /// The element showing this text.
    Text(ClickText),
}

/// A direction to scroll in, or an end to scroll to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScrollDirection {
    /// One step up.
    Up,
    /// One step down.
    Down,
    /// One step left.
    Left,
    /// One step right.
    Right,
    /// To the top of the page.
    Top,
    /// To the bottom of the page.
    Bottom,
}

impl ScrollDirection {
    /// Every direction and end.
    pub const ALL: [ScrollDirection; 6] = [
        Self::Up,
        Self::Down,
        Self::Left,
        Self::Right,
        Self::Top,
        Self::Bottom,
    ];

    /// Parses the wire name: `up`, `down`, `left`, `right`, `top` or `bottom`.
    ///
    /// # Errors
    /// `bad-parameters` for any other text.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        match text {
            "up" => Ok(Self::Up),
            "down" => Ok(Self::Down),
            "left" => Ok(Self::Left),
            "right" => Ok(Self::Right),
            "top" => Ok(Self::Top),
            "bottom" => Ok(Self::Bottom),
            _ => Err(Refusal::BadParameters),
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Left => "left",
            Self::Right => "right",
            Self::Top => "top",
            Self::Bottom => "bottom",
        }
    }
}

/// What a scroll is aimed at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ScrollTarget {
    /// Scroll the page in a direction or to an end.
    Direction(ScrollDirection),
    /// Scroll until the element the selector finds is visible.
    Selector(Selector),
}

/// One browser action with checked parameters. There is no action that
/// evaluates script: the pane only performs these.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BrowserAction {
    /// Open a URL, in a view of the given size if one is given.
    Open {
        /// The page to open.
        url: HttpUrl,
        /// The view size to use.
        viewport: Option<Viewport>,
    },
    /// Describe the page (visible text and interactive elements), or only the
    /// part the selector finds.
    Snapshot {
        /// The part of the page to describe.
        selector: Option<Selector>,
    },
    /// Click an element.
    Click(ClickTarget),
    /// Type a value into an element, then submit its form if asked.
    Type {
        /// The element to type into.
        selector: Selector,
        /// What to type.
        value: InputValue,
        /// Whether to submit the element's form afterwards.
        submit: bool,
    },
    /// Scroll the page.
    Scroll(ScrollTarget),
    /// Go back in the view's history.
    Back,
    /// Go forward in the view's history.
    Forward,
    /// Describe one element in detail.
    Inspect {
        /// The element to describe.
        selector: Selector,
    },
    /// Capture an image of the view.
    Capture {
        /// A label the pane attaches to the capture.
        label: Option<CaptureLabel>,
    },
    /// Resize the view.
    Resize {
        /// The new size.
        viewport: Viewport,
    },
}

impl BrowserAction {
    /// Every action's wire name, in declaration order.
    pub const NAMES: [&'static str; 10] = [
        "open", "snapshot", "click", "type", "scroll", "back", "forward", "inspect", "capture",
        "resize",
    ];

    /// The wire name, for example `"click"`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Open { .. } => "open",
            Self::Snapshot { .. } => "snapshot",
            Self::Click(_) => "click",
            Self::Type { .. } => "type",
            Self::Scroll(_) => "scroll",
            Self::Back => "back",
            Self::Forward => "forward",
            Self::Inspect { .. } => "inspect",
            Self::Capture { .. } => "capture",
            Self::Resize { .. } => "resize",
        }
    }

    /// Whether only a client that declared itself capable (`browser=1`) can
    /// serve this action. Only `open` can go to any client, because opening a
    /// tab is what creates a view.
    pub fn needs_capable_client(&self) -> bool {
        match self {
            Self::Open { .. } => false,
            Self::Snapshot { .. }
            | Self::Click(_)
            | Self::Type { .. }
            | Self::Scroll(_)
            | Self::Back
            | Self::Forward
            | Self::Inspect { .. }
            | Self::Capture { .. }
            | Self::Resize { .. } => true,
        }
    }

    /// The action authority is checked for: `browser.<name>`.
    pub fn action(&self) -> Action {
        // Every name in `NAMES` is a lowercase word; a unit test parses all ten.
        Action::joined("browser", self.name())
    }

    /// The target authority is checked against: the URL's origin for `open`,
    /// none for every other action (they act on whatever page is open).
    pub fn target(&self) -> Option<Target> {
        match self {
            Self::Open { url, .. } => Some(url.origin().clone()),
            Self::Snapshot { .. }
            | Self::Click(_)
            | Self::Type { .. }
            | Self::Scroll(_)
            | Self::Back
            | Self::Forward
            | Self::Inspect { .. }
            | Self::Capture { .. }
            | Self::Resize { .. } => None,
        }
    }
}

/// The timeout of a request: the agent's `requested_ms` or the action's
/// default (45 s for `open`, 20 s otherwise), clamped to 1–120 s.
pub fn effective_timeout(action: &BrowserAction, requested_ms: Option<u64>) -> Duration {
    let default = match action {
        BrowserAction::Open { .. } => OPEN_TIMEOUT,
        BrowserAction::Snapshot { .. }
        | BrowserAction::Click(_)
        | BrowserAction::Type { .. }
        | BrowserAction::Scroll(_)
        | BrowserAction::Back
        | BrowserAction::Forward
        | BrowserAction::Inspect { .. }
        | BrowserAction::Capture { .. }
        | BrowserAction::Resize { .. } => DEFAULT_TIMEOUT,
    };
    requested_ms
        .map_or(default, Duration::from_millis)
        .clamp(MIN_TIMEOUT, MAX_TIMEOUT)
}

/// A connected browser client, as the transport knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// The client's self-chosen id.
    pub id: ClientId,
    /// Whether the client opened its event stream with `browser=1`, declaring
    /// that it can drive a page.
    pub capable: bool,
}

/// The answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimReply {
    /// This client performs the request and must post its result with this
    /// token.
    Granted(ClaimToken),
    /// This client must do nothing: the request is unknown, settled, already
    /// claimed, or was not delivered to it.
    Refused,
}

/// What the claimant reported.
///
/// The pane's own error text is not carried: the agent's reply is a static
/// refusal code (a pane's words never reach an agent), and the two failure
/// variants keep apart the two things an agent can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneOutcome<R> {
    /// The pane performed the action; this is its result.
    Done(R),
    /// The pane reported that the action failed; the agent gets
    /// `browser-failed`.
    Failed,
    /// The pane's result was over the result route's limit and the pane
    /// reported that in a small follow-up; the agent gets
    /// `browser-result-too-large`.
    TooLarge,
    /// The pane refused a navigation the action would have caused, to a
    /// private address (it checks the broker's rule, [`AddressPolicy`],
    /// on every navigation it sees); the agent gets
    /// `browser-address-refused`.
    AddressRefused,
}

impl<R> PaneOutcome<R> {
    /// The agent's reply for this outcome.
    pub fn into_result(self) -> Result<R, Refusal> {
        match self {
            Self::Done(result) => Ok(result),
            Self::Failed => Err(Refusal::BrowserFailed),
            Self::TooLarge => Err(Refusal::BrowserResultTooLarge),
            Self::AddressRefused => Err(Refusal::BrowserAddressRefused),
        }
    }
}

/// Work the machine asks the adapter to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrowserEffect<R> {
    /// Send the request to these clients (`browser-control-request`).
    Deliver {
        /// The request.
        request: BrowserRequestId,
        /// What to do.
        action: BrowserAction,
        /// The time after which the request fails if it is still unsettled.
        claim_by: Timestamp,
        /// Every client that may claim it, in id order.
        to: Vec<ClientId>,
    },
    /// Answer the agent. Queued exactly once per accepted request.
    Settle {
        /// The request.
        request: BrowserRequestId,
        /// The pane's result or the refusal.
        outcome: Result<R, Refusal>,
    },
    /// Tell these clients to stop working on the request
    /// (`browser-control-cancel`), because it ended before a result.
    Cancel {
        /// The request.
        request: BrowserRequestId,
        /// The claimant, or every client it was delivered to if no one had
        /// claimed it, in id order.
        to: Vec<ClientId>,
    },
}

/// Where a live request stands. Settled requests are removed, so "settled" is
/// the absence of an entry.
#[derive(Debug, Clone)]
enum RequestState {
    /// Delivered and waiting for a claim.
    Pending {
        /// The clients that may claim it.
        delivered_to: BTreeSet<ClientId>,
        /// When it times out.
        deadline: Timestamp,
    },
    /// Claimed; only the claimant's token can settle it.
    Claimed {
        /// The client whose claim won.
        client: ClientId,
        /// The token that client received.
        token: ClaimToken,
        /// When it times out; claiming does not extend it.
        deadline: Timestamp,
    },
}

impl RequestState {
    fn deadline(&self) -> Timestamp {
        match self {
            Self::Pending { deadline, .. } | Self::Claimed { deadline, .. } => *deadline,
        }
    }

    /// Who must hear that the request ended early: the claimant, or every
    /// client that might still be deciding to claim it.
    fn cancel_recipients(self) -> Vec<ClientId> {
        match self {
            Self::Pending { delivered_to, .. } => delivered_to.into_iter().collect(),
            Self::Claimed { client, .. } => vec![client],
        }
    }
}

/// The browser request machine: pending → claimed → settled, with exactly one
/// [`BrowserEffect::Settle`] per accepted request.
///
/// `R` is the result payload, opaque to the domain (the adapter picks it, for
/// example a JSON value). The machine holds only live requests; its deadline
/// scans are linear, which suits the handful of requests agents keep open.
#[derive(Debug, Clone)]
pub struct BrowserRequests<R> {
    requests: BTreeMap<BrowserRequestId, RequestState>,
    effects: VecDeque<BrowserEffect<R>>,
}

impl<R> Default for BrowserRequests<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> BrowserRequests<R> {
    /// A machine with no requests.
    pub fn new() -> Self {
        Self {
            requests: BTreeMap::new(),
            effects: VecDeque::new(),
        }
    }

    /// Accepts a request and queues its delivery to every client that can
    /// serve it: all `clients` for `open`, the capable ones otherwise. The
    /// request times out at `now + timeout`.
    ///
    /// # Errors
    /// - `no-browser-client` when no client can serve the action; nothing is
    ///   kept and nothing is queued, so the agent hears at once;
    /// - `bad-request` when `id` is already live (ids are random, so this is
    ///   a caller bug, refused rather than trusted).
    pub fn handle_request(
        &mut self,
        now: Timestamp,
        id: BrowserRequestId,
        action: BrowserAction,
        timeout: Duration,
        clients: &[ClientInfo],
    ) -> Result<(), Refusal> {
        if self.requests.contains_key(&id) {
            return Err(Refusal::BadRequest);
        }
        let needs_capable = action.needs_capable_client();
        let delivered_to: BTreeSet<ClientId> = clients
            .iter()
            .filter(|client| client.capable || !needs_capable)
            .map(|client| client.id.clone())
            .collect();
        if delivered_to.is_empty() {
            return Err(Refusal::NoBrowserClient);
        }
        let deadline = now.saturating_add(timeout);
        self.effects.push_back(BrowserEffect::Deliver {
            request: id,
            action,
            claim_by: deadline,
            to: delivered_to.iter().cloned().collect(),
        });
        self.requests.insert(
            id,
            RequestState::Pending {
                delivered_to,
                deadline,
            },
        );
        Ok(())
    }

    /// Grants the request to `client` with `token` if it is pending and was
    /// delivered to that client. The first claim wins; every other claim is
    /// refused and changes nothing.
    pub fn handle_claim(
        &mut self,
        id: BrowserRequestId,
        client: &ClientId,
        token: ClaimToken,
    ) -> ClaimReply {
        let Some(state) = self.requests.get_mut(&id) else {
            return ClaimReply::Refused;
        };
        match state {
            RequestState::Pending {
                delivered_to,
                deadline,
            } => {
                if !delivered_to.contains(client) {
                    return ClaimReply::Refused;
                }
                *state = RequestState::Claimed {
                    client: client.clone(),
                    token: token.clone(),
                    deadline: *deadline,
                };
                ClaimReply::Granted(token)
            }
            RequestState::Claimed { .. } => ClaimReply::Refused,
        }
    }

    /// Whether a claim by `client` could win now: the request is pending
    /// and was delivered to that client. Changes nothing.
    pub fn may_claim(&self, id: BrowserRequestId, client: &ClientId) -> bool {
        match self.requests.get(&id) {
            Some(RequestState::Pending { delivered_to, .. }) => delivered_to.contains(client),
            Some(RequestState::Claimed { .. }) | None => false,
        }
    }

    /// Settles a claimed request with its claimant's outcome, if `token` is
    /// the claim token. Returns whether it matched; an unknown or settled
    /// request, an unclaimed one, or a wrong token matches nothing and leaves
    /// the request waiting, because a late answer is correct behaviour, not
    /// an error.
    pub fn handle_result(
        &mut self,
        id: BrowserRequestId,
        token: &ClaimToken,
        outcome: PaneOutcome<R>,
    ) -> bool {
        let matched = match self.requests.get(&id) {
            Some(RequestState::Claimed { token: held, .. }) => held.ct_eq(token),
            Some(RequestState::Pending { .. }) | None => false,
        };
        if matched {
            self.requests.remove(&id);
            self.effects.push_back(BrowserEffect::Settle {
                request: id,
                outcome: outcome.into_result(),
            });
        }
        matched
    }

    /// Ends a live request as aborted (`browser-aborted`) and cancels it at
    /// the clients working on it. Returns whether the request was live.
    pub fn handle_abort(&mut self, id: BrowserRequestId) -> bool {
        self.end_early(id, Refusal::BrowserAborted)
    }

    /// Ends every request whose deadline is at or before `now` as timed out
    /// (`browser-timeout`), in request id order. A claimant that vanished
    /// ends here too: assuming success would report an interaction that never
    /// happened.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        let expired: Vec<BrowserRequestId> = self
            .requests
            .iter()
            .filter(|(_, state)| state.deadline() <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.end_early(id, Refusal::BrowserTimeout);
        }
    }

    /// The next queued effect, oldest first.
    pub fn poll_effect(&mut self) -> Option<BrowserEffect<R>> {
        self.effects.pop_front()
    }

    /// The earliest deadline of a live request: when the adapter must call
    /// [`Self::handle_timeout`] next.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.requests.values().map(RequestState::deadline).min()
    }

    /// How many requests are live (pending or claimed).
    pub fn pending(&self) -> usize {
        self.requests.len()
    }

    /// Settles a live request with `refusal` and cancels it at its clients.
    fn end_early(&mut self, id: BrowserRequestId, refusal: Refusal) -> bool {
        let Some(state) = self.requests.remove(&id) else {
            return false;
        };
        self.effects.push_back(BrowserEffect::Settle {
            request: id,
            outcome: Err(refusal),
        });
        self.effects.push_back(BrowserEffect::Cancel {
            request: id,
            to: state.cancel_recipients(),
        });
        true
    }
}
