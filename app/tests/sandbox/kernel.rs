//! Kernel state that is not a file. `up` runs with a
//! session keyring holding a key of the human's (a Python wrapper joins a
//! new named keyring, adds the key, and executes `up`); the agent reads
//! its session keyring and adds a key of its own. Without the sandbox it
//! reads the human's key: the negative control.

use serde_json::json;

use crate::probe::{Layout, Stayed};
use crate::PYTHON;

/// The human's key, in the keyring `up` is started with.
const SECRET: &str = "human-session-token-probe";

/// Joins a new session keyring, adds `user:human:session-token` to it,
/// and executes the rest.
const WITH_KEY: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(KEYCTL, 1, b"mosaic-probe") < 0:
    sys.exit("keyctl join: " + os.strerror(ctypes.get_errno()))
secret = sys.argv[1].encode()
if libc.syscall(ADD_KEY, b"user", b"human:session-token", secret, len(secret), -3) < 0:
    sys.exit("add_key: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[2], sys.argv[2:])
"#;

/// `script` with this architecture's numbers of `keyctl` and `add_key`.
fn numbered(script: &str) -> String {
    script
        .replace("KEYCTL", &libc::SYS_keyctl.to_string())
        .replace("ADD_KEY", &libc::SYS_add_key.to_string())
}

/// The agent's side: the key searched in its session keyring and read,
/// and a key added; each prints its payload, `ok`, or `failed:<errno>`.
const KEYS_PY: &str = r#"
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def fail():
    return "failed:" + errno.errorcode.get(ctypes.get_errno(), "?")
def read():
    key = libc.syscall(KEYCTL, 10, -3, b"user", b"human:session-token", 0)
    if key < 0:
        return fail()
    buf = ctypes.create_string_buffer(256)
    n = libc.syscall(KEYCTL, 11, ctypes.c_long(key), buf, 256)
    return buf.raw[:n].decode() if n >= 0 else fail()
def add():
    return "ok" if libc.syscall(ADD_KEY, b"user", b"agent:planted", b"x", 1, -3) >= 0 else fail()
print({"read": read, "add": add}[sys.argv[1]]())
"#;

fn probe(work: &std::path::Path, sandbox: &str) -> Stayed<()> {
    let mut layout = Layout::new(work);
    let wrapper = work.join("with-key.py");
    std::fs::write(&wrapper, numbered(WITH_KEY)).expect("write the wrapper");
    let keys = layout.conf.join("keys.py");
    std::fs::write(&keys, numbered(KEYS_PY)).expect("write the probe");
    layout.wrapper = vec![PYTHON.into(), wrapper.into(), SECRET.into()];
    let body = format!(
        "say read \"$({PYTHON} '{k}' read)\"\nsay add \"$({PYTHON} '{k}' add)\"\nsay done yes",
        k = keys.display()
    );
    // The probe beside the configuration, granted by name: nothing of that
    // folder is visible unless named.
    let mut agent = layout.agent("a", &body);
    agent["read"] = json!([keys]);
    let config = layout.config(sandbox, json!({}), vec![agent]);
    layout.stay(&config, &[], |_| ())
}

#[test]
fn the_agent_neither_reads_nor_adds_to_the_session_keyring() {
    let work = tempfile::tempdir().expect("work");
    let run = probe(work.path(), "required");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}");
    assert_eq!(r["read"], "failed:EPERM", "{r:?}");
    assert_eq!(r["add"], "failed:EPERM", "{r:?}");
}

#[test]
fn without_the_sandbox_the_agent_reads_the_humans_key() {
    let work = tempfile::tempdir().expect("work");
    let run = probe(work.path(), "off");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    let r = &run.report;
    assert_eq!(r["read"], SECRET, "{r:?}");
    assert_eq!(r["add"], "ok", "{r:?}");
}
