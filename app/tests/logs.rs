//! The broker's logs from outside: a real `mosaic-bus broker` child at the
//! most detailed level (`MOSAIC_LOG=trace`), holding a service token
//! and serving browser control, driven through successes and refusals.
//! Its stderr says what happened (boot, every request with its code, the
//! refused binding, the close) and never holds a secret: no capability it
//! issued, no UI token, no claim token, no service token, no message body.
//!
//! The storage failure's log line is tested with the faults that cause it
//! (`app/tests/faults.rs`).

#[path = "support/mod.rs"]
mod support;

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

use serde_json::{json, Value};

use support::pane::Ui;
use support::{boot_line, config, data_root, is_cap, launch, raw, raw_refused, Broker};

/// The service token the broker loads.
const GITEA: &str = "gitea-0123456789abcdefXYZ~._";
/// A message body: the log may say a message was sent, never what it said.
const BODY: &str = "the-body-of-a-message-31c7e0";

/// `shop`: `web` may send messages and use the browser within its role;
/// `dev` holds a Gitea token in a private file.
fn shop(gitea_file: &str) -> Value {
    json!({
        "id": "shop", "human": "alice",
        "arbiters": {"technical": "web", "delivery": "web"},
        "roles": {
            "web": {"authority": {"withinRole": ["message.send", "browser.snapshot"], "crossRole": []}},
            "dev": {"authority": {"withinRole": ["message.send"], "crossRole": []},
                    "credentials": {"gitea": {"file": gitea_file}}}
        }
    })
}

#[test]
fn a_whole_run_at_trace_logs_what_happened_and_never_a_secret_or_a_body() {
    let root = data_root();
    let secrets = tempfile::Builder::new()
        .prefix("mosaic-log-secrets-")
        .tempdir()
        .expect("a folder for the token");
    std::fs::set_permissions(secrets.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let token_file = secrets.path().join("gitea");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&token_file)
        .expect("the token file");
    std::io::Write::write_all(&mut file, GITEA.as_bytes()).expect("write the token");
    drop(file);

    let launches = [
        launch("shop", "web", "web-1"),
        launch("shop", "dev", "dev-1"),
    ];
    let business = shop(token_file.to_str().expect("UTF-8"));
    let mut cfg = config(root.path(), &[business], &launches, &["shop"]);
    cfg["browser"] = json!({"listen": "127.0.0.1:0"});
    let mut broker = Broker::spawn_with_env(root.path(), &[("MOSAIC_LOG", "trace")]);
    let boot = broker.host(&boot_line(&cfg));
    assert_eq!(boot["ok"], json!(true), "{boot}");
    broker.socket = boot["path"].as_str().expect("the socket").into();
    broker.boot = boot.clone();

    // Every secret of the run, as it is issued.
    let mut issued: Vec<String> = ["launches", "readers"]
        .iter()
        .flat_map(|list| boot[list].as_array().cloned().unwrap_or_default())
        .map(|entry| entry["cap"].as_str().expect("a cap").to_owned())
        .collect();
    let ui = Ui::of(&broker);
    issued.push(ui.token.clone());

    let (web, dev, reader) = (
        broker.agent("web-1"),
        broker.agent("dev-1"),
        broker.reader(0),
    );
    web.claim();
    dev.claim();
    web.send("dev", BODY, json!({}));
    let received = dev.ok("message.receive", json!({}));
    assert_eq!(received[0]["body"], json!(BODY), "{received}");
    reader.ok("inbox", json!({}));
    // Refusals: a capability nobody issued, a line holding the token, an
    // unknown verb, a binding of a process that does not match its record.
    let forged = "0".repeat(64);
    raw_refused(
        &broker.socket,
        json!({"cap": forged, "verb": "inbox", "args": {}})
            .to_string()
            .as_bytes(),
        "bad-capability",
    );
    let leak = json!({"cap": web.cap, "verb": "message.send",
                      "args": {"to": "dev", "body": format!("see {GITEA}")}});
    raw_refused(
        &broker.socket,
        leak.to_string().as_bytes(),
        "credential-leak",
    );
    web.refused("no.such.verb", json!({}), "unknown-verb");
    let mut mismatched = launch("shop", "dev", "dev-9");
    mismatched["startTime"] = json!(support::start_time() + 1);
    assert_eq!(
        broker.bind_launch(&mismatched),
        json!({"ok": false, "error": "launch-start-mismatch"})
    );
    let dev2 = broker.bind_ok(&launch("shop", "dev", "dev-2"));
    issued.push(dev2.cap.clone());

    // Browser control: a pane claims a request (a claim token is issued),
    // a result with a wrong token is not matched, the right one is; a
    // request with a wrong UI token is refused.
    let mut pane = ui.listen("pane-1", true);
    let asking = {
        let web = web.clone();
        std::thread::spawn(move || {
            web.call(
                "browser.request",
                json!({"action": "snapshot", "parameters": {}, "timeoutMs": 10_000}),
            )
        })
    };
    let request = pane.next_request();
    let id = request["properties"]["requestId"].clone();
    let claim = ui.post(
        "/api/browser-control/claim",
        &json!({"requestId": id, "clientId": "pane-1"}),
    );
    let claim_token = claim["claimToken"]
        .as_str()
        .expect("a claim token")
        .to_owned();
    issued.push(claim_token.clone());
    let wrong = json!({"requestId": id, "claimToken": "f".repeat(claim_token.len()), "ok": true, "data": {}});
    assert_eq!(
        ui.post("/api/browser-control/result", &wrong),
        json!({"matched": false})
    );
    let result =
        json!({"requestId": id, "claimToken": claim_token, "ok": true, "data": {"title": "t"}});
    assert_eq!(
        ui.post("/api/browser-control/result", &result),
        json!({"matched": true})
    );
    assert_eq!(asking.join().expect("the agent"), Ok(json!({"title": "t"})));
    let (status, _) = ui.http("GET", "/pane", Some(&"e".repeat(64)), b"");
    assert_eq!(status, 401);
    // The broker answered everything: a last request shows it still runs.
    assert_eq!(raw(&broker.socket, b"{}")["ok"], json!(false));

    let log = broker.close();
    // What happened is there, named by codes and ids.
    let lines: Vec<&str> = log.lines().collect();
    let has = |parts: &[&str]| lines.iter().any(|l| parts.iter().all(|p| l.contains(p)));
    for parts in [
        &[
            "INFO",
            "broker serving",
            "launches=2",
            "readers=1",
            "browser=\"http://127.0.0.1:",
        ][..],
        &[
            "DEBUG",
            "request",
            "verb=\"message.send\"",
            "caller=\"agent\"",
            "code=\"ok\"",
            "micros=",
        ],
        &[
            "DEBUG",
            "request",
            "verb=\"inbox\"",
            "caller=\"reader\"",
            "code=\"ok\"",
        ],
        &["DEBUG", "request", "code=\"bad-capability\""],
        &[
            "DEBUG",
            "request",
            "verb=\"message.send\"",
            "code=\"credential-leak\"",
        ],
        &["DEBUG", "request", "code=\"unknown-verb\""],
        &[
            "DEBUG",
            "request",
            "verb=\"browser.request\"",
            "code=\"ok\"",
        ],
        &[
            "WARN",
            "bindLaunch refused",
            "code=\"launch-start-mismatch\"",
            "run=\"dev-9\"",
        ],
        &["INFO", "launch bound", "run=\"dev-2\""],
        &["INFO", "the host asked to close"],
        &["INFO", "broker closed"],
    ] {
        assert!(has(parts), "no line with {parts:?} in\n{log}");
    }
    // And nothing secret is.
    assert!(issued
        .iter()
        .all(|secret| is_cap(secret) || secret.len() >= 32));
    for secret in issued.iter().map(String::as_str).chain([GITEA, BODY]) {
        assert!(!log.contains(secret), "{secret:?} is in the log:\n{log}");
    }
    // Nor any other 64-hex string that could be one.
    for word in log.split(|c: char| !c.is_ascii_hexdigit()) {
        assert!(!is_cap(word), "{word:?} in the log");
    }
}

/// The human CLI from outside, detached from this test: its answer line.
fn human(socket: &std::path::Path, verb: &str, args: Value) -> support::detached::Outcome {
    let mut command = support::detached::detached();
    command.arg(support::BIN).arg("human").arg(socket);
    let request = json!({"business": "acme", "verb": verb, "args": args});
    support::detached::Pending::start(&mut command).finish(format!("{request}\n").as_bytes())
}

/// A broker whose stderr is a pipe nobody reads any more (every write
/// fails with `EPIPE`), logging at trace, so that every request writes a
/// line: the lines are dropped, never a panic. The human's
/// `launch.revoke` and `message.send` are answered `ok`, an agent is
/// served, the close exits 0 leaving neither socket nor lock, and
/// `verify` passes on the store.
#[test]
fn a_broker_whose_stderr_is_a_closed_pipe_serves_the_human_and_closes_cleanly() {
    let root = data_root();
    let (unread, stderr) = std::io::pipe().expect("a pipe");
    drop(unread);
    let config = config(
        root.path(),
        &[support::acme()],
        &support::acme_launches(),
        &["acme"],
    );
    let broker = Broker::boot_with_stderr(
        root.path(),
        &config,
        &[("MOSAIC_LOG", "trace")],
        stderr.into(),
    );
    let lead = broker.agent("lead-1");
    lead.claim();
    let sent = lead.send("human", "written while the log is lost", json!({}));
    assert!(sent.is_string(), "{sent}");

    let revoked = human(&broker.socket, "launch.revoke", json!({}));
    assert_eq!(revoked.ok(), json!({}));
    let sent = human(
        &broker.socket,
        "message.send",
        json!({"to": "lead", "body": "the human, without a log"}),
    )
    .ok();
    assert!(sent["id"].is_string(), "{sent}");
    // The agent is still served after the human's writes.
    let inbox = lead.ok("inbox", json!({}));
    assert!(
        inbox.to_string().contains("the human, without a log"),
        "{inbox}"
    );

    broker.close();
    let verify = std::process::Command::new(support::BIN)
        .args(["verify", "--db"])
        .arg(root.path().join("bus/bus.sqlite"))
        .output()
        .expect("mosaic-bus verify");
    assert!(
        verify.status.success(),
        "verify: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
}
