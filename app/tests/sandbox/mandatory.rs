//! The mandatory read-only paths inside a writable grant. The human made
//! the workdir a git repository; the agent commits in it, then tries to
//! set the repository's configuration (`core.fsmonitor` would run for the
//! human's next `git status`), to add a hook, to plant tool, editor and
//! harness settings (`.npmrc`, `.envrc`, `.vscode`, `.claude`, `.pi`), to
//! append to a start-up file, and to make a repository of its own at the
//! root of a `write` folder. `CLAUDE.md` stays the agent's to edit. Without
//! a sandbox every one gets through: the negative control.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::probe::{Layout, Stayed};

/// The probe; `$PLAIN` is a `write` folder that is not a repository.
const PLANT: &str = r##"
attempt() { if "$@" >/dev/null 2>&1; then echo ok; else echo failed; fi; }
export GIT_CONFIG_GLOBAL="$TMPDIR/gitconfig"
printf '[user]\n\tname = probe\n\temail = probe@example.invalid\n[safe]\n\tdirectory = *\n' >"$GIT_CONFIG_GLOBAL"
echo hello >work.txt
say add "$(attempt git add work.txt)"
say commit "$(attempt git commit -q -m probe)"
say last "$(git log -1 --format=%s 2>/dev/null)"
say git_config "$(attempt git config probe.planted yes)"
say config_append "$(attempt sh -c 'echo x >>.git/config')"
say config_rename "$(attempt mv .git/config .git/config.old)"
say hook "$(attempt sh -c 'printf "#!/bin/sh\n" >.git/hooks/pre-commit')"
say gitmodules "$(attempt sh -c 'echo x >.gitmodules')"
say npmrc "$(attempt sh -c 'echo x >.npmrc')"
say npmrc_rm "$(attempt rm -f .npmrc)"
say envrc "$(attempt sh -c 'echo x >.envrc')"
say mcp "$(attempt sh -c 'echo {} >.mcp.json')"
say vscode "$(attempt sh -c 'mkdir -p .vscode && echo {} >.vscode/tasks.json')"
say claude "$(attempt mkdir -p .claude/hooks)"
say pi "$(attempt mkdir -p .pi/extensions)"
say bashrc "$(attempt sh -c 'echo x >>.bashrc')"
say claude_md "$(attempt sh -c 'echo notes >>CLAUDE.md')"
say init_plain "$(attempt git init -q "$PLAIN")"
say done yes
"##;

/// The mandatory paths the probe tries to write: `failed` in a sandbox.
const HELD: [&str; 14] = [
    "git_config",
    "config_append",
    "config_rename",
    "hook",
    "gitmodules",
    "npmrc",
    "npmrc_rm",
    "envrc",
    "mcp",
    "vscode",
    "claude",
    "pi",
    "bashrc",
    "init_plain",
];

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?}");
}

/// Runs the probe with `sandbox` in a repository the human made.
fn plant(work: &Path, sandbox: &str) -> (Layout, Stayed<()>) {
    let layout = Layout::new(work);
    git(&layout.team, &["init", "-q"]);
    std::fs::write(layout.team.join(".bashrc"), "# the project's\n").expect(".bashrc");
    let plain = work.join("plain");
    std::fs::create_dir(&plain).expect("mkdir plain");
    let mut agent = layout.agent("a", PLANT);
    agent["write"] = json!([plain]);
    agent["env"] = json!(["PLAIN"]);
    let config = layout.config(sandbox, json!({}), vec![agent]);
    let run = layout.stay(&config, &[("PLAIN", plain.as_os_str())], |_| ());
    (layout, run)
}

#[test]
fn inside_a_workdir_commits_work_but_git_s_configuration_hooks_and_settings_stay_read_only() {
    let work = tempfile::tempdir().expect("work");
    let (layout, run) = plant(work.path(), "required");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    assert_eq!(r["add"], "ok", "{r:?}");
    assert_eq!(r["commit"], "ok", "{r:?}");
    assert_eq!(r["last"], "probe", "{r:?}");
    assert_eq!(r["claude_md"], "ok", "{r:?}");
    for probe in HELD {
        assert_eq!(r[probe], "failed", "{probe}: {r:?}");
    }
    let team = &layout.team;
    let config = std::fs::read_to_string(team.join(".git/config")).expect("config");
    assert!(!config.contains("planted"), "{config}");
    assert!(!team.join(".git/hooks/pre-commit").exists());
    let bashrc = std::fs::read_to_string(team.join(".bashrc")).expect(".bashrc");
    assert_eq!(bashrc, "# the project's\n");
    // What is left of a placeholder is an empty file or folder.
    let npmrc = std::fs::metadata(team.join(".npmrc")).expect(".npmrc is left");
    assert_eq!(npmrc.len(), 0);
    for folder in [".claude", ".pi", ".vscode"] {
        let entries = std::fs::read_dir(team.join(folder)).expect(folder).count();
        assert_eq!(entries, 0, "{folder}");
    }
    assert!(!work.path().join("plain/.git/HEAD").exists());
}

#[test]
fn without_the_sandbox_the_same_configuration_and_settings_are_planted() {
    let work = tempfile::tempdir().expect("work");
    let (layout, run) = plant(work.path(), "off");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    assert_eq!(r["commit"], "ok", "{r:?}");
    for probe in HELD {
        assert_eq!(r[probe], "ok", "{probe}: {r:?}");
    }
    let config = std::fs::read_to_string(layout.team.join(".git/config.old")).expect("config");
    assert!(config.contains("planted"), "{config}");
}
