//! The network of a sandboxed agent, with the real bwrap, the real `up
//! --stay`, its real proxy and real sockets: outside, on the host's
//! loopback, a service that runs what it is sent (a line makes it write a
//! marker file, standing in for a debugger), and an echo service the proxy
//! may admit (listed by address, the documented exception for loopback).
//! Three agents try to reach both, each reporting what happened:
//!
//! - `"network": "none"`: the service is out of reach;
//! - `"network": "proxy"`: out of reach directly, and the proxy refuses it
//!   by address literal and by a name that resolves to 127.0.0.1, and an
//!   unlisted host; it carries the listed echo service, found through
//!   `HTTPS_PROXY`;
//! - `"network": "host"`: the negative control, which reaches it.
//!
//! Run as root by `cargo test -p mosaic-app --test network`, and
//! unprivileged with the same binary, as `.ci/run` does:
//! `setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp
//! TMPDIR=/tmp target/debug/deps/network-<hash>`. Needs bwrap and python3.
//!
//! Every wait is bounded ([`UP_WAIT`]): for `up`'s first line, for the
//! agents' reports (polled with a short pause) and for `up`'s exit.

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::up::{first_line, private_dir, stop, PYTHON, UP_WAIT};
use support::BIN;

/// The agents: role and network.
const AGENTS: [(&str, &str); 3] = [
    ("offline", "none"),
    ("proxied", "proxy"),
    ("hosted", "host"),
];

/// What each agent tries, written to `report.json` in its workdir (through
/// a rename, so the file is whole when it appears).
const PROBE: &str = r#"
import errno, json, os, socket, sys
role = sys.argv[1]
service, echo = int(os.environ["SERVICE_PORT"]), int(os.environ["ECHO_PORT"])
sys.stdin.readline()
report = {}

def failed(e):
    return "failed:" + errno.errorcode.get(e.errno, str(e.errno)) if e.errno else "failed:" + type(e).__name__

def direct():
    try:
        s = socket.create_connection(("127.0.0.1", service), timeout=10)
        s.sendall((role + "\n").encode())
        return "reached:" + s.makefile().readline().strip()
    except OSError as e:
        return failed(e)

def tunnel(proxy, target, line=None):
    host, port = proxy.removeprefix("http://").rsplit(":", 1)
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
    except OSError as e:
        return failed(e)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    f = s.makefile("rb")
    status = f.readline().decode().strip()
    while f.readline() not in (b"\r\n", b""):
        pass
    if " 200 " in status and line:
        s.sendall((line + "\n").encode())
        return status + " | " + f.readline().decode().strip()
    return status + " | " + f.read().decode().strip()

report["direct"] = direct()
proxy = os.environ.get("HTTPS_PROXY")
report["https_proxy"] = proxy or "unset"
report["no_proxy"] = os.environ.get("NO_PROXY", "unset")
if proxy:
    report["allowed"] = tunnel(proxy, "127.0.0.1:%d" % echo, "hello")
    report["literal"] = tunnel(proxy, "127.0.0.1:%d" % service, role)
    report["localhost"] = tunnel(proxy, "localhost:%d" % service, role)
    report["unlisted"] = tunnel(proxy, "example.com:443")
with open("report.tmp", "w") as out:
    json.dump(report, out)
os.rename("report.tmp", "report.json")
"#;

/// The service that runs what it is sent: for each line, a marker file
/// `ran/<line>` in `work`, then the answer `ran`. Its port.
fn service(work: &Path) -> u16 {
    let ran = work.join("ran");
    std::fs::create_dir(&ran).expect("mkdir ran");
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut out = stream.try_clone().expect("a second handle");
            let mut line = String::new();
            if BufReader::new(stream).read_line(&mut line).is_err() {
                continue;
            }
            let name: String = line
                .trim()
                .chars()
                .filter(char::is_ascii_lowercase)
                .collect();
            std::fs::write(ran.join(name), "ran").expect("the marker");
            let _ = writeln!(out, "ran");
        }
    });
    port
}

/// A service that echoes every line back. Its port.
fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut out = stream.try_clone().expect("a second handle");
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if writeln!(out, "{line}").is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// The configuration: one agent per network, each in a workdir of its own
/// under `work`, the probe in the configuration's folder.
fn config(work: &Path, service: u16, echo: u16) -> PathBuf {
    let dir = work.join("team");
    std::fs::create_dir(&dir).expect("mkdir team");
    let probe = dir.join("probe.py");
    std::fs::write(&probe, PROBE).expect("write the probe");
    let roles: serde_json::Map<String, Value> = AGENTS
        .iter()
        .map(|(role, _)| {
            let authority = json!({"authority": {"withinRole": [], "crossRole": []}});
            ((*role).to_owned(), authority)
        })
        .collect();
    let agents: Vec<Value> = AGENTS
        .iter()
        .map(|(role, network)| {
            let workdir = work.join(role);
            std::fs::create_dir(&workdir).expect("mkdir workdir");
            let mut agent = json!({
                "role": role, "harness": "pi", "network": network,
                "workdir": workdir, "env": ["SERVICE_PORT", "ECHO_PORT"],
                "command": [PYTHON, probe, role],
            });
            if *network == "proxy" {
                // The echo service by address, exactly; the service by
                // name only, which resolves to loopback, not listed.
                agent["allow"] =
                    json!([format!("127.0.0.1:{echo}"), format!("localhost:{service}")]);
            }
            agent
        })
        .collect();
    let config = json!({
        "sandbox": "required",
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "offline", "delivery": "offline"},
                     "roles": roles},
        "agents": agents,
    });
    let path = dir.join("up.json");
    std::fs::write(&path, config.to_string()).expect("write the configuration");
    path
}

/// Each agent's report, once all are written (polled with a short pause,
/// within [`UP_WAIT`]); `None` for one that never came.
fn reports(work: &Path) -> Vec<Option<Value>> {
    let paths: Vec<PathBuf> = AGENTS
        .iter()
        .map(|(role, _)| work.join(role).join("report.json"))
        .collect();
    let deadline = Instant::now() + UP_WAIT;
    while !paths.iter().all(|p| p.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            serde_json::from_str(&text).ok()
        })
        .collect()
}

/// The bridges of this binary still running once every agent's sandbox
/// has had time to end (polled with a short pause, within [`UP_WAIT`]): their
/// pids, seen from outside.
fn bridges_after_the_agents() -> Vec<u32> {
    let bridges = || -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let words: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
                words.len() > 1 && words[0] == BIN.as_bytes() && words[1] == b"sandbox-bridge"
            })
            .collect()
    };
    let deadline = Instant::now() + UP_WAIT;
    loop {
        let left = bridges();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `up`'s log events (its JSON lines; the agents' relayed lines are not).
fn events(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn a_loopback_service_is_out_of_reach_but_with_network_host() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    let service = service(work);
    let echo = echo();
    let config = config(work, service, echo);
    let root = work.join("data");
    let home = work.join("home");
    private_dir(&root);
    private_dir(&home);
    let log_path = work.join("up.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut child = Command::new(BIN)
        .args(["up", "--stay", "--log-format", "json", "--config"])
        .arg(&config)
        .arg("--data-root")
        .arg(&root)
        .env("HOME", &home)
        .env("SERVICE_PORT", service.to_string())
        .env("ECHO_PORT", echo.to_string())
        .env_remove("MOSAIC_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn up");
    let first = first_line(&mut child);
    let reports = reports(work);
    // The agents end once they have reported; the proxied one's bridge
    // ends with its sandbox, while `up` still serves.
    let bridges_left = bridges_after_the_agents();
    let status = stop(child);
    let log = std::fs::read_to_string(&log_path).expect("the log");
    let summary: Value = serde_json::from_str(&first)
        .unwrap_or_else(|e| panic!("a JSON first line: {e}: {first:?}\n{log}"));
    assert_eq!(status.code(), Some(0), "{log}");
    assert_eq!(
        bridges_left,
        Vec::<u32>::new(),
        "bridges outlived their sandbox"
    );
    // The first line says each agent's network, as configured: all three
    // are sandboxed.
    let agents = summary["agents"].as_array().expect("agents");
    for (agent, (role, network)) in agents.iter().zip(AGENTS) {
        assert_eq!(agent["role"], role, "{summary}");
        assert_eq!(agent["network"], network, "{summary}");
        assert_eq!(agent["sandboxed"], true, "{summary}");
    }
    let run = |role: &str| {
        agents
            .iter()
            .find(|a| a["role"] == role)
            .and_then(|a| a["run"].as_str())
            .expect("a run")
            .to_owned()
    };
    let [offline, proxied, hosted] = [0, 1, 2].map(|i| {
        reports[i]
            .clone()
            .unwrap_or_else(|| panic!("{}'s report\n{log}", AGENTS[i].0))
    });
    // Without a network, nothing on the host's loopback, and no proxy.
    assert_eq!(offline["direct"], "failed:ECONNREFUSED", "{offline}");
    assert_eq!(offline["https_proxy"], "unset", "{offline}");
    // Through the proxy: the service is refused three ways, the echo
    // service, listed, is reached.
    assert_eq!(proxied["direct"], "failed:ECONNREFUSED", "{proxied}");
    assert_eq!(proxied["https_proxy"], "http://127.0.0.1:3128", "{proxied}");
    assert_eq!(proxied["no_proxy"], "localhost,127.0.0.1,::1", "{proxied}");
    assert_eq!(
        proxied["allowed"], "HTTP/1.1 200 Connection established | hello",
        "{proxied}"
    );
    for (probe, reason) in [
        ("literal", "address-literal"),
        ("localhost", "private-address"),
        ("unlisted", "not-allowed"),
    ] {
        assert_eq!(
            proxied[probe],
            format!("HTTP/1.1 403 Forbidden | mosaic-bus proxy: {reason}"),
            "{proxied}"
        );
    }
    // The negative control: on the host's network the service ran what
    // it was sent.
    assert_eq!(hosted["direct"], "reached:ran", "{hosted}");
    let ran: Vec<String> = std::fs::read_dir(work.join("ran"))
        .expect("the markers")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(ran, ["hosted"], "only the host's agent reached the service");
    // The log: every refusal with the run, the target and the reason; the
    // carried connection with its bytes; one warning naming the agent on
    // the host's network.
    let events = events(&log);
    let proxied_run = run("proxied");
    let refused: Vec<(String, u64, String)> = events
        .iter()
        .filter(|e| e["message"] == "the proxy refused a connection")
        .map(|e| {
            assert_eq!(e["run"], proxied_run.as_str(), "{e}");
            let host = e["host"].as_str().unwrap_or_default().to_owned();
            let reason = e["reason"].as_str().unwrap_or_default().to_owned();
            (host, e["port"].as_u64().unwrap_or_default(), reason)
        })
        .collect();
    let service = u64::from(service);
    assert_eq!(
        refused,
        [
            (
                "127.0.0.1".to_owned(),
                service,
                "address-literal".to_owned()
            ),
            (
                "localhost".to_owned(),
                service,
                "private-address".to_owned()
            ),
            ("example.com".to_owned(), 443, "not-allowed".to_owned()),
        ],
        "{log}"
    );
    let carried: Vec<&Value> = events
        .iter()
        .filter(|e| e["message"] == "the proxy carried a connection")
        .collect();
    assert_eq!(carried.len(), 1, "{log}");
    assert_eq!(carried[0]["run"], proxied_run.as_str());
    assert_eq!(carried[0]["host"], "127.0.0.1");
    assert_eq!(carried[0]["port"], u64::from(echo));
    // "hello\n" each way.
    assert_eq!(carried[0]["sent"], 6, "{}", carried[0]);
    assert_eq!(carried[0]["received"], 6, "{}", carried[0]);
    let warned: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("these agents have the host's network"))
        })
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert_eq!(warned[0]["agents"], "hosted", "{log}");
    assert!(!run("hosted").is_empty() && !run("offline").is_empty());
}
