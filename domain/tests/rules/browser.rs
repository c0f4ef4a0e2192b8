//! The browser-control machine's rules (`mosaic_domain::browser`).

use std::time::Duration;

use mosaic_domain::browser::*;
use mosaic_domain::*;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(ms).unwrap()
}

fn rid(n: u8) -> BrowserRequestId {
    BrowserRequestId::from_random([n; 16])
}

fn client(name: &str) -> ClientId {
    ClientId::parse(name).unwrap()
}

fn info(name: &str, capable: bool) -> ClientInfo {
    ClientInfo {
        id: client(name),
        capable,
    }
}

fn token(n: u8) -> ClaimToken {
    ClaimToken::from_random([n; 32])
}

fn open() -> BrowserAction {
    BrowserAction::Open {
        url: HttpUrl::parse("https://example.com/a").unwrap(),
        viewport: None,
    }
}

fn snapshot() -> BrowserAction {
    BrowserAction::Snapshot { selector: None }
}

/// Drains every queued effect and compares the list with `expected`.
#[track_caller]
fn assert_effects(machine: &mut BrowserRequests<u32>, expected: &[BrowserEffect<u32>]) {
    let actual: Vec<_> = std::iter::from_fn(|| machine.poll_effect()).collect();
    assert_eq!(actual, expected);
}

fn deliver(n: u8, action: BrowserAction, claim_by: i64, to: &[&str]) -> BrowserEffect<u32> {
    BrowserEffect::Deliver {
        request: rid(n),
        action,
        claim_by: t(claim_by),
        to: to.iter().map(|name| client(name)).collect(),
    }
}

fn settle(n: u8, outcome: Result<u32, Refusal>) -> BrowserEffect<u32> {
    BrowserEffect::Settle {
        request: rid(n),
        outcome,
    }
}

fn cancel(n: u8, to: &[&str]) -> BrowserEffect<u32> {
    BrowserEffect::Cancel {
        request: rid(n),
        to: to.iter().map(|name| client(name)).collect(),
    }
}

/// A machine with request 1 (a snapshot, deadline 21000) delivered to the
/// capable clients `a` and `b`.
fn with_pending() -> BrowserRequests<u32> {
    let mut m = BrowserRequests::new();
    let clients = [info("a", true), info("b", true), info("x", false)];
    m.handle_request(t(1_000), rid(1), snapshot(), DEFAULT_TIMEOUT, &clients)
        .unwrap();
    assert_effects(&mut m, &[deliver(1, snapshot(), 21_000, &["a", "b"])]);
    m
}

// --- validation ---

#[test]
fn urls_accept_http_and_https_and_derive_a_canonical_origin() {
    for (text, origin) in [
        ("http://example.com", "http://example.com"),
        ("https://example.com/", "https://example.com"),
        ("HTTPS://Example.COM/Path?Q=1#F", "https://example.com"),
        ("http://example.com:80/x", "http://example.com"),
        ("https://example.com:443", "https://example.com"),
        ("http://example.com:443", "http://example.com:443"),
        ("https://localhost:8080?x", "https://localhost:8080"),
        ("http://127.0.0.1:7420#top", "http://127.0.0.1:7420"),
        ("http://[::1]:3000/", "http://[::1]:3000"),
        ("http://[FE80::1]", "http://[fe80::1]"),
        (
            "http://my_host.internal/ünïcode-path",
            "http://my_host.internal",
        ),
    ] {
        let url = HttpUrl::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(url.as_str(), text);
        assert_eq!(url.origin().as_str(), origin, "{text}");
    }
}

#[test]
fn urls_refuse_other_schemes_and_relative_forms() {
    for bad in [
        "javascript:alert(1)",
        "javascript://example.com/%0aalert(1)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "ftp://example.com/",
        "ws://example.com/",
        "/relative/path",
        "example.com",
        "//example.com/",
        "http:example.com",
        "http:/example.com",
        "http:\\\\example.com",
        "xhttp://example.com",
        "",
    ] {
        assert_eq!(HttpUrl::parse(bad), Err(Refusal::BadParameters), "{bad}");
    }
}

#[test]
fn urls_refuse_malformed_hosts_ports_and_user_info() {
    for bad in [
        "http://",
        "http:///example.com",
        "http://?q",
        "http://:80/",
        "http://user@example.com/",
        "http://user:pass@example.com/",
        "http://evil.com\\@good.com/",
        "http://good.com\\evil.com/",
        "http://%65xample.com/",
        "http://exämple.com/",
        "http://example.com:/",
        "http://example.com:0/",
        "http://example.com:65536/",
        "http://example.com:080808/",
        "http://example.com:000080/",
        "http://example.com:+80/",
        "http://example.com:8a/",
        "http://[::1/",
        "http://[]/",
        "http://[::1]x/",
        "http://[g::1]/",
        "http://[127.0.0.1]/",
    ] {
        assert_eq!(HttpUrl::parse(bad), Err(Refusal::BadParameters), "{bad}");
    }
    let long_host = format!("http://{}.com/", "a".repeat(250));
    assert_eq!(HttpUrl::parse(&long_host), Err(Refusal::BadParameters));
    // The DNS limit itself is a host, and so are five-digit ports.
    let dns_limit = format!("http://{}.com/", "a".repeat(249));
    assert!(HttpUrl::parse(&dns_limit).is_ok());
    for port in ["65535", "00080", "1"] {
        let url = format!("http://example.com:{port}/");
        assert!(HttpUrl::parse(&url).is_ok(), "{url}");
    }
}

#[test]
fn urls_refuse_whitespace_control_characters_and_more_than_8_kib() {
    for bad in [
        " http://example.com",
        "http://example.com ",
        "http://exa mple.com/",
        "http://example.com/a b",
        "http://example.com/\t",
        "http://example.com/\n",
        "http://example.com/\u{7f}",
        "http://example.com/\u{a0}",
        "http://example.com/\u{2028}",
    ] {
        assert_eq!(HttpUrl::parse(bad), Err(Refusal::BadParameters), "{bad:?}");
    }
    let prefix = "https://example.com/";
    let at_limit = format!("{prefix}{}", "a".repeat(8 * 1024 - prefix.len()));
    assert!(HttpUrl::parse(&at_limit).is_ok());
    let over = format!("{at_limit}a");
    assert_eq!(HttpUrl::parse(&over), Err(Refusal::BadParameters));
}

#[test]
fn selectors_are_non_empty_single_lines_of_at_most_1_kib() {
    assert_eq!(
        Selector::parse("#main > a.b").unwrap().as_str(),
        "#main > a.b"
    );
    assert!(Selector::parse(&"a".repeat(1024)).is_ok());
    for bad in ["", "a\nb", "a\u{0}", "\u{1b}[0m"] {
        assert_eq!(Selector::parse(bad), Err(Refusal::BadParameters), "{bad:?}");
    }
    assert_eq!(
        Selector::parse(&"a".repeat(1025)),
        Err(Refusal::BadParameters)
    );
    // The cap counts bytes, so multi-byte characters fill it sooner.
    assert_eq!(
        Selector::parse(&"é".repeat(513)),
        Err(Refusal::BadParameters)
    );
}

#[test]
fn viewport_sides_run_from_1_to_10000() {
    let v = Viewport::new(1, 10_000).unwrap();
    assert_eq!((v.width(), v.height()), (1, 10_000));
    let v = Viewport::new(10_000, 1).unwrap();
    assert_eq!((v.width(), v.height()), (10_000, 1));
    let v = Viewport::new(1280, 720).unwrap();
    assert_eq!((v.width(), v.height()), (1280, 720));
    for (w, h) in [(0, 10), (10, 0), (10_001, 10), (10, 10_001), (u64::MAX, 10)] {
        assert_eq!(Viewport::new(w, h), Err(Refusal::BadParameters), "{w}x{h}");
    }
}

#[test]
fn click_text_input_value_and_label_have_their_caps() {
    assert!(ClickText::parse(&"a".repeat(1024)).is_ok());
    assert_eq!(
        ClickText::parse(&"a".repeat(1025)),
        Err(Refusal::BadParameters)
    );
    assert_eq!(ClickText::parse(""), Err(Refusal::BadParameters));
    assert_eq!(ClickText::parse("Sign\nin"), Err(Refusal::BadParameters));

    assert!(InputValue::parse("").is_ok());
    assert!(InputValue::parse("line one\nline two\tand a tab").is_ok());
    assert!(InputValue::parse(&"a".repeat(64 * 1024)).is_ok());
    assert_eq!(
        InputValue::parse(&"a".repeat(64 * 1024 + 1)),
        Err(Refusal::BadParameters)
    );

    assert!(CaptureLabel::parse(&"a".repeat(256)).is_ok());
    assert_eq!(
        CaptureLabel::parse(&"a".repeat(257)),
        Err(Refusal::BadParameters)
    );
    assert_eq!(CaptureLabel::parse(""), Err(Refusal::BadParameters));
    assert_eq!(CaptureLabel::parse("a\rb"), Err(Refusal::BadParameters));
}

#[test]
fn scroll_directions_round_trip_and_nothing_else_parses() {
    for d in ScrollDirection::ALL {
        assert_eq!(ScrollDirection::parse(d.as_str()), Ok(d));
    }
    for bad in ["", "UP", "sideways", " up"] {
        assert_eq!(
            ScrollDirection::parse(bad),
            Err(Refusal::BadParameters),
            "{bad:?}"
        );
    }
}

#[test]
fn actions_have_names_authority_actions_and_targets() {
    let sel = Selector::parse("#q").unwrap();
    let all = [
        BrowserAction::Open {
            url: HttpUrl::parse("HTTP://Example.com:8080/x").unwrap(),
            viewport: Some(Viewport::new(800, 600).unwrap()),
        },
        BrowserAction::Snapshot {
            selector: Some(sel.clone()),
        },
        BrowserAction::Click(ClickTarget::Text(ClickText::parse("Go").unwrap())),
        BrowserAction::Type {
            selector: sel.clone(),
            value: InputValue::parse("hello").unwrap(),
            submit: true,
        },
        BrowserAction::Scroll(ScrollTarget::Direction(ScrollDirection::Bottom)),
        BrowserAction::Back,
        BrowserAction::Forward,
        BrowserAction::Inspect { selector: sel },
        BrowserAction::Capture { label: None },
        BrowserAction::Resize {
            viewport: Viewport::new(1, 1).unwrap(),
        },
    ];
    let names: Vec<_> = all.iter().map(BrowserAction::name).collect();
    assert_eq!(names, BrowserAction::NAMES);
    for action in &all {
        assert_eq!(
            action.action().as_str(),
            format!("browser.{}", action.name())
        );
        assert_eq!(
            Action::parse(action.action().as_str()),
            Ok(action.action()),
            "a valid action name"
        );
        let is_open = matches!(action, BrowserAction::Open { .. });
        assert_eq!(action.needs_capable_client(), !is_open, "{}", action.name());
        if !is_open {
            assert_eq!(action.target(), None, "{}", action.name());
        }
    }
    assert_eq!(
        all[0].target(),
        Some(Target::parse("http://example.com:8080").unwrap())
    );
}

#[test]
fn timeouts_default_by_action_and_clamp_to_1_to_120_seconds() {
    let secs = Duration::from_secs;
    assert_eq!(effective_timeout(&snapshot(), None), secs(20));
    assert_eq!(effective_timeout(&open(), None), secs(45));
    assert_eq!(effective_timeout(&snapshot(), Some(5_000)), secs(5));
    assert_eq!(effective_timeout(&open(), Some(5_000)), secs(5));
    assert_eq!(effective_timeout(&snapshot(), Some(0)), secs(1));
    assert_eq!(effective_timeout(&snapshot(), Some(999)), secs(1));
    assert_eq!(effective_timeout(&open(), Some(120_001)), secs(120));
    assert_eq!(effective_timeout(&open(), Some(u64::MAX)), secs(120));
    assert_eq!(
        effective_timeout(&snapshot(), Some(1_500)),
        Duration::from_millis(1_500)
    );
}

// --- the machine ---

#[test]
fn no_recipient_is_refused_at_once_without_state_or_effects() {
    let mut m = BrowserRequests::<u32>::new();
    let only_plain = [info("x", false)];
    for clients in [&[][..], &only_plain[..]] {
        let reply = m.handle_request(t(0), rid(1), snapshot(), DEFAULT_TIMEOUT, clients);
        assert_eq!(reply, Err(Refusal::NoBrowserClient));
        assert_effects(&mut m, &[]);
        assert_eq!((m.pending(), m.next_deadline()), (0, None));
    }
    let reply = m.handle_request(t(0), rid(1), open(), OPEN_TIMEOUT, &[]);
    assert_eq!(reply, Err(Refusal::NoBrowserClient));
    assert_effects(&mut m, &[]);
    assert_eq!(m.pending(), 0);
}

#[test]
fn open_reaches_every_client_and_other_actions_only_capable_ones() {
    let mut m = BrowserRequests::<u32>::new();
    let clients = [info("x", false), info("a", true), info("x", false)];
    m.handle_request(t(0), rid(1), open(), OPEN_TIMEOUT, &clients)
        .unwrap();
    m.handle_request(t(0), rid(2), snapshot(), DEFAULT_TIMEOUT, &clients)
        .unwrap();
    assert_effects(
        &mut m,
        &[
            deliver(1, open(), 45_000, &["a", "x"]),
            deliver(2, snapshot(), 20_000, &["a"]),
        ],
    );
    assert_eq!((m.pending(), m.next_deadline()), (2, Some(t(20_000))));
    assert_eq!(
        m.handle_claim(rid(1), &client("x"), token(1)),
        ClaimReply::Granted(token(1))
    );
    assert_eq!(
        m.handle_claim(rid(2), &client("x"), token(2)),
        ClaimReply::Refused
    );
}

#[test]
fn a_live_duplicate_id_is_a_bad_request_and_changes_nothing() {
    let mut m = with_pending();
    let reply = m.handle_request(t(5), rid(1), open(), OPEN_TIMEOUT, &[info("z", true)]);
    assert_eq!(reply, Err(Refusal::BadRequest));
    assert_effects(&mut m, &[]);
    assert_eq!(
        m.handle_claim(rid(1), &client("z"), token(1)),
        ClaimReply::Refused
    );
    assert_eq!(m.next_deadline(), Some(t(21_000)));
}

#[test]
fn the_first_claim_wins_and_every_other_claim_is_refused() {
    let mut m = with_pending();
    assert_eq!(
        m.handle_claim(rid(9), &client("a"), token(1)),
        ClaimReply::Refused
    );
    assert_eq!(
        m.handle_claim(rid(1), &client("x"), token(1)),
        ClaimReply::Refused
    );
    assert_eq!(
        m.handle_claim(rid(1), &client("b"), token(2)),
        ClaimReply::Granted(token(2))
    );
    assert_eq!(
        m.handle_claim(rid(1), &client("a"), token(3)),
        ClaimReply::Refused
    );
    assert_eq!(
        m.handle_claim(rid(1), &client("b"), token(4)),
        ClaimReply::Refused
    );
    assert_effects(&mut m, &[]);
    // The first token still settles; the refused claims' tokens do not.
    assert!(!m.handle_result(rid(1), &token(3), PaneOutcome::Done(7)));
    assert!(m.handle_result(rid(1), &token(2), PaneOutcome::Done(7)));
    assert_effects(&mut m, &[settle(1, Ok(7))]);
}

#[test]
fn only_the_claim_token_settles_and_a_result_sends_no_cancel() {
    let mut m = with_pending();
    assert!(!m.handle_result(rid(1), &token(1), PaneOutcome::Done(1)));
    assert_eq!(
        m.handle_claim(rid(1), &client("a"), token(1)),
        ClaimReply::Granted(token(1))
    );
    assert!(!m.handle_result(rid(1), &token(2), PaneOutcome::Done(2)));
    assert!(!m.handle_result(rid(2), &token(1), PaneOutcome::Done(3)));
    assert_effects(&mut m, &[]);
    assert_eq!(m.pending(), 1);
    assert!(m.handle_result(rid(1), &token(1), PaneOutcome::Done(4)));
    assert_effects(&mut m, &[settle(1, Ok(4))]);
    assert_eq!((m.pending(), m.next_deadline()), (0, None));
}

#[test]
fn pane_failures_reach_the_agent_with_their_own_codes() {
    for (outcome, refusal) in [
        (PaneOutcome::Failed, Refusal::BrowserFailed),
        (PaneOutcome::TooLarge, Refusal::BrowserResultTooLarge),
    ] {
        let mut m = with_pending();
        m.handle_claim(rid(1), &client("a"), token(1));
        assert!(m.handle_result(rid(1), &token(1), outcome));
        assert_effects(&mut m, &[settle(1, Err(refusal))]);
    }
}

#[test]
fn a_settled_request_refuses_claims_results_and_aborts() {
    let mut m = with_pending();
    m.handle_claim(rid(1), &client("a"), token(1));
    assert!(m.handle_result(rid(1), &token(1), PaneOutcome::Done(1)));
    assert_effects(&mut m, &[settle(1, Ok(1))]);
    assert_eq!(
        m.handle_claim(rid(1), &client("b"), token(2)),
        ClaimReply::Refused
    );
    assert!(!m.handle_result(rid(1), &token(1), PaneOutcome::Done(2)));
    assert!(!m.handle_abort(rid(1)));
    m.handle_timeout(t(i64::from(u32::MAX)));
    assert_effects(&mut m, &[]);
}

#[test]
fn abort_cancels_at_every_recipient_while_pending() {
    let mut m = with_pending();
    assert!(m.handle_abort(rid(1)));
    assert_effects(
        &mut m,
        &[
            settle(1, Err(Refusal::BrowserAborted)),
            cancel(1, &["a", "b"]),
        ],
    );
    assert!(!m.handle_abort(rid(1)));
    assert_eq!(
        m.handle_claim(rid(1), &client("a"), token(1)),
        ClaimReply::Refused
    );
    assert_effects(&mut m, &[]);
}

#[test]
fn abort_cancels_at_the_claimant_only_once_claimed() {
    let mut m = with_pending();
    m.handle_claim(rid(1), &client("b"), token(1));
    assert!(m.handle_abort(rid(1)));
    assert_effects(
        &mut m,
        &[settle(1, Err(Refusal::BrowserAborted)), cancel(1, &["b"])],
    );
    assert!(!m.handle_result(rid(1), &token(1), PaneOutcome::Done(1)));
    assert_effects(&mut m, &[]);
}

#[test]
fn requests_time_out_at_their_deadline_in_id_order() {
    let mut m = with_pending();
    m.handle_request(
        t(2_000),
        rid(2),
        open(),
        Duration::from_secs(5),
        &[info("x", false)],
    )
    .unwrap();
    m.handle_request(
        t(3_000),
        rid(0),
        open(),
        Duration::from_secs(4),
        &[info("y", false)],
    )
    .unwrap();
    assert_effects(
        &mut m,
        &[
            deliver(2, open(), 7_000, &["x"]),
            deliver(0, open(), 7_000, &["y"]),
        ],
    );
    assert_eq!(m.next_deadline(), Some(t(7_000)));
    m.handle_timeout(t(6_999));
    assert_effects(&mut m, &[]);
    m.handle_timeout(t(7_000));
    assert_effects(
        &mut m,
        &[
            settle(0, Err(Refusal::BrowserTimeout)),
            cancel(0, &["y"]),
            settle(2, Err(Refusal::BrowserTimeout)),
            cancel(2, &["x"]),
        ],
    );
    assert_eq!((m.pending(), m.next_deadline()), (1, Some(t(21_000))));
}

#[test]
fn a_vanished_claimant_times_out_and_its_late_result_matches_nothing() {
    let mut m = with_pending();
    m.handle_claim(rid(1), &client("a"), token(1));
    // Claiming does not move the deadline.
    assert_eq!(m.next_deadline(), Some(t(21_000)));
    m.handle_timeout(t(21_000));
    assert_effects(
        &mut m,
        &[settle(1, Err(Refusal::BrowserTimeout)), cancel(1, &["a"])],
    );
    assert!(!m.handle_result(rid(1), &token(1), PaneOutcome::Done(1)));
    assert_effects(&mut m, &[]);
}

#[test]
fn an_id_may_be_used_again_once_settled() {
    let mut m = with_pending();
    m.handle_abort(rid(1));
    assert_effects(
        &mut m,
        &[
            settle(1, Err(Refusal::BrowserAborted)),
            cancel(1, &["a", "b"]),
        ],
    );
    m.handle_request(t(50_000), rid(1), open(), OPEN_TIMEOUT, &[info("c", false)])
        .unwrap();
    assert_effects(&mut m, &[deliver(1, open(), 95_000, &["c"])]);
    assert_eq!(
        m.handle_claim(rid(1), &client("a"), token(1)),
        ClaimReply::Refused
    );
    assert_eq!(
        m.handle_claim(rid(1), &client("c"), token(2)),
        ClaimReply::Granted(token(2))
    );
}

#[test]
fn may_claim_says_whether_a_claim_would_win_and_changes_nothing() {
    let clients = ["a", "b", "x", "z"];
    // Pending, delivered to `a` and `b` only.
    let mut m = with_pending();
    for name in clients {
        let would = m.clone().handle_claim(rid(1), &client(name), token(1));
        assert_eq!(
            m.may_claim(rid(1), &client(name)),
            would == ClaimReply::Granted(token(1)),
            "{name}"
        );
        assert!(!m.may_claim(rid(9), &client(name)), "{name}: unknown");
    }
    assert!(m.may_claim(rid(1), &client("a")) && m.may_claim(rid(1), &client("b")));
    assert_effects(&mut m, &[]);
    // Asking claimed nothing: the first real claim still wins.
    assert_eq!(
        m.handle_claim(rid(1), &client("b"), token(2)),
        ClaimReply::Granted(token(2))
    );
    // Claimed: no claim can win, the claimant's own included.
    for name in clients {
        assert!(!m.may_claim(rid(1), &client(name)), "{name}: claimed");
    }
    // Settled: gone.
    assert!(m.handle_result(rid(1), &token(2), PaneOutcome::Done(1)));
    assert!(!m.may_claim(rid(1), &client("a")));
}
