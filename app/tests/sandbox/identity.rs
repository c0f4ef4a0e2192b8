//! Files and folders by identity, not by path. A hard link of lead's
//! program in dev's workdir is the same file: dev could rewrite what lead
//! runs. Two agents' workdirs, one inside the other: the outer one could
//! plant what the inner one reads (a `.pi` folder of its own). Both are
//! refused; without a sandbox the link rewrites lead's program (the
//! negative control), and with `"shared": true` for both the nested pair
//! starts, with one warning that each can steer the other.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::probe::Layout;

/// Lead's program, outside every agent's folder, with a hard link of it
/// in the team's folder; the configuration with lead (role `b`) running
/// it and the prober (role `a`) in the team's folder, which appends to
/// the link.
fn linked(layout: &Layout, work: &Path, sandbox: &str) -> (PathBuf, PathBuf) {
    let programs = work.join("programs");
    std::fs::create_dir(&programs).expect("mkdir programs");
    let program = programs.join("lead.sh");
    std::fs::write(&program, "#!/bin/sh\nread _\n").expect("lead.sh");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let link = layout.team.join("lead-link.sh");
    std::fs::hard_link(&program, &link).expect("a hard link");
    let lead = json!({"role": "b", "harness": "pi", "command": [program]});
    let prober = layout.agent(
        "a",
        "if echo 'echo dev wrote this' >>lead-link.sh; then say wrote ok; else say wrote failed; fi",
    );
    let config = layout.config(sandbox, json!({}), vec![lead, prober]);
    (config, program)
}

#[test]
fn a_hard_link_of_a_program_in_a_writable_path_is_refused_naming_both() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let (config, program) = linked(&layout, work.path(), "required");
    let (code, line, log) = layout.refused(&config);
    assert_eq!(code, Some(2), "{log}");
    assert_eq!(
        line, r#"{"error":"unsafe-path","ok":false,"role":"a"}"#,
        "{log}"
    );
    assert!(log.contains("hard link"), "{log}");
    assert!(log.contains("lead-link.sh"), "{log}");
    assert!(log.contains(&*program.to_string_lossy()), "{log}");
}

#[test]
fn without_the_sandbox_the_hard_link_rewrites_lead_s_program() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let (config, program) = linked(&layout, work.path(), "off");
    let run = layout.stay(&config, &[], |_| ());
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    assert_eq!(run.report["wrote"], "ok", "{:?}", run.report);
    let text = std::fs::read_to_string(&program).expect("lead.sh");
    assert!(text.contains("dev wrote this"), "{text}");
}

/// The prober (role `a`) in the team's folder and another agent (role
/// `b`) in a folder inside it, each with `shared` as given.
fn nested(layout: &Layout, shared: bool) -> PathBuf {
    let inner = layout.team.join("inner");
    std::fs::create_dir(&inner).expect("mkdir inner");
    let mut outer = layout.agent(
        "a",
        "if mkdir -p inner/.pi/extensions; then say planted ok; else say planted failed; fi",
    );
    outer["shared"] = json!(shared);
    let mut other = layout.agent("b", "");
    other["workdir"] = json!(inner);
    other["shared"] = json!(shared);
    layout.config("required", json!({}), vec![outer, other])
}

#[test]
fn two_agents_writable_paths_that_nest_are_refused_unless_both_say_shared() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let config = nested(&layout, false);
    let (code, line, log) = layout.refused(&config);
    assert_eq!(code, Some(2), "{log}");
    assert_eq!(
        line, r#"{"error":"unsafe-path","ok":false,"role":"b"}"#,
        "{log}"
    );
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("overlap or nest"))
        .collect();
    assert_eq!(refused.len(), 1, "{log}");
    let inner = layout.team.join("inner");
    assert!(refused[0].contains(&*inner.to_string_lossy()), "{log}");
    assert!(refused[0].contains("other_role=\"b\""), "{log}");
    assert!(!inner.join(".pi").exists());
}

#[test]
fn with_shared_for_both_the_nested_pair_starts_and_one_warning_says_each_can_steer_the_other() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let config = nested(&layout, true);
    let run = layout.stay(&config, &[], |_| ());
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    assert_eq!(run.report["planted"], "ok", "{:?}", run.report);
    let warned: Vec<&str> = run
        .log
        .lines()
        .filter(|l| l.contains("each can steer the other"))
        .collect();
    assert_eq!(warned.len(), 1, "{}", run.log);
    assert!(warned[0].contains("agents=\"a and b\""), "{}", run.log);
}
