//! An agent cannot take from the human
//! what its sandbox caps. It fills its `/tmp`, its home and `/dev/shm`
//! (each a tmpfs of `tmpMiB`), writes into `/dev` (read-only), allocates past `memoryMiB`, and forks until refused
//! (`processes`, as `RLIMIT_NPROC` for an unprivileged user and as the
//! cgroup's `pids.max` where `up` can make one, root included), holding
//! what it got while the human's CLI sends a message and the reader reads
//! the inbox.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::probe::Layout;
use crate::BIN;

/// The caps the probe's config sets.
const TMP_MIB: u64 = 4;
const PROCESSES: usize = 32;
const MEMORY_MIB: u64 = 64;
/// What the probe allocates and touches: past the memory cap.
const ALLOCATE_MIB: u64 = 256;
/// How many forks the probe tries: past the cap, bounded.
const FORKS: usize = 64;

/// Forks up to its argument's count of children, each paused, and writes
/// `COUNT ERRNO` (`none` when every fork succeeded) to the fifo named by
/// its second argument; then waits, holding them, until killed.
const FORK_PY: &str = r#"
import errno, os, signal, sys
count, err = 0, "none"
for _ in range(int(sys.argv[1])):
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
        break
    if pid == 0:
        signal.pause()
        os._exit(0)
    count += 1
with open(sys.argv[2], "w") as f:
    f.write(f"{count} {err}\n")
signal.pause()
"#;

#[test]
fn an_agent_that_fills_its_tmp_and_forks_until_refused_leaves_the_human_served() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let fork = layout.conf.join("fork.py");
    std::fs::write(&fork, FORK_PY).expect("write the forker");
    crate::support::up::mkfifo(&layout.team.join("forks"));
    let body = format!(
        r#"
dd if=/dev/zero of=/tmp/fill bs=1M count=16 2>/dev/null
say tmp "$(stat -c %s /tmp/fill)"
dd if=/dev/zero of="$HOME/fill" bs=1M count=16 2>/dev/null
say home "$(stat -c %s "$HOME/fill")"
dd if=/dev/zero of=/dev/shm/fill bs=1M count=16 2>/dev/null
say shm "$(stat -c %s /dev/shm/fill)"
rm -f /dev/shm/fill
touch /dev/planted 2>/dev/null && say dev_write ok || say dev_write failed
/usr/bin/python3 -c 'x = b"\x01" * ({ALLOCATE_MIB} << 20)'
say memory "$?"
/usr/bin/python3 '{fork}' {FORKS} ./forks &
read -r forks <./forks
say forks "$forks"
say done yes
"#,
        fork = fork.display()
    );
    let mut agent = layout.agent("a", &body);
    agent["tmpMiB"] = json!(TMP_MIB);
    agent["processes"] = json!(PROCESSES);
    agent["memoryMiB"] = json!(MEMORY_MIB);
    // The forker beside the configuration, granted by name.
    agent["read"] = json!([fork]);
    let config = layout.config("required", json!({}), vec![agent]);
    // While the agent holds its processes and its full tmpfs: the human's
    // CLI, then the reader.
    let run = layout.stay(&config, &[], |live| {
        let mut human = Command::new(BIN)
            .args(["human", live.socket()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the human CLI");
        human
            .stdin
            .take()
            .expect("stdin")
            .write_all(
                br#"{"business":"x","verb":"message.send","args":{"to":"human","body":"still served"}}"#,
            )
            .expect("the request");
        let out = human.wait_with_output().expect("the answer");
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (answer, live.reader("inbox", json!({})))
    });
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    // `/dev/shm` is capped as `/tmp` is, and the rest of `/dev` takes no
    // write.
    assert_eq!(r["dev_write"], "failed", "{r:?}");
    for place in ["tmp", "home", "shm"] {
        let bytes: u64 = r[place].parse().expect("a size");
        assert!(bytes <= TMP_MIB << 20, "{place}: {r:?}");
        assert!(bytes >= 1 << 20, "{place}: {r:?}");
    }
    // RLIMIT_NPROC holds for an unprivileged user. Root is exempt from it
    // (docs/host.md), so as root the cap is the cgroup's `pids.max`, which
    // this CI host allows root to make (cgroup v1 pids, or v2 delegated).
    let root = rustix::process::getuid().is_root();
    assert!(!root || run.log.contains("pids.max"), "{}", run.log);
    let (count, errno) = r["forks"].split_once(' ').expect("COUNT ERRNO");
    let count: usize = count.parse().expect("a count");
    assert!(count < PROCESSES, "{r:?}");
    assert_eq!(errno, "EAGAIN", "{r:?}");
    // The memory cap holds where the log says a cgroup caps the memory:
    // the allocation is killed (SIGKILL, 128 + 9 in the shell) and the
    // agent goes on. Without one nothing caps it, and the allocation ends.
    let memory_capped = ["memory.max", "memory.limit_in_bytes"]
        .iter()
        .any(|file| run.log.contains(file));
    assert!(!root || memory_capped, "{}", run.log);
    let expected = if memory_capped { "137" } else { "0" };
    assert_eq!(r["memory"], expected, "{r:?}\n{}", run.log);
    let (answer, inbox) = &run.during;
    assert_eq!(answer["ok"], true, "{answer}\n{}", run.log);
    let bodies: Vec<&str> = inbox
        .as_array()
        .expect("an inbox")
        .iter()
        .filter_map(|m| m["body"].as_str())
        .collect();
    assert_eq!(bodies, ["still served"], "{inbox}");
}
