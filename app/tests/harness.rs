//! The real harnesses, pinned in `tests/package-lock.json` and installed
//! by `.ci/harness-deps` into `tests/node_modules`: Claude Code and pi,
//! each against a real broker, with the scripted model of
//! `support/model.rs` in place of Anthropic's API. Outside `up`: these
//! tests pin what a launch must pass (the permission flag, the
//! capability's file, pi's RPC mode) so that the bus's tools work.
//!
//! Nothing sleeps to synchronise: the tests wait on lines of the
//! harness's event stream and on the requests the model records, each
//! bounded by [`START`] (node programs start in 1–3 s; a loaded 2-core
//! machine gets ten times that).

#[path = "support/mod.rs"]
mod support;

#[path = "support/model.rs"]
mod model;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use model::{Model, Request, Step};
use mosaic_domain::{CallerKind, Verb};
use serde_json::{json, Value};
use support::{acme, config, data_root, launch, Broker, BIN};

/// The bound on each wait for a harness: starting, answering, exiting.
const START: Duration = Duration::from_secs(60);

/// The installed program `name` (`claude`, `pi`): the test fails, not
/// skips, when `.ci/harness-deps` has not installed it.
fn program(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run .ci/harness-deps (npm ci in tests/)",
        path.display()
    );
    path
}

/// The agent verbs, from the verb table.
fn agent_verbs() -> Vec<&'static str> {
    Verb::ALL
        .iter()
        .filter(|v| v.serves(CallerKind::Agent))
        .map(|v| v.as_str())
        .collect()
}

/// A broker of acme with runs `lead-1` and `dev-1`.
fn broker(root: &Path) -> Broker {
    let launches = [
        launch("acme", "lead", "lead-1"),
        launch("acme", "dev", "dev-1"),
    ];
    Broker::boot(root, &config(root, &[acme()], &launches, &[]))
}

/// `run`'s capability in a private file (0600) of `dir`.
fn cap_file(broker: &Broker, run: &str, dir: &Path) -> PathBuf {
    let path = dir.join(format!("{run}.cap"));
    std::fs::write(&path, format!("{}\n", broker.cap(run))).expect("write the cap");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

/// A harness process whose standard output lines arrive on a channel.
struct Harness {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every line so far.
    seen: Vec<String>,
    stdin: Option<ChildStdin>,
    /// When it was started, for the figures in docs/performance.md.
    started: Instant,
}

impl Harness {
    fn start(mut command: Command) -> Harness {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the harness");
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
        let stdin = child.stdin.take();
        Harness {
            started: Instant::now(),
            child,
            lines,
            seen: Vec::new(),
            stdin,
        }
    }

    /// The first event (a JSON line) that `matches`, within [`START`].
    #[track_caller]
    fn event(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + START;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no {what} within {START:?}; the stream:\n{}",
                    self.seen.join("\n")
                )
            });
            self.seen.push(line.clone());
            if let Ok(event) = serde_json::from_str::<Value>(&line) {
                if matches(&event) {
                    return event;
                }
            }
        }
    }

    /// Its exit status, within [`START`]; killed and failed otherwise.
    #[track_caller]
    fn exit(mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + START;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("still running after {START:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Prints a figure for docs/performance.md (`-- --nocapture`): the
/// harness's peak RSS so far (VmHWM, the process itself, not its
/// children) and how long after its start `what` happened.
fn measure(harness: &Harness, what: &str) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", harness.child.id()));
    let hwm = status
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .unwrap_or_default();
    eprintln!(
        "measure: {what} {} ms after the start; {hwm}",
        harness.started.elapsed().as_millis()
    );
}

impl Drop for Harness {
    fn drop(&mut self) {
        // A failed test leaves no harness behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Claude Code with the bus as its MCP server (`mosaic-bus mcp
/// --cap-file FILE`), the model at `model` with `key`, allowed the bus's
/// tools when `allow`.
fn claude(
    model: &Model,
    key: &str,
    socket: &Path,
    cap: &Path,
    home: &Path,
    allow: bool,
) -> Harness {
    let mcp = home.join("mcp.json");
    let servers = json!({"mcpServers": {"mosaic-bus": {
        "type": "stdio",
        "command": BIN,
        "args": ["mcp", "--socket", socket, "--cap-file", cap],
    }}});
    std::fs::write(&mcp, servers.to_string()).expect("write mcp.json");
    let config_dir = home.join("claude");
    std::fs::create_dir_all(&config_dir).expect("mkdir");
    let mut command = Command::new(program("claude"));
    command
        .args(["-p", "Claim your role, then read your inbox."])
        .args([
            "--output-format",
            "stream-json",
            "--verbose",
            "--strict-mcp-config",
        ])
        .arg(format!("--mcp-config={}", mcp.display()))
        .current_dir(home)
        .env("HOME", home)
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", key)
        .env("CLAUDE_CONFIG_DIR", &config_dir)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        // The bus's tools in the request with their schemas, not deferred
        // behind ToolSearch (which a scripted model never calls).
        .env("ENABLE_TOOL_SEARCH", "false")
        .env_remove("MOSAIC_BUS_CAP_FD")
        .env_remove("MOSAIC_BUS_CAP_FILE");
    if allow {
        // Every tool of the `mosaic-bus` server, as `up` passes it.
        command.arg("--allowedTools=mcp__mosaic-bus");
    }
    let mut harness = Harness::start(command);
    drop(harness.stdin.take());
    harness
}

/// The lead's script: claim, read the inbox, end the turn.
fn claim_and_inbox(prefix: &str) -> Vec<Step> {
    vec![
        Step::tool(&format!("{prefix}role_claim"), json!({})),
        Step::tool(&format!("{prefix}inbox"), json!({})),
        Step::text("Claimed; the inbox is read."),
    ]
}

fn is_init(event: &Value) -> bool {
    event["type"] == "system" && event["subtype"] == "init"
}

fn is_result(event: &Value) -> bool {
    event["type"] == "result"
}

/// The status the init event gives the `mosaic-bus` server.
fn server_status(init: &Value) -> Value {
    let servers = init["mcp_servers"].as_array().expect("mcp_servers");
    let ours: Vec<&Value> = servers
        .iter()
        .filter(|s| s["name"] == "mosaic-bus")
        .collect();
    assert_eq!(ours.len(), 1, "{init}");
    ours[0]["status"].clone()
}

/// Whether `run` claimed `role`, by the role's trail.
fn claimed_by(broker: &Broker, reader_run: &str, role: &str, run: &str) -> bool {
    let trail = broker
        .agent(reader_run)
        .ok("trail", json!({"subject": role}));
    trail
        .as_array()
        .expect("a trail")
        .iter()
        .any(|r| r["kind"] == "role.claimed" && r["run"] == run)
}

#[test]
fn claude_code_calls_the_bus_tools_through_mosaic_bus_mcp_with_the_permission_flag() {
    let root = data_root();
    let broker = broker(root.path());
    let home = tempfile::tempdir().expect("home");
    let cap = cap_file(&broker, "lead-1", home.path());
    let model = Model::start(vec![(
        "lead",
        "key-lead",
        claim_and_inbox("mcp__mosaic-bus__"),
    )]);
    let mut harness = claude(&model, "key-lead", &broker.socket, &cap, home.path(), true);
    let init = harness.event("the init event", is_init);
    assert_eq!(server_status(&init), "connected", "{init}");
    model.wait("the claim's result", START, |requests| {
        requests.iter().any(|r| {
            model::tool_results(r.body["messages"].as_array().map_or(&[][..], |m| m)).len() == 1
        })
    });
    measure(&harness, "claude-code: role claimed");
    let result = harness.event("the result", is_result);
    measure(&harness, "claude-code: result");
    assert_eq!(result["permission_denials"], json!([]), "{result}");
    assert_eq!(result["subtype"], "success", "{result}");
    assert!(harness.exit().success());

    let requests: Vec<Request> = model
        .requests()
        .into_iter()
        .filter(Request::is_message)
        .collect();
    assert!(
        requests.iter().all(|r| r.agent.as_deref() == Some("lead")),
        "{requests:?}"
    );
    let advertised = requests[0].tools();
    // Claude Code lists the tools by name.
    let mut bus: Vec<&str> = advertised
        .iter()
        .filter_map(|t| t.strip_prefix("mcp__mosaic-bus__"))
        .collect();
    bus.sort_unstable();
    let mut expected: Vec<String> = agent_verbs().iter().map(|v| v.replace('.', "_")).collect();
    expected.sort_unstable();
    assert_eq!(bus, expected, "{advertised:?}");
    assert_eq!(bus.len(), 17);
    // The model saw both calls answered: the claim, then the inbox.
    let last = &requests.last().expect("a request").body["messages"];
    let results = model::tool_results(last.as_array().expect("messages"));
    assert_eq!(
        results,
        vec![json!({"status": "claimed"}), json!([])],
        "{last}"
    );
    assert!(claimed_by(&broker, "lead-1", "lead", "lead-1"));
    assert!(
        requests.iter().all(|r| r.header("x-api-key").is_none()),
        "the key is not recorded"
    );
}

#[test]
fn without_the_permission_flag_claude_code_denies_every_bus_tool() {
    let root = data_root();
    let broker = broker(root.path());
    let home = tempfile::tempdir().expect("home");
    let cap = cap_file(&broker, "lead-1", home.path());
    let model = Model::start(vec![(
        "lead",
        "key-lead",
        claim_and_inbox("mcp__mosaic-bus__"),
    )]);
    let mut harness = claude(&model, "key-lead", &broker.socket, &cap, home.path(), false);
    let init = harness.event("the init event", is_init);
    assert_eq!(server_status(&init), "connected", "{init}");
    let result = harness.event("the result", is_result);
    let denied: Vec<&str> = result["permission_denials"]
        .as_array()
        .expect("permission_denials")
        .iter()
        .filter_map(|d| d["tool_name"].as_str())
        .collect();
    assert_eq!(
        denied,
        ["mcp__mosaic-bus__role_claim", "mcp__mosaic-bus__inbox"],
        "{result}"
    );
    // Claude Code still exits 0: only the denials tell.
    assert!(harness.exit().success());
    // The role is still free: lead-1 claims it now, for the first time.
    broker.agent("lead-1").claim();
    let trail = broker
        .agent("lead-1")
        .ok("trail", json!({"subject": "lead"}));
    let claims = trail
        .as_array()
        .expect("a trail")
        .iter()
        .filter(|r| r["kind"] == "role.claimed")
        .count();
    assert_eq!(claims, 1, "{trail}");
}

#[test]
fn without_its_capability_file_the_bus_server_fails_in_claude_code() {
    let root = data_root();
    let broker = broker(root.path());
    let home = tempfile::tempdir().expect("home");
    let missing = home.path().join("no-such.cap");
    let model = Model::start(vec![(
        "lead",
        "key-lead",
        vec![Step::text("Nothing to do.")],
    )]);
    let mut harness = claude(
        &model,
        "key-lead",
        &broker.socket,
        &missing,
        home.path(),
        true,
    );
    let init = harness.event("the init event", is_init);
    assert_eq!(server_status(&init), "failed", "{init}");
    let result = harness.event("the result", is_result);
    assert!(harness.exit().success(), "{result}");
    let requests = model.requests();
    let first = requests.iter().find(|r| r.is_message()).expect("a request");
    assert!(
        first.tools().iter().all(|t| !t.starts_with("mcp__")),
        "{:?}",
        first.tools()
    );
}

/// pi in RPC mode with the shipped extension, the model at `model` as a
/// custom provider with `key`, the capability of `run` in a file; the
/// extension waits `wait_ms` at a stop, from `since`.
fn pi(
    model: &Model,
    key: &str,
    socket: &Path,
    cap: &Path,
    home: &Path,
    since: u64,
    wait_ms: u64,
) -> Harness {
    pi_at(&model.base_url(), key, socket, cap, home, since, wait_ms)
}

/// As [`pi`], with the model's API at `base_url`.
fn pi_at(
    base_url: &str,
    key: &str,
    socket: &Path,
    cap: &Path,
    home: &Path,
    since: u64,
    wait_ms: u64,
) -> Harness {
    let agent_dir = home.join("pi");
    std::fs::create_dir_all(&agent_dir).expect("mkdir");
    let models = json!({"providers": {"scripted": {
        "api": "anthropic-messages",
        "baseUrl": base_url,
        "apiKey": "MOSAIC_TEST_MODEL_KEY",
        "models": [{"id": "scripted-1"}],
    }}});
    std::fs::write(agent_dir.join("models.json"), models.to_string()).expect("models.json");
    let extension = Path::new(env!("CARGO_MANIFEST_DIR")).join("../harness/pi/mosaic-bus.ts");
    let mut command = Command::new(program("pi"));
    command
        .args([
            "--mode",
            "rpc",
            "--no-session",
            "--provider",
            "scripted",
            "--model",
            "scripted-1",
        ])
        .arg("-e")
        .arg(extension)
        .current_dir(home)
        .env("HOME", home)
        .env("PI_CODING_AGENT_DIR", &agent_dir)
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .env("PI_TELEMETRY", "0")
        .env("MOSAIC_TEST_MODEL_KEY", key)
        .env("MOSAIC_BUS_BIN", BIN)
        .env("MOSAIC_BUS_SOCKET", socket)
        .env("MOSAIC_BUS_CAP_FILE", cap)
        .env("MOSAIC_BUS_SINCE", since.to_string())
        .env("MOSAIC_HOOK_WAIT_MS", wait_ms.to_string())
        .env_remove("MOSAIC_BUS_CAP_FD");
    let mut harness = Harness::start(command);
    let prompt = json!({"type": "prompt", "message": "Claim your role, then read your inbox."});
    // The prompt is one RPC command; stdin stays open, as `up` keeps it.
    writeln!(harness.stdin.as_mut().expect("stdin"), "{prompt}").expect("write the prompt");
    harness
}

/// The text of the last user message of a request.
fn last_user_text(request: &Request) -> String {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(last) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => String::new(),
    }
}

#[test]
fn pi_with_the_extension_is_woken_after_agent_end_and_exits_when_nothing_more_arrives() {
    let root = data_root();
    let broker = broker(root.path());
    let lead = broker.agent("lead-1");
    lead.claim();
    // The feed's cursor at launch, as `up` hands it over.
    let since = lead.ok("changes", json!({}))["cursor"]
        .as_u64()
        .expect("a cursor");
    let home = tempfile::tempdir().expect("home");
    let cap = cap_file(&broker, "dev-1", home.path());
    let mut steps = claim_and_inbox("");
    steps.push(Step::tool("message_receive", json!({})));
    steps.push(Step::tool_with(
        "message_read",
        |results| json!({"id": results[2][0]["id"]}),
    ));
    steps.push(Step::text("Read it."));
    let model = Model::start(vec![("dev", "key-dev", steps)]);
    let harness = pi(
        &model,
        "key-dev",
        &broker.socket,
        &cap,
        home.path(),
        since,
        2000,
    );

    // Once dev holds its role (the model has the claim's result), the lead
    // writes to it.
    model.wait("the claim's result", START, |requests| {
        requests.iter().any(|r| {
            model::tool_results(r.body["messages"].as_array().map_or(&[][..], |m| m)).len() == 1
        })
    });
    measure(&harness, "pi: role claimed");
    let id = lead.send("dev", "The login fix is merged.", json!({}));
    let id = id.as_str().expect("an id").to_owned();

    // After its turn ended, the extension's follow-up names the message.
    let requests = model.wait("the follow-up after agent_end", START, |requests| {
        requests
            .iter()
            .any(|r| last_user_text(r).contains(&format!("message.sent {id}")))
    });
    let follow_up = requests
        .iter()
        .find(|r| last_user_text(r).contains(&id))
        .expect("the follow-up");
    assert!(
        last_user_text(follow_up).contains("message_receive"),
        "{}",
        last_user_text(follow_up)
    );
    // Then it receives and reads the message, ends its turn, waits 2 s
    // with nothing more, and pi exits 0.
    model.wait("the read's result", START, |requests| {
        requests.iter().any(|r| {
            model::tool_results(r.body["messages"].as_array().map_or(&[][..], |m| m)).len() == 4
        })
    });
    let last_turn = Instant::now();
    measure(&harness, "pi: the last turn");
    let status = harness.exit();
    eprintln!(
        "measure: pi: the last stop took {} ms beyond its 2000 ms wait",
        last_turn.elapsed().as_millis().saturating_sub(2000)
    );
    assert!(status.success(), "{status}");
    let requests: Vec<Request> = model
        .requests()
        .into_iter()
        .filter(Request::is_message)
        .collect();
    let last = requests.last().expect("a request");
    let results = model::tool_results(last.body["messages"].as_array().expect("messages"));
    assert_eq!(results.len(), 4, "{results:?}");
    assert_eq!(results[0], json!({"status": "claimed"}));
    assert_eq!(results[2][0]["id"], id.as_str(), "{results:?}");
    assert_eq!(results[3], json!({}));
    let kinds = lead.trail_kinds(&id);
    assert!(kinds.iter().any(|k| k == "message.read"), "{kinds:?}");

    // The tools pi advertises beside its own are exactly the agent verbs.
    let own = ["read", "bash", "edit", "write"];
    let bus: Vec<String> = requests[0]
        .tools()
        .into_iter()
        .filter(|t| !own.contains(&t.as_str()))
        .collect();
    let expected: Vec<String> = agent_verbs().iter().map(|v| v.replace('.', "_")).collect();
    assert_eq!(bus, expected);
}

#[test]
fn pi_with_the_extension_exits_1_when_its_last_turn_ended_in_a_model_error() {
    let root = data_root();
    let broker = broker(root.path());
    let lead = broker.agent("lead-1");
    lead.claim();
    let since = lead.ok("changes", json!({}))["cursor"]
        .as_u64()
        .expect("a cursor");
    let home = tempfile::tempdir().expect("home");
    let cap = cap_file(&broker, "dev-1", home.path());
    let model = Model::start(vec![("dev", "key-dev", claim_and_inbox(""))]);
    // A route the model does not serve: every answer is an error, which
    // pi does not retry.
    let gone = format!("{}/gone", model.base_url());
    let mut harness = pi_at(
        &gone,
        "key-dev",
        &broker.socket,
        &cap,
        home.path(),
        since,
        2000,
    );
    harness.event("the failed answer", |e| {
        e["type"] == "message_end" && e["message"]["stopReason"] == "error"
    });
    let status = harness.exit();
    assert_eq!(status.code(), Some(1), "{status}");
}
