//! The command line from outside, on the real binary: every subcommand's
//! help, the version, and the usage-error contracts.
//!
//! Every run here has a bounded wait ([`WAIT`]), and help and usage errors
//! run with a stdin pipe that is held open and never written: a command
//! that read stdin instead of answering would hang there and fail the test
//! at the deadline, and one that took the pipe's end as an answer would not
//! get one either.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mosaic_domain::{CallerKind, Verb};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic-bus");
const WAIT: Duration = Duration::from_secs(20);

/// Every subcommand, as the global help must list it.
const SUBCOMMANDS: [&str; 13] = [
    "broker", "up", "call", "mcp", "human", "console", "demo", "unlock", "head", "backup",
    "verify", "version", "help",
];

/// What a finished run printed.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `mosaic-bus ARGS` with stdin an open pipe nobody writes, an empty
/// environment but for `env`, and waits at most [`WAIT`] for its exit.
#[track_caller]
fn run_with(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut child = Command::new(BIN)
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mosaic-bus");
    // Held until the child exited: it never sees the end of its input.
    let stdin = child.stdin.take();
    let (mut out, mut err) = (
        child.stdout.take().expect("stdout"),
        child.stderr.take().expect("stderr"),
    );
    let pid = child.id();
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut stdout, mut stderr) = (String::new(), String::new());
        let reader = std::thread::spawn(move || {
            let _ = err.read_to_string(&mut stderr);
            stderr
        });
        let _ = out.read_to_string(&mut stdout);
        let stderr = reader.join().unwrap_or_default();
        let status = child.wait().expect("wait");
        let _ = done.send(Run {
            code: status.code(),
            stdout,
            stderr,
        });
    });
    let outcome = finished.recv_timeout(WAIT);
    drop(stdin);
    match outcome {
        Ok(run) => run,
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("mosaic-bus {args:?} did not exit within {WAIT:?}: it waits on stdin");
        }
    }
}

#[track_caller]
fn run(args: &[&str]) -> Run {
    run_with(args, &[])
}

/// The help of `args` (`--help`, `-h` or `help NAME`): exit 0, on stdout,
/// nothing on stderr.
#[track_caller]
fn help(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(out.code, Some(0), "{args:?}: {out:?}");
    assert_eq!(out.stderr, "", "{args:?}");
    assert!(
        out.stdout.contains("Usage: mosaic-bus"),
        "{args:?}: {out:?}"
    );
    out.stdout
}

#[test]
fn every_subcommand_has_a_help_that_exits_0_without_reading_stdin() {
    for name in SUBCOMMANDS
        .iter()
        .filter(|n| !matches!(**n, "help" | "version"))
    {
        let long = help(&[name, "--help"]);
        assert!(
            long.contains(&format!("Usage: mosaic-bus {name}")),
            "{name}: {long}"
        );
        // Its exit codes and an example, at least.
        assert!(
            long.to_lowercase().contains("exit codes:"),
            "{name}: {long}"
        );
        assert!(long.contains("Example"), "{name}: {long}");
        let short = help(&[name, "-h"]);
        assert!(
            short.contains(&format!("Usage: mosaic-bus {name}")),
            "{name}"
        );
        assert_eq!(help(&["help", name]), long, "help {name}");
    }
    help(&["version", "--help"]);
}

#[test]
fn the_global_help_lists_every_subcommand_and_names_no_file_a_user_lacks() {
    let global = help(&["--help"]);
    let commands: Vec<&str> = global
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(commands, SUBCOMMANDS, "{global}");
    assert_eq!(help(&["help"]), global);
    // No subcommand at all: the same help, exit 0.
    assert_eq!(help(&[]), global);
    let mut every = global.clone();
    for name in SUBCOMMANDS.iter().filter(|n| **n != "help") {
        every.push_str(&help(&[name, "--help"]));
    }
    for stale in [
        "DESIGN",
        "spec/",
        "section 4",
        ".rs",
        "examples/",
        "ARCHITECTURE",
    ] {
        assert!(!every.contains(stale), "the help names {stale:?}");
    }
    // Every page of the docs it names is a page the docs have.
    for page in every.split_whitespace().filter(|w| w.contains("docs/")) {
        let page = page.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '/' && c != '.');
        let page = page.trim_end_matches('.');
        assert!(
            [
                "docs/protocol.md",
                "docs/host.md",
                "docs/agents.md",
                "docs/operations.md",
                "docs/browser.md",
                "docs/human.md",
            ]
            .contains(&page),
            "the help names {page}"
        );
    }
}

#[test]
fn the_version_is_the_crate_version() {
    let expected = format!("mosaic-bus {}\n", env!("CARGO_PKG_VERSION"));
    for args in [&["--version"][..], &["-V"], &["version"]] {
        let out = run(args);
        assert_eq!(
            (out.code, out.stdout.as_str(), out.stderr.as_str()),
            (Some(0), expected.as_str(), ""),
            "{args:?}"
        );
    }
}

/// The verbs of `caller` in the verb table.
fn verbs(caller: CallerKind) -> Vec<&'static str> {
    Verb::ALL
        .iter()
        .filter(|v| v.serves(caller))
        .map(|v| v.as_str())
        .collect()
}

/// The comma-separated list under `heading` in `help`.
fn listed<'a>(help: &'a str, heading: &str) -> Vec<&'a str> {
    help.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .flat_map(|l| l.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect()
}

#[test]
fn the_verb_lists_of_call_human_and_mcp_are_the_verb_table() {
    let call = help(&["call", "--help"]);
    assert_eq!(
        listed(&call, "Verbs (agents):"),
        verbs(CallerKind::Agent),
        "{call}"
    );
    assert_eq!(
        listed(&call, "Verbs (readers):"),
        verbs(CallerKind::Reader),
        "{call}"
    );
    let human = help(&["human", "--help"]);
    assert_eq!(
        listed(&human, "Verbs:"),
        verbs(CallerKind::Human),
        "{human}"
    );
    let mcp = help(&["mcp", "--help"]);
    let tools: Vec<String> = verbs(CallerKind::Agent)
        .iter()
        .map(|v| v.replace('.', "_"))
        .collect();
    assert_eq!(listed(&mcp, "Tools:"), tools, "{mcp}");
    // The examples use verbs their command serves.
    assert!(call.contains("mosaic-bus call message.send '{"), "{call}");
    assert!(
        human.contains(r#"{"business":"acme","verb":"inbox"}"#),
        "{human}"
    );
}

/// A usage error whose answer is one JSON line on stdout: exactly `line`,
/// exit 2; clap's explanation (or nothing, for `unlock`) on stderr.
#[track_caller]
fn refused_on_stdout(args: &[&str], line: &str) -> Run {
    let out = run(args);
    assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
    assert_eq!(out.stdout, format!("{line}\n"), "{args:?}: {out:?}");
    out
}

/// A usage error whose answer is its code on the last line of stderr,
/// with nothing on stdout, exit 2.
#[track_caller]
fn refused_on_stderr(args: &[&str], code: &str) -> Run {
    let out = run(args);
    assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
    assert_eq!(out.stdout, "", "{args:?}");
    assert_eq!(out.stderr.lines().last(), Some(code), "{args:?}: {out:?}");
    out
}

#[test]
fn usage_errors_keep_each_subcommands_contract() {
    let refusal = json!({"ok": false, "error": "bad-request"});
    let wire = r#"{"ok":false,"error":"bad-request"}"#;
    let sorted = r#"{"error":"bad-request","ok":false}"#;
    assert_eq!(
        serde_json::from_str::<Value>(wire).ok(),
        Some(refusal.clone())
    );
    assert_eq!(serde_json::from_str::<Value>(sorted).ok(), Some(refusal));

    // The host's channel: a boot failure line, and stdin is never read.
    let broker = refused_on_stdout(&["broker", "extra"], sorted);
    assert!(
        broker.stderr.contains("Usage: mosaic-bus broker"),
        "{broker:?}"
    );
    refused_on_stdout(&["broker", "--log-format", "xml"], sorted);
    // `up`'s startup failure line, byte for byte.
    for args in [
        &["up"][..],
        &["up", "--data-root", "/tmp"],
        &["up", "--config", ""],
        &["up", "--config", "a", "--config", "b"],
        &["up", "--config", "a", "--stay", "--stay"],
        &["up", "--config", "a", "extra"],
    ] {
        // What was wrong, for a person, on stderr.
        let out = refused_on_stdout(args, sorted);
        assert!(out.stderr.starts_with("error: "), "{out:?}");
        assert!(out.stderr.contains("--help"), "{out:?}");
    }
    // `call` and `human`: the wire's refusal line.
    for args in [
        &["call"][..],
        &["call", "inbox"],
        &["call", "inbox", "{}", "extra", "--socket", "/s"],
        &["call", "inbox", "--cap-file"],
        &["human"],
        &["human", "/s", "extra"],
        &["human", ""],
    ] {
        refused_on_stdout(args, wire);
    }
    // Arguments that are not JSON: refused before anything is sent.
    refused_on_stdout(&["call", "inbox", "not json", "--socket", "/s"], wire);
    // The socket may come from the environment.
    let from_env = run_with(&["call", "inbox", "[1"], &[("MOSAIC_BUS_SOCKET", "/s")]);
    assert_eq!((from_env.code, from_env.stdout.trim()), (Some(2), wire));
    // `unlock`: its one line and nothing else.
    for args in [
        &["unlock"][..],
        &["unlock", "--data-root"],
        &["unlock", "--data-root", ""],
        &["unlock", "--root", "/tmp"],
    ] {
        let out = refused_on_stdout(args, sorted);
        assert_eq!(out.stderr, "", "{args:?}");
    }
    // `verify` and `backup`: the one line and nothing else.
    for args in [
        &["verify"][..],
        &["verify", "--db"],
        &["verify", "--db", ""],
        &["verify", "--db", "/s", "--head"],
        &["backup", "--data-root", "/d"],
        &["backup", "--to", "/f", "extra"],
        &["backup", "--data-root", "/d", "--to", "/f", "--note"],
    ] {
        let out = refused_on_stdout(args, sorted);
        assert_eq!(out.stderr, "", "{args:?}");
    }
    // `head` prints a note on stdout: the code on stderr.
    refused_on_stderr(&["head", "--socket"], "bad-request");
    refused_on_stderr(&["head", "--socket", "/s", "extra"], "bad-request");
    // `mcp` (stdout is MCP's) and `demo` (stdout is its steps): the code on
    // stderr.
    refused_on_stderr(&["mcp"], "bad-request");
    refused_on_stderr(&["mcp", "--socket", "/s", "--bogus"], "bad-request");
    refused_on_stderr(&["demo", "--data-root"], "bad-request");
    refused_on_stderr(&["demo", "extra"], "bad-request");
    // An unknown command, or an unknown option before any command.
    for args in [&["frobnicate"][..], &["--bogus"], &["help", "frobnicate"]] {
        let out = refused_on_stderr(args, "unknown-command");
        assert!(out.stderr.contains("Usage: mosaic-bus"), "{out:?}");
    }
}
