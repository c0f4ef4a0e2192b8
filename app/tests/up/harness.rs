//! The harnesses `up` starts itself (`"harness"` without `"command"`),
//! each played by a fake program (a `#!/bin/sh` script given as
//! `"program"`) that records what it was given: its arguments, the names
//! of its variables (no secret's value), its working directory, its
//! standard input and the files `up` wrote for it. Run under the real `up`,
//! in a real bwrap sandbox and without one; the fake also claims its role
//! with `mosaic-bus call`, through the capability's file alone.

use super::*;

/// What every fake records into `$OUT` (its `workdir`, the one place it
/// may write in a sandbox), before its own part; asked its `--version`, it
/// says [`FAKE_VERSION`] and exits.
const RECORD: &str = r#"set -u
[ "${1:-}" = --version ] && { echo "9.9.9 (Fake)"; exit 0; }
out=$PWD
{ for a in "$@"; do printf '%s\n' "$a"; done; } > "$out/argv"
env | sed 's/=.*//' | sort > "$out/env-names"
pwd > "$out/cwd"
readlink /proc/self/fd/0 > "$out/stdin" 2>&1 || true
[ -n "${MOSAIC_BUS_CAP_FD:-}" ] && echo "fd $MOSAIC_BUS_CAP_FD" > "$out/cap-fd"
ls -ln "$MOSAIC_BUS_CAP_FILE" | cut -c1-10 > "$out/cap-mode"
mosaic-bus call role.claim > "$out/claim" 2>&1
"#;

/// What a fake says to `--version`.
const FAKE_VERSION: &str = "9.9.9 (Fake)";

/// The fake Claude Code: it records, copies the files `up` named in its
/// arguments, checks its key and its state folder, prints one event and
/// exits.
const FAKE_CLAUDE: &str = r#"
for a in "$@"; do
  case $a in
    --mcp-config=*) cat "${a#--mcp-config=}" > "$out/mcp.json" ;;
    --settings=*) cat "${a#--settings=}" > "$out/settings.json" ;;
  esac
done
[ "${ANTHROPIC_API_KEY:-}" = model-key-value ] && echo yes > "$out/key"
touch "$CLAUDE_CONFIG_DIR/written" && echo yes > "$out/state-writable"
hook=$(sed -n 's/.*"command":"sh '"'"'\([^'"'"']*\)'"'"'".*/\1/p' "$out/settings.json")
[ -r "$hook" ] && echo yes > "$out/hook-readable"
( : > "$hook" ) 2>/dev/null || echo yes > "$out/hook-read-only"
printf '%s\n' '{"type":"system","subtype":"init","mcp_servers":[]}'
printf '%s\n' '{"type":"result","subtype":"success"}'
"#;

/// The fake pi: it records, copies its `models.json` and reads its
/// prompt, the line after `ready`, from stdin.
const FAKE_PI: &str = r#"
cat "$PI_CODING_AGENT_DIR/models.json" > "$out/models.json"
[ "${MODEL_KEY:-}" = model-key-value ] && echo yes > "$out/key"
IFS= read -r prompt && printf '%s\n' "$prompt" > "$out/prompt"
printf '%s\n' '{"type":"agent_end"}'
"#;

/// A fake harness at `dir/bin/NAME`: [`RECORD`] and then `part`.
fn fake(dir: &Path, name: &str, part: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{RECORD}{part}")).expect("write the fake");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// One run of `up` with a single harness agent of `harness` played by
/// `program`, with `sandbox`; returns its summary line, the agent's
/// `workdir` (what it recorded) and the data root.
fn run_harness(
    dir: &Path,
    harness: &str,
    program: &Path,
    sandbox: &str,
) -> (Value, PathBuf, tempfile::TempDir) {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("mkdir work");
    let conf = dir.join("conf");
    std::fs::create_dir_all(&conf).expect("mkdir conf");
    let config = conf.join("up.json");
    let key_env = if harness == "pi" {
        "MODEL_KEY"
    } else {
        "ANTHROPIC_API_KEY"
    };
    let agent = json!({"role": "a", "harness": harness, "program": program,
        "prompt": "Claim your role, then \"work\".", "args": ["--extra", "x"],
        "workdir": work, "idle": "wait",
        "model": {"api": "anthropic", "baseUrl": "http://127.0.0.1:47321", "id": "model-1",
                  "keyEnv": key_env}});
    let text = json!({"sandbox": sandbox,
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [agent]});
    std::fs::write(&config, text.to_string()).expect("write config");
    let root = tempfile::tempdir().expect("data root");
    let up = Up::start_with(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
        ],
        &[(key_env, "model-key-value".as_ref())],
    );
    let first = up.line();
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{first}\n{stderr}");
    let summary: Value = serde_json::from_str(&first).expect("the first line");
    (summary, work, root)
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What both harnesses share: the run's capability reached the fake as
/// a private file alone, its role is claimed with it, its environment
/// holds no capability, and its event stream is in its transcript.
#[track_caller]
fn check_common(summary: &Value, work: &Path, root: &Path, events: &str) {
    let agent = &summary["agents"][0];
    // Its program's version, asked before it started.
    assert_eq!(agent["version"], FAKE_VERSION, "{summary}");
    // `--version` was not its launch: it was started with `up`'s
    // arguments alone.
    assert!(!read(work, "argv").lines().any(|a| a == "--version"));
    assert_eq!(
        read(work, "claim").trim(),
        r#"{"ok":true,"result":{"status":"claimed"}}"#
    );
    assert_eq!(read(work, "cap-mode").trim(), "-rw-------");
    assert!(!work.join("cap-fd").exists(), "no descriptor is named");
    let names = read(work, "env-names");
    for name in [
        "MOSAIC_BUS_CAP_FILE",
        "MOSAIC_BUS_SINCE",
        "MOSAIC_RUN_ID",
        "MOSAIC_BUS_SOCKET",
    ] {
        assert!(names.lines().any(|n| n == name), "{name}: {names}");
    }
    assert_eq!(
        read(work, "cwd").trim(),
        work.canonicalize().unwrap().to_string_lossy()
    );
    let transcript = PathBuf::from(agent["transcript"].as_str().expect("a transcript"));
    assert!(
        transcript.is_absolute() && transcript.starts_with(root),
        "{summary}"
    );
    // The harness's lines as they came, then the run's end.
    assert_eq!(
        std::fs::read_to_string(&transcript).expect("transcript"),
        format!("{events}{{\"type\":\"mosaic-bus.ended\",\"cause\":\"exited\",\"status\":0}}\n")
    );
    let mode = std::fs::metadata(&transcript)
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let run = agent["run"].as_str().expect("a run");
    let run_dir = root.join("agents/runs").join(run);
    let mode = std::fs::metadata(&run_dir)
        .expect("the run folder")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn up_starts_claude_code_with_the_bus_as_its_mcp_server_and_the_stop_hook() {
    for sandbox in ["required", "off"] {
        let dir = tempfile::tempdir().expect("dir");
        let program = fake(dir.path(), "fake-claude", FAKE_CLAUDE);
        let (summary, work, root) = run_harness(dir.path(), "claude-code", &program, sandbox);
        let agent = &summary["agents"][0];
        assert_eq!(agent["harness"], "claude-code");
        assert_eq!(agent["sandboxed"], sandbox == "required", "{summary}");
        let events = "{\"type\":\"system\",\"subtype\":\"init\",\"mcp_servers\":[]}\n\
                      {\"type\":\"result\",\"subtype\":\"success\"}\n";
        check_common(&summary, &work, root.path(), events);
        let run = agent["run"].as_str().expect("a run");
        let run_dir = root.path().join("agents/runs").join(run);
        let argv = read(&work, "argv");
        // With a workdir its own tools run: without asking in the sandbox,
        // its file edits alone without one.
        let mode = if sandbox == "required" {
            "bypassPermissions"
        } else {
            "acceptEdits"
        };
        let expected = format!(
            "-p\n--output-format\nstream-json\n--verbose\n--include-hook-events\n\
             --strict-mcp-config\n\
             --mcp-config={run}/mcp.json\n--settings={run}/settings.json\n\
             --allowedTools=mcp__mosaic-bus\n--permission-mode={mode}\n--model=model-1\n\
             --extra\nx\n--\nClaim your role, then \"work\".\n",
            run = run_dir.display()
        );
        assert_eq!(argv, expected);
        let names = read(&work, "env-names");
        for name in [
            "CLAUDE_CONFIG_DIR",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
            "DISABLE_AUTOUPDATER",
            "DISABLE_TELEMETRY",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_MODEL",
            "ANTHROPIC_API_KEY",
        ] {
            assert!(names.lines().any(|n| n == name), "{name}: {names}");
        }
        assert_eq!(read(&work, "key").trim(), "yes");
        assert_eq!(read(&work, "state-writable").trim(), "yes");
        assert_eq!(read(&work, "hook-readable").trim(), "yes");
        assert_eq!(read(&work, "stdin").trim(), "/dev/null");
        let mcp: Value = serde_json::from_str(&read(&work, "mcp.json")).expect("mcp.json");
        let server = &mcp["mcpServers"]["mosaic-bus"];
        assert_eq!(server["args"], json!(["mcp"]), "{mcp}");
        assert_eq!(server["type"], "stdio");
        assert!(
            Path::new(server["command"].as_str().expect("a command")).is_absolute(),
            "{mcp}"
        );
        assert_eq!(server["env"]["MOSAIC_RUN_ID"], json!(run));
        let settings: Value =
            serde_json::from_str(&read(&work, "settings.json")).expect("settings.json");
        // Waiting with no cap: the hook's timeout is a day.
        assert_eq!(
            settings["hooks"]["Stop"][0]["hooks"][0]["timeout"],
            json!(86_400),
            "{settings}"
        );
        if sandbox == "required" {
            // In the sandbox the run's folder is read-only.
            assert_eq!(read(&work, "hook-read-only").trim(), "yes");
            assert_eq!(agent["network"], "proxy");
        }
        let state = root.path().join("agents/state/a.claude-code");
        assert!(state.join("written").exists(), "the state folder lasts");
        // No capability is left on disk once `up` closed.
        assert!(!run_dir.join("cap").exists());
    }
}

#[test]
fn up_starts_pi_in_rpc_mode_with_its_model_and_its_prompt_on_stdin() {
    for sandbox in ["required", "off"] {
        let dir = tempfile::tempdir().expect("dir");
        let program = fake(dir.path(), "fake-pi", FAKE_PI);
        let (summary, work, root) = run_harness(dir.path(), "pi", &program, sandbox);
        let agent = &summary["agents"][0];
        assert_eq!(agent["harness"], "pi");
        check_common(&summary, &work, root.path(), "{\"type\":\"agent_end\"}\n");
        let run = agent["run"].as_str().expect("a run");
        let run_dir = root.path().join("agents/runs").join(run);
        let argv = read(&work, "argv");
        let sessions = root.path().join("agents/state/a.pi/sessions").join(run);
        let expected = format!(
            "--mode\nrpc\n--provider\nanthropic\n--session-dir\n{}\n--model\nmodel-1\n-e\n\
             {}/mosaic-bus.ts\n--extra\nx\n",
            sessions.display(),
            run_dir.display()
        );
        assert_eq!(argv, expected);
        let names = read(&work, "env-names");
        for name in ["PI_CODING_AGENT_DIR", "PI_OFFLINE", "MODEL_KEY"] {
            assert!(names.lines().any(|n| n == name), "{name}: {names}");
        }
        assert!(!names.lines().any(|n| n == "ANTHROPIC_API_KEY"), "{names}");
        assert_eq!(read(&work, "key").trim(), "yes");
        let models: Value = serde_json::from_str(&read(&work, "models.json")).expect("models");
        assert_eq!(
            models,
            json!({"providers": {"anthropic": {
                "api": "anthropic-messages", "apiKey": "MODEL_KEY",
                "baseUrl": "http://127.0.0.1:47321", "models": [{"id": "model-1"}]}}})
        );
        let prompt: Value = serde_json::from_str(&read(&work, "prompt")).expect("the prompt");
        assert_eq!(
            prompt,
            json!({"type": "prompt", "message": "Claim your role, then \"work\"."})
        );
        assert!(
            read(&work, "stdin").contains("pipe:"),
            "{}",
            read(&work, "stdin")
        );
    }
}

/// A harness whose event stream carries what JSON allows raw (a C1
/// control, a bidi override inside a string), a line that is not JSON
/// with a raw escape, and an escape on its standard error.
const HOSTILE_EVENTS: &str = r#"
printf '{"type":"assistant","text":"\302\23331m\342\200\256x"}\n'
printf 'plain \033]0;pwned\007\n'
printf 'warn \033[2J\n' >&2
"#;

#[test]
fn a_transcript_holds_no_raw_control_byte_of_the_harness() {
    let dir = tempfile::tempdir().expect("dir");
    let program = fake(
        dir.path(),
        "fake-claude",
        &format!("{FAKE_CLAUDE}{HOSTILE_EVENTS}"),
    );
    let (summary, _work, _root) = run_harness(dir.path(), "claude-code", &program, "off");
    let agent = &summary["agents"][0];
    assert_eq!(agent["output"], agent["transcript"], "{summary}");
    let bytes =
        std::fs::read(agent["transcript"].as_str().expect("a transcript")).expect("the transcript");
    let text = String::from_utf8(bytes).expect("UTF-8");
    assert!(
        !text
            .chars()
            .any(|c| c != '\n' && mosaic_domain::text::is_hidden(c)),
        "{text:?}"
    );
    let lines: Vec<&str> = text.lines().collect();
    let event: Value = serde_json::from_str(
        lines
            .iter()
            .find(|l| l.contains("assistant"))
            .expect("the event"),
    )
    .expect("still JSON");
    assert_eq!(event["text"], "\u{9b}31m\u{202e}x");
    for expected in ["plain ⟨ESC⟩]0;pwned⟨BEL⟩", "warn ⟨ESC⟩[2J"] {
        assert!(lines.contains(&expected), "{expected:?} in {lines:#?}");
    }
}

/// The real Claude Code, where [`harness_bin`](super::model::harness_bin)
/// finds it.
fn real_claude() -> PathBuf {
    super::model::harness_bin().join("claude")
}

#[test]
fn the_real_claude_code_connects_to_the_bus_in_its_sandbox_before_its_first_request() {
    let dir = tempfile::tempdir().expect("dir");
    let work = dir.path().join("work");
    let conf = dir.path().join("conf");
    for folder in [&work, &conf] {
        std::fs::create_dir(folder).expect("mkdir");
    }
    // A closed loopback port: the init event comes before the first model
    // request, which then fails.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("its address").port()
    };
    let config = conf.join("up.json");
    let text = json!({"sandbox": "required",
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [{"role": "a", "harness": "claude-code", "program": real_claude(),
                    "prompt": "Claim your role.", "workdir": work,
                    "model": {"api": "anthropic", "baseUrl": format!("http://127.0.0.1:{port}")}}]});
    std::fs::write(&config, text.to_string()).expect("write config");
    let root = tempfile::tempdir().expect("data root");
    let up = Up::start_with(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
        ],
        &[("ANTHROPIC_API_KEY", "sk-test-not-a-key".as_ref())],
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line");
    let transcript = PathBuf::from(
        summary["agents"][0]["transcript"]
            .as_str()
            .expect("a transcript"),
    );
    // Polled with a short pause, bounded: the event is a line of a file.
    let started = std::time::Instant::now();
    let init = loop {
        let text = std::fs::read_to_string(&transcript).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains(r#""subtype":"init""#)) {
            break serde_json::from_str::<Value>(line).expect("a JSON event");
        }
        assert!(started.elapsed() < WAIT, "no init event within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    up.signal(rustix::process::Signal::TERM);
    let (_, _, stderr) = up.finish();
    let servers = init["mcp_servers"].as_array().expect("mcp_servers");
    assert_eq!(servers.len(), 1, "{init}");
    assert_eq!(
        (&servers[0]["name"], &servers[0]["status"]),
        (&json!("mosaic-bus"), &json!("connected")),
        "{init}\n{stderr}"
    );
    let tools: Vec<&str> = init["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .filter(|t| t.starts_with("mcp__mosaic-bus__"))
        .collect();
    assert!(tools.contains(&"mcp__mosaic-bus__role_claim"), "{tools:?}");
    // Whatever it tried to reach went to its model's port alone.
    for line in stderr
        .lines()
        .filter(|l| l.contains("the proxy refused a connection"))
    {
        assert!(line.contains(&format!("port={port}")), "{line}");
    }
}
