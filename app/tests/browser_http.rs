//! Browser control's HTTP routes, spoken to directly (issue 7): the UI
//! token, the claim and result rules, the body limits and the event stream,
//! with this test acting as a pane over plain HTTP/1.1. The real pane in
//! real Chromium is `browser.rs`.

#[path = "support/mod.rs"]
mod support;

use mosaic_domain::Refusal;
use serde_json::{json, Value};

use support::pane::{boot_shop, Events, Ui};
use support::{data_root, Agent, Broker};

/// A broker serving browser control, with `web-1` claimed.
struct Bench {
    broker: Broker,
    ui: Ui,
    web: Agent,
    _root: tempfile::TempDir,
}

impl std::ops::Deref for Bench {
    type Target = Ui;

    fn deref(&self) -> &Ui {
        &self.ui
    }
}

impl Bench {
    fn start() -> Bench {
        let root = data_root();
        let broker = boot_shop(root.path(), &["browser.snapshot", "browser.click"]);
        let ui = Ui::of(&broker);
        let web = broker.agent("web-1");
        Bench {
            broker,
            ui,
            web,
            _root: root,
        }
    }

    /// Starts an agent's `browser.request` on its own thread.
    fn ask(
        &self,
        action: &str,
        parameters: Value,
    ) -> std::thread::JoinHandle<Result<Value, Refusal>> {
        let web = self.web.clone();
        let action = action.to_owned();
        std::thread::spawn(move || {
            web.call(
                "browser.request",
                json!({"action": action, "parameters": parameters, "timeoutMs": 10_000}),
            )
        })
    }
}

#[test]
fn every_route_needs_the_ui_token() {
    let bench = Bench::start();
    for (method, path) in [
        ("GET", "/pane".to_owned()),
        ("GET", "/fixtures/index.html".to_owned()),
        ("GET", "/api/events?browser=1&clientId=p".to_owned()),
        ("POST", "/api/browser-control/claim".to_owned()),
        ("POST", "/api/browser-control/result".to_owned()),
        ("GET", format!("/pane?token={}", "0".repeat(64))),
    ] {
        let (status, _) = bench.http(method, &path, None, b"{}");
        assert_eq!(status, 401, "{method} {path}");
    }
    let (status, _) = bench.http("GET", "/pane", Some(&"f".repeat(64)), b"");
    assert_eq!(status, 401, "a wrong token");
    let (status, body) = bench.http("GET", &format!("/pane?token={}", bench.token), None, b"");
    assert_eq!(status, 200);
    assert!(
        String::from_utf8_lossy(&body).contains("<html"),
        "the pane is served"
    );
}

#[test]
fn a_wrong_claim_token_matches_nothing_and_the_request_waits_for_the_real_one() {
    let bench = Bench::start();
    let mut pane = bench.listen("pane-1", true);
    let mut other = bench.listen("pane-2", true);
    let asked = bench.ask("snapshot", json!({}));
    let request = pane.next_request();
    assert_eq!(request["type"], json!("browser-control-request"));
    let id = request["properties"]["requestId"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(request["properties"]["action"], json!("snapshot"));
    assert!(request["properties"]["claimBy"].as_str().is_some());
    assert_eq!(other.next_request()["properties"]["requestId"], json!(id));

    let claim = |client: &str| {
        bench.post(
            "/api/browser-control/claim",
            &json!({"requestId": id, "clientId": client}),
        )
    };
    let granted = claim("pane-1");
    assert_eq!(granted["granted"], json!(true));
    let token = granted["claimToken"]
        .as_str()
        .expect("a claim token")
        .to_owned();
    assert_eq!(
        claim("pane-2"),
        json!({"granted": false}),
        "the first claim wins"
    );
    assert_eq!(
        claim("pane-1"),
        json!({"granted": false}),
        "no second grant"
    );
    assert_eq!(
        claim("stranger"),
        json!({"granted": false}),
        "not delivered to it"
    );

    let result = |token: &str, data: Value| {
        bench.post(
            "/api/browser-control/result",
            &json!({"requestId": id, "claimToken": token, "ok": true, "data": data}),
        )
    };
    assert_eq!(
        result(&"a".repeat(64), json!({"forged": true})),
        json!({"matched": false})
    );
    let unknown = json!({"requestId": "0b5f2c1e-3a4d-4e6f-8a9b-0c1d2e3f4a5b", "claimToken": token, "ok": true, "data": {}});
    assert_eq!(
        bench.post("/api/browser-control/result", &unknown),
        json!({"matched": false})
    );
    assert!(!asked.is_finished(), "the request still waits");
    assert_eq!(
        result(&token, json!({"title": "real"})),
        json!({"matched": true})
    );
    assert_eq!(asked.join().expect("agent"), Ok(json!({"title": "real"})));
    assert_eq!(
        result(&token, json!({"late": true})),
        json!({"matched": false}),
        "settled once"
    );
    let (status, body) = bench.http(
        "POST",
        "/api/browser-control/claim",
        Some(&bench.token),
        br#"{"requestId":"x"}"#,
    );
    assert_eq!(
        (status, body),
        (400, br#"{"error":"bad-request"}"#.to_vec())
    );
}

#[test]
fn a_ten_mib_result_is_accepted_and_an_oversized_one_gets_413_then_a_clear_code() {
    let bench = Bench::start();
    let mut pane = bench.listen("pane-1", true);
    let run = |pane: &mut Events| {
        let asked = bench.ask("snapshot", json!({}));
        let id = pane.next_request()["properties"]["requestId"]
            .as_str()
            .expect("id")
            .to_owned();
        let granted = bench.post(
            "/api/browser-control/claim",
            &json!({"requestId": id, "clientId": "pane-1"}),
        );
        (
            asked,
            id,
            granted["claimToken"].as_str().expect("token").to_owned(),
        )
    };

    let (asked, id, token) = run(&mut pane);
    let text = "x".repeat(10 * 1024 * 1024);
    let body = json!({"requestId": id, "claimToken": token, "ok": true, "data": {"text": text}});
    assert_eq!(
        bench.post("/api/browser-control/result", &body),
        json!({"matched": true})
    );
    let stored = asked.join().expect("agent").expect("a stored result");
    let path = stored["stored"]
        .as_str()
        .expect("a large result is stored as a file");
    let saved: Value = serde_json::from_slice(&std::fs::read(path).expect("read")).expect("JSON");
    assert_eq!(saved["text"].as_str().map(str::len), Some(text.len()));
    assert!(path.starts_with(bench.broker.root.to_str().expect("utf-8")));

    let (asked, id, token) = run(&mut pane);
    let huge = "x".repeat(16 * 1024 * 1024);
    let body = json!({"requestId": id, "claimToken": token, "ok": true, "data": huge});
    let (status, _) = bench.http(
        "POST",
        "/api/browser-control/result",
        Some(&bench.token),
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 413);
    assert!(!asked.is_finished(), "a refused body settles nothing");
    let follow_up = json!({"requestId": id, "claimToken": token, "ok": false, "error": "browser-result-too-large"});
    assert_eq!(
        bench.post("/api/browser-control/result", &follow_up),
        json!({"matched": true})
    );
    assert_eq!(
        asked.join().expect("agent"),
        Err(Refusal::BrowserResultTooLarge)
    );
}

#[test]
fn a_timeout_cancels_at_the_claimant_and_reaches_the_agent_with_its_code_and_status() {
    let bench = Bench::start();
    let mut pane = bench.listen("pane-1", true);
    let web = bench.web.clone();
    let asked = std::thread::spawn(move || {
        web.call(
            "browser.request",
            json!({"action": "click", "parameters": {"selector": "#b"}, "timeoutMs": 1000}),
        )
    });
    let id = pane.next_request()["properties"]["requestId"]
        .as_str()
        .expect("id")
        .to_owned();
    let granted = bench.post(
        "/api/browser-control/claim",
        &json!({"requestId": id, "clientId": "pane-1"}),
    );
    assert_eq!(granted["granted"], json!(true));
    assert_eq!(asked.join().expect("agent"), Err(Refusal::BrowserTimeout));
    assert_eq!(
        pane.next_request(),
        json!({"type": "browser-control-cancel", "properties": {"requestId": id}})
    );
    // The agent's raw answer carries the status class too.
    let line = json!({"cap": bench.web.cap, "verb": "browser.request", "args": {"action": "click", "parameters": {"selector": "#b"}, "timeoutMs": 1000}});
    let answer = support::raw(&bench.broker.socket, line.to_string().as_bytes());
    assert_eq!(
        answer,
        json!({"ok": false, "error": "browser-timeout", "status": 504})
    );
}
