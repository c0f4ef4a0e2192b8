//! What `up` relays of its agents: how each one exited (`agents`'s
//! `exited`), and their output, line by line, with every escape made
//! visible.

use super::*;

#[test]
fn agents_says_how_each_agent_up_reaped_has_exited() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let secrets = tempfile::tempdir().expect("the operator's secrets folder");
    std::fs::set_permissions(secrets.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let path = dir.path().join("up.json");
    // Unsandboxed, so each agent is `up`'s own child and its signal is its
    // own (bwrap would report it as an exit code).
    let config = json!({
        "sandbox": "off",
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [
            {"role": "a", "harness": "pi", "command": ["sh", "-c", "read _ && exit 3"]},
            {"role": "a", "harness": "pi", "command": ["sh", "-c", "read _ && kill -9 $$"]},
        ],
    });
    std::fs::write(&path, config.to_string()).expect("write config");
    let up = Up::start(
        &[
            "--config".as_ref(),
            path.as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
            "--secrets-dir".as_ref(),
            secrets.path().as_os_str(),
            "--stay".as_ref(),
        ],
        None,
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("JSON");
    let cap_file = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
    let socket = summary["socket"].as_str().expect("socket").to_owned();
    let runs: Vec<String> = summary["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| a["run"].as_str().expect("a run").to_owned())
        .collect();
    up.stderr_until("every agent has exited");
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
    let exited = |run: &str| {
        answer["result"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|row| row["run"] == run)
            .map(|row| row["exited"].clone())
    };
    assert_eq!(
        exited(&runs[0]),
        Some(json!({"status": 3, "signal": null})),
        "{answer}"
    );
    assert_eq!(
        exited(&runs[1]),
        Some(json!({"status": null, "signal": 9})),
        "{answer}"
    );
    up.signal(rustix::process::Signal::TERM);
    let (status, _, stderr) = up.finish();
    // Both failed, so `up` exits 1 when stopped.
    assert_eq!(status.code(), Some(1), "{stderr}");
}

#[test]
fn agents_output_is_relayed_line_by_line_with_every_escape_made_visible() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    // A window title and the clipboard on stdout, the same on stderr, a
    // screen clear, and a last line without its newline.
    let script = r"read _
printf '\033]0;pwned\007\n'
printf '\033]52;c;ZWNobyAncm0gLXJmIH4n\007\n' >&2
printf 'clear\033[2J\r\n'
printf 'tail'";
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "command": ["sh", "-c", script]}]),
    );
    let (status, stdout, stderr) = run_to_end(&config, root.path());
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(
        stdout.lines().count(),
        1,
        "only the summary on stdout: {stdout}"
    );
    for raw in ['\u{1b}', '\u{7}', '\r'] {
        assert!(!stderr.contains(raw), "a raw {raw:?} in {stderr:?}");
    }
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("a: ")).collect();
    for expected in [
        "a: ⟨ESC⟩]0;pwned⟨BEL⟩",
        "a: ⟨ESC⟩]52;c;ZWNobyAncm0gLXJmIH4n⟨BEL⟩",
        "a: clear⟨ESC⟩[2J",
        "a: tail",
    ] {
        assert!(lines.contains(&expected), "{expected:?} in {lines:?}");
    }
    assert_eq!(lines.len(), 4, "{lines:?}");
}
