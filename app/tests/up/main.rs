//! `mosaic-bus up`, the standalone host, run as a real binary: the example
//! agents exchange a decision and a message over the socket, each holding
//! only its own capability on an inherited descriptor.
//!
//! Nothing here sleeps to synchronise: every wait is for a line, the end of
//! a pipe or the process's exit, each bounded by [`WAIT`] so a hung run
//! fails the test instead of hanging it; `up` on a real terminal runs in a
//! private tmux server (`support::tmux`), whose screen is read again until
//! a deadline. `state.rs`: a harness's state folder is data, never code
//! (the real pi and Claude Code, with a planted extension and hook).

#[path = "../support/mod.rs"]
mod support;

#[path = "../support/model.rs"]
mod model;

mod dry_run;
mod folders;
mod harness;
mod life;
mod relay;
mod state;
mod work;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mosaic_adapters::config::boot_from_value;
use mosaic_adapters::procfs::ProcFs;
use mosaic_app::runtime::start_broker;
use mosaic_client::socket::Client;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic-bus");
/// Generous: the example agents finish in well under a second.
const WAIT: Duration = Duration::from_secs(60);

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/business.json")
}

/// A running `up` whose stdout and stderr are read on threads, line by line.
struct Up {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl Up {
    fn start(args: &[&std::ffi::OsStr], dump: Option<&Path>) -> Up {
        let dump = dump.map(|d| ("MOSAIC_EXAMPLE_DUMP", d.as_os_str()));
        Up::start_with(args, dump.as_slice())
    }

    /// As [`Up::start`], with these variables added to `up`'s environment.
    fn start_with(args: &[&std::ffi::OsStr], env: &[(&str, &std::ffi::OsStr)]) -> Up {
        let mut command = Command::new(BIN);
        command
            .arg("up")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .envs(env.iter().copied());
        let mut child = command.spawn().expect("spawn up");
        let stdout = lines(child.stdout.take().expect("stdout"));
        let stderr = lines(child.stderr.take().expect("stderr"));
        Up {
            child,
            stdout,
            stderr,
        }
    }

    /// The next stdout line, within [`WAIT`].
    fn line(&self) -> String {
        self.stdout.recv_timeout(WAIT).expect("a line from up")
    }

    /// Waits for stderr to say `needle`.
    fn stderr_until(&self, needle: &str) {
        loop {
            let line = self.stderr.recv_timeout(WAIT).expect("a line on stderr");
            if line.contains(needle) {
                return;
            }
        }
    }

    fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)
            .expect("signal up");
    }

    /// Waits for the exit (killing `up` after [`WAIT`]); returns the status
    /// and the rest of stdout and stderr.
    fn finish(mut self) -> (ExitStatus, String, String) {
        let (done, exited) = mpsc::channel();
        let pid = rustix::process::Pid::from_child(&self.child);
        let waiter = std::thread::spawn(move || {
            let status = self.child.wait().expect("wait for up");
            let _ = done.send(());
            status
        });
        if exited.recv_timeout(WAIT).is_err() {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            panic!("up did not exit within {WAIT:?}");
        }
        let status = waiter.join().expect("waiter");
        // Every writer of the pipes has exited by now; bounded all the same.
        let rest = |lines: mpsc::Receiver<String>| {
            let mut all = Vec::new();
            loop {
                match lines.recv_timeout(WAIT) {
                    Ok(line) => all.push(line),
                    Err(mpsc::RecvTimeoutError::Disconnected) => return all.join("\n"),
                    Err(mpsc::RecvTimeoutError::Timeout) => panic!("a pipe of up stays open"),
                }
            }
        };
        (status, rest(self.stdout), rest(self.stderr))
    }
}

fn lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            if send.send(line).is_err() {
                return;
            }
        }
    });
    receive
}

/// The UUID that follows `prefix` in `text`.
fn uuid_after(text: &str, prefix: &str) -> String {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix:?} in {text}"))
        + prefix.len();
    text[at..at + 36].to_owned()
}

/// Whether `text` holds 64 hex digits in a row (the shape of a capability).
fn has_capability_shape(text: &str) -> bool {
    let mut run = 0;
    for c in text.chars() {
        run = if c.is_ascii_hexdigit() { run + 1 } else { 0 };
        if run >= 64 {
            return true;
        }
    }
    false
}

fn kinds(trail: &Value) -> Vec<&str> {
    trail
        .as_array()
        .expect("a trail is an array")
        .iter()
        .map(|r| r["kind"].as_str().expect("kind"))
        .collect()
}

fn entry<'a>(trail: &'a Value, kind: &str) -> &'a Value {
    trail
        .as_array()
        .expect("array")
        .iter()
        .find(|r| r["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {trail}"))
}

/// A copy of the example (its configuration and its agents) in `dir/ex`,
/// with an empty `dump` folder beside it that each agent is granted as a
/// `write` path (`"shared"` by both): in a sandbox an agent without a
/// `workdir` runs in an empty home of its own, sees of the configuration's
/// folder only what the configuration names (its script, its `read`
/// folder `agents`), and writes only where it is granted.
fn copy_example(dir: &Path) -> (PathBuf, PathBuf) {
    let examples = example().parent().expect("examples").to_owned();
    let ex = dir.join("ex");
    std::fs::create_dir_all(ex.join("agents")).expect("mkdir agents");
    for name in ["lib.sh", "lead.sh", "dev.sh"] {
        std::fs::copy(
            examples.join("agents").join(name),
            ex.join("agents").join(name),
        )
        .expect("copy an agent");
    }
    let dump = dir.join("dump");
    std::fs::create_dir(&dump).expect("mkdir dump");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(example()).expect("the example"))
            .expect("JSON");
    for agent in config["agents"].as_array_mut().expect("agents") {
        agent["write"] = json!([dump]);
        // One scratch folder for both: they say they share it.
        agent["shared"] = json!(true);
    }
    let file = ex.join("business.json");
    std::fs::write(&file, config.to_string()).expect("write the configuration");
    (file, dump)
}

#[test]
fn the_example_agents_exchange_a_decision_and_a_message_then_up_exits() {
    let root = tempfile::tempdir().expect("data root");
    let work = tempfile::tempdir().expect("a copy of the example");
    let (config, dump) = copy_example(work.path());
    let up = Up::start(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
        ],
        Some(&dump),
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line is JSON");
    let (status, out, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "stdout: {out}\nstderr: {stderr}");
    // One line on stdout; the agents' lines are relayed to stderr, each
    // prefixed with its role.
    assert!(out.is_empty(), "{out}");
    let rest = stderr;

    // The one JSON line says where everything is, and names both runs.
    assert_eq!(summary["ok"], true);
    assert_eq!(summary["business"], "acme");
    assert_eq!(summary["dataRoot"], json!(root.path()));
    let socket = root.path().join("bus/bus.sock");
    assert_eq!(summary["socket"], json!(socket));
    // Without --console the agents' lines are on up's stderr: no log file.
    assert_eq!(summary["log"], Value::Null);
    // The reader capability is in a private folder of its own, never under
    // the data root that every agent can find from its socket's path.
    let reader_cap = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
    assert!(
        !reader_cap.starts_with(root.path()),
        "{}",
        reader_cap.display()
    );
    let secrets = reader_cap.parent().expect("its folder").to_owned();
    assert!(secrets
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("mosaic-up-secrets-")));
    let agents = summary["agents"].as_array().expect("agents");
    let roles: Vec<&str> = agents.iter().map(|a| a["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["lead", "dev"]);
    let run = |i: usize| agents[i]["run"].as_str().expect("run").to_owned();
    let (lead, dev) = (run(0), run(1));
    assert!(lead.starts_with("lead-") && dev.starts_with("dev-"));
    for (i, name) in [&lead, &dev].into_iter().enumerate() {
        let role = roles[i];
        let relayed =
            |l: &str| l.starts_with(&format!("{role}: ")) && l.contains(&format!("[{name}]:"));
        assert!(rest.lines().any(relayed), "{name} in {rest}");
        assert_eq!(agents[i]["harness"], "pi");
        // bwrap is installed wherever these tests run (CI installs it), so
        // the example's default, `auto`, sandboxes every agent.
        assert_eq!(agents[i]["sandboxed"], true, "{summary}");
        // The example names no network: `none`, a namespace of its own,
        // where no abstract socket of the host is in reach.
        assert_eq!(agents[i]["network"], "none", "{summary}");
        assert_eq!(agents[i]["abstractSockets"], "closed", "{summary}");
        let mut keys: Vec<&str> = agents[i]
            .as_object()
            .expect("an agent")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "abstractSockets",
                "harness",
                "network",
                "output",
                "pid",
                "role",
                "run",
                "sandboxed"
            ]
        );
        // Its lines are kept in its own file too, beside the transcripts.
        let output = std::fs::read_to_string(agents[i]["output"].as_str().expect("output"))
            .expect("the run's output");
        assert!(output.contains(&format!("[{name}]:")), "{output}");
        assert_eq!(
            agents[i]["output"],
            json!(root.path().join(format!("agents/runs/{name}.log")))
        );
    }
    assert!(
        !has_capability_shape(&rest) && !has_capability_shape(&summary.to_string()),
        "no capability on stdout: {rest}"
    );
    let decision = uuid_after(&rest, "raised decision ");
    let message = uuid_after(&rest, "sent message ");
    assert!(rest.contains(&format!("acknowledged message {message}")));
    let reply = uuid_after(
        &rest,
        &format!("replied to message {message} with message "),
    );
    assert!(rest.contains(&format!("received reply {reply} from lead")));
    assert!(rest.contains(&format!("acknowledged reply {reply}")));
    // Nobody sits at a console: dev leaves its gated decision for the
    // human, says how to answer it, and ends.
    let release = uuid_after(&rest, "left decision ");
    assert!(
        rest.contains(&format!(
            "left decision {release} for the human: nobody is at a console (answer it from \
             mosaic-bus up --console, or while up --stay serves with mosaic-bus console \
             --socket {} --business acme)",
            socket.display()
        )),
        "{rest}"
    );

    // Closed cleanly: no socket, no lock, no reader capability left.
    assert!(!socket.exists());
    assert!(!root.path().join("bus/writer.lock").exists());
    assert!(
        !reader_cap.exists() && !secrets.exists(),
        "removed on close"
    );

    // Each agent's environment carries no capability, only the descriptor's
    // number, and each agent holds exactly one capability descriptor.
    for name in [&lead, &dev] {
        let env = std::fs::read_to_string(dump.join(format!("{name}.env"))).expect("env");
        assert!(!has_capability_shape(&env), "a capability in {name}'s env");
        assert!(env.contains(&format!("MOSAIC_RUN_ID={name}\n")));
        assert!(env.contains(&format!("MOSAIC_BUS_SOCKET={}\n", socket.display())));
        // The feed's cursor at launch, where the agent's loop starts.
        let since = env
            .lines()
            .find_map(|l| l.strip_prefix("MOSAIC_BUS_SINCE="))
            .expect("MOSAIC_BUS_SINCE");
        assert!(since.parse::<u64>().is_ok(), "{since}");
        let fd = env
            .lines()
            .find_map(|l| l.strip_prefix("MOSAIC_BUS_CAP_FD="))
            .expect("MOSAIC_BUS_CAP_FD");
        let fds = std::fs::read_to_string(dump.join(format!("{name}.fds"))).expect("fds");
        let memfds: Vec<&str> = fds.lines().filter(|l| l.contains("memfd:")).collect();
        assert_eq!(memfds.len(), 1, "{name} holds one memfd: {fds}");
        assert!(
            memfds[0].contains(&format!(" {fd} -> /memfd:mosaic-bus-cap")),
            "{}",
            memfds[0]
        );
    }

    // Read the evidence back through a broker booted on the same data root.
    let business: Value =
        serde_json::from_str(mosaic_app::commands::demo::EXAMPLE_BUSINESS).unwrap();
    let config = boot_from_value(json!({
        "dataRoot": root.path(), "businesses": {"acme": business["business"]},
        "readers": ["acme"], "repoRoots": []
    }))
    .expect("boot config");
    let (broker, booted) = start_broker(config).expect("a broker on the same data root");
    let reader = Client::new(&booted.socket, booted.readers[0].cap.expose());
    let trail = |subject: &str| {
        reader
            .call("trail", json!({ "subject": subject }))
            .expect("trail")
    };

    // A cross-role decision routed to the lead and resolved by its run.
    let d = trail(&decision);
    assert_eq!(
        kinds(&d),
        ["decision.raised", "decision.resolved", "message.sent"]
    );
    let raised = entry(&d, "decision.raised");
    assert_eq!(raised["class"], "cross-role");
    assert_eq!(raised["route"], "lead");
    assert_eq!(raised["action"], "repo.merge");
    let resolved = entry(&d, "decision.resolved");
    assert_eq!(resolved["choice"], "yes");
    assert_eq!(resolved["by_run"], json!(lead));

    // The gated decision went to the human, and is still waiting there.
    let g = trail(&release);
    assert_eq!(kinds(&g), ["decision.raised"]);
    assert_eq!(
        (&g[0]["class"], &g[0]["route"]),
        (&json!("gated"), &json!("human"))
    );
    assert_eq!(g[0]["action"], "release.publish");
    assert_eq!(g[0]["raisedBy"]["run"], json!(dev));
    let waiting = reader.call("inbox", json!({})).expect("the human's inbox");
    assert!(waiting.to_string().contains(&release), "{waiting}");

    // The message citing it was delivered to the lead's run and read, and
    // the lead replied to it.
    let m = trail(&message);
    assert_eq!(
        kinds(&m),
        [
            "message.sent",
            "message.delivered",
            "message.read",
            "message.sent"
        ]
    );
    assert_eq!(m[0]["id"], json!(message));
    assert_eq!(m[0]["decision"], json!(decision));
    assert_eq!(m[2]["run"], json!(lead));
    assert_eq!(m[3]["id"], json!(reply));
    assert_eq!(m[3]["in_reply_to"], json!(message));

    // The reply, dev's signal that the lead handled its report (a read
    // does not concern the sender in the change feed), reached dev's run
    // and was read there.
    let r = trail(&reply);
    assert_eq!(
        kinds(&r),
        ["message.sent", "message.delivered", "message.read"]
    );
    assert_eq!(r[0]["from_run"], json!(lead));
    assert_eq!(r[0]["to"], "dev");
    assert_eq!(r[1]["run"], json!(dev));
    assert_eq!(r[2]["run"], json!(dev));

    // Both launches were bound with the real child: the pid up printed (in
    // a sandbox, its bwrap's, from which every process inside descends),
    // which unsandboxed is the pid the script saw as its own, and a start
    // time after this test began.
    let test_started = ProcFs::new().current().expect("/proc").start_time;
    let bound = reader.call("agents", json!({})).expect("agents");
    for (i, name) in [&lead, &dev].into_iter().enumerate() {
        let record = bound
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["run"] == json!(name))
            .unwrap_or_else(|| panic!("{name} bound"));
        let own: u64 = std::fs::read_to_string(dump.join(format!("{name}.pid")))
            .expect("pid")
            .trim()
            .parse()
            .expect("a pid");
        if agents[i]["sandboxed"] == json!(true) {
            // Its own pid inside the sandbox's PID namespace, which the
            // broker never sees.
            assert!(own > 0, "{own}");
        } else {
            assert_eq!(record["pid"], json!(own));
        }
        assert_eq!(record["pid"], agents[i]["pid"]);
        assert!(record["start_time"].as_u64().expect("start time") >= test_started);
        let launched = trail(record["role"].as_str().unwrap());
        assert!(kinds(&launched).contains(&"session.launched"));
    }
    broker.close().expect("close");
}

/// The example agents wait on the change feed: nothing under examples/
/// sleeps, and the agents take a cursor, then wait with `changes` from it.
#[test]
fn the_example_agents_wait_on_the_change_feed_and_never_sleep() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let files = files_under(&examples);
    assert!(files.len() >= 8, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a text file");
        assert!(!text.contains("sleep"), "{} sleeps", file.display());
    }
    let read =
        |name: &str| std::fs::read_to_string(examples.join("agents").join(name)).expect(name);
    let lib = read("lib.sh");
    assert!(
        lib.contains("\n  call changes\n"),
        "the cursor first: {lib}"
    );
    assert!(
        lib.contains(r#"call changes "{\"since\":$cursor,\"timeoutMs\":$WAIT_MS}""#),
        "then a wait from it: {lib}"
    );
    for agent in ["lead.sh", "dev.sh"] {
        let text = read(agent);
        assert!(
            text.contains("\nwatch\n") && text.contains("\nawait "),
            "{agent}"
        );
    }
}

#[test]
fn with_stay_the_reader_capability_and_the_pane_serve_until_sigterm() {
    let root = tempfile::tempdir().expect("data root");
    let secrets = tempfile::tempdir().expect("the operator's secrets folder");
    std::fs::set_permissions(secrets.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let up = Up::start(
        &[
            "--config".as_ref(),
            example().as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
            "--secrets-dir".as_ref(),
            secrets.path().as_os_str(),
            "--browser".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--stay".as_ref(),
        ],
        None,
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("JSON");
    let token_file = PathBuf::from(summary["browser"]["tokenFile"].as_str().expect("tokenFile"));
    let token = std::fs::read_to_string(&token_file).expect("ui.token");
    let mode = std::fs::metadata(&token_file)
        .expect("ui.token")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let pane = summary["browser"]["pane"].as_str().expect("pane url");
    let address = pane
        .strip_prefix("http://")
        .and_then(|p| p.strip_suffix("/pane"))
        .expect("http://ADDR/pane");
    let get = |path: &str| {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(address).expect("connect");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )
        .expect("request");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("response");
        answer.lines().next().unwrap_or_default().to_owned()
    };
    assert_eq!(
        get(&format!("/pane?token={}", token.trim())),
        "HTTP/1.1 200 OK"
    );
    assert_eq!(get("/pane"), "HTTP/1.1 401 Unauthorized");
    let cap_file = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
    let socket = summary["socket"].as_str().expect("socket").to_owned();
    up.stderr_until("every agent has exited");
    assert_eq!(cap_file.parent(), Some(secrets.path()));
    assert_eq!(token_file.parent(), Some(secrets.path()));
    // Nothing an agent can find from its socket's path holds either secret.
    let cap = std::fs::read_to_string(&cap_file).expect("reader.cap");
    for file in files_under(root.path()) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        for secret in [cap.trim(), token.trim()] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "a secret in {}",
                file.display()
            );
        }
    }

    let mode = std::fs::metadata(&cap_file)
        .expect("reader.cap")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let out = Command::new(BIN)
        .args(["call", "agents", "--socket", &socket, "--cap-file"])
        .arg(&cap_file)
        .output()
        .expect("call");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(answer["result"].as_array().map(Vec::len), Some(2));

    up.signal(rustix::process::Signal::TERM);
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!cap_file.exists(), "reader.cap is removed on close");
    assert!(!token_file.exists(), "ui.token is removed on close");
    assert!(!Path::new(&socket).exists());
    assert!(!root.path().join("bus/writer.lock").exists());
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        let kind = std::fs::symlink_metadata(&path).expect("stat").file_type();
        if kind.is_dir() {
            files.extend(files_under(&path));
        } else if kind.is_file() {
            files.push(path);
        }
    }
    files
}

/// A configuration of one business `x` with one role `a` and these agents.
fn config_file(dir: &Path, agents: Value) -> PathBuf {
    let path = dir.join("up.json");
    let config = json!({
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": agents,
    });
    std::fs::write(&path, config.to_string()).expect("write config");
    path
}

fn run_to_end(config: &Path, root: &Path) -> (ExitStatus, String, String) {
    run_to_end_with(config, root, &[])
}

fn run_to_end_with(
    config: &Path,
    root: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> (ExitStatus, String, String) {
    let up = Up::start_with(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.as_os_str(),
        ],
        env,
    );
    let (status, mut stdout, stderr) = {
        let first = up.stdout.recv_timeout(WAIT).unwrap_or_default();
        let (status, rest, stderr) = up.finish();
        (status, format!("{first}\n{rest}"), stderr)
    };
    stdout = stdout.trim().to_owned();
    (status, stdout, stderr)
}

#[test]
fn an_agent_gets_only_allowed_variables_and_never_a_service_token() {
    const TOKEN: &str = "vikunja_tok_0123456789abcdef";
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let business = json!({
        "id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
        "roles": {"a": {"authority": {"withinRole": [], "crossRole": []},
                        "credentials": {"vikunja": {"env": "X_A_VIKUNJA"}}}}});
    // The agent writes its environment into `out`, granted as a `write`
    // path beside the configuration's folder, which is read-only in a
    // sandbox and may hold no writable path.
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("mkdir out");
    let write = |mut agent: Value| {
        agent["write"] = json!([out]);
        let conf = dir.path().join("conf");
        std::fs::create_dir_all(&conf).expect("mkdir conf");
        let path = conf.join("up.json");
        let config = json!({"business": business, "agents": [agent]});
        std::fs::write(&path, config.to_string()).expect("write config");
        path
    };
    let dump = out.join("agent.env");
    let env: [(&str, &std::ffi::OsStr); 4] = [
        ("X_A_VIKUNJA", TOKEN.as_ref()),
        ("UNLISTED_SECRET", "unlisted-value".as_ref()),
        ("LISTED", "listed-value".as_ref()),
        ("DUMP", dump.as_os_str()),
    ];
    let config = write(
        json!({"role": "a", "harness": "pi", "env": ["LISTED", "DUMP"],
        "command": ["sh", "-c", "read _ && env > \"$DUMP\""]}),
    );
    let (status, _, stderr) = run_to_end_with(&config, root.path(), &env);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let seen = std::fs::read_to_string(&dump).expect("the agent's environment");
    assert!(
        !seen.contains(TOKEN),
        "a service token reached the agent: {seen}"
    );
    assert!(!seen.contains("X_A_VIKUNJA"), "{seen}");
    assert!(!seen.contains("unlisted-value"), "{seen}");
    assert!(seen.contains("LISTED=listed-value\n"), "{seen}");
    assert!(seen.contains("MOSAIC_RUN_ID=a-"), "{seen}");

    // Naming the token's variable for an agent refuses the configuration.
    let config = write(json!({"role": "a", "harness": "pi", "env": ["X_A_VIKUNJA"],
        "command": ["sh", "-c", "read _ && env > \"$DUMP\""]}));
    let (status, stdout, _) = run_to_end_with(&config, root.path(), &env);
    assert_eq!(status.code(), Some(2));
    assert_eq!(stdout, r#"{"error":"bad-config","ok":false}"#);
}

#[test]
fn an_agent_that_exits_non_zero_is_reported_and_makes_the_exit_code_1() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "command": ["sh", "-c", "read _ && exit 3"]},
               {"role": "a", "harness": "claude-code", "command": ["sh", "-c", "read _"]}]),
    );
    let (status, _, stderr) = run_to_end(&config, root.path());
    assert_eq!(status.code(), Some(1), "{stderr}");
    // One agent failed, and the log names it and its status.
    let failed: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("an agent failed"))
        .collect();
    assert_eq!(failed.len(), 1, "{stderr}");
    assert!(failed[0].contains(" role=\"a\" "), "{stderr}");
    assert!(
        failed[0].ends_with(" status=\"exited with status 3\""),
        "{stderr}"
    );
    assert!(!root.path().join("bus/writer.lock").exists());
}

#[test]
fn startup_failures_print_one_static_code_and_release_everything() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let cases = [
        (json!([]), json!({"ok": false, "error": "bad-config"})),
        (
            json!([{"role": "b", "harness": "pi", "command": ["true"]}]),
            json!({"ok": false, "error": "unknown-role"}),
        ),
        (
            json!([{"role": "a", "harness": "pi", "command": ["sh", "-c", "read _; sleep 600"]},
                   {"role": "a", "harness": "pi", "command": ["./no/such/program"]}]),
            json!({"ok": false, "error": "launch-failed", "role": "a"}),
        ),
    ];
    let tmp = tempfile::tempdir().expect("up's TMPDIR");
    for (agents, expected) in cases {
        let config = config_file(dir.path(), agents);
        let (status, stdout, stderr) =
            run_to_end_with(&config, root.path(), &[("TMPDIR", tmp.path().as_os_str())]);
        assert_eq!(status.code(), Some(2), "{stderr}");
        let line: Value = serde_json::from_str(&stdout).expect("one JSON line");
        assert_eq!(line, expected);
        assert!(!root.path().join("bus/writer.lock").exists());
        assert!(!root.path().join("bus/bus.sock").exists());
        assert!(!root.path().join("reader.cap").exists());
        // Nor the secrets folder it made, whichever step refused.
        let left: Vec<_> = std::fs::read_dir(tmp.path()).expect("tmp").collect();
        assert!(left.is_empty(), "up left {left:?}");
    }
    // The human's secrets never go under the data root.
    let inside = root.path().join("keys");
    std::fs::create_dir(&inside).expect("mkdir");
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "command": ["true"]}]),
    );
    let out = Command::new(BIN)
        .arg("up")
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--data-root".as_ref(), root.path().as_os_str()])
        .args(["--secrets-dir".as_ref(), inside.as_os_str()])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"error":"unsafe-path","ok":false}"#
    );
    assert!(!root.path().join("bus/writer.lock").exists());
    let out = Command::new(BIN)
        .args(["up", "--data-root", "/tmp"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"error":"bad-request","ok":false}"#
    );
}

#[test]
fn sigterm_stops_running_agents_and_closes() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "command": ["sh", "-c", "read _ && exec sleep 600"]}]),
    );
    let up = Up::start(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
        ],
        None,
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("JSON");
    let agent = summary["agents"][0]["pid"].as_u64().expect("pid");
    up.signal(rustix::process::Signal::TERM);
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stopping the agents agents=1"), "{stderr}");
    assert!(
        !Path::new(&format!("/proc/{agent}")).exists(),
        "the agent is gone"
    );
    assert!(!root.path().join("bus/writer.lock").exists());
    assert!(!root.path().join("reader.cap").exists());
}

#[test]
fn a_second_signal_kills_an_agent_that_ignores_sigterm() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    // SIGTERM stays ignored across exec, so `sleep` ignores it too.
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi",
                "command": ["sh", "-c", "trap '' TERM; read _ && exec sleep 600"]}]),
    );
    let up = Up::start(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
        ],
        None,
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("JSON");
    let agent = summary["agents"][0]["pid"].as_u64().expect("pid");
    up.signal(rustix::process::Signal::TERM);
    up.stderr_until("stopping the agents agents=1");
    up.signal(rustix::process::Signal::INT);
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!Path::new(&format!("/proc/{agent}")).exists());
    assert!(!root.path().join("bus/writer.lock").exists());
}

#[test]
fn help_shows_the_console() {
    let out = Command::new(BIN)
        .args(["up", "--help"])
        .output()
        .expect("help");
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for text in ["--console", "MOSAIC_CONSOLE=1", "log?"] {
        assert!(help.contains(text), "{text} in {help}");
    }
}

/// Without a terminal the console cannot open: up stops its agents and
/// exits 1. `setsid` leaves it no controlling terminal to fall back on.
#[test]
fn with_console_and_no_terminal_up_stops_and_exits_1() {
    let root = tempfile::tempdir().expect("data root");
    let mut command = Command::new("setsid");
    command
        .args(["-w", BIN, "up", "--console", "--config"])
        .arg(example())
        .arg("--data-root")
        .arg(root.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn up");
    let up = Up {
        stdout: lines(child.stdout.take().expect("stdout")),
        stderr: lines(child.stderr.take().expect("stderr")),
        child,
    };
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line is JSON");
    let (status, rest, stderr) = up.finish();
    assert_eq!(status.code(), Some(1), "stdout: {rest}\nstderr: {stderr}");
    assert!(stderr.contains("console: the terminal failed"), "{stderr}");
    // The agents' lines went to the log file, none to stdout.
    let log = PathBuf::from(summary["log"].as_str().expect("log"));
    assert_eq!(log.parent(), Some(root.path()));
    assert!(rest.is_empty(), "{rest}");
    let mode = std::fs::metadata(&log)
        .expect("the log")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(!root.path().join("bus/bus.sock").exists(), "closed");
}
