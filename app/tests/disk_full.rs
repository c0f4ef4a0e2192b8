//! A full disk never locks the human out, with the real
//! `up --stay`, the real broker, a real sandboxed agent and the real human
//! CLI: the data root and the agent's `workdir` share a 48 MiB tmpfs, the
//! agent fills it with `dd`, and then
//! - the agent's own request is refused `storage-unavailable`;
//! - the human's `launch.revoke` and `message.send`, from outside (the
//!   detached CLI), are answered `ok` and recorded, as the reader
//!   capability reads back while `up` still serves;
//! - once the test deletes the agent's file, the agent is served again;
//! - the log says why agents were refused, once, and that space returned;
//! - `mosaic-bus verify` passes on the store afterwards.
//!
//! The same again with `up`'s log on a full disk of its own (as `up
//! --console` keeps its log in the data root): the log lines that cannot
//! be written, the writer thread's first of all, are dropped and counted,
//! never a panic that would leave the broker half-alive; the human is
//! served all the same, and once the log has room again its next line
//! says how many were dropped.
//!
//! And a harness agent (a fake pi) that fills the disk through its state
//! folder, in bytes or in files (a tmpfs of few inodes): the human's
//! `launch.revoke` and `message.send` are `ok`, the next `up` starts,
//! having removed the sessions that left the disk short, and `verify`
//! passes.
//!
//! How it runs: `cargo test -p mosaic-app --test disk_full`. As root (how
//! `.ci/run` runs it) it mounts the tmpfs on a fresh folder and unmounts it
//! (lazily) when done. Without root, or where `mount` is refused, it runs
//! again, whole, in a child of this binary that is root of its own user
//! and mount namespaces (`unshare --user --map-root-user --mount`), where
//! a tmpfs may be mounted; when it cannot mount there either, it fails,
//! saying why: it never skips. Needs bwrap (`.ci/sandbox-deps`).
//!
//! Nothing sleeps: the agent reports through a fifo and waits on another,
//! and every wait is bounded by [`WAIT`] or, for `up`, by
//! [`support::up::UP_WAIT`].

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use serde_json::{json, Value};

use support::detached::{detached, Pending};
use support::up::{mkfifo, private_dir, reader_call, stop, summary};
use support::{BIN, WAIT};

/// Set in the re-run inside the namespaces: the file the child writes once
/// the test has passed there.
const IN_NAMESPACE: &str = "MOSAIC_DISK_FULL_IN_NAMESPACE";

/// The tests' names, as the harness filters on them.
const TEST: &str = "a_full_disk_leaves_the_human_served_and_agents_refused_until_space_returns";
const TEST_LOG: &str = "a_full_disk_under_the_log_too_drops_log_lines_and_serves_the_human";

/// The size of the log's own disk in the second test.
const LOG_DISK: &str = "1m";

/// The agent: it claims its role, waits at the gate, fills the disk, asks
/// for a write of its own, then waits at the gate while the test plays the
/// human and frees the space, and asks again. Each outcome is one
/// `name=answer` line into the `report` fifo (a fifo needs no room on a
/// full disk).
const AGENT: &str = r#"read _
say() { printf '%s=%s\n' "$1" "$2" >./report; }
say claim "$(mosaic-bus call role.claim 2>/dev/null)"
cat ./gate >/dev/null
dd if=/dev/zero of=./fill bs=1M count=100 2>/dev/null
say dd "$?"
say full "$(mosaic-bus call message.send '{"to":"human","body":"from a full disk"}' 2>/dev/null)"
cat ./gate >/dev/null
say after "$(mosaic-bus call message.send '{"to":"human","body":"after space returned"}' 2>/dev/null)"
cat ./gate >/dev/null
"#;

/// A 48 MiB tmpfs on a fresh folder, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts one of `size` here, or says why not.
    fn mount(size: &str) -> Result<Tmpfs, String> {
        if !rustix::process::geteuid().is_root() {
            return Err("not root".into());
        }
        let dir = tempfile::Builder::new()
            .prefix("mosaic-disk-full-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status()
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("mount: {status}"));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: an `up` left running by a failed assertion must not keep
        // the mount alive.
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

/// Runs `test` again in a child that is root of its own user and mount
/// namespaces, and fails unless it passed there.
fn in_namespace(test: &str, why: &str) {
    assert!(
        std::env::var_os(IN_NAMESPACE).is_none(),
        "cannot mount a tmpfs even as root of a new user namespace: {why}"
    );
    let marks = tempfile::tempdir().expect("a folder for the mark");
    let mark = marks.path().join("passed");
    let status = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "--"])
        .arg(std::env::current_exe().expect("this test binary"))
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .env(IN_NAMESPACE, &mark)
        .status()
        .expect("run unshare (util-linux)");
    assert!(
        status.success(),
        "{test} failed in its user namespace ({status}); here it could not mount ({why}), \
         and without root it needs unprivileged user namespaces"
    );
    assert_eq!(
        std::fs::read_to_string(&mark).ok().as_deref(),
        Some(test),
        "{test} did not run in its user namespace"
    );
}

/// The lines of the fifo at `path`, each sent as it comes: the fifo is
/// held open for writing too, so it never ends between the agent's lines.
fn fifo_lines(path: &Path) -> mpsc::Receiver<String> {
    let fifo = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open the report fifo");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(fifo).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// The agent's next report, which must be `name`; its answer, parsed when
/// it is JSON.
#[track_caller]
fn next(reports: &mpsc::Receiver<String>, name: &str, log: &Path) -> Value {
    let line = reports.recv_timeout(WAIT).unwrap_or_else(|_| {
        let log = std::fs::read_to_string(log).unwrap_or_default();
        panic!("no `{name}` report from the agent within {WAIT:?}\n{log}")
    });
    let answer = line
        .strip_prefix(&format!("{name}="))
        .unwrap_or_else(|| panic!("`{name}=…` expected, got {line:?}"));
    serde_json::from_str(answer).unwrap_or_else(|_| Value::String(answer.to_owned()))
}

/// Opens the agent's gate once: it goes on to its next step.
fn open_gate(gate: &Path) {
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .open(gate)
        .expect("open the gate");
    fifo.write_all(b"\n").expect("open the gate");
}

/// The human CLI from outside, detached from this test: its `result`.
#[track_caller]
fn human(socket: &str, verb: &str, args: Value) -> Value {
    let mut command = detached();
    command.arg(BIN).arg("human").arg(socket);
    let request = json!({"business": "x", "verb": verb, "args": args});
    Pending::start(&mut command)
        .finish(format!("{request}\n").as_bytes())
        .ok()
}

/// How many lines of `log` contain `text`.
fn lines_with(log: &str, text: &str) -> usize {
    log.lines().filter(|l| l.contains(text)).count()
}

/// Fills the filesystem of `dir` with a file of zeros, written until it
/// fails for lack of space; returns the file.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).expect("the filler");
    let chunk = vec![0_u8; 64 * 1024];
    loop {
        if let Err(e) = file.write_all(&chunk) {
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
            break;
        }
    }
    // What a last partial chunk could not write.
    while file.write_all(&[0]).is_ok() {}
    path
}

/// Pads the log at `path` with empty lines to a whole number of 64 KiB,
/// so that its last page has no room left: a full filesystem refuses
/// only a write that needs a new page.
fn pad(path: &Path) {
    let len = std::fs::metadata(path).expect("the log").len();
    let missing = (64 * 1024 - len % (64 * 1024)) % (64 * 1024);
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("the log");
    log.write_all(&vec![b'\n'; usize::try_from(missing).expect("a size")])
        .expect("pad the log");
}

/// Where `up`'s log goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Log {
    /// A file off the small disk.
    Outside,
    /// A file on a disk of its own, which the test fills before the agent
    /// fills the data root's, and frees when it frees that one.
    OnAFullDisk,
}

#[test]
fn a_full_disk_leaves_the_human_served_and_agents_refused_until_space_returns() {
    full_disk(TEST, Log::Outside);
}

#[test]
fn a_full_disk_under_the_log_too_drops_log_lines_and_serves_the_human() {
    full_disk(TEST_LOG, Log::OnAFullDisk);
}

fn full_disk(test: &str, where_log: Log) {
    let fs = match Tmpfs::mount("48m") {
        Ok(fs) => fs,
        Err(why) => return in_namespace(test, &why),
    };
    let log_fs = match where_log {
        Log::Outside => None,
        Log::OnAFullDisk => Some(Tmpfs::mount(LOG_DISK).expect("a second tmpfs")),
    };
    let outside = tempfile::tempdir().expect("a folder off the small disk");
    let root = private_dir(&fs.path().join("data"));
    let work = fs.path().join("work");
    std::fs::create_dir(&work).expect("mkdir work");
    for fifo in ["report", "gate"] {
        mkfifo(&work.join(fifo));
    }
    let team = outside.path().join("team");
    std::fs::create_dir(&team).expect("mkdir team");
    std::fs::write(team.join("agent.sh"), AGENT).expect("write the agent");
    let sends = json!({"authority": {"withinRole": ["message.send"], "crossRole": []}});
    let config = json!({
        "sandbox": "required",
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": sends}},
        "agents": [{"role": "a", "harness": "pi", "workdir": work,
                    "command": ["sh", team.join("agent.sh")]}],
    });
    let config_path = team.join("up.json");
    std::fs::write(&config_path, config.to_string()).expect("write the configuration");
    let tmp = private_dir(&outside.path().join("tmp"));
    let log_path = log_fs
        .as_ref()
        .map_or_else(|| outside.path().to_owned(), |fs| fs.path().to_owned())
        .join("up.log");
    let reports = fifo_lines(&work.join("report"));
    let mut up = Command::new(BIN)
        .args(["up", "--stay", "--config"])
        .arg(&config_path)
        .arg("--data-root")
        .arg(&root)
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(
            // Appended to, so that no write of `up` lands in the room the
            // test's padding leaves in the file's last page.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .expect("the log"),
        )
        .spawn()
        .expect("spawn up");
    let summary = summary(&mut up, &log_path);
    let socket = summary["socket"].as_str().expect("socket").to_owned();
    let reader_cap = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
    let reader = |verb: &str, args: Value| reader_call(&socket, &reader_cap, verb, args);
    let reserve = root.join("bus").join(mosaic_adapters::sqlite::RESERVE_FILE);
    let reserve_len = || std::fs::metadata(&reserve).expect("the reserve").len();
    assert_eq!(summary["agents"][0]["sandboxed"], true, "{summary}");
    assert!(reserve_len() > 0, "the broker holds its reserve");

    let claim = next(&reports, "claim", &log_path);
    assert_eq!(claim["ok"], true, "{claim}");
    // The log's disk is full before the agent fills the data root's: the
    // writer's line about the full disk cannot be written.
    let log_filler = log_fs.as_ref().map(|fs| {
        pad(&log_path);
        fill(fs.path())
    });
    let logged_before = std::fs::metadata(&log_path).expect("the log").len();
    open_gate(&work.join("gate"));
    // `dd` ran out of space: the 100 MiB never fit.
    assert_eq!(next(&reports, "dd", &log_path), json!(1));
    assert!(
        std::fs::metadata(work.join("fill"))
            .expect("the agent's file")
            .len()
            > 30 << 20,
        "the agent filled the disk"
    );
    // The agent's write failed for lack of space: the broker released its
    // reserve and refused the agent.
    assert_eq!(
        next(&reports, "full", &log_path),
        json!({"ok": false, "error": "storage-unavailable"})
    );
    assert_eq!(reserve_len(), 0, "the reserve is released");

    // The human, from outside, on the full disk.
    assert_eq!(human(&socket, "launch.revoke", json!({})), json!({}));
    let sent = human(
        &socket,
        "message.send",
        json!({"to": "a", "body": "stop filling the disk"}),
    );
    let id = sent["id"].as_str().expect("the message's id").to_owned();
    // Recorded, as the reader capability reads back.
    let trail = reader("trail", json!({"subject": id}));
    assert!(trail.to_string().contains("message.sent"), "{trail}");
    let changes = reader("changes", json!({"since": 0, "timeoutMs": 1000}));
    let kinds: Vec<&str> = changes["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("changes in {changes}"))
        .iter()
        .filter_map(|c| c["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"launch.revoked"), "{changes}");
    // The agent's message never was.
    let inbox = reader("inbox", json!({}));
    assert!(!inbox.to_string().contains("from a full disk"), "{inbox}");
    if log_filler.is_some() {
        assert_eq!(
            std::fs::metadata(&log_path).expect("the log").len(),
            logged_before,
            "nothing could be added to the full log"
        );
    }

    // Space returns: the agent is served again, and the reserve is back.
    if let Some(filler) = &log_filler {
        std::fs::remove_file(filler).expect("free the log's disk");
    }
    std::fs::remove_file(work.join("fill")).expect("delete the agent's file");
    open_gate(&work.join("gate"));
    let after = next(&reports, "after", &log_path);
    assert_eq!(after["ok"], true, "{after}");
    assert!(reserve_len() > 0, "the reserve is taken again");
    let inbox = reader("inbox", json!({})).to_string();
    assert!(inbox.contains("after space returned"), "{inbox}");
    assert!(!inbox.contains("from a full disk"), "{inbox}");

    open_gate(&work.join("gate"));
    let status = stop(up);
    let log = std::fs::read_to_string(&log_path).expect("the log");
    assert!(status.success(), "{status}\n{log}");
    let full_line = "the disk is full: only the human's requests are served now";
    let dropped = "log lines could not be written and were dropped";
    match where_log {
        Log::Outside => {
            // Why agents were refused, once; and that space returned, once.
            assert_eq!(lines_with(&log, full_line), 1, "{log}");
            assert_eq!(lines_with(&log, dropped), 0, "{log}");
        }
        Log::OnAFullDisk => {
            // The line about the full disk was lost with the others, and
            // the first line written again says how many were.
            assert_eq!(lines_with(&log, full_line), 0, "{log}");
            assert_eq!(lines_with(&log, dropped), 1, "{log}");
            let summary = log
                .lines()
                .find(|l| l.contains(dropped))
                .expect("the summary line");
            let count: u64 = summary
                .rsplit("dropped=")
                .next()
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("a count in {summary:?}"));
            assert!(count >= 1, "{summary}");
        }
    }
    assert_eq!(lines_with(&log, "space returned"), 1, "{log}");

    let verify = Command::new(BIN)
        .args(["verify", "--db"])
        .arg(root.join("bus/bus.sqlite"))
        .output()
        .expect("mosaic-bus verify");
    assert!(
        verify.status.success(),
        "verify: {}\n{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    drop(log_fs);
    if let Some(mark) = std::env::var_os(IN_NAMESPACE) {
        std::fs::write(mark, test).expect("mark the child's pass");
    }
}

/// The tests of a harness's state folder on a full disk, by name.
const TEST_STATE: &str =
    "a_harness_that_fills_its_state_folder_leaves_the_human_served_and_the_next_up_starts";
const TEST_STATE_FILES: &str =
    "a_harness_that_fills_the_disk_s_files_leaves_the_human_served_and_the_next_up_starts";

/// A fake pi that fills its state folder's sessions, with one file of
/// zeros (`bytes`) or with empty files (`files`), until the disk refuses;
/// then reports `filled` into the `report` fifo of `work` and waits.
fn state_filler(work: &Path, how: &str) -> String {
    let fill = match how {
        "bytes" => r#"dd if=/dev/zero of="$S/fill" bs=1M count=100 2>/dev/null"#,
        // In a subshell: a redirection that fails ends `sh` itself.
        _ => r#"i=0; while (: >"$S/f$i") 2>/dev/null; do i=$((i+1)); done"#,
    };
    format!(
        "#!/bin/sh\n[ \"${{1:-}}\" = --version ] && {{ echo 0.0.1; exit 0; }}\n\
         S=\"$PI_CODING_AGENT_DIR/sessions\"; mkdir -p \"$S\"\n{fill}\n\
         echo filled=1 >'{}'\nexec sleep 600\n",
        work.join("report").display()
    )
}

#[test]
fn a_harness_that_fills_its_state_folder_leaves_the_human_served_and_the_next_up_starts() {
    state_full(TEST_STATE, "48m", "bytes");
}

#[test]
fn a_harness_that_fills_the_disk_s_files_leaves_the_human_served_and_the_next_up_starts() {
    state_full(TEST_STATE_FILES, "48m,nr_inodes=3000", "files");
}

/// A harness agent (a fake pi) fills the data root's disk through its
/// state folder, in bytes or in files: the human's `launch.revoke` and
/// `message.send` are answered `ok`; the next `up` starts, having removed
/// the sessions that left the disk short (a line says so); `verify` passes.
fn state_full(test: &str, size: &str, how: &str) {
    let fs = match Tmpfs::mount(size) {
        Ok(fs) => fs,
        Err(why) => return in_namespace(test, &why),
    };
    let outside = tempfile::tempdir().expect("a folder off the small disk");
    let root = private_dir(&fs.path().join("data"));
    let work = outside.path().join("work");
    std::fs::create_dir(&work).expect("mkdir work");
    mkfifo(&work.join("report"));
    let team = outside.path().join("team");
    std::fs::create_dir(&team).expect("mkdir team");
    let program = team.join("fill-pi");
    std::fs::write(&program, state_filler(&work, how)).expect("write the filler");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let sends = json!({"authority": {"withinRole": ["message.send"], "crossRole": []}});
    let config = json!({
        "sandbox": "required",
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": sends}},
        "agents": [{"role": "a", "harness": "pi", "workdir": work, "program": program,
                    "prompt": "Fill.", "restart": "no", "network": "host",
                    "model": {"api": "anthropic", "baseUrl": "http://127.0.0.1:9"}}],
    });
    let config_path = team.join("up.json");
    std::fs::write(&config_path, config.to_string()).expect("write the configuration");
    let tmp = private_dir(&outside.path().join("tmp"));
    let start = |log_path: &Path| {
        let mut up = Command::new(BIN)
            .args(["up", "--stay", "--config"])
            .arg(&config_path)
            .arg("--data-root")
            .arg(&root)
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log_path).expect("the log"))
            .spawn()
            .expect("spawn up");
        let summary = summary(&mut up, log_path);
        (up, summary)
    };
    let reports = fifo_lines(&work.join("report"));
    let first_log = outside.path().join("first.log");
    let (up, summary) = start(&first_log);
    assert_eq!(summary["agents"][0]["sandboxed"], true, "{summary}");
    assert_eq!(next(&reports, "filled", &first_log), json!(1));
    let socket = summary["socket"].as_str().expect("socket").to_owned();
    // The human, from outside, on the full disk.
    assert_eq!(human(&socket, "launch.revoke", json!({})), json!({}));
    let sent = human(
        &socket,
        "message.send",
        json!({"to": "a", "body": "stop filling the disk"}),
    );
    assert!(sent["id"].is_string(), "{sent}");
    let status = stop(up);
    let log = std::fs::read_to_string(&first_log).expect("the log");
    assert!(status.success(), "{status}\n{log}");

    // The next `up` starts, and removes the sessions first.
    let next_log = outside.path().join("next.log");
    let (up, summary) = start(&next_log);
    assert_eq!(summary["ok"], true, "{summary}");
    let status = stop(up);
    let log = std::fs::read_to_string(&next_log).expect("the log");
    assert!(status.success(), "{status}\n{log}");
    assert!(log.contains("removed a harness agent's sessions"), "{log}");
    // The launch makes the run's own empty session folder again: no file
    // of the filled sessions is left.
    let kept = files_under(&root.join("agents/state/a.pi/sessions"));
    assert!(kept.is_empty(), "{kept:?}\n{log}");

    let verify = Command::new(BIN)
        .args(["verify", "--db"])
        .arg(root.join("bus/bus.sqlite"))
        .output()
        .expect("mosaic-bus verify");
    assert!(
        verify.status.success(),
        "verify: {}\n{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    if let Some(mark) = std::env::var_os(IN_NAMESPACE) {
        std::fs::write(mark, test).expect("mark the child's pass");
    }
}

/// Every file below `dir`, at any depth (none where `dir` is missing).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}
