//! No Unix socket from inside: the human's sockets listening in the
//! agent's `workdir`, in the configuration's folder and in a `read` grant
//! (all three under the host's temporary folder, where such sockets live)
//! are out of the agent's reach, since the sandbox refuses
//! `socket(AF_UNIX, …)` (and leaves `socketpair`); the broker is still
//! reached, by several `mosaic-bus call`s at once, through the connector
//! of the sandbox's supervisor. Without the sandbox the same probes
//! connect (the negative control).

use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use serde_json::json;

use crate::probe::{Layout, Stayed};

/// Connects to the Unix socket its argument names, or with `pair` makes a
/// socket pair and sends a byte over it; prints `connected`, `ok` or
/// `failed:<errno name>`.
const SOCKET_PY: &str = r#"
import errno, socket, sys
try:
    if sys.argv[1] == "pair":
        a, b = socket.socketpair()
        a.send(b"x")
        print("ok" if b.recv(1) == b"x" else "failed:mismatch")
    else:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(sys.argv[1])
        print("connected")
except OSError as e:
    print("failed:" + errno.errorcode.get(e.errno, str(e.errno)))
"#;

/// The places the human's sockets listen in, by the report's names.
const PLACES: [&str; 3] = ["workdir", "conf", "read"];

/// How many calls the agent makes at once.
const CALLS: usize = 4;

/// Runs the probe with `sandbox` and `network`: the report, with the
/// listeners kept until the run ends.
fn probe(sandbox: &str, network: &str) -> Stayed<()> {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    let sockets: Vec<PathBuf> = [&layout.team, &layout.conf, &shared]
        .iter()
        .map(|dir| dir.join("human.sock"))
        .collect();
    let _listeners: Vec<UnixListener> = sockets
        .iter()
        .map(|path| UnixListener::bind(path).expect("listen"))
        .collect();
    let script = layout.conf.join("unix_probe.py");
    std::fs::write(&script, SOCKET_PY).expect("write the probe");
    let mut body = String::new();
    for (place, socket) in PLACES.iter().zip(&sockets) {
        body.push_str(&format!(
            "say {place} \"$(/usr/bin/python3 '{}' '{}')\"\n",
            script.display(),
            socket.display()
        ));
    }
    body.push_str(&format!(
        "say pair \"$(/usr/bin/python3 '{}' pair)\"\n",
        script.display()
    ));
    body.push_str(&format!(
        r#"mosaic-bus call role.claim >./claim
grep -q '"ok":true' ./claim && say claim ok || say claim "$(cat ./claim)"
for i in $(seq {CALLS}); do mosaic-bus call inbox '{{}}' >./call-$i & done
wait
n=0
for i in $(seq {CALLS}); do grep -q '"ok":true' ./call-$i && n=$((n + 1)); done
say calls "$n"
# A program that lost the connector (Claude Code's hooks do) takes the
# bridge, where there is one.
env -u MOSAIC_BUS_CONNECTOR_FD mosaic-bus call inbox '{{}}' >./bridged
grep -q '"ok":true' ./bridged && say bridged ok || say bridged "$(cat ./bridged)"
say done yes
"#
    ));
    let mut agent = layout.agent("a", &body);
    agent["read"] = json!([shared, script]);
    agent["network"] = json!(network);
    let config = layout.config(sandbox, json!({}), vec![agent]);
    layout.stay(&config, &[], |_| ())
}

#[test]
fn no_unix_socket_in_any_granted_path_is_reached_and_the_bus_is() {
    let run = probe("required", "none");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    assert_eq!(
        run.summary["agents"][0]["sandboxed"], true,
        "{}",
        run.summary
    );
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    for place in PLACES {
        assert_eq!(r[place], "failed:EPERM", "{place}: {r:?}\n{}", run.log);
    }
    assert_eq!(r["pair"], "ok", "{r:?}");
    assert_eq!(r["claim"], "ok", "{r:?}\n{}", run.log);
    assert_eq!(r["calls"], CALLS.to_string(), "{r:?}\n{}", run.log);
    assert_eq!(r["bridged"], "ok", "{r:?}\n{}", run.log);
}

#[test]
fn with_the_host_s_network_the_sockets_stay_out_of_reach_and_the_bridge_serves() {
    let run = probe("required", "host");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    assert_eq!(
        run.summary["agents"][0]["network"], "host",
        "{}",
        run.summary
    );
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    for place in PLACES {
        assert_eq!(r[place], "failed:EPERM", "{place}: {r:?}");
    }
    assert_eq!(r["calls"], CALLS.to_string(), "{r:?}\n{}", run.log);
    assert_eq!(r["bridged"], "ok", "{r:?}\n{}", run.log);
}

#[test]
fn without_the_sandbox_the_same_sockets_are_reached() {
    let run = probe("off", "none");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    assert_eq!(
        run.summary["agents"][0]["sandboxed"], false,
        "{}",
        run.summary
    );
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    for place in PLACES {
        assert_eq!(r[place], "connected", "{place}: {r:?}");
    }
    assert_eq!(r["claim"], "ok", "{r:?}\n{}", run.log);
    assert_eq!(r["calls"], CALLS.to_string(), "{r:?}\n{}", run.log);
}
