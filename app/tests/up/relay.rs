//! What `up` relays of its agents: how each one exited (`agents`'s
//! `exited`), and their output, line by line, with every escape made
//! visible, kept in each run's own file; on a terminal, each agent line
//! dim and cut to one row, so none can pass for `up`'s own.

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
    // The run's own file, named in the first line, holds every line too,
    // neutralised alike.
    let summary: Value = serde_json::from_str(&stdout).expect("the first line");
    let output = PathBuf::from(summary["agents"][0]["output"].as_str().expect("output"));
    assert!(output.starts_with(root.path()), "{summary}");
    let mode = std::fs::metadata(&output)
        .expect("the output")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let kept = std::fs::read(&output).expect("the output");
    assert!(
        !kept.iter().any(|b| *b < 0x20 && *b != b'\n' || *b == 0x7f),
        "{:?}",
        String::from_utf8_lossy(&kept)
    );
    let kept = String::from_utf8(kept).expect("UTF-8");
    for expected in [
        "⟨ESC⟩]0;pwned⟨BEL⟩",
        "⟨ESC⟩]52;c;ZWNobyAncm0gLXJmIH4n⟨BEL⟩",
        "clear⟨ESC⟩[2J",
        "tail",
    ] {
        assert!(
            kept.lines().any(|l| l == expected),
            "{expected:?} in {kept:?}"
        );
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

/// On an 80-column terminal (tmux), an agent line wider than the screen,
/// ending in words that read like `up`'s own log line, is one dim row
/// after its mark, cut: no row of the screen starts with the agent's words
/// or holds the forged part; the run's file holds the line whole.
#[test]
fn on_a_terminal_each_agent_line_is_one_dim_row_after_its_mark() {
    let dir = tempfile::tempdir().expect("dir");
    let root = tempfile::tempdir().expect("data root");
    let forged = "INFO mosaic_app::runtime::broker: agent exited forged-by-the-agent status=0";
    let script = format!(
        "read _\nprintf '%s%s\\n' \"$(printf '%076d' 0)\" '{forged}'\n\
         printf '%s%s\\n' '{}' '{forged}'\nprintf 'done\\n'",
        "\u{65e5}".repeat(50)
    );
    let config = dir.path().join("up.json");
    let text = json!({
        "sandbox": "off",
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [{"role": "a", "harness": "pi", "command": ["sh", "-c", script]}],
    });
    std::fs::write(&config, text.to_string()).expect("write config");
    let command = format!(
        "{BIN} up --config {} --data-root {} >{}/summary; echo \"up exited with $?\"; read _",
        config.display(),
        root.path().display(),
        dir.path().display()
    );
    let tmux = support::tmux::Tmux::start(&command, 80, 24);
    tmux.wait_for("up exited with 0", WAIT);
    let rows = tmux.rows();
    let agent_rows: Vec<&String> = rows.iter().filter(|r| r.starts_with("a │ ")).collect();
    assert_eq!(agent_rows.len(), 3, "{rows:#?}");
    assert_eq!(agent_rows[2], "a │ done", "{rows:#?}");
    for (i, row) in rows.iter().enumerate() {
        assert!(!row.contains("forged-by-the-agent"), "{rows:#?}");
        // The row after an agent's is its next line or `up`'s own (which
        // wraps, and may go on with a run id's digits), never the rest
        // of the agent's line.
        let after_agent = i > 0 && rows[i - 1].starts_with("a │ ");
        assert!(
            !(after_agent && (row.starts_with('0') || row.starts_with('\u{65e5}'))),
            "an agent line wrapped: {rows:#?}"
        );
    }
    for row in &agent_rows[..2] {
        assert!(row.ends_with('…'), "{row:?}");
    }
    // Drawn dim: tmux keeps the attribute where it starts, at the mark.
    let escaped = String::from_utf8_lossy(&tmux.screen_escaped()).into_owned();
    assert!(escaped.contains("\u{1b}[2ma │ 0000"), "{escaped:?}");
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary")).expect("the summary"),
    )
    .expect("JSON");
    let output = std::fs::read_to_string(summary["agents"][0]["output"].as_str().expect("output"))
        .expect("the output");
    assert_eq!(
        output.lines().filter(|l| l.ends_with(forged)).count(),
        2,
        "{output}"
    );
}
