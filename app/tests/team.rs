//! The team flow end to end with the real programs: `mosaic-bus up
//! --config examples/claude-team.json --console` in tmux, lead on the real
//! Claude Code and dev on the real pi (pinned in `tests/package-lock.json`,
//! installed by `.ci/harness-deps`; or the folder `MOSAIC_TEST_HARNESS_BIN`
//! names), each in `up`'s bubblewrap sandbox with `"network": "proxy"`, and
//! the scripted model of `support/model.rs` in place of Anthropic's API.
//!
//! The example is taken as shipped: only each agent's model `baseUrl`
//! changes (the scripted model on loopback), both read the one
//! `ANTHROPIC_API_KEY` (the model tells them apart by the tools they
//! advertise), and `claude` and `pi` are found on `PATH`, as a new user's
//! would be. The human answers in the real console, with keys.
//!
//! Nothing sleeps to synchronise: every wait is on the console's screen
//! or the model's recorded requests, bounded by [`FLOW`] (the harnesses
//! start in 1–3 s and each turn runs `mosaic-bus`; a loaded 2-core
//! machine gets many times that).

#[path = "support/mod.rs"]
mod support;

#[path = "support/model.rs"]
mod model;

use std::path::Path;
use std::time::Duration;

use model::{harness_bin, Model, Request, Step};
use mosaic_domain::{CallerKind, Verb};
use serde_json::{json, Value};
use support::tmux::Tmux;
use support::{config, data_root, Broker, BIN, WAIT};

/// The bound on each wait for a step of the flow.
const FLOW: Duration = Duration::from_secs(240);

/// The names of the tools `mosaic-bus mcp --tools` lists (what the MCP
/// server answers to `tools/list`, and what the pi extension registers),
/// sorted; checked to be the agent verbs, dots as underscores.
fn bus_tools() -> Vec<String> {
    let out = std::process::Command::new(BIN)
        .args(["mcp", "--tools"])
        .output()
        .expect("mosaic-bus mcp --tools");
    assert!(out.status.success(), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).expect("a JSON array");
    let mut tools: Vec<String> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_owned())
        .collect();
    tools.sort_unstable();
    let mut verbs: Vec<String> = Verb::ALL
        .iter()
        .filter(|v| v.serves(CallerKind::Agent))
        .map(|v| v.as_str().replace('.', "_"))
        .collect();
    verbs.sort_unstable();
    assert_eq!(tools, verbs);
    tools
}

/// The text of a result's `id`.
fn id_of(result: &Value) -> String {
    result["id"]
        .as_str()
        .unwrap_or_else(|| panic!("an id in {result}"))
        .to_owned()
}

fn raise(action: &str, target: &str, question: &str) -> Value {
    json!({"action": action, "target": target, "question": question,
           "options": [{"key": "yes", "text": "Do it"}, {"key": "no", "text": "Not yet"}],
           "recommendation": "yes: the tests pass", "blocking": false})
}

/// The bodies of dev's two messages.
const REPORT: &str = "Merged the login fix into main, as you approved.";
const PUBLISHED: &str = "Published the login fix, as you answered.";

/// dev on pi: claims, raises the merge, waits for its resolution, reports
/// citing it, raises the publication, waits for the human's answer,
/// cites it to the human and releases its role. Results: 0 claim, 1
/// merge, 2 report, 3 publication, 4 message, 5 release.
fn dev_script() -> Vec<Step> {
    vec![
        Step::tool("role_claim", json!({})),
        Step::tool(
            "decision_raise",
            raise("repo.merge", "main", "May I merge the login fix into main?"),
        ),
        Step::wait_for_with(|r| json!(format!("decision.resolved {}", id_of(&r[1])))),
        Step::tool_with(
            "message_send",
            |r| json!({"to": "lead", "body": REPORT, "decision": id_of(&r[1])}),
        ),
        Step::tool(
            "decision_raise",
            raise(
                "release.publish",
                "login-fix",
                "May I publish the login fix?",
            ),
        ),
        Step::wait_for_with(|r| json!(format!("decision.resolved {}", id_of(&r[3])))),
        Step::tool_with(
            "message_send",
            |r| json!({"to": "human", "body": PUBLISHED, "decision": id_of(&r[3])}),
        ),
        Step::tool("role_release", json!({})),
        Step::text("Done: merged, reported, published."),
    ]
}

/// lead on Claude Code: claims, reads its inbox, stops until the merge
/// is routed to it (its Stop hook), approves it, stops until dev's
/// report, takes delivery, reads it and releases its role. Results: 0
/// claim, 1 inbox, 2 inbox, 3 resolve, 4 receive, 5 read, 6 release.
fn lead_script() -> Vec<Step> {
    let p = |verb: &str| format!("mcp__mosaic-bus__{verb}");
    vec![
        Step::tool(&p("role_claim"), json!({})),
        Step::tool(&p("inbox"), json!({})),
        Step::wait_for("decision"),
        Step::tool(&p("inbox"), json!({})),
        Step::tool_with(&p("decision_resolve"), |r| {
            let merge = r[2]
                .as_array()
                .and_then(|items| items.iter().find(|i| i["action"] == "repo.merge"))
                .unwrap_or_else(|| panic!("the merge in the inbox {}", r[2]));
            json!({"id": id_of(merge), "choice": "yes", "note": "Merge it."})
        }),
        Step::wait_for("message.sent"),
        Step::tool(&p("message_receive"), json!({})),
        Step::tool_with(&p("message_read"), |r| json!({"id": id_of(&r[4][0])})),
        Step::tool(&p("role_release"), json!({})),
        Step::text("Done: approved and read."),
    ]
}

/// `examples/claude-team.json` with each agent's model at `base_url`;
/// nothing else changed.
fn example_config(base_url: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/claude-team.json");
    let text = std::fs::read_to_string(path).expect("the example");
    let mut example: Value = serde_json::from_str(&text).expect("JSON");
    for agent in example["agents"].as_array_mut().expect("agents") {
        assert_eq!(agent["model"]["keyEnv"], "ANTHROPIC_API_KEY", "{agent}");
        agent["model"]["baseUrl"] = json!(base_url);
    }
    example
}

/// The message requests of `agent`, in order.
fn requests_of(model: &Model, agent: &str) -> Vec<Request> {
    model
        .requests()
        .into_iter()
        .filter(|r| r.is_message() && r.agent.as_deref() == Some(agent))
        .collect()
}

/// The tool results in the longest conversation of `agent`.
fn results_of(model: &Model, agent: &str) -> Vec<Value> {
    requests_of(model, agent)
        .iter()
        .map(|r| model::tool_results(r.body["messages"].as_array().map_or(&[][..], |m| m)))
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

/// Whether `agent`'s conversation has `n` tool results.
fn has_results(requests: &[Request], agent: &str, n: usize) -> bool {
    requests.iter().any(|r| {
        r.agent.as_deref() == Some(agent)
            && model::tool_results(r.body["messages"].as_array().map_or(&[][..], |m| m)).len() >= n
    })
}

#[test]
fn lead_on_claude_code_and_dev_on_pi_run_the_example_flow_in_up_s_sandbox_with_the_human_at_the_console(
) {
    let bin = harness_bin();
    let model = Model::start_shared(
        "sk-team-test",
        vec![
            ("lead", "mcp__mosaic-bus__role_claim", lead_script()),
            ("dev", "role_claim", dev_script()),
        ],
    );
    let dir = tempfile::tempdir().expect("dir");
    let root = data_root();
    let config_path = dir.path().join("claude-team.json");
    let example = example_config(&model.base_url());
    std::fs::write(&config_path, example.to_string()).expect("write the config");
    // A home of its own, apart from the config's folder (which the
    // sandbox binds, and must not show the home).
    let home = tempfile::tempdir().expect("home");
    let command = format!(
        "HOME={home} PATH={bin}:$PATH ANTHROPIC_API_KEY=sk-team-test \
         {BIN} up --config {config} --data-root {root} --console; echo \"up exited with $?\"; read _",
        home = home.path().display(),
        bin = bin.display(),
        config = config_path.display(),
        root = root.path().display(),
    );
    let tmux = Tmux::start(&command, 160, 50);

    // dev's publication comes to the human's console. The Agents view
    // shows dev waiting on the human, its last tool the raise, its loop
    // on the feed; then the human answers.
    tmux.wait_for("release.publish on login-fix", FLOW);
    agents_view(&tmux);
    tmux.wait_for("· WAITING ON YOU · pi ·", WAIT);
    let working = tmux.wait_for("the agent's own word: last tool decision_raise, ", WAIT);
    eprintln!("the Agents view, dev waiting:\n{working}");
    tmux.keys(&["]"]);
    tmux.wait_for("May I publish the login fix?", WAIT);
    tmux.keys(&["1"]);
    tmux.wait_for("selected yes", WAIT);
    tmux.keys(&["Enter"]);
    tmux.wait_for("(choice yes)? y/n", WAIT);
    tmux.keys(&["y"]);
    tmux.wait_for("resolved with yes", WAIT);
    tmux.keys(&["Escape"]);
    // dev cites it to the human; both agents release their roles and exit.
    tmux.wait_for(&format!("a message · {PUBLISHED}"), FLOW);
    model.wait("both roles released", FLOW, |requests| {
        has_results(requests, "lead", 7) && has_results(requests, "dev", 6)
    });
    agents_view(&tmux);
    let lead_exited = "· ENDED (exited, status 0) · claude-code ·";
    let dev_exited = "· ENDED (exited, status 0) · pi ·";
    tmux.wait_for(lead_exited, FLOW);
    let agents = tmux.wait_for(dev_exited, FLOW);
    eprintln!("the Agents view:\n{agents}");
    assert_eq!(
        agents
            .matches("the agent's own word: last tool role_release, ")
            .count(),
        2,
        "{agents}"
    );
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("up exited with 0", WAIT);
    let first: Value = screen
        .lines()
        .find_map(|l| serde_json::from_str(l.trim_end()).ok())
        .unwrap_or_else(|| panic!("up's first line on\n{screen}"));
    let log = std::fs::read_to_string(first["log"].as_str().expect("a log")).expect("the log");

    check_agents(&first);
    let runs = |role: &str| -> String {
        first["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .find(|a| a["role"] == role)
            .and_then(|a| a["run"].as_str())
            .expect("a run")
            .to_owned()
    };
    let (lead_run, dev_run) = (runs("lead"), runs("dev"));
    check_tools(&model);
    check_wake_ups(&model);
    check_evidence(root.path(), &example, &model, &lead_run, &dev_run);
    // Nothing reached any host but the model's: the proxy admits only it
    // and logs every refusal into this log (where up's own lines went
    // while the console was open: the agents' exits are there); the
    // model saw every request it admitted.
    for run in [&lead_run, &dev_run] {
        let exited = format!("agent exited run=\"{run}\"");
        assert!(log.contains(&exited), "{exited} in {log}");
    }
    assert!(!log.contains("the proxy refused"), "{log}");
    assert!(
        model
            .requests()
            .iter()
            .filter(|r| r.is_message())
            .all(|r| r.agent.is_some()),
        "a request without a scripted key"
    );
}

/// Tabs to the Agents view, each time waiting for the screen to change.
#[track_caller]
fn agents_view(tmux: &Tmux) {
    for _ in 0..6 {
        let before = tmux.screen().unwrap_or_default();
        if before.contains(" · run lead-") {
            return;
        }
        tmux.keys(&["Tab"]);
        let deadline = std::time::Instant::now() + WAIT;
        while tmux.screen().unwrap_or_default() == before {
            assert!(std::time::Instant::now() < deadline, "Tab changed nothing");
            std::thread::sleep(support::tmux::PAUSE);
        }
    }
    panic!("no Agents view after six Tabs");
}

/// Both agents ran in the sandbox with the proxy, each as its harness.
#[track_caller]
fn check_agents(first: &Value) {
    let agents = first["agents"].as_array().expect("agents");
    let harnesses: Vec<(&Value, &Value)> =
        agents.iter().map(|a| (&a["role"], &a["harness"])).collect();
    assert_eq!(
        harnesses,
        [
            (&json!("lead"), &json!("claude-code")),
            (&json!("dev"), &json!("pi"))
        ],
        "{first}"
    );
    for agent in agents {
        assert_eq!(agent["sandboxed"], true, "{first}");
        assert_eq!(agent["network"], "proxy", "{first}");
    }
}

/// The 17 bus tools advertised to Claude Code as `mcp__mosaic-bus__…`
/// and to pi beside its own.
#[track_caller]
fn check_tools(model: &Model) {
    let expected = bus_tools();
    assert_eq!(expected.len(), 17, "{expected:?}");
    for request in requests_of(model, "lead") {
        let mut bus: Vec<String> = request
            .tools()
            .iter()
            .filter_map(|t| t.strip_prefix("mcp__mosaic-bus__").map(str::to_owned))
            .collect();
        bus.sort_unstable();
        assert_eq!(bus, expected);
    }
    let own = ["read", "bash", "edit", "write"];
    for request in requests_of(model, "dev") {
        let mut bus: Vec<String> = request
            .tools()
            .into_iter()
            .filter(|t| !own.contains(&t.as_str()))
            .collect();
        bus.sort_unstable();
        assert_eq!(bus, expected);
    }
}

/// lead was woken by its Stop hook (its reason naming dev's report) and
/// dev by its extension's follow-up (naming the human's resolution).
#[track_caller]
fn check_wake_ups(model: &Model) {
    let (lead, dev) = (results_of(model, "lead"), results_of(model, "dev"));
    let woken = |agent: &str, text: &str| {
        requests_of(model, agent)
            .iter()
            .any(|r| r.body["messages"].to_string().contains(text))
    };
    assert!(
        woken("lead", "mosaic-bus: work arrived for run lead-"),
        "no Stop hook's reason"
    );
    let report = format!("message.sent {}", id_of(&dev[2]));
    assert!(woken("lead", &report), "{report} in lead's conversation");
    // By its extension while pi still waits, or by `up` once pi has
    // ended idle (`"idle": "exit"`): either says what arrived.
    let answered = format!("decision.resolved {}", id_of(&dev[3]));
    assert!(woken("dev", &answered), "{answered} in dev's conversation");
    assert!(
        woken("dev", "mosaic-bus: work arrived: ") || woken("dev", "while you were idle: "),
        "no wake-up in dev's conversation"
    );
    assert_eq!(lead.len(), 7, "{lead:?}");
}

/// The evidence of the closed data root, read through a reader of the
/// business: each launch with its harness, each step by its run.
#[track_caller]
fn check_evidence(root: &Path, example: &Value, model: &Model, lead_run: &str, dev_run: &str) {
    let dev = results_of(model, "dev");
    let lead = results_of(model, "lead");
    assert_eq!(dev.len(), 6, "{dev:?}");
    assert_eq!(lead.len(), 7, "{lead:?}");
    let b = Broker::boot(
        root,
        &config(root, &[example["business"].clone()], &[], &["acme"]),
    );
    let reader = b.reader(0);
    for (role, run, harness) in [("lead", lead_run, "claude-code"), ("dev", dev_run, "pi")] {
        let trail = reader.trail(role);
        let launched = trail
            .iter()
            .filter(|r| r["kind"] == "session.launched")
            .map(|r| (&r["run"], &r["harness"]))
            .collect::<Vec<_>>();
        assert_eq!(launched, [(&json!(run), &json!(harness))], "{trail:?}");
        let claims: Vec<&Value> = trail
            .iter()
            .filter(|r| r["kind"] == "role.claimed" || r["kind"] == "role.released")
            .map(|r| &r["run"])
            .collect();
        assert_eq!(claims, [run, run], "{trail:?}");
    }
    // The merge: raised by dev, resolved by lead, cited by dev's report,
    // which lead read.
    let merge = reader.trail(&id_of(&dev[1]));
    let kinds: Vec<&str> = merge.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        ["decision.raised", "decision.resolved", "message.sent"],
        "{merge:?}"
    );
    assert_eq!(merge[0]["raisedBy"]["run"], dev_run, "{merge:?}");
    assert_eq!(
        (&merge[1]["by_run"], &merge[1]["choice"]),
        (&json!(lead_run), &json!("yes")),
        "{merge:?}"
    );
    assert_eq!(
        (&merge[2]["from_run"], &merge[2]["to"], &merge[2]["body"]),
        (&json!(dev_run), &json!("lead"), &json!(REPORT)),
        "{merge:?}"
    );
    let report = id_of(&dev[2]);
    assert_eq!(merge[2]["id"], report, "{merge:?}");
    let trail = reader.trail(&report);
    let delivery: Vec<(&Value, &Value)> = trail
        .iter()
        .filter(|r| r["kind"] != "message.sent")
        .map(|r| (&r["kind"], &r["run"]))
        .collect();
    assert_eq!(
        delivery,
        [
            (&json!("message.delivered"), &json!(lead_run)),
            (&json!("message.read"), &json!(lead_run))
        ]
    );
    // The publication: raised by dev, the human's input and resolution,
    // then dev's message citing it.
    let publish = reader.trail(&id_of(&dev[3]));
    let kinds: Vec<&str> = publish.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "decision.raised",
            "human.input",
            "decision.resolved",
            "message.sent"
        ],
        "{publish:?}"
    );
    assert_eq!(publish[0]["raisedBy"]["run"], dev_run, "{publish:?}");
    assert_eq!(
        (&publish[2]["by"], &publish[2]["choice"]),
        (&json!("human"), &json!("yes"))
    );
    assert_eq!(publish[3]["id"], json!(id_of(&dev[4])));
    assert_eq!(
        (&publish[3]["from_run"], &publish[3]["to"]),
        (&json!(dev_run), &json!("human"))
    );
    b.close();
}
