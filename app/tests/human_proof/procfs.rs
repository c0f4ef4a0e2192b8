//! The proof against real processes, read through `/proc` ([`ProcFs`]):
//! a `cat` that waits on its stdin plays the CLI.

use super::*;

/// A child of this test, fed on its stdin; reaped when dropped, even when an
/// assertion failed.
struct Spawned {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // EOF ends the `cat`, and with it the shell around it.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// Spawns `argv` (a `cat`, perhaps under a shell) with our environment less
/// every run marker, plus `env`, and waits until it has echoed a line: the
/// `cat` has exec'd.
fn echoing(argv: &[&str], env: &[(&str, &str)]) -> Spawned {
    let mut command = Command::new(argv[0]);
    command.args(&argv[1..]);
    for marker in RUN_MARKERS {
        command.env_remove(marker);
    }
    command.envs(env.iter().copied());
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut spawned = Spawned {
        stdin: child.stdin.take(),
        child,
    };
    let stdin = spawned.stdin.as_mut().expect("stdin");
    stdin.write_all(b"ready\n").expect("write");
    stdin.flush().expect("flush");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("read");
    assert_eq!(line, "ready\n");
    spawned
}

/// The one process whose parent is `parent`, found by scanning `/proc`.
fn only_child_of(parent: u32) -> u32 {
    let table = ProcFs::new();
    let children: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| table.process(pid).is_ok_and(|p| p.ppid == parent))
        .collect();
    assert_eq!(children.len(), 1, "children of {parent}: {children:?}");
    children[0]
}

/// The device and inode of the file at `path` now, links followed.
fn identity_of(path: &Path) -> ExeIdentity {
    let meta = std::fs::metadata(path).expect("metadata");
    ExeIdentity {
        dev: meta.dev(),
        ino: meta.ino(),
    }
}

/// A claim that `peer` is the CLI, where the CLI is `cat` and the broker is
/// this test process.
fn cat_claim(peer: u32) -> HumanClaim {
    let uid = ProcFs::new().current().expect("self").uid;
    HumanClaim {
        peer_pid: peer,
        peer_uid: uid,
        broker_uid: uid,
        exe: BrokerExe {
            path: std::fs::canonicalize("/bin/cat").expect("cat"),
            identity: identity_of(Path::new("/bin/cat")),
        },
        // This test process's, which the peers started here share.
        namespaces: ProcFs::new()
            .namespaces(std::process::id())
            .expect("our namespaces"),
        nonce: NONCE.to_owned(),
    }
}

/// Over the real `/proc`: a "broker" (a copy of `cat`)
/// takes its executable at boot; another file is then renamed over its
/// path; a "CLI" started from that path reports the broker's very path, but
/// another file, and is refused. Before the swap, the same path passes the
/// executable checks (and fails only later, on its missing nonce).
#[test]
fn a_real_peer_running_a_file_swapped_in_at_the_brokers_path_is_refused() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join("mosaic-bus");
    std::fs::copy("/bin/cat", &path).expect("copy cat");
    let path = path.to_str().expect("a UTF-8 path");
    let broker = echoing(&[path], &[]);
    let exe = BrokerExe::of(&ProcFs::new(), broker.child.id()).expect("the broker's exe");
    assert_eq!(exe.identity, identity_of(Path::new(path)));
    let claim_for = |peer: u32| HumanClaim {
        exe: exe.clone(),
        ..cat_claim(peer)
    };

    let before = echoing(&[path], &[]);
    assert_check(
        &ProcFs::new(),
        &claim_for(before.child.id()),
        &no_launch,
        Err(ProofFailure::NonceMissing),
    );

    let replacement = dir.path().join("mosaic-bus.new");
    std::fs::copy("/bin/cat", &replacement).expect("copy cat again");
    std::fs::rename(&replacement, path).expect("rename over the broker's path");
    let after = echoing(&[path], &[(NONCE_ENV, NONCE)]);
    let peer = ProcFs::new().process(after.child.id()).expect("the peer");
    assert_eq!(peer.exe.as_ref(), Some(&exe.path), "the very same path");
    assert_check(
        &ProcFs::new(),
        &claim_for(after.child.id()),
        &no_launch,
        Err(ProofFailure::ExeReplaced),
    );
}

#[test]
fn a_real_peer_started_with_a_run_marker_is_refused() {
    let spawned = echoing(
        &["/bin/sh", "-c", "exec cat"],
        &[("MOSAIC_RUN_ID", "x"), (NONCE_ENV, NONCE)],
    );
    let peer = spawned.child.id();
    assert_check(
        &ProcFs::new(),
        &cat_claim(peer),
        &no_launch,
        Err(ProofFailure::PeerRunMarker {
            marker: "MOSAIC_RUN_ID",
        }),
    );
    assert_eq!(
        prove(&ProcFs::new(), &cat_claim(peer), &no_launch),
        Err(Refusal::HumanProofFailed)
    );
}

#[test]
fn a_real_ancestor_with_a_run_marker_is_refused() {
    // The shell keeps the marker; the `cat` it runs has it removed, as an
    // agent clearing its own variable would.
    let spawned = echoing(
        &["/bin/sh", "-c", "env -u MOSAIC_RUN_ID cat; :"],
        &[("MOSAIC_RUN_ID", "x"), (NONCE_ENV, NONCE)],
    );
    let shell = spawned.child.id();
    let peer = only_child_of(shell);
    let environ = ProcFs::new().environ(peer).expect("the cat's environ");
    assert!(!environ.iter().any(|(name, _)| name == b"MOSAIC_RUN_ID"));
    assert_check(
        &ProcFs::new(),
        &cat_claim(peer),
        &no_launch,
        Err(ProofFailure::AncestorRunMarker {
            pid: shell,
            marker: "MOSAIC_RUN_ID",
        }),
    );
}

#[test]
fn a_real_process_under_a_known_launch_is_refused() {
    let spawned = echoing(&["/bin/sh", "-c", "cat; :"], &[(NONCE_ENV, NONCE)]);
    let shell = spawned.child.id();
    let peer = only_child_of(shell);
    let start = ProcFs::new().process(shell).expect("shell").start_time;
    let launched = move |pid: u32, st: u64| pid == shell && st == start;
    assert_check(
        &ProcFs::new(),
        &cat_claim(peer),
        &launched,
        Err(ProofFailure::AncestorIsLaunch { pid: shell }),
    );
}

#[test]
fn a_real_peer_with_another_nonce_is_refused() {
    let spawned = echoing(&["/bin/cat"], &[(NONCE_ENV, OTHER_NONCE)]);
    assert_check(
        &ProcFs::new(),
        &cat_claim(spawned.child.id()),
        &no_launch,
        Err(ProofFailure::NonceMismatch),
    );
}

/// A clean peer proves: a `cat` carrying the nonce, started [`detached`],
/// so neither this test process nor its ancestors (whatever run markers
/// they carry, under an agent's harness) are in its ancestry.
#[test]
fn a_real_clean_peer_proves() {
    let mut command = detached();
    command
        .arg("/usr/bin/env")
        .arg(format!("{NONCE_ENV}={NONCE}"))
        .arg("/bin/cat");
    let peer = Pending::start(&mut command);
    peer.wait_for_request();
    assert_check(&ProcFs::new(), &cat_claim(peer.pid()), &no_launch, Ok(()));
    let echoed = peer.finish(b"{}\n");
    assert_eq!((echoed.code, echoed.reply), (0, serde_json::json!({})));
}
