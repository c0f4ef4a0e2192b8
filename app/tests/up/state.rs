//! A harness's state folder is data, never code: an extension planted in
//! pi's, or a hook planted in Claude Code's settings there, by one run
//! does not run in the next, with `"network": "proxy"` or `"host"`; the
//! same code named by the configuration runs (the negative control). The
//! real harnesses, against the scripted model (`support/model.rs`) on a
//! route it does not serve, so each run ends after its first request.
//!
//! And what a run writes outside its grants is capped (`"stateMiB"`): a
//! fake harness that fills its state folder, and a command that floods its
//! output, each end for their budget; the sessions left past the cap go at
//! the next launch; with room, the same run lives on (the control).

use super::*;
use crate::model::Model;

/// The real harness `name` (`pi`, `claude`), as `.ci/harness-deps`
/// installs it, or in the folder `MOSAIC_TEST_HARNESS_BIN` names.
fn real(name: &str) -> PathBuf {
    let program = match std::env::var_os("MOSAIC_TEST_HARNESS_BIN") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/node_modules/.bin")
            .join(name),
    };
    assert!(
        program.exists(),
        "the real {name} is not at {} (run .ci/harness-deps)",
        program.display()
    );
    program
}

/// One run of `up` (sandbox required, no restart) with agent `a` on
/// `harness` in `work`, its model at `model`'s `/gone` route, with `args`
/// and `network`, on the data root `root`: the run ends after its first
/// request. Returns `up`'s log.
fn run(
    dir: &Path,
    root: &Path,
    (harness, program): (&str, &Path),
    model: &Model,
    network: &str,
    args: &[String],
) -> String {
    let work = dir.join("work");
    let conf = dir.join("conf");
    let config = conf.join("up.json");
    let key_env = if harness == "pi" {
        "MODEL_KEY"
    } else {
        "ANTHROPIC_API_KEY"
    };
    let agent = json!({"role": "a", "harness": harness, "program": program,
        "prompt": "Claim your role.", "args": args, "workdir": work,
        "network": network, "restart": "no",
        "model": {"api": "anthropic", "baseUrl": format!("{}/gone", model.base_url()),
                  "id": "model-1", "keyEnv": key_env}});
    let text = json!({"sandbox": "required",
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [agent]});
    std::fs::write(&config, text.to_string()).expect("write config");
    let up = Up::start_with(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.as_os_str(),
        ],
        &[(key_env, "model-key-value".as_ref())],
    );
    let first = up.line();
    let (_, _, stderr) = up.finish();
    assert!(first.contains(r#""ok":true"#), "{first}\n{stderr}");
    stderr
}

/// The folders of a test: `work` (the agent's `workdir`), `conf`, and a
/// data root.
fn folders() -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    for name in ["work", "conf"] {
        std::fs::create_dir(dir.path().join(name)).expect("mkdir");
    }
    (dir, tempfile::tempdir().expect("data root"))
}

/// Writes `text` at `path`, making its folders (0700, as an agent's own).
fn plant(path: &Path, text: &str) {
    let parent = path.parent().expect("a folder");
    std::fs::create_dir_all(parent).expect("mkdir");
    for folder in parent.ancestors().take(2) {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    std::fs::write(path, text).expect("plant");
}

/// A pi extension that leaves `marker` when it loads.
fn extension(marker: &Path) -> String {
    format!(
        "import {{ writeFileSync }} from \"node:fs\";\n\
         export default function () {{ writeFileSync({:?}, \"ran\"); }}\n",
        marker.to_string_lossy()
    )
}

#[test]
fn an_extension_planted_in_pi_s_state_folder_never_loads_and_one_the_config_names_does() {
    let (dir, root) = folders();
    let pi = real("pi");
    let model = Model::start(vec![("a", "model-key-value", Vec::new())]);
    let marker = dir.path().join("work/planted-ran");
    let state = root.path().join("agents/state/a.pi");
    // The first run makes the state folder; what an agent of it could
    // write there is planted between runs: an extension, settings naming
    // it, and the folder's mode changed.
    run(dir.path(), root.path(), ("pi", &pi), &model, "proxy", &[]);
    assert!(!model.requests().is_empty(), "pi reached its model");
    for network in ["proxy", "host"] {
        plant(&state.join("extensions/planted.ts"), &extension(&marker));
        let named = state.join("elsewhere/planted.ts");
        plant(&named, &extension(&marker));
        let settings = json!({"extensions": [named]}).to_string();
        plant(&state.join("settings.json"), &settings);
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let log = run(dir.path(), root.path(), ("pi", &pi), &model, network, &[]);
        assert!(
            !marker.exists(),
            "{network}: the planted extension ran\n{log}"
        );
        assert!(!state.join("extensions").exists(), "{network}\n{log}");
        assert!(log.contains("repaired the mode"), "{network}: {log}");
        assert!(
            log.contains("removed what a harness agent"),
            "{network}: {log}"
        );
    }
    // The control: the same extension, named by the configuration (a file
    // beside it), runs.
    let control = dir.path().join("conf/control.ts");
    std::fs::write(&control, extension(&marker)).expect("the control");
    let args = ["-e".to_owned(), control.to_string_lossy().into_owned()];
    let log = run(dir.path(), root.path(), ("pi", &pi), &model, "proxy", &args);
    assert!(marker.exists(), "the named extension did not run\n{log}");
}

#[test]
fn a_hook_planted_in_claude_code_s_state_folder_never_runs_and_one_the_config_names_does() {
    let (dir, root) = folders();
    let claude = real("claude");
    let model = Model::start(vec![("a", "model-key-value", Vec::new())]);
    let marker = dir.path().join("work/hook-ran");
    let hooks = json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command",
        "command": format!("echo ran > '{}'", marker.display())}]}]}})
    .to_string();
    let state = root.path().join("agents/state/a.claude-code");
    run(
        dir.path(),
        root.path(),
        ("claude-code", &claude),
        &model,
        "proxy",
        &[],
    );
    for network in ["proxy", "host"] {
        plant(&state.join("settings.json"), &hooks);
        plant(&state.join("settings.local.json"), &hooks);
        let log = run(
            dir.path(),
            root.path(),
            ("claude-code", &claude),
            &model,
            network,
            &[],
        );
        assert!(!marker.exists(), "{network}: the planted hook ran\n{log}");
        assert_eq!(
            std::fs::read_to_string(state.join("settings.json")).expect("settings"),
            "{}",
            "{network}"
        );
    }
    // The control: the same hooks, named by the configuration, run.
    let control = dir.path().join("work/control.json");
    std::fs::write(&control, &hooks).expect("the control");
    let args = [format!("--settings={}", control.display())];
    let log = run(
        dir.path(),
        root.path(),
        ("claude-code", &claude),
        &model,
        "proxy",
        &args,
    );
    assert!(marker.exists(), "the named hook did not run\n{log}");
}

/// A fake pi (`#!/bin/sh`) that says its version, then writes `mib` MiB
/// into its state folder's sessions, file by file, and waits to be
/// stopped: `up` must end its run.
fn filler(dir: &Path, mib: u32) -> PathBuf {
    let path = dir.join("conf/fill-pi");
    let script = format!(
        "#!/bin/sh\n[ \"${{1:-}}\" = --version ] && {{ echo 0.0.1; exit 0; }}\n\
         mkdir -p \"$PI_CODING_AGENT_DIR/sessions\"\n\
         i=0; while [ $i -lt {mib} ]; do\n\
         head -c 1048576 /dev/zero > \"$PI_CODING_AGENT_DIR/sessions/$i\" || break\n\
         i=$((i+1)); done\nexec sleep 600\n"
    );
    std::fs::write(&path, script).expect("the filler");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[test]
fn a_run_that_fills_its_state_folder_past_state_mib_ends_for_its_budget_and_its_sessions_go() {
    let (dir, root) = folders();
    let model = Model::start(Vec::new());
    let fill = filler(dir.path(), 8);
    let with_cap = |cap: u32| {
        let config = dir.path().join("conf/up.json");
        let work = dir.path().join("work");
        let agent = json!({"role": "a", "harness": "pi", "program": fill,
            "prompt": "Fill.", "workdir": work, "restart": "no", "stateMiB": cap,
            "model": {"api": "anthropic", "baseUrl": model.base_url(), "keyEnv": "MODEL_KEY"}});
        let text = json!({"sandbox": "required",
            "business": {"id": "x", "human": "alice",
                         "arbiters": {"technical": "a", "delivery": "a"},
                         "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
            "agents": [agent]});
        std::fs::write(&config, text.to_string()).expect("write config");
        let up = Up::start(
            &[
                "--config".as_ref(),
                config.as_os_str(),
                "--data-root".as_ref(),
                root.path().as_os_str(),
            ],
            None,
        );
        let first = up.line();
        assert!(first.contains(r#""ok":true"#), "{first}");
        up
    };
    let sessions = root.path().join("agents/state/a.pi/sessions");
    // Capped at 4 MiB: the run ends for its budget (`stateMiB`), before
    // the filler is done, and `up` exits on its own.
    let (_, _, log) = with_cap(4).finish();
    assert!(
        log.contains("the run reached its budget's limit and ends") && log.contains("stateMiB"),
        "{log}"
    );
    assert!(sessions.is_dir(), "{log}");
    // The next launch removes the sessions that reached the cap, with a
    // line; then this run ends for its budget again.
    let (_, _, log) = with_cap(4).finish();
    assert!(log.contains("removed a harness agent's sessions"), "{log}");
    // The control: with room for what it writes, the run lives on until
    // `up` is stopped, and its sessions are kept.
    let up = with_cap(64);
    let written = sessions.join("7");
    let started = std::time::Instant::now();
    while std::fs::metadata(&written).map_or(true, |m| m.len() < 1 << 20) {
        assert!(started.elapsed() < WAIT, "the filler did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    up.signal(rustix::process::Signal::TERM);
    let (_, _, log) = up.finish();
    assert!(!log.contains("reached its budget's limit"), "{log}");
    assert!(written.is_file());
}

#[test]
fn a_command_agent_that_floods_its_output_is_cut_at_state_mib_and_ends() {
    let (dir, root) = folders();
    let config = dir.path().join("conf/up.json");
    let flood = "read _; head -c 3000000 /dev/zero | tr '\\0' 'x' | fold -w 1000; exec sleep 600";
    let agent = json!({"role": "a", "harness": "pi", "command": ["sh", "-c", flood],
        "workdir": dir.path().join("work"), "stateMiB": 1});
    let text = json!({"sandbox": "required",
        "business": {"id": "x", "human": "alice", "arbiters": {"technical": "a", "delivery": "a"},
                     "roles": {"a": {"authority": {"withinRole": [], "crossRole": []}}}},
        "agents": [agent]});
    std::fs::write(&config, text.to_string()).expect("write config");
    let up = Up::start(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
        ],
        None,
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line");
    let (_, _, log) = up.finish();
    assert!(log.contains("the run reached its budget's limit"), "{log}");
    let output = PathBuf::from(summary["agents"][0]["output"].as_str().expect("output"));
    let kept = std::fs::read_to_string(&output).expect("the output");
    assert!(kept.len() <= (1 << 20) + 200, "{}", kept.len());
    assert!(
        kept.ends_with("(stateMiB)⟩\n"),
        "{}",
        &kept[kept.len() - 100..]
    );
}
