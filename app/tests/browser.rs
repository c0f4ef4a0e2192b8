//! Browser control end to end: the real broker booted with
//! `browser.listen`, panes at `/pane` in headless Chromium (driven by
//! `web/tests/panes.mjs` through playwright-core), and agents calling
//! `browser.request` over the socket. Each result is checked against the
//! fixture page it acted on.
//!
//! Needs `/usr/bin/chromium` (or `$CHROMIUM`) and `web/node_modules`
//! (`npm ci` in `web/`); `.ci/run` installs both.

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mosaic_domain::Refusal;
use serde_json::{json, Value};

use support::{config, data_root, launch, Agent, Broker, WAIT};

const ACTIONS: [&str; 10] = [
    "browser.open",
    "browser.snapshot",
    "browser.click",
    "browser.type",
    "browser.scroll",
    "browser.back",
    "browser.forward",
    "browser.inspect",
    "browser.capture",
    "browser.resize",
];

/// `shop`: `web` may use the browser; `ops` may not.
fn shop() -> Value {
    json!({
        "id": "shop",
        "human": "alice",
        "arbiters": {"technical": "web", "delivery": "web"},
        "roles": {
            "web": {"authority": {"withinRole": ACTIONS, "crossRole": []}},
            "ops": {"authority": {"withinRole": [], "crossRole": []}}
        }
    })
}

/// A broker serving browser control, with `web-1` and `ops-1` claimed.
struct Bench {
    broker: Broker,
    url: String,
    token: String,
    web: Agent,
    ops: Agent,
    /// `web-1`'s capability in a private file, for `mosaic-bus call`.
    cap_file: PathBuf,
    _root: tempfile::TempDir,
}

impl Bench {
    fn start() -> Bench {
        let root = data_root();
        let mut config = config(
            root.path(),
            &[shop()],
            &[
                launch("shop", "web", "web-1"),
                launch("shop", "ops", "ops-1"),
            ],
            &[],
        );
        config["browser"] = json!({"listen": "127.0.0.1:0"});
        let broker = Broker::boot(root.path(), &config);
        let browser = &broker.boot["browser"];
        let url = browser["url"].as_str().expect("a browser url").to_owned();
        let token = browser["token"].as_str().expect("a UI token").to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let web = broker.agent("web-1");
        let ops = broker.agent("ops-1");
        web.claim();
        ops.claim();
        let cap_file = root.path().join("web.cap");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&cap_file)
            .expect("cap file");
        writeln!(file, "{}", web.cap).expect("write cap");
        Bench {
            broker,
            url,
            token,
            web,
            ops,
            cap_file,
            _root: root,
        }
    }

    /// A fixture page's URL, carrying the UI token.
    fn fixture(&self, name: &str) -> String {
        format!("{}/fixtures/{name}?token={}", self.url, self.token)
    }

    fn panes(&self, count: usize, extra: &[&str]) -> Panes {
        Panes::start(&self.url, &self.token, count, extra)
    }

    /// `mosaic-bus call browser.request …` as `web-1`, as an agent's shell
    /// would run it.
    fn browse(&self, action: &str, parameters: Value) -> Result<Value, Refusal> {
        self.browse_within(action, parameters, 15_000)
    }

    /// [`Bench::browse`] with its own `timeoutMs`, for an action whose
    /// page work is slow on a loaded machine.
    fn browse_within(
        &self,
        action: &str,
        parameters: Value,
        timeout_ms: u64,
    ) -> Result<Value, Refusal> {
        let args = json!({"action": action, "parameters": parameters, "timeoutMs": timeout_ms});
        let out = Command::new(support::BIN)
            .args(["call", "browser.request", &args.to_string(), "--socket"])
            .arg(&self.broker.socket)
            .arg("--cap-file")
            .arg(&self.cap_file)
            .output()
            .expect("mosaic-bus call");
        let answer: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
        match (out.status.code(), answer["ok"].as_bool()) {
            (Some(0), Some(true)) => Ok(answer["result"].clone()),
            (Some(1), Some(false)) => {
                let code = answer["error"].as_str().unwrap_or_default();
                Err(Refusal::from_code(code).unwrap_or_else(|| panic!("a code: {answer}")))
            }
            other => panic!("call exited {other:?}: {answer}"),
        }
    }

    #[track_caller]
    fn ok(&self, action: &str, parameters: Value) -> Value {
        self.browse(action, parameters.clone()).unwrap_or_else(|r| {
            panic!(
                "{action} {parameters}: {r}; stderr: {}",
                self.broker.stderr()
            )
        })
    }
}

/// `web/tests/panes.mjs`: panes in headless Chromium, one command per line.
struct Panes {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../web")
}

impl Panes {
    fn start(url: &str, token: &str, count: usize, extra: &[&str]) -> Panes {
        let mut child = Command::new("node")
            .arg(web_dir().join("tests/panes.mjs"))
            .args([
                "--url",
                url,
                "--token",
                token,
                "--panes",
                &count.to_string(),
            ])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node runs web/tests/panes.mjs (is Node installed?)");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take().expect("stdin");
        let mut panes = Panes {
            child,
            stdin,
            lines,
        };
        let ready = panes.next();
        assert_eq!(
            ready,
            json!({"ready": true, "panes": count}),
            "the panes start"
        );
        panes
    }

    fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a line from the pane driver");
        serde_json::from_str(&line).expect("JSON from the pane driver")
    }

    fn command(&mut self, command: Value) -> Value {
        writeln!(self.stdin, "{command}").expect("write to the pane driver");
        let reply = self.next();
        assert_eq!(reply["ok"], json!(true), "{command}: {reply}");
        reply
    }

    /// A fixed reading of pane `i`'s framed page.
    fn frame(&mut self, pane: usize, expr: &str) -> Value {
        self.command(json!({"op": "frame", "pane": pane, "expr": expr}))["value"].clone()
    }

    fn log(&mut self, pane: usize) -> Vec<String> {
        self.command(json!({"op": "log", "pane": pane}))["log"]
            .as_array()
            .expect("a log")
            .iter()
            .map(|e| e["event"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn close(&mut self, pane: usize) {
        self.command(json!({"op": "close", "pane": pane}));
    }
}

impl Drop for Panes {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, r#"{{"op":"quit"}}"#);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `check` holds, for readings that settle after an action
/// (a navigation the pane reported, a closed page the server must notice).
#[track_caller]
fn eventually(mut check: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_action_acts_on_the_fixture_page_in_real_chromium() {
    let bench = Bench::start();
    let mut panes = bench.panes(1, &[]);

    let opened = bench.ok("open", json!({"url": bench.fixture("index.html")}));
    assert_eq!(opened["title"], json!("Mosaic fixture: index"), "{opened}");

    let snapshot = bench.ok("snapshot", json!({}));
    assert_eq!(snapshot["title"], json!("Mosaic fixture: index"));
    assert!(snapshot["url"]
        .as_str()
        .unwrap_or_default()
        .contains("/fixtures/index.html"));
    assert_eq!(snapshot["textTruncated"], json!(false));
    let elements = snapshot["elements"].as_array().expect("elements");
    assert!(!elements.is_empty(), "{snapshot}");
    for element in elements {
        let selector = element["selector"].as_str().expect("a selector");
        let bounds = &element["bounds"];
        assert!(
            !selector.is_empty() && bounds["width"].is_number(),
            "{element}"
        );
        // Every selector the snapshot gives resolves back through inspect.
        let inspected = bench.ok("inspect", json!({"selector": selector}));
        assert_eq!(inspected["selector"], json!(selector));
    }

    bench.ok("open", json!({"url": bench.fixture("clicks.html")}));
    let clicked = bench.ok("click", json!({"selector": "#count-button"}));
    assert_eq!(clicked["clicked"], json!("#count-button"));
    assert_eq!(panes.frame(0, "count"), json!(1));
    bench.ok("click", json!({"text": "Count me"}));
    assert_eq!(panes.frame(0, "count"), json!(2));

    bench.ok("open", json!({"url": bench.fixture("form.html")}));
    let typed = bench.ok(
        "type",
        json!({"selector": "#name", "value": "Ada Lovelace", "submit": true}),
    );
    assert_eq!(typed["typed"], json!("#name"));
    assert_eq!(panes.frame(0, "submitted"), json!("Ada Lovelace"));

    bench.ok("open", json!({"url": bench.fixture("long.html")}));
    let scrolled = bench.ok("scroll", json!({"direction": "bottom"}));
    assert!(
        scrolled["scrollY"].as_f64().unwrap_or_default() > 0.0,
        "{scrolled}"
    );
    assert_eq!(panes.frame(0, "scrollY"), scrolled["scrollY"]);

    let back = bench.ok("back", json!({}));
    assert!(
        back["url"]
            .as_str()
            .unwrap_or_default()
            .contains("/fixtures/form.html"),
        "{back}"
    );
    eventually(
        || {
            panes
                .frame(0, "url")
                .as_str()
                .unwrap_or_default()
                .contains("form.html")
        },
        "the view to be back on form.html",
    );

    let capture = bench.ok("capture", json!({"label": "form"}));
    let path = PathBuf::from(capture["path"].as_str().expect("a stored capture's path"));
    let image = std::fs::read(&path).expect("the capture is stored under the data root");
    assert!(path.starts_with(&bench.broker.root), "{}", path.display());
    assert_eq!(capture["bytes"], json!(image.len()));
    assert_eq!(capture["label"], json!("form"));
    assert!(
        capture.get("data").is_none(),
        "the agent gets a path, not the bytes"
    );
    if capture["mime"] == "image/png" {
        assert_eq!(&image[..8], b"\x89PNG\r\n\x1a\n");
    } else {
        assert_eq!(capture["mime"], json!("image/svg+xml"));
    }

    // The trail records each outcome with a digest, never the payload.
    let trail = bench.web.trail("web");
    let completed: Vec<&Value> = trail
        .iter()
        .filter(|r| r["event"] == "browser.completed")
        .collect();
    let requests = 11 + elements.len();
    assert_eq!(
        completed.len(),
        requests,
        "one record per request: {trail:?}"
    );
    assert!(completed
        .iter()
        .all(|r| r["body"]["sha256"].as_str().is_some_and(|d| d.len() == 64)));
    assert!(!trail.iter().any(|r| r.to_string().contains("Ada Lovelace")));
    let allowed: i64 = support::open_db(&bench.broker.root)
        .query_row(
            "SELECT count(*) FROM actions_allowed WHERE action GLOB 'browser.*' AND run = 'web-1'",
            [],
            |row| row.get(0),
        )
        .expect("count");
    assert_eq!(
        allowed,
        i64::try_from(requests).expect("small"),
        "each was authorized first"
    );
}

#[test]
fn two_panes_race_and_exactly_one_clicks() {
    let bench = Bench::start();
    let mut panes = bench.panes(2, &["--src", "/fixtures/clicks.html"]);
    for pane in 0..2 {
        eventually(
            || panes.frame(pane, "count") == json!(0),
            "both panes showing the click counter",
        );
    }
    bench.ok("click", json!({"selector": "#count-button"}));
    let counts: Vec<i64> = (0..2)
        .map(|pane| panes.frame(pane, "count").as_i64().expect("a count"))
        .collect();
    assert_eq!(
        counts.iter().sum::<i64>(),
        1,
        "exactly one pane clicked: {counts:?}"
    );
    let refused: usize = (0..2)
        .map(|pane| {
            panes
                .log(pane)
                .iter()
                .filter(|e| *e == "claim-refused")
                .count()
        })
        .sum();
    assert_eq!(refused, 1, "the other pane's claim was refused");
}

#[test]
fn a_pane_closed_after_claiming_times_out_never_succeeds() {
    let bench = Bench::start();
    let mut panes = bench.panes(1, &["--delay-ms", "60000"]);
    let agent = bench.web.clone();
    let asked = std::thread::spawn(move || {
        agent.call(
            "browser.request",
            json!({"action": "snapshot", "parameters": {}, "timeoutMs": 1500}),
        )
    });
    eventually(
        || panes.log(0).iter().any(|e| e == "claimed"),
        "the pane to claim",
    );
    panes.close(0);
    assert_eq!(asked.join().expect("agent"), Err(Refusal::BrowserTimeout));
}

#[test]
fn an_aborted_request_is_cancelled_at_the_pane_which_does_not_act() {
    let bench = Bench::start();
    let mut panes = bench.panes(1, &["--delay-ms", "1500", "--src", "/fixtures/clicks.html"]);
    eventually(|| panes.frame(0, "count") == json!(0), "the click counter");
    let line = json!({
        "cap": bench.web.cap,
        "verb": "browser.request",
        "args": {"action": "click", "parameters": {"selector": "#count-button"}},
    })
    .to_string();
    let mut socket =
        std::os::unix::net::UnixStream::connect(&bench.broker.socket).expect("connect");
    socket
        .write_all(format!("{line}\n").as_bytes())
        .expect("send");
    eventually(
        || panes.log(0).iter().any(|e| e == "claimed"),
        "the pane to claim",
    );
    // The agent goes away before the reply: its request is aborted.
    drop(socket);
    eventually(
        || panes.log(0).iter().any(|e| e == "cancelled"),
        "the cancel to reach the pane",
    );
    // The pane waits out the same delay before every action, so once a
    // later request is answered the cancelled one's moment has passed.
    bench.ok("snapshot", json!({}));
    assert_eq!(panes.frame(0, "count"), json!(0), "the pane did not click");
    let performed = panes.log(0).iter().filter(|e| *e == "performed").count();
    assert_eq!(performed, 1, "only the later snapshot was performed");
    let trail = bench.web.trail("web");
    assert!(
        trail
            .iter()
            .any(|r| r["event"] == "browser.completed" && r["body"]["code"] == "browser-aborted"),
        "{trail:?}"
    );
}

#[test]
fn nobody_connected_is_refused_at_once_with_its_status_and_a_sentence() {
    let bench = Bench::start();
    let line = json!({"cap": bench.web.cap, "verb": "browser.request",
               "args": {"action": "snapshot", "timeoutMs": 120_000}})
    .to_string();
    let started = Instant::now();
    let answer = support::raw(&bench.broker.socket, line.as_bytes());
    let took = started.elapsed();
    assert_eq!(answer["error"], json!("no-browser-client"));
    assert_eq!(answer["status"], json!(503));
    assert!(
        answer["message"]
            .as_str()
            .unwrap_or_default()
            .contains("0 client(s)"),
        "{answer}"
    );
    // At once: not after the request's two minutes. How fast "at once" is
    // belongs to the benchmarks, not to a test on a loaded machine.
    assert!(took < Duration::from_secs(10), "answered in {took:?}");
    // `mosaic-bus call` shows the broker's line whole, status and sentence.
    let out = Command::new(support::BIN)
        .args([
            "call",
            "browser.request",
            r#"{"action":"back"}"#,
            "--socket",
        ])
        .arg(&bench.broker.socket)
        .arg("--cap-file")
        .arg(&bench.cap_file)
        .output()
        .expect("call");
    let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        (&printed["error"], &printed["status"]),
        (&json!("no-browser-client"), &json!(503))
    );
    assert!(printed["message"].is_string(), "{printed}");
    // A display-only client cannot serve a click either.
    let _display = bench.panes(1, &["--capable", "0"]);
    assert_eq!(
        bench.browse("click", json!({"selector": "#x"})),
        Err(Refusal::NoBrowserClient)
    );
    // And a role without browser authority is refused before anything is emitted.
    assert_eq!(
        bench
            .ops
            .call("browser.request", json!({"action": "snapshot"})),
        Err(Refusal::NotAuthorized)
    );
    let verb: String = support::open_db(&bench.broker.root)
        .query_row(
            "SELECT verb FROM refusals WHERE run = 'ops-1' AND code = 'not-authorized'",
            [],
            |row| row.get(0),
        )
        .expect("the refusal is recorded");
    assert_eq!(verb, "browser.request", "under the verb the agent sent");
    assert_eq!(
        bench.browse("open", json!({"url": "javascript:alert(1)"})),
        Err(Refusal::BadParameters)
    );
}

#[test]
fn a_large_capture_is_accepted_and_an_oversized_one_ends_in_a_clear_code() {
    let bench = Bench::start();
    let _panes = bench.panes(1, &[]);
    bench.ok("open", json!({"url": bench.fixture("noise.html")}));
    // About 13 MB of base64 PNG: over 10 MiB, under the 16 MiB limit.
    bench.ok(
        "resize",
        json!({"viewport": {"width": 1700, "height": 1700}}),
    );
    let capture = bench.ok("capture", json!({}));
    let bytes = capture["bytes"].as_u64().expect("a size");
    assert!(bytes > 7 * 1024 * 1024, "a large capture: {capture}");
    assert_eq!(
        std::fs::metadata(capture["path"].as_str().expect("path"))
            .map(|m| m.len())
            .ok(),
        Some(bytes)
    );
    // About 26 MB: the result route answers 413, and the pane follows up
    // with a small error, so the agent hears a code, not a timeout. On a
    // loaded machine Chromium's capture of this page alone can take longer
    // than 15 s, so this one action gets the longest wait there is.
    bench.ok(
        "resize",
        json!({"viewport": {"width": 2400, "height": 2400}}),
    );
    assert_eq!(
        bench.browse_within("capture", json!({}), 120_000),
        Err(Refusal::BrowserResultTooLarge)
    );
}
