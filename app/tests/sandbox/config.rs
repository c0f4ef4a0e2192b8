//! Nothing that is later run or read as configuration is writable from a
//! sandbox, and nothing beside the configuration is visible. Another
//! agent's program in the `examples/` layout, the configuration through
//! its folder, a `.env` beside it, and a `write` path and a `workdir`
//! turned into symbolic links into the human's home between two runs.

use std::ffi::OsStr;
use std::path::Path;

use serde_json::{json, Value};

use crate::probe::Layout;

/// The `examples/` layout in `conf`: agents without a `workdir` run in
/// an empty home of their own, and see of `conf` only the configuration
/// and the files their arguments name (lead's `agents/lead.sh`), never a
/// `.env` beside them. The prober (with `team` granted for its report),
/// given the configuration's folder as `C`, tries to rewrite lead's
/// script, to add a file, to rewrite the configuration, to rename its
/// folder, and to read the `.env` by its path and by a search of `S`: all
/// it sees in the sandbox, the test's own folder without one (a search of
/// the whole host takes minutes on a busy machine).
const REWRITE: &str = r#"
attempt() { if "$@" 2>/dev/null; then echo ok; else echo failed; fi; }
say cwd "$PWD"
say lead_script "$(attempt sh -c 'echo "echo dev wrote this" >>"$0/agents/lead.sh"' "$C")"
say new_file "$(attempt touch "$C/planted.sh")"
say config "$(attempt sh -c 'echo "{}" >"$0/up.json"' "$C")"
say rename_folder "$(attempt mv "$C" "$C.old")"
say dotenv "$(cat "$C/.env" 2>/dev/null || cat "$C.old/.env" 2>/dev/null || echo unread)"
say found "$(find "$S" -name .env -not -path '/proc/*' 2>/dev/null | head -n 1)"
say done yes
"#;

/// What `.env` holds beside the configuration.
const SECRET: &str = "API_TOKEN=s3cr3t-beside-the-config";

/// The `examples/` layout: `conf/agents/lead.sh`, a `.env` and the
/// configuration, lead a bare reader, the prober `a` without a `workdir`.
fn examples(layout: &Layout, sandbox: &str) -> std::path::PathBuf {
    std::fs::create_dir(layout.conf.join("agents")).expect("mkdir agents");
    std::fs::write(layout.conf.join("agents/lead.sh"), "read _\n").expect("lead.sh");
    std::fs::write(layout.conf.join(".env"), SECRET).expect(".env");
    let conf = std::fs::canonicalize(&layout.conf).expect("conf");
    let search = match sandbox {
        "off" => conf.parent().expect("the test's folder").to_path_buf(),
        _ => "/".into(),
    };
    let body = format!(
        "C='{}'\nS='{}'\n{REWRITE}",
        conf.display(),
        search.display()
    );
    let mut prober = layout.agent("a", &body);
    prober.as_object_mut().expect("an agent").remove("workdir");
    prober["write"] = json!([layout.team]);
    let lead = json!({"role": "b", "harness": "pi", "command": ["sh", "agents/lead.sh"]});
    layout.config(sandbox, json!({}), vec![lead, prober])
}

#[test]
fn an_agent_without_a_workdir_sees_only_the_files_the_configuration_names() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let config = examples(&layout, "required");
    let run = layout.stay(&config, &[], |_| ());
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    let r = &run.report;
    assert_eq!(r["done"], "yes", "{r:?}");
    assert_eq!(r["cwd"], mosaic_app::commands::up::SANDBOX_HOME, "{r:?}");
    // The configuration's folder here lies in `/tmp`, which inside is the
    // agent's own tmpfs: a file added there or a rename stays in it, so
    // what counts is what the host's folder holds afterwards.
    for probe in ["lead_script", "config"] {
        assert_eq!(r[probe], "failed", "{probe}: {r:?}");
    }
    assert_eq!(r["dotenv"], "unread", "{r:?}");
    assert!(layout.conf.join("up.json").is_file());
    assert!(!layout.conf.with_extension("old").exists());
    assert_eq!(r["found"], "", "{r:?}");
    assert!(!run.log.contains("s3cr3t"), "{}", run.log);
    let lead = std::fs::read_to_string(layout.conf.join("agents/lead.sh")).expect("lead.sh");
    assert_eq!(lead, "read _\n");
    assert!(!layout.conf.join("planted.sh").exists());
}

#[test]
fn without_the_sandbox_an_agent_rewrites_another_agents_program_and_reads_the_env() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let config = examples(&layout, "off");
    let run = layout.stay(&config, &[], |_| ());
    assert_eq!(run.status.code(), Some(0), "{}", run.log);
    let r = &run.report;
    for probe in ["lead_script", "new_file", "rename_folder", "config"] {
        assert_eq!(r[probe], "ok", "{probe}: {r:?}");
    }
    assert_eq!(r["dotenv"], SECRET, "{r:?}");
    assert!(r["found"].ends_with("/.env"), "{r:?}");
    // The configuration's folder was renamed away, lead's script in it.
    let moved = layout.conf.with_extension("old");
    let lead = std::fs::read_to_string(moved.join("agents/lead.sh")).expect("lead.sh");
    assert!(lead.contains("dev wrote this"), "{lead}");
}

/// `up` with `agent` (role `a`) in a configuration at `file`: it must
/// refuse `unsafe-path`; its log.
fn refused(layout: &Layout, file: &Path, agent: Value) -> String {
    let config = json!({"sandbox": "required",
        "business": {"id": "x", "human": "alice",
                     "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [agent]});
    std::fs::write(file, config.to_string()).expect("write the configuration");
    let (code, first, log) = layout.refused(file);
    assert_eq!(code, Some(2), "{log}");
    assert_eq!(
        first, r#"{"error":"unsafe-path","ok":false,"role":"a"}"#,
        "{log}"
    );
    log
}

#[test]
fn a_workdir_that_holds_the_configuration_is_refused_and_told_to_move_it_out() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    // The configuration in a subfolder of the agent's workdir: renaming
    // that subfolder would swap it.
    std::fs::create_dir(layout.team.join("cfg")).expect("mkdir cfg");
    let file = layout.team.join("cfg/up.json");
    let mut agent = layout.agent("a", "say started yes");
    let log = refused(&layout, &file, agent.clone());
    assert!(log.contains("move the configuration out"), "{log}");
    // Its folder's parent as a write path, the same.
    agent.as_object_mut().expect("an agent").remove("workdir");
    agent["write"] = json!([layout.team]);
    let log = refused(&layout, &file, agent);
    assert!(log.contains("move the configuration out"), "{log}");
}

/// The planter (role `b`, its `workdir` `team`) turns the prober's
/// `write` path `team/out` into a link to the human's `.bashrc`, and its
/// `workdir` `team/w` into one to the human's home, then opens the
/// `planted` fifo the prober waits on: the links are left for the next
/// `up`. It starts once the prober says, through the `mounted` fifo, that
/// its sandbox is in place.
const PLANT: &str = r#"
cat ./mounted >/dev/null
rm -rf ./out ./w
ln -s "$PROBE_BASHRC" ./out && ln -s "$(dirname "$PROBE_BASHRC")" ./w && say planted yes
echo >./planted
"#;

#[test]
fn a_write_path_and_a_workdir_made_links_into_the_home_are_refused_the_next_time() {
    let work = tempfile::tempdir().expect("work");
    let layout = Layout::new(work.path());
    let bashrc = layout.home.join(".bashrc");
    std::fs::write(&bashrc, "# the human's\n").expect(".bashrc");
    for dir in ["out", "w"] {
        std::fs::create_dir(layout.team.join(dir)).expect("mkdir");
    }
    for fifo in ["mounted", "planted"] {
        crate::support::up::mkfifo(&layout.team.join(fifo));
    }
    let mut planter = layout.agent("b", PLANT);
    planter["env"] = json!(["PROBE_BASHRC"]);
    planter["shared"] = json!(true);
    let wait = format!(
        "echo >'{}'\ncat '{}' >/dev/null",
        layout.team.join("mounted").display(),
        layout.team.join("planted").display()
    );
    let mut prober = layout.agent("a", &wait);
    prober["workdir"] = json!(layout.team.join("w"));
    prober["write"] = json!([layout.team, layout.team.join("out")]);
    prober["shared"] = json!(true);
    let config = layout.config("required", json!({}), vec![planter, prober]);
    let env: [(&str, &OsStr); 1] = [("PROBE_BASHRC", bashrc.as_os_str())];
    let first = layout.stay(&config, &env, |_| ());
    assert_eq!(first.status.code(), Some(0), "{}", first.log);
    assert_eq!(first.report["planted"], "yes", "{:?}", first.report);
    let planted = |name: &str| {
        std::fs::symlink_metadata(layout.team.join(name)).is_ok_and(|m| m.file_type().is_symlink())
    };
    assert!(planted("out") && planted("w"), "{:?}", first.report);
    // The next `up` refuses the prober's workdir, and would its write
    // path (each a link); it binds nothing of the human's home.
    let (code, line, log) = layout.refused(&config);
    assert_eq!(code, Some(2), "{log}");
    assert_eq!(
        line, r#"{"error":"unsafe-path","ok":false,"role":"a"}"#,
        "{log}"
    );
    assert!(log.contains("symbolic link"), "{log}");
    let mut prober: Value = serde_json::from_str::<Value>(
        &std::fs::read_to_string(&config).expect("the configuration"),
    )
    .expect("JSON")["agents"][1]
        .clone();
    prober.as_object_mut().expect("an agent").remove("workdir");
    let log = refused(&layout, &layout.conf.join("up.json"), prober);
    assert!(log.contains("symbolic link"), "{log}");
    let rc = std::fs::read_to_string(&bashrc).expect(".bashrc");
    assert_eq!(rc, "# the human's\n");
}
