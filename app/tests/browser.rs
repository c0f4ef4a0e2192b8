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

use mosaic_domain::browser::{AddressPolicy, AllowedAddress, HttpUrl};
use mosaic_domain::Refusal;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
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
        Bench::start_with(json!({"listen": "127.0.0.1:0"}))
    }

    /// A bench whose broker's browser configuration is `browser`.
    fn start_with(browser: Value) -> Bench {
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
        config["browser"] = browser;
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

    /// How pane `pane` reads each of `urls`: `invalid`, `refused` or
    /// `allowed`.
    fn addresses(&mut self, pane: usize, urls: &[String]) -> Vec<String> {
        self.command(json!({"op": "addresses", "pane": pane, "urls": urls}))["read"]
            .as_array()
            .expect("the readings")
            .iter()
            .map(|r| r.as_str().expect("a reading").to_owned())
            .collect()
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

/// The private addresses the broker's browser configuration names in the
/// address tests.
const ALLOW_PRIVATE: [&str; 4] = [
    "localhost:3000",
    "10.1.2.3:8080",
    "[fd00::1]:9000",
    "127.0.0.2:9",
];

/// URLs in every form of address the rule knows: IPv4 in one to four
/// parts of decimal, octal and hexadecimal, IPv4 inside IPv6 (mapped,
/// translated, compatible, NAT64, 6to4), IPv6 of every kind, `localhost`
/// and names below it, hosts that end in a number and are no address,
/// plain names, with and without ports, including the allowed ones.
fn address_forms() -> impl Strategy<Value = String> {
    let private = prop_oneof![
        Just(0x0a01_0203_u32),
        Just(0x7f00_0001),
        Just(0x7f00_0002),
        Just(0xa9fe_a9fe),
        Just(0xc0a8_0001),
        Just(0xac10_0001),
        Just(0x6440_0001),
        Just(0x0000_0000),
        Just(0xe000_0001),
        any::<u32>(),
    ];
    let radix = prop_oneof![Just(10_u32), Just(8), Just(16)];
    let v4 = (
        private,
        1_usize..=4,
        proptest::collection::vec(radix, 4),
        any::<bool>(),
    )
        .prop_map(|(bits, parts, radixes, dot)| {
            let octets = bits.to_be_bytes();
            let write = |n: u64, radix: u32| match radix {
                8 => format!("0{n:o}"),
                16 => format!("0x{n:x}"),
                _ => n.to_string(),
            };
            let mut written: Vec<String> = (0..parts - 1)
                .map(|i| write(u64::from(octets[i]), radixes[i]))
                .collect();
            let rest = u64::from(bits) & ((1_u64 << (8 * (5 - parts))) - 1);
            written.push(write(rest, radixes[parts - 1]));
            let mut host = written.join(".");
            if dot {
                host.push('.');
            }
            host
        });
    let carried = (any::<u32>(), 0_usize..5).prop_map(|(bits, form)| {
        let v4 = std::net::Ipv4Addr::from(bits);
        let (hi, lo) = ((bits >> 16) as u16, bits as u16);
        match form {
            0 => format!("[::ffff:{v4}]"),
            1 => format!("[::ffff:0:{hi:x}:{lo:x}]"),
            2 => format!("[::{v4}]"),
            3 => format!("[64:ff9b::{hi:x}:{lo:x}]"),
            _ => format!("[2002:{hi:x}:{lo:x}::1]"),
        }
    });
    let v6 = prop_oneof![
        Just("[::]".to_owned()),
        Just("[::1]".to_owned()),
        Just("[fd00::1]".to_owned()),
        Just("[fe80::1]".to_owned()),
        Just("[fec0::1]".to_owned()),
        Just("[ff02::1]".to_owned()),
        Just("[64:ff9b:1::1]".to_owned()),
        Just("[2001:db8::1]".to_owned()),
        any::<[u16; 8]>().prop_map(|s| format!("[{}]", std::net::Ipv6Addr::from(s))),
    ];
    let names = prop_oneof![
        Just("localhost".to_owned()),
        Just("LocalHost.".to_owned()),
        Just("a.b.localhost".to_owned()),
        Just("localhost.example.com".to_owned()),
        Just("example.com".to_owned()),
        Just("nas.lan".to_owned()),
        "[a-z]{1,6}\\.[0-9]{1,4}",
        "[a-z]{1,8}(\\.[a-z]{2,4}){0,2}",
        Just("1.2.3.4.5".to_owned()),
        Just("0x".to_owned()),
        Just("08".to_owned()),
        Just("256.1.1.1".to_owned()),
    ];
    let host = prop_oneof![3 => v4, 2 => carried, 2 => v6, 2 => names];
    let port = prop_oneof![
        Just(None),
        Just(Some(9_u16)),
        Just(Some(3000)),
        Just(Some(8080)),
        Just(Some(9000)),
        (1_u16..).prop_map(Some),
    ];
    (prop_oneof![Just("http"), Just("https")], host, port).prop_map(|(scheme, host, port)| {
        match port {
            Some(port) => format!("{scheme}://{host}:{port}/path"),
            None => format!("{scheme}://{host}/"),
        }
    })
}

/// How the broker reads `url` under its browser configuration.
fn broker_reads(url: &str, policy: &AddressPolicy) -> &'static str {
    match HttpUrl::parse(url) {
        Err(_) => "invalid",
        Ok(url) => match policy.check(&url) {
            Ok(()) => "allowed",
            Err(_) => "refused",
        },
    }
}

/// The pane refuses what the broker refuses: a thousand URLs in every
/// form of address, generated, read by the broker's rule and by the real
/// pane in Chromium (whose URL parser reads each host first), alike.
#[test]
fn the_pane_reads_every_form_of_address_as_the_broker_does() {
    let bench = Bench::start_with(json!({"listen": "127.0.0.1:0", "allowPrivate": ALLOW_PRIVATE}));
    let mut panes = bench.panes(1, &[]);
    let mut policy = AddressPolicy::new(
        ALLOW_PRIVATE
            .iter()
            .map(|a| AllowedAddress::parse(a).expect("an allowed address")),
    );
    let own = bench
        .url
        .strip_prefix("http://")
        .expect("the pane's address");
    policy.allow(AllowedAddress::parse(own).expect("the pane's address"));
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = address_forms();
    let mut urls: Vec<String> = (0..1000)
        .map(|_| strategy.new_tree(&mut runner).expect("a URL").current())
        .collect();
    // The pane's own server, and each allowed address at its port and at
    // another.
    urls.push(bench.fixture("index.html"));
    for allowed in ALLOW_PRIVATE {
        urls.push(format!("http://{allowed}/"));
        urls.push(format!("http://{allowed}1/"));
    }
    let pane = panes.addresses(0, &urls);
    let mut seen = std::collections::BTreeMap::new();
    for (url, pane) in urls.iter().zip(&pane) {
        let broker = broker_reads(url, &policy);
        assert_eq!(broker, pane, "{url}");
        *seen.entry(broker).or_insert(0) += 1;
    }
    assert_eq!(pane.len(), urls.len());
    eprintln!("the readings of {} URLs: {seen:?}", urls.len());
    // Each reading came up, many times.
    for reading in ["invalid", "refused", "allowed"] {
        assert!(seen.get(reading).is_some_and(|n| *n >= 20), "{seen:?}");
    }
}

/// `browser.open` to a private address is refused by the broker before
/// any pane hears of it, in every form; a private address the
/// configuration names is opened. A navigation a click or a form would
/// cause, to a private address, is refused by the pane itself, which
/// stays where it was; a link to the named one is followed.
#[test]
fn the_human_browser_goes_to_no_private_address_the_configuration_does_not_name() {
    let bench = Bench::start_with(json!({"listen": "127.0.0.1:0", "allowPrivate": ALLOW_PRIVATE}));
    let mut panes = bench.panes(1, &[]);
    for url in [
        "http://127.0.0.1:9/",
        "http://2130706433:9/",
        "http://0x7f.1:9/",
        "http://0177.0.0.1:9/",
        "http://[::ffff:127.0.0.1]:9/",
        "http://[::1]:9/",
        "http://localhost:9/",
        "http://a.localhost./",
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]/",
        "http://0.0.0.0:9/",
        "http://localhost:3001/",
    ] {
        assert_eq!(
            bench.browse("open", json!({"url": url})),
            Err(Refusal::BrowserAddressRefused),
            "{url}"
        );
    }
    assert!(
        !panes.log(0).iter().any(|e| e == "request"),
        "no pane heard of a refused open"
    );
    // Named: the pane goes there (nothing listens there, so it says the
    // navigation failed, but it was not refused).
    let opened = bench.browse("open", json!({"url": "http://127.0.0.2:9/"}));
    assert_ne!(opened, Err(Refusal::BrowserAddressRefused));
    assert!(panes.log(0).iter().any(|e| e == "request"));

    bench.ok("open", json!({"url": bench.fixture("private.html")}));
    let before = panes.frame(0, "url");
    for link in ["#lan", "#mapped", "#hex", "#local", "#metadata"] {
        assert_eq!(
            bench.browse("click", json!({"selector": link})),
            Err(Refusal::BrowserAddressRefused),
            "{link}"
        );
        assert_eq!(panes.frame(0, "url"), before, "the view stayed ({link})");
    }
    assert_eq!(
        bench.browse(
            "type",
            json!({"selector": "#q", "value": "x", "submit": true})
        ),
        Err(Refusal::BrowserAddressRefused)
    );
    assert_eq!(panes.frame(0, "url"), before, "the view stayed (the form)");
    assert!(
        panes
            .log(0)
            .iter()
            .filter(|e| *e == "navigation-refused")
            .count()
            >= 6,
        "the pane logged each refusal"
    );
    // The control: the link to the named address is followed.
    let refused = panes
        .log(0)
        .iter()
        .filter(|e| *e == "navigation-refused")
        .count();
    bench.ok("click", json!({"selector": "#allowed"}));
    let after = panes
        .log(0)
        .iter()
        .filter(|e| *e == "navigation-refused")
        .count();
    assert_eq!(after, refused, "nothing more was refused");
}
