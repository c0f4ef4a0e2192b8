//! `up --dry-run` on each example: it writes nothing, and the plans it
//! prints are the plans `up` then runs (which `up` logs at debug, one
//! `an agent's plan` line per launch), compared whole but for the run ids,
//! which each `up` draws anew. And the configuration errors it shares with
//! `up`: a prompt over the limit names its role, its size and the limit.

use std::ffi::OsStr;

use super::*;

/// A fake Claude Code or pi, on `PATH` for the example of real harnesses:
/// it says its version, and otherwise exits at once.
const FAKE_HARNESS: &str = "#!/bin/sh\n\
[ \"${1:-}\" = --version ] && { echo '1.2.3 (Fake Harness)'; exit 0; }\n\
exit 0\n";

/// `up --dry-run` with `args` and the variables `env`: its exit code and
/// its standard output.
fn dry_run(args: &[&OsStr], env: &[(&str, &OsStr)]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(["up", "--dry-run"])
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run up --dry-run");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), stdout)
}

/// The plans `up` logged, in the order of its launches.
fn logged_plans(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["message"] == "an agent's plan")
        .map(|line| {
            let plan = line["plan"].as_str().expect("the plan, as text");
            serde_json::from_str(plan).expect("the plan is JSON")
        })
        .collect()
}

/// `up --dry-run` and then `up` on the configuration `file`, with the
/// variables `env`: the printed plans are the logged ones, their run ids
/// aside; and the dry run made neither folder it was given.
fn dry_run_matches_up(file: &Path, env: &[(&str, &OsStr)]) {
    let dir = tempfile::tempdir().expect("dir");
    let (data, secrets) = (dir.path().join("data"), dir.path().join("secrets"));
    let folders: [&OsStr; 6] = [
        "--config".as_ref(),
        file.as_os_str(),
        "--data-root".as_ref(),
        data.as_os_str(),
        "--secrets-dir".as_ref(),
        secrets.as_os_str(),
    ];
    let (code, stdout) = dry_run(&folders, env);
    assert_eq!(code, Some(0), "{stdout}");
    let dry: Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!((&dry["ok"], &dry["dryRun"]), (&json!(true), &json!(true)));
    assert!(
        !data.exists() && !secrets.exists(),
        "a dry run writes nothing"
    );
    let mut args: Vec<&OsStr> = vec!["-v".as_ref(), "--log-format".as_ref(), "json".as_ref()];
    args.extend(folders);
    let up = Up::start_with(&args, env);
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line");
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(
        (&dry["business"], &dry["dataRoot"], &dry["socket"]),
        (
            &summary["business"],
            &summary["dataRoot"],
            &summary["socket"]
        )
    );
    let ran = logged_plans(&stderr);
    let printed = dry["agents"].as_array().expect("agents");
    let agents = summary["agents"].as_array().expect("agents");
    assert_eq!((printed.len(), ran.len()), (agents.len(), agents.len()));
    for ((printed, ran), agent) in printed.iter().zip(&ran).zip(agents) {
        let (dry_run_id, run) = (
            printed["run"].as_str().expect("a run"),
            agent["run"].as_str().expect("a run"),
        );
        assert_ne!(dry_run_id, run, "each up draws its own run ids");
        let printed: Value =
            serde_json::from_str(&printed.to_string().replace(dry_run_id, run)).expect("JSON");
        assert_eq!(&printed, ran);
        assert_eq!(ran["sandboxed"], agent["sandboxed"]);
        assert_eq!(ran["network"], agent["network"]);
        // The plan names what a harness agent's first line does.
        if agent.get("transcript").is_some() {
            assert_eq!(ran["version"], agent["version"]);
        }
    }
}

#[test]
fn a_dry_run_of_the_command_example_prints_the_plans_up_then_runs() {
    dry_run_matches_up(&example(), &[]);
}

#[test]
fn a_dry_run_of_the_harness_example_prints_the_plans_up_then_runs() {
    let dir = tempfile::tempdir().expect("dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir bin");
    for name in ["claude", "pi"] {
        let fake = bin.join(name);
        std::fs::write(&fake, FAKE_HARNESS).expect("write the fake");
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("a PATH");
    let file = example().with_file_name("claude-team.json");
    dry_run_matches_up(
        &file,
        &[
            ("PATH", path.as_os_str()),
            ("ANTHROPIC_API_KEY", "sk-not-a-key".as_ref()),
        ],
    );
    // What the dry run says of each harness agent.
    let (code, stdout) = dry_run(
        &["--config".as_ref(), file.as_os_str()],
        &[("PATH", path.as_os_str())],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let dry: Value = serde_json::from_str(&stdout).expect("JSON");
    for agent in dry["agents"].as_array().expect("agents") {
        assert_eq!(agent["version"], "1.2.3 (Fake Harness)", "{agent}");
        assert_eq!(agent["network"], "proxy");
        assert_eq!(agent["capability"], "file");
        let env: Vec<&str> = agent["env"]
            .as_array()
            .expect("env")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for name in ["MOSAIC_RUN_ID", "MOSAIC_BUS_SOCKET", "PATH", "HOME"] {
            assert!(env.contains(&name), "{name} in {env:?}");
        }
        // Without a data root, where `up` would make one.
        let root = dry["dataRoot"].as_str().expect("dataRoot");
        assert!(root.ends_with("/mosaic-up-XXXXXX"), "{root}");
    }
    assert!(!stdout.contains("sk-not-a-key"));
}

#[test]
fn a_prompt_over_the_limit_names_its_role_its_size_and_the_limit() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("data");
    let prompt = "x".repeat(70 * 1024);
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "prompt": prompt}]),
    );
    let expected = json!({
        "ok": false,
        "error": "bad-config",
        "role": "a",
        "why": "the prompt of a is 71680 bytes, over the limit of 65536 bytes (64 KiB): \
                shorten it, and put what the agent needs besides in a file of its workdir \
                for it to read",
    });
    let (code, stdout) = dry_run(&["--config".as_ref(), config.as_os_str()], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).expect("one line"),
        expected
    );
    let (status, stdout, stderr) = run_to_end(&config, &root);
    assert_eq!(status.code(), Some(2));
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).expect("one line"),
        expected
    );
    // The log names the cause: the role, the size and the limit.
    let cause = stderr
        .lines()
        .find(|l| l.contains("an agent's prompt is over the limit"))
        .unwrap_or_else(|| panic!("{stderr}"));
    for field in ["role=\"a\"", "bytes=71680", "limit=65536"] {
        assert!(cause.contains(field), "{field} in {cause}");
    }
    assert!(!root.exists(), "a refused configuration makes no data root");
}
