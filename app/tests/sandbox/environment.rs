//! Only named variables: of `up`'s environment an agent gets `PATH`,
//! `HOME`, `LANG`, `TERM` and what its configuration names in `env`,
//! sandboxed or not. `up` starts with locale categories, an ssh agent's
//! socket and a display set: none reaches the agent, unless its `env`
//! names it (the negative control: the same variable, named, arrives).

use std::ffi::OsStr;

use serde_json::json;

use crate::probe::Layout;

/// What `up`'s environment holds beyond the usual, by name and value.
const PLANTED: [(&str, &str); 4] = [
    ("LC_ALL", "C.UTF-8"),
    ("LC_FOO", "planted"),
    ("SSH_AUTH_SOCK", "/tmp/ssh-planted/agent.1"),
    ("DISPLAY", ":99"),
];

/// The names the agent sees with `sandbox`, its `env` naming `named`.
fn names_seen(sandbox: &str, named: &[&str]) -> Vec<String> {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let mut agent = layout.agent(
        "a",
        "say names \"$(env | cut -d= -f1 | sort | tr '\\n' ' ')\"\nsay done yes",
    );
    agent["env"] = json!(named);
    let config = layout.config(sandbox, json!({}), vec![agent]);
    let env: Vec<(&str, &OsStr)> = PLANTED
        .iter()
        .map(|(name, value)| (*name, OsStr::new(value)))
        .chain([
            ("LANG", OsStr::new("C.UTF-8")),
            ("TERM", OsStr::new("xterm")),
        ])
        .collect();
    let run = layout.stay(&config, &env, |_| ());
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    assert_eq!(run.report["done"], "yes", "{:?}\n{}", run.report, run.log);
    run.report["names"]
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn only_the_fixed_list_and_the_named_variables_reach_an_agent() {
    for sandbox in ["required", "off"] {
        let names = names_seen(sandbox, &[]);
        for (planted, _) in PLANTED {
            assert!(!names.iter().any(|n| n == planted), "{sandbox}: {names:?}");
        }
        for wanted in ["PATH", "HOME", "LANG", "TERM", "MOSAIC_BUS_SOCKET"] {
            assert!(names.iter().any(|n| n == wanted), "{sandbox}: {names:?}");
        }
    }
}

#[test]
fn a_variable_the_configuration_names_reaches_the_agent() {
    let names = names_seen("required", &["LC_FOO", "DISPLAY"]);
    for named in ["LC_FOO", "DISPLAY"] {
        assert!(names.iter().any(|n| n == named), "{names:?}");
    }
    assert!(!names.iter().any(|n| n == "LC_ALL"), "{names:?}");
}
