//! `mosaic-bus call` against a real broker: the capability from a private
//! file or an inherited descriptor, never from an argument.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic-bus");

struct Broker {
    child: std::process::Child,
    boot: Value,
    _dir: tempfile::TempDir,
}

fn boot() -> Broker {
    let dir = tempfile::tempdir().expect("temporary directory");
    let business: Value =
        serde_json::from_str(mosaic_app::commands::demo::EXAMPLE_BUSINESS).expect("example parses");
    let business = business.get("business").cloned().unwrap_or(business);
    let config = json!({"op": "boot", "config": {
        "dataRoot": dir.path(),
        "businesses": {"acme": business},
        "launches": [{"business": "acme", "role": "dev", "run": "d1", "harness": "pi", "pid": std::process::id(),
                      "startTime": mosaic_adapters::procfs::ProcFs::new().current().expect("our stat").start_time}],
        "readers": [], "repoRoots": []}});
    let mut child = Command::new(BIN)
        .arg("broker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the broker");
    writeln!(child.stdin.as_mut().expect("stdin"), "{config}").expect("boot line");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("boot reply");
    let boot: Value = serde_json::from_str(&line).expect("boot reply is JSON");
    assert_eq!(boot["ok"], true, "{boot}");
    Broker {
        child,
        boot,
        _dir: dir,
    }
}

fn cap_file(dir: &std::path::Path, cap: &str, mode: u32) -> std::path::PathBuf {
    let path = dir.join(format!("cap-{mode:o}"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&path)
        .expect("cap file");
    writeln!(f, "{cap}").expect("write cap");
    path
}

fn call(args: &[&str], stdin: Stdio, env: &[(&str, &str)]) -> (Value, i32) {
    let out = Command::new(BIN)
        .arg("call")
        .args(args)
        .stdin(stdin)
        .envs(env.iter().copied())
        .output()
        .expect("run call");
    let line: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    (line, out.status.code().expect("exit code"))
}

#[test]
fn call_reads_its_capability_from_a_private_file_or_an_inherited_descriptor() {
    let mut broker = boot();
    let socket = broker.boot["path"].as_str().expect("path").to_owned();
    let cap = broker.boot["launches"][0]["cap"]
        .as_str()
        .expect("cap")
        .to_owned();
    let scratch = tempfile::tempdir().expect("scratch");

    let file = cap_file(scratch.path(), &cap, 0o600);
    let (reply, code) = call(
        &[
            "role.claim",
            "--cap-file",
            file.to_str().unwrap(),
            "--socket",
            &socket,
        ],
        Stdio::null(),
        &[],
    );
    assert_eq!(
        (reply, code),
        (json!({"ok": true, "result": {"status": "claimed"}}), 0)
    );

    // The descriptor form: the capability file is the child's fd 0.
    let fd = std::fs::File::open(&file).expect("open cap");
    let (reply, code) = call(
        &["inbox"],
        Stdio::from(fd),
        &[("MOSAIC_BUS_CAP_FD", "0"), ("MOSAIC_BUS_SOCKET", &socket)],
    );
    assert_eq!((reply, code), (json!({"ok": true, "result": []}), 0));

    // A refusal is exit 1 with the static code.
    let (reply, code) = call(
        &[
            "role.release",
            "{\"extra\":1}",
            "--cap-file",
            file.to_str().unwrap(),
            "--socket",
            &socket,
        ],
        Stdio::null(),
        &[],
    );
    assert_eq!(
        (reply, code),
        (json!({"ok": false, "error": "unknown-key"}), 1)
    );

    // A readable-by-others capability file is refused before anything is sent.
    let loose = cap_file(scratch.path(), &cap, 0o644);
    let (reply, code) = call(
        &[
            "inbox",
            "--cap-file",
            loose.to_str().unwrap(),
            "--socket",
            &socket,
        ],
        Stdio::null(),
        &[],
    );
    assert_eq!(
        (reply, code),
        (json!({"ok": false, "error": "unsafe-path"}), 1)
    );

    // No capability at all, and usage errors.
    let (reply, code) = call(&["inbox", "--socket", &socket], Stdio::null(), &[]);
    assert_eq!(
        (reply, code),
        (json!({"ok": false, "error": "bad-capability"}), 1)
    );
    let (reply, code) = call(&[], Stdio::null(), &[]);
    assert_eq!(
        (reply, code),
        (json!({"ok": false, "error": "bad-request"}), 2)
    );
    let (reply, code) = call(
        &["inbox", "not json", "--socket", &socket],
        Stdio::null(),
        &[],
    );
    assert_eq!(
        (reply, code),
        (json!({"ok": false, "error": "bad-request"}), 2)
    );

    writeln!(
        broker.child.stdin.as_mut().expect("stdin"),
        "{{\"op\":\"close\"}}"
    )
    .expect("close");
    assert!(broker.child.wait().expect("wait").success());

    // The broker is gone: nothing was sent.
    let (reply, code) = call(
        &[
            "inbox",
            "--cap-file",
            file.to_str().unwrap(),
            "--socket",
            &socket,
        ],
        Stdio::null(),
        &[],
    );
    assert_eq!(
        (reply, code),
        (json!({"ok": false, "error": "broker-unavailable"}), 1)
    );
}
