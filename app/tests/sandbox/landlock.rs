//! A kernel without Landlock, played by a seccomp filter around `up`:
//! abstract sockets stay closed all the same, since a sandboxed agent
//! makes no Unix socket, and the first line says so, with no warning.

use std::path::Path;

use crate::detours::{config, human_answer, run_up, HUMAN_PROBES};
use crate::outside::Outside;
use crate::PYTHON;

/// A seccomp filter that answers Landlock's system calls with `ENOSYS`, as
/// a kernel without Landlock does, written to `path` as the raw BPF
/// program `prctl(PR_SET_SECCOMP)` takes.
fn no_landlock_filter(path: &Path) {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
    let filter = SeccompFilter::new(
        [
            libc::SYS_landlock_create_ruleset,
            libc::SYS_landlock_add_rule,
            libc::SYS_landlock_restrict_self,
        ]
        .into_iter()
        .map(|call| (call, Vec::new()))
        .collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        std::env::consts::ARCH.try_into().expect("an architecture"),
    )
    .expect("a filter");
    let program = BpfProgram::try_from(filter).expect("a program");
    let bytes: Vec<u8> = program
        .iter()
        .flat_map(|i| {
            let mut b = i.code.to_ne_bytes().to_vec();
            b.extend([i.jt, i.jf]);
            b.extend(i.k.to_ne_bytes());
            b
        })
        .collect();
    std::fs::write(path, bytes).expect("write the filter");
}

/// Installs the filter in its first argument (with `no_new_privs`) and
/// executes the rest: `up` and everything it starts then run as on a
/// kernel without Landlock.
const WITHOUT_LANDLOCK_PY: &str = r#"
import ctypes, os, sys
prog = open(sys.argv[1], "rb").read()
buf = ctypes.create_string_buffer(prog, len(prog))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = Fprog(len(prog) // 8, ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
ul = ctypes.c_ulong
if libc.prctl(ul(38), ul(1), ul(0), ul(0), ul(0)) != 0 or libc.prctl(ul(22), ul(2), ctypes.byref(fprog), ul(0), ul(0)) != 0:
    sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[2], sys.argv[2:])
"#;

#[test]
fn without_landlock_abstract_sockets_stay_closed_by_the_socket_filter() {
    let work = tempfile::tempdir().expect("work");
    let work = work.path();
    let outside = Outside::start(work);
    let config = config(work, "required");
    let filter = work.join("no-landlock.bpf");
    no_landlock_filter(&filter);
    let wrapper = work.join("without-landlock.py");
    std::fs::write(&wrapper, WITHOUT_LANDLOCK_PY).expect("write the wrapper");
    let (wrapper, filter) = (wrapper.to_string_lossy(), filter.to_string_lossy());
    let run = run_up(&config, work, &outside, &[PYTHON, &wrapper, &filter]);
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    for agent in run.summary["agents"].as_array().expect("agents") {
        assert_eq!(agent["sandboxed"], true, "{}", run.summary);
        assert_eq!(agent["abstractSockets"], "closed", "{}", run.summary);
    }
    assert!(!run.log.contains("Landlock scopes"), "{}", run.log);
    // What the first line says is so: the abstract socket is out of reach
    // (the socket filter refuses the socket itself); the rest of the
    // sandbox holds.
    let r = &run.report;
    assert_eq!(r["abstract"], "failed:EPERM", "{r:?}");
    for probe in HUMAN_PROBES {
        assert_eq!(r[probe], human_answer(probe), "{probe}: {r:?}");
    }
    assert_eq!(r["tmux_keys"], "failed", "{r:?}");
    assert_eq!(run.probe_messages(), Vec::<String>::new(), "{}", run.inbox);
}
