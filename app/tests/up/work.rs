//! Harness agents at work: the real Claude Code and the real pi (as
//! `.ci/harness-deps` installs them, or from the folder
//! `MOSAIC_TEST_HARNESS_BIN` names), each in `up`'s sandbox with a git
//! repository as its `workdir` and no `"args"`, against the scripted model
//! of `support/model.rs`. Each reads and edits a file with its own tool,
//! runs the repository's tests with its shell tool, and commits as its
//! role; with `"tools": "bus"` the same shell call is denied and the bus's
//! tools still work. Each transcript ends with the run's end.
//!
//! Every wait is on the model's recorded requests or on `up`'s exit,
//! bounded by [`FLOW`]: node programs start slowly on a loaded machine.

use super::model::{self, harness_bin, Model, Request, Step};
use super::*;

/// The bound on an agent's whole script.
const FLOW: Duration = Duration::from_secs(240);

/// What the tests print when they pass: the model's next request must
/// hold it.
const PASSED: &str = "tests: ok (2 + 2 = 4)";

/// `git` in `repo`, which must succeed; its standard output.
#[track_caller]
fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// A git repository at `dir/NAME` with a bug in `sum.sh` that `test.sh`
/// finds, committed once; its canonical path.
fn repository(dir: &Path, name: &str) -> PathBuf {
    let repo = dir.join(name);
    std::fs::create_dir(&repo).expect("mkdir the repository");
    std::fs::write(repo.join("sum.sh"), "echo $((2 + 3))\n").expect("sum.sh");
    std::fs::write(
        repo.join("test.sh"),
        "out=$(sh sum.sh)\n[ \"$out\" = 4 ] || { echo \"tests: FAILED (2 + 2 = $out)\"; exit 1; }\n\
         echo \"tests: ok (2 + 2 = $out)\"\n",
    )
    .expect("test.sh");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "."]);
    git(
        &repo,
        &[
            "-c",
            "user.name=Alice",
            "-c",
            "user.email=alice@example.com",
            "commit",
            "-qm",
            "A sum with a bug",
        ],
    );
    repo.canonicalize().expect("canonical")
}

/// The shell command that commits the fix and shows who committed: it
/// adds every file, as models do, so the sandbox's placeholders for the
/// missing `.envrc`, `.npmrc`, `.mcp.json` and `.gitmodules` (not
/// regular files, which `git add` refuses) must be ignored.
const COMMIT: &str = "git add -A && git commit -qm 'Fix the sum' && \
                      git log -1 --format='%an <%ae> | %cn <%ce>'";

/// Claude Code's script in `repo`: claim, read, edit, test, commit,
/// release. Results: 0 claim, 1 read, 2 edit, 3 tests, 4 commit, 5
/// release.
fn claude_script(repo: &Path) -> Vec<Step> {
    let file = repo.join("sum.sh").to_string_lossy().into_owned();
    vec![
        Step::tool("mcp__mosaic-bus__role_claim", json!({})),
        Step::tool("Read", json!({"file_path": file})),
        Step::tool(
            "Edit",
            json!({"file_path": file, "old_string": "2 + 3", "new_string": "2 + 2"}),
        ),
        Step::tool(
            "Bash",
            json!({"command": "sh test.sh", "description": "Run the tests"}),
        ),
        Step::tool(
            "Bash",
            json!({"command": COMMIT, "description": "Commit the fix"}),
        ),
        Step::tool("mcp__mosaic-bus__role_release", json!({})),
        Step::text("Fixed, tested and committed."),
    ]
}

/// pi's script in `repo`, with the same results as [`claude_script`].
fn pi_script(repo: &Path) -> Vec<Step> {
    let file = repo.join("sum.sh").to_string_lossy().into_owned();
    vec![
        Step::tool("role_claim", json!({})),
        Step::tool("read", json!({"path": file})),
        Step::tool(
            "edit",
            json!({"path": file, "edits": [{"oldText": "2 + 3", "newText": "2 + 2"}]}),
        ),
        Step::tool("bash", json!({"command": "sh test.sh"})),
        Step::tool("bash", json!({"command": COMMIT})),
        Step::tool("role_release", json!({})),
        Step::text("Fixed, tested and committed."),
    ]
}

/// A configuration of acme with `agents`, at `dir/conf/up.json`.
fn team_config(dir: &Path, agents: Value) -> PathBuf {
    let conf = dir.join("conf");
    std::fs::create_dir_all(&conf).expect("mkdir conf");
    let role = json!({"authority": {"withinRole": [], "crossRole": []}});
    let text = json!({"sandbox": "required",
        "business": {"id": "acme", "human": "alice",
                     "arbiters": {"technical": "lead", "delivery": "lead"},
                     "roles": {"lead": role, "dev": role}},
        "agents": agents});
    let config = conf.join("up.json");
    std::fs::write(&config, text.to_string()).expect("write config");
    config
}

/// One harness agent's entry: `role` on `harness` in `repo`, its model at
/// `model` with its key in `key_env`, and `extra` keys.
fn agent(role: &str, harness: &str, repo: &Path, model: &Model, key_env: &str) -> Value {
    let program = harness_bin().join(if harness == "pi" { "pi" } else { "claude" });
    json!({"role": role, "harness": harness, "program": program, "workdir": repo,
           "prompt": "Fix the sum, run the tests and commit.",
           "model": {"api": "anthropic", "baseUrl": model.base_url(), "id": "claude-test-1",
                     "keyEnv": key_env}})
}

/// Runs `up` on `config` until its agents are done and it exits 0; its
/// summary line.
fn run_up(config: &Path, root: &Path, model: &Model, agents: &[&str]) -> Value {
    let up = Up::start_with(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.as_os_str(),
        ],
        &[
            ("LEAD_KEY", "lead-key".as_ref()),
            ("DEV_KEY", "dev-key".as_ref()),
        ],
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line");
    // Each script ends in text after its role is released: then each
    // harness stops, and `up` with it.
    model.wait("each agent's last turn", FLOW, |requests| {
        agents.iter().all(|a| results_of(requests, a).len() >= 6)
    });
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{summary}\n{stderr}");
    summary
}

/// The tool results of `agent`'s longest conversation.
fn results_of(requests: &[Request], agent: &str) -> Vec<Value> {
    requests
        .iter()
        .filter(|r| r.is_message() && r.agent.as_deref() == Some(agent))
        .map(|r| model::tool_results(r.body["messages"].as_array().map_or(&[][..], |m| m)))
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

/// The text of a tool result, whatever its shape.
fn text_of(result: &Value) -> String {
    result
        .as_str()
        .map_or_else(|| result.to_string(), str::to_owned)
}

/// The last line of `role`'s transcript, as `summary` names it.
fn last_transcript_line(summary: &Value, role: &str) -> Value {
    let agent = summary["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["role"] == role)
        .unwrap_or_else(|| panic!("{role} in {summary}"));
    let path = agent["transcript"].as_str().expect("a transcript");
    let text = std::fs::read_to_string(path).expect("the transcript");
    serde_json::from_str(text.lines().last().expect("a line")).expect("JSON")
}

#[test]
fn each_harness_reads_edits_tests_and_commits_in_its_repository_as_its_role() {
    let bin = harness_bin();
    assert!(bin.is_dir());
    let dir = tempfile::tempdir().expect("dir");
    let lead_repo = repository(dir.path(), "lead-repo");
    let dev_repo = repository(dir.path(), "dev-repo");
    let model = Model::start(vec![
        ("lead", "lead-key", claude_script(&lead_repo)),
        ("dev", "dev-key", pi_script(&dev_repo)),
    ]);
    let config = team_config(
        dir.path(),
        json!([
            agent("lead", "claude-code", &lead_repo, &model, "LEAD_KEY"),
            agent("dev", "pi", &dev_repo, &model, "DEV_KEY"),
        ]),
    );
    let root = tempfile::tempdir().expect("data root");
    let summary = run_up(&config, root.path(), &model, &["lead", "dev"]);
    let requests = model.requests();
    for (role, repo) in [("lead", &lead_repo), ("dev", &dev_repo)] {
        let results = results_of(&requests, role);
        let texts: Vec<String> = results.iter().map(text_of).collect();
        assert!(texts[0].contains("claimed"), "{role}: {texts:#?}");
        assert!(texts[1].contains("2 + 3"), "{role} read: {texts:#?}");
        // The tests ran after the edit, and their output reached the
        // model in its next request.
        assert!(texts[3].contains(PASSED), "{role} tests: {texts:#?}");
        let who = format!("{role} (acme) <{role}@acme.invalid>");
        assert!(
            texts[4].contains(&format!("{who} | {who}")),
            "{role} commit: {texts:#?}"
        );
        assert_eq!(results[5], json!({}), "{role} release: {texts:#?}");
        assert_eq!(
            std::fs::read_to_string(repo.join("sum.sh")).expect("sum.sh"),
            "echo $((2 + 2))\n"
        );
        assert_eq!(
            git(repo, &["log", "-1", "--format=%an <%ae>|%cn <%ce>|%s"]).trim(),
            format!("{who}|{who}|Fix the sum")
        );
        assert_eq!(git(repo, &["diff", "HEAD", "--stat"]), "", "{role}");
        assert_eq!(
            git(repo, &["show", "--name-only", "--format=", "HEAD"]).trim(),
            "sum.sh",
            "{role}: the commit holds the fix alone"
        );
        assert_eq!(
            last_transcript_line(&summary, role),
            json!({"type": "mosaic-bus.ended", "cause": "exited", "status": 0}),
            "{role}"
        );
    }
}

#[test]
fn with_tools_bus_the_shell_is_denied_and_the_bus_s_tools_are_not() {
    let dir = tempfile::tempdir().expect("dir");
    let lead_repo = repository(dir.path(), "lead-repo");
    let dev_repo = repository(dir.path(), "dev-repo");
    let shell = |name: &str, claim: &str, release: &str| {
        let mut input = json!({"command": "sh test.sh > ran.txt"});
        if name == "Bash" {
            input["description"] = json!("Run the tests");
        }
        vec![
            Step::tool(claim, json!({})),
            Step::tool(name, input),
            Step::tool(release, json!({})),
            Step::text("Done."),
        ]
    };
    let model = Model::start(vec![
        (
            "lead",
            "lead-key",
            shell(
                "Bash",
                "mcp__mosaic-bus__role_claim",
                "mcp__mosaic-bus__role_release",
            ),
        ),
        (
            "dev",
            "dev-key",
            shell("bash", "role_claim", "role_release"),
        ),
    ]);
    let mut lead = agent("lead", "claude-code", &lead_repo, &model, "LEAD_KEY");
    let mut dev = agent("dev", "pi", &dev_repo, &model, "DEV_KEY");
    for entry in [&mut lead, &mut dev] {
        entry["tools"] = json!("bus");
    }
    let config = team_config(dir.path(), json!([lead, dev]));
    let root = tempfile::tempdir().expect("data root");
    let up = Up::start_with(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
        ],
        &[
            ("LEAD_KEY", "lead-key".as_ref()),
            ("DEV_KEY", "dev-key".as_ref()),
        ],
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line");
    model.wait("each agent's release", FLOW, |requests| {
        ["lead", "dev"]
            .iter()
            .all(|a| results_of(requests, a).len() >= 3)
    });
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{summary}\n{stderr}");
    let requests = model.requests();
    for (role, repo) in [("lead", &lead_repo), ("dev", &dev_repo)] {
        let results = results_of(&requests, role);
        let texts: Vec<String> = results.iter().map(text_of).collect();
        assert!(texts[0].contains("claimed"), "{role}: {texts:#?}");
        assert!(!texts[1].contains("tests:"), "{role}: {texts:#?}");
        assert_eq!(results[2], json!({}), "{role} release: {texts:#?}");
        assert!(!repo.join("ran.txt").exists(), "{role}: the shell ran");
        // The harness's own tools were not offered to the model at all.
        let offered = requests
            .iter()
            .filter(|r| r.is_message() && r.agent.as_deref() == Some(role))
            .flat_map(Request::tools)
            .collect::<Vec<_>>();
        assert!(
            !offered.iter().any(|t| t == "Bash" || t == "bash"),
            "{role}: {offered:?}"
        );
    }
}

/// What the human's own instructions say, in a fake home.
const MARKER: &str = "MARKER-7f3a: the human's own instructions";

/// What the human's credential files hold, in a fake home: never seen by
/// an agent.
const SECRET: &str = "SECRET-c9d2-credential";

#[test]
fn with_user_config_the_human_s_instructions_reach_the_model_and_credentials_do_not() {
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    let claude = home.join(".claude");
    let pi = home.join(".pi/agent");
    for folder in [claude.join("skills"), pi.join("prompts")] {
        std::fs::create_dir_all(folder).expect("mkdir");
    }
    std::fs::write(
        claude.join("CLAUDE.md"),
        format!("{MARKER} (Claude Code)\n"),
    )
    .expect("md");
    std::fs::write(pi.join("AGENTS.md"), format!("{MARKER} (pi)\n")).expect("md");
    for secret in [
        claude.join(".credentials.json"),
        claude.join("settings.json"),
        pi.join("auth.json"),
        pi.join("settings.json"),
    ] {
        std::fs::write(secret, format!("{{\"token\": \"{SECRET}\"}}")).expect("secret");
    }
    let lead_repo = repository(dir.path(), "lead-repo");
    let dev_repo = repository(dir.path(), "dev-repo");
    // Whatever lies in the configuration folder, and anywhere else the
    // agent can look, is shown to the model.
    let config_dir = "${CLAUDE_CONFIG_DIR:-$PI_CODING_AGENT_DIR}";
    let look = format!(
        "ls -a {config_dir} 2>&1; cat {config_dir}/* {config_dir}/.c* 2>&1; \
         cat {home}/.claude/.credentials.json {home}/.pi/agent/auth.json 2>&1; \
         grep -rs c9d2-cred \"$HOME\" /tmp {config_dir} 2>&1 | head -5; echo looked",
        home = home.display()
    );
    let script = |shell: &str, claim: &str, release: &str| {
        let mut input = json!({"command": look.clone()});
        if shell == "Bash" {
            input["description"] = json!("Look around");
        }
        vec![
            Step::tool(claim, json!({})),
            Step::tool(shell, input),
            Step::tool(release, json!({})),
            Step::text("Done."),
        ]
    };
    let model = Model::start(vec![
        (
            "lead",
            "lead-key",
            script(
                "Bash",
                "mcp__mosaic-bus__role_claim",
                "mcp__mosaic-bus__role_release",
            ),
        ),
        (
            "dev",
            "dev-key",
            script("bash", "role_claim", "role_release"),
        ),
    ]);
    let mut lead = agent("lead", "claude-code", &lead_repo, &model, "LEAD_KEY");
    let mut dev = agent("dev", "pi", &dev_repo, &model, "DEV_KEY");
    for entry in [&mut lead, &mut dev] {
        entry["userConfig"] = json!(true);
    }
    let config = team_config(dir.path(), json!([lead, dev]));
    let root = tempfile::tempdir().expect("data root");
    let up = Up::start_with(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.path().as_os_str(),
        ],
        &[
            ("LEAD_KEY", "lead-key".as_ref()),
            ("DEV_KEY", "dev-key".as_ref()),
            ("HOME", home.as_os_str()),
        ],
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line");
    model.wait("each agent's release", FLOW, |requests| {
        ["lead", "dev"]
            .iter()
            .all(|a| results_of(requests, a).len() >= 3)
    });
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{summary}\n{stderr}");
    let home = home.canonicalize().expect("canonical");
    for (role, bound) in [
        ("lead", home.join(".claude/CLAUDE.md")),
        ("dev", home.join(".pi/agent/AGENTS.md")),
    ] {
        let agent = summary["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .find(|a| a["role"] == role)
            .expect("the agent");
        let mut named: Vec<&str> = agent["userConfig"]
            .as_array()
            .expect("userConfig")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        named.sort_unstable();
        let expected = match role {
            "lead" => vec![
                bound.to_string_lossy().into_owned(),
                home.join(".claude/skills").to_string_lossy().into_owned(),
            ],
            _ => vec![
                bound.to_string_lossy().into_owned(),
                home.join(".pi/agent/prompts")
                    .to_string_lossy()
                    .into_owned(),
            ],
        };
        assert_eq!(named, expected, "{role}: {summary}");
        let requests: Vec<Request> = model
            .requests()
            .into_iter()
            .filter(|r| r.is_message() && r.agent.as_deref() == Some(role))
            .collect();
        assert!(
            requests.iter().all(|r| r.body.to_string().contains(MARKER)),
            "{role}: the human's instructions in every request"
        );
        let results = results_of(&requests, role);
        let looked = text_of(&results[1]);
        assert!(looked.contains("looked"), "{role}: {looked}");
        for request in &requests {
            assert!(
                !request.body.to_string().contains(SECRET),
                "{role}: {looked}"
            );
        }
    }
}
