//! The processes inside the sandbox that the agent's filters do not bind
//! are out of its reach: the supervisor (`sandbox-exec`, whose connector
//! thread makes Unix sockets) and the proxy's bridge (`sandbox-bridge`)
//! run as the agent's own user, yet the agent opens neither one's memory
//! for writing (`/proc/<pid>/mem`) nor takes their descriptors
//! (`pidfd_getfd`). The negative controls: inside the sandbox the agent
//! opens the memory of a child of its own, so the probe can open one;
//! without the sandbox it takes that child's descriptor too.

use serde_json::json;

use crate::probe::{Layout, Stayed};

/// Finds the processes whose command line names `sandbox-exec` and
/// `sandbox-bridge` in `/proc`, tries each one's memory (opened for
/// writing) and its standard input (`pidfd_getfd`), and the same on a
/// child of its own; prints `NAME=VALUE` lines: how many of each it
/// found, and for each try `open` or `failed:<errno name>`, the first
/// process's answer that differs from a refusal, else the refusal.
const REACH_PY: &str = r#"
import ctypes, errno, os, subprocess, sys

libc = ctypes.CDLL(None, use_errno=True)
PIDFD_GETFD = 438
PR_GET_DUMPABLE = 3

def name(e):
    return "failed:" + errno.errorcode.get(e, str(e))

def mem(pid):
    try:
        os.close(os.open("/proc/%d/mem" % pid, os.O_RDWR))
        return "open"
    except OSError as e:
        return name(e.errno)

def getfd(pid):
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as e:
        return name(e.errno)
    fd = libc.syscall(PIDFD_GETFD, pidfd, 0, 0)
    e = ctypes.get_errno()
    os.close(pidfd)
    if fd < 0:
        return name(e)
    os.close(fd)
    return "open"

def worst(answers):
    opened = [a for a in answers if a == "open"]
    return opened[0] if opened else (answers[0] if answers else "none")

found = {"supervisor": [], "bridge": [], "init": []}
for entry in (os.listdir("/proc") if sys.argv[1] == "scan" else []):
    if not entry.isdigit():
        continue
    try:
        with open("/proc/%s/cmdline" % entry, "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        continue
    if argv[1:2] == [b"sandbox-exec"]:
        found["supervisor"].append(int(entry))
    elif argv[1:2] == [b"sandbox-bridge"]:
        found["bridge"].append(int(entry))
    elif os.path.basename(argv[0]) == b"bwrap":
        found["init"].append(int(entry))

for kind, pids in (found.items() if sys.argv[1] == "scan" else []):
    print("%s=%d" % (kind, len(pids)))
    print("%s_mem=%s" % (kind, worst([mem(p) for p in pids])))
    print("%s_getfd=%s" % (kind, worst([getfd(p) for p in pids])))

child = subprocess.Popen(["/bin/sleep", "600"])
try:
    print("child_mem=%s" % mem(child.pid))
    print("child_getfd=%s" % getfd(child.pid))
finally:
    child.kill()
    child.wait()
print("self_dumpable=%d" % libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
"#;

/// Runs the probe with `sandbox` and `network`.
fn probe(sandbox: &str, network: &str) -> Stayed<()> {
    // Without the sandbox the probe would see every process of the
    // machine, other tests' among them: it tries only its own child.
    let scan = if sandbox == "off" { "own" } else { "scan" };
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let script = layout.conf.join("reach.py");
    std::fs::write(&script, REACH_PY).expect("write the probe");
    let body = format!(
        r#"/usr/bin/python3 '{}' {scan} >./reach 2>&1
while IFS='=' read -r k v; do say "$k" "$v"; done <./reach
say done yes
"#,
        script.display()
    );
    let mut agent = layout.agent("a", &body);
    agent["network"] = json!(network);
    agent["read"] = json!([script]);
    let config = layout.config(sandbox, json!({}), vec![agent]);
    layout.stay(&config, &[], |_| ())
}

#[test]
fn the_supervisor_and_the_bridge_are_out_of_the_agent_s_reach() {
    let run = probe("required", "proxy");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    assert_eq!(
        run.summary["agents"][0]["sandboxed"], true,
        "{}",
        run.summary
    );
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    // The supervisor, and the bridge of the proxy's port.
    assert_eq!(r["supervisor"], "1", "{r:?}");
    assert_eq!(r["bridge"], "1", "{r:?}");
    // bwrap's own process, the sandbox's init, is out of reach already.
    assert_eq!(r["init"], "1", "{r:?}");
    assert_eq!(r["init_mem"], "failed:EACCES", "{r:?}");
    for kind in ["supervisor", "bridge"] {
        assert_eq!(r[&format!("{kind}_mem")], "failed:EACCES", "{kind}: {r:?}");
        assert_eq!(r[&format!("{kind}_getfd")], "failed:EPERM", "{kind}: {r:?}");
    }
    // A dumpable process of its own is in reach: the probe can see one.
    assert_eq!(r["child_mem"], "open", "{r:?}");
    assert_eq!(r["child_getfd"], "failed:EPERM", "{r:?}");
    assert_eq!(r["self_dumpable"], "1", "{r:?}");
}

#[test]
fn without_the_sandbox_a_process_of_the_agent_s_own_user_is_in_reach() {
    let run = probe("off", "none");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    assert_eq!(
        run.summary["agents"][0]["sandboxed"], false,
        "{}",
        run.summary
    );
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    assert_eq!(r["child_mem"], "open", "{r:?}");
    assert_eq!(r["child_getfd"], "open", "{r:?}");
    assert_eq!(r["self_dumpable"], "1", "{r:?}");
}
