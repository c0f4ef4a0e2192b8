//! No agent holds `up`'s terminal. `up` runs with a
//! terminal (a pty the test holds) as its standard input and controlling
//! terminal; the agent reopens its descriptors 0, 1 and 2 through
//! `/proc/self/fd`, reads them, asks `tcgetattr` of each and writes an
//! escape sequence to each and to its output: nothing reaches the
//! terminal, and `up`'s log shows the escapes as tokens.

use std::collections::HashMap;
use std::io::Read;

use serde_json::json;

use crate::outside::pty;
use crate::probe::Layout;
use crate::PYTHON;

/// Each of 0, 1 and 2 reopened read-write, read without blocking, asked
/// `tcgetattr`, and written an escape sequence; one `tty_N=` line each in
/// the report named by its argument.
const TERM_PY: &str = r#"
import errno, os, sys, termios
out = open(sys.argv[1], "a")
for n in (0, 1, 2):
    parts = []
    try:
        fd = os.open(f"/proc/self/fd/{n}", os.O_RDWR | os.O_NONBLOCK | os.O_NOCTTY)
        parts.append("open:ok")
    except OSError as e:
        out.write(f"tty_{n}=open:{errno.errorcode[e.errno]}\n")
        continue
    try:
        parts.append(f"read:{len(os.read(fd, 4096))}")
    except OSError as e:
        parts.append("read:" + errno.errorcode[e.errno])
    try:
        termios.tcgetattr(fd)
        parts.append("tcgetattr:ok")
    except termios.error as e:
        parts.append("tcgetattr:" + errno.errorcode[e.args[0]])
    parts.append(f"isatty:{os.isatty(fd)}")
    try:
        os.write(fd, b"\x1b]0;pwned\x07\x1b[2J\n")
    except OSError:
        pass
    out.write(f"tty_{n}=" + " ".join(parts) + "\n")
"#;

/// A run with `sandbox`: the report, what reached the terminal, the log.
fn probe(sandbox: &str) -> (HashMap<String, String>, Vec<u8>, String) {
    let work = tempfile::tempdir().expect("work");
    let mut layout = Layout::new(work.path());
    let (master, terminal) = pty();
    layout.stdin = Some(terminal);
    // `up` leads a session whose controlling terminal is the pty.
    layout.wrapper = vec!["setsid".into(), "--ctty".into()];
    let term = layout.conf.join("term.py");
    std::fs::write(&term, TERM_PY).expect("write the probe");
    let body = format!(
        r#"
{PYTHON} '{term}' "$R"
say fds "$(ls -l /proc/self/fd | awk 'NR>1 {{printf "%s ", $11}}')"
printf '\033]0;pwned\007\033[2Jout\n'
printf '\033]0;pwned\007\033[2Jerr\n' >&2
if printf '\033]0;pwned\007tty\n' 2>/dev/null >/dev/tty; then say dev_tty ok; else say dev_tty failed; fi
say done yes
"#,
        term = term.display()
    );
    // The probe beside the configuration, granted by name: nothing of that
    // folder is visible unless named.
    let mut agent = layout.agent("a", &body);
    agent["read"] = json!([term]);
    let config = layout.config(sandbox, json!({}), vec![agent]);
    let run = layout.stay(&config, &[], |_| ());
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    // What reached the terminal: its master side's bytes.
    rustix::fs::fcntl_setfl(&master, rustix::fs::OFlags::NONBLOCK).expect("non-blocking");
    let mut held = Vec::new();
    // Ends with `EAGAIN` once everything is read.
    let _ = std::fs::File::from(master).read_to_end(&mut held);
    (run.report, held, run.log)
}

#[test]
fn no_agent_holds_ups_terminal_and_nothing_reaches_it_raw() {
    let (r, held, log) = probe("required");
    assert_eq!(r["done"], "yes", "{r:?}");
    for n in 0..3 {
        let line = &r[&format!("tty_{n}")];
        assert!(line.contains("tcgetattr:ENOTTY"), "{n}: {r:?}");
        assert!(line.contains("isatty:False"), "{n}: {r:?}");
    }
    assert!(
        !r["fds"].contains("/dev/pts") && !r["fds"].contains("tty"),
        "{r:?}"
    );
    assert_eq!(r["dev_tty"], "failed", "{r:?}");
    assert!(held.is_empty(), "the terminal got {held:?}");
    // What the agent wrote is relayed with its escapes as tokens.
    assert!(log.contains("a: ⟨ESC⟩]0;pwned⟨BEL⟩⟨ESC⟩[2Jout"), "{log}");
    assert!(log.contains("a: ⟨ESC⟩]0;pwned⟨BEL⟩⟨ESC⟩[2Jerr"), "{log}");
    assert!(!log.contains('\u{1b}'), "a raw escape in the log");
}

#[test]
fn without_the_sandbox_the_agent_writes_to_ups_terminal() {
    let (r, held, _) = probe("off");
    assert_eq!(r["dev_tty"], "ok", "{r:?}");
    let text = String::from_utf8_lossy(&held);
    assert!(text.contains("\u{1b}]0;pwned\u{7}tty"), "{text:?}");
}
