//! An agent's root is empty but for what is granted.
//! The probes list `/etc/shadow`, `/var/tmp`, `/opt` and `/root`, read by
//! glob a service credential's file that `up` passes to the broker (kept
//! in `/var/tmp`, outside `/tmp`, `/home` and `/run`), and ask a tmux
//! server on a socket in `/var/tmp` to run the human CLI. Without a
//! sandbox the same probes get through: the negative control.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use mosaic_app::commands::up::SANDBOX_ETC;
use serde_json::{json, Value};

use crate::probe::{Layout, Stayed};

/// The probe: each detour reported as `ok`/`listed` or `failed`.
const FILES: &str = r#"
attempt() { if "$@" >/dev/null 2>&1; then echo ok; else echo failed; fi; }
say shadow "$(attempt cat /etc/shadow)"
for p in /var/tmp /opt /root /srv /mnt /run /home/alice; do
  say "list_$p" "$(attempt ls -A "$p")"
done
say etc "$(ls -A /etc | tr '\n' ' ')"
say credential "$(cat /var/tmp/mosaic-cred-*/token 2>/dev/null || echo failed)"
printf '{"business":"x","verb":"message.send","args":{"to":"human","body":"probe tmux-var"}}\n' >./request.json
tmux -S "$PROBE_TMUX" run-shell "$(command -v mosaic-bus) human $MOSAIC_BUS_SOCKET <$PWD/request.json >$PWD/tmux-answer" 2>/dev/null
say tmux_run "$(cat ./tmux-answer 2>/dev/null || echo failed)"
say done yes
"#;

/// The secret in the credential's file.
const TOKEN: &str = "vikunja_tok_probe_0123456789";

/// What the human has in `/var/tmp`: a credential's file of the broker's
/// and a tmux server's socket. Dropped, it stops the server.
struct VarTmp {
    dir: tempfile::TempDir,
}

impl VarTmp {
    fn start() -> VarTmp {
        let dir = tempfile::Builder::new()
            .prefix("mosaic-cred-")
            .tempdir_in("/var/tmp")
            .expect("a folder in /var/tmp");
        let token = dir.path().join("token");
        std::fs::write(&token, TOKEN).expect("write the token");
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let started = Command::new("tmux")
            .arg("-S")
            .arg(dir.path().join("tmux"))
            .args(["-f", "/dev/null", "new-session", "-d", "sh"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("SHELL", "/bin/sh")
            .env("HOME", dir.path())
            .status()
            .expect("tmux");
        assert!(started.success(), "the tmux server in /var/tmp started");
        VarTmp { dir }
    }

    fn token(&self) -> PathBuf {
        self.dir.path().join("token")
    }

    fn tmux(&self) -> PathBuf {
        self.dir.path().join("tmux")
    }
}

impl Drop for VarTmp {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(self.tmux())
            .arg("kill-server")
            .status();
    }
}

/// Runs the probe with `sandbox`; the report and the human's inbox.
fn probe(work: &Path, var: &VarTmp, sandbox: &str) -> Stayed<Value> {
    let layout = Layout::new(work);
    let business = json!({"roles": {"b": {"credentials": {"vikunja": {"file": var.token()}}}}});
    let mut agent = layout.agent("a", FILES);
    agent["env"] = json!(["PROBE_TMUX"]);
    let config = layout.config(sandbox, business, vec![agent]);
    let tmux = var.tmux();
    let env: [(&str, &OsStr); 1] = [("PROBE_TMUX", tmux.as_os_str())];
    layout.stay(&config, &env, |live| live.reader("inbox", json!({})))
}

fn root() -> bool {
    rustix::process::getuid().is_root()
}

#[test]
fn the_agent_sees_no_file_of_the_host_it_was_not_granted() {
    let work = tempfile::tempdir().expect("work");
    let var = VarTmp::start();
    let run = probe(work.path(), &var, "required");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    assert_eq!(run.summary["agents"][0]["sandboxed"], true);
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}\n{}", run.log);
    assert_eq!(r["shadow"], "failed", "{r:?}");
    for p in [
        "/var/tmp",
        "/opt",
        "/root",
        "/srv",
        "/mnt",
        "/run",
        "/home/alice",
    ] {
        assert_eq!(r[&format!("list_{p}")], "failed", "{p}: {r:?}");
    }
    // /etc holds the named list and nothing else.
    for name in r["etc"].split_whitespace() {
        assert!(SANDBOX_ETC.contains(&name), "{name} in /etc: {r:?}");
    }
    assert!(r["etc"].contains("passwd"), "{r:?}");
    assert_eq!(r["credential"], "failed", "{r:?}");
    assert_eq!(r["tmux_run"], "failed", "{r:?}");
    assert_eq!(run.during, json!([]), "the human's inbox");
}

#[test]
fn without_the_sandbox_the_same_files_and_the_tmux_server_are_in_reach() {
    let work = tempfile::tempdir().expect("work");
    let var = VarTmp::start();
    let run = probe(work.path(), &var, "off");
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}");
    let as_root = if root() { "ok" } else { "failed" };
    assert_eq!(r["shadow"], as_root, "{r:?}");
    assert_eq!(r["list_/root"], as_root, "{r:?}");
    for p in ["/var/tmp", "/opt"] {
        assert_eq!(r[&format!("list_{p}")], "ok", "{p}: {r:?}");
    }
    // The glob may meet another test's folder too: each holds the token.
    assert!(r["credential"].starts_with(TOKEN), "{r:?}");
    let answer: Value = serde_json::from_str(&r["tmux_run"]).unwrap_or(Value::Null);
    assert_eq!(answer["ok"], true, "{r:?}");
    let bodies: Vec<&str> = run
        .during
        .as_array()
        .expect("an inbox")
        .iter()
        .filter_map(|m| m["body"].as_str())
        .collect();
    assert_eq!(bodies, ["probe tmux-var"], "{}", run.during);
}

#[test]
fn a_granted_path_that_holds_a_credential_file_is_refused() {
    let work = tempfile::tempdir().expect("work");
    let var = VarTmp::start();
    let layout = Layout::new(work.path());
    let business = json!({"roles": {"b": {"credentials": {"vikunja": {"file": var.token()}}}}});
    for key in ["read", "write"] {
        let mut agent = layout.agent("a", "say started yes");
        agent[key] = json!([var.dir.path()]);
        let config = layout.config("required", business.clone(), vec![agent]);
        let (code, first, log) = layout.refused(&config);
        assert_eq!(code, Some(2), "{key}: {log}");
        assert_eq!(
            first, r#"{"error":"unsafe-path","ok":false,"role":"a"}"#,
            "{key}: {log}"
        );
        assert!(log.contains("a service credential's file"), "{log}");
        assert!(!log.contains(TOKEN), "{log}");
    }
}
