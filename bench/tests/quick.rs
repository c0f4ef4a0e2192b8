//! `mosaic-bench --quick` runs the whole benchmark path on tiny sizes: every
//! stdout line is JSON, the figures come in order with positive numbers, and
//! the run leaves nothing behind in its data root.

use std::process::Command;

use serde_json::Value;

const FIGURES: [&str; 17] = [
    "environment",
    "raw_sqlite_commit",
    "message_send_1_client",
    "commit_cost_rows",
    "message_send_1_client_socket",
    "message_send_1_client_socket_persistent",
    "message_send_16_clients",
    "inbox_10k",
    "browser_rtt_1_pane",
    "browser_rtt_100_clients_1_capable",
    "browser_rtt_100_racing",
    "broker_rss",
    "changes_wake",
    "changes_idle",
    "boot_history",
    "human_under_siege",
    "socket_ceilings",
];

fn positive(line: &Value, key: &str) {
    let x = line[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is a number in {line}"));
    assert!(x > 0.0 && x.is_finite(), "{key} is positive in {line}");
}

#[test]
fn quick_run_prints_every_figure_as_json_and_cleans_up() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_mosaic-bench"))
        .args(["--quick", "--data-root"])
        .arg(root.path())
        .output()
        .expect("the bench runs");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let names: Vec<&str> = lines
        .iter()
        .map(|l| l["figure"].as_str().expect("a figure name"))
        .collect();
    assert_eq!(names, FIGURES);

    let env = &lines[0];
    positive(env, "nproc");
    assert_eq!(env["quick"], true);
    assert!(env["bench_dir"]
        .as_str()
        .expect("bench_dir")
        .starts_with(env["data_root"].as_str().expect("data_root")));

    for key in [
        "commits_per_s",
        "p50_us",
        "p99_us",
        "mean_us",
        "n",
        "idle_p50_us",
        "awake_p50_us",
        "idle_penalty_p50",
    ] {
        positive(&lines[1], key);
    }
    for key in [
        "requests_per_s",
        "p50_us",
        "p99_us",
        "ratio_to_raw",
        "raw_commits_per_s",
        "store_only_commits_per_s",
        "store_only_p50_us",
        "store_only_written_bytes_per_op",
        "raw_7_btrees_commits_per_s",
        "raw_7_btrees_p50_us",
        "raw_7_btrees_written_bytes_per_op",
        "raw_3_btrees_commits_per_s",
        "raw_3_btrees_p50_us",
        "raw_3_btrees_written_bytes_per_op",
    ] {
        positive(&lines[2], key);
    }
    assert_eq!(
        lines[2]["records_per_request"], 2.0,
        "a within-role send commits action.allowed and message.sent"
    );
    for key in [
        "small_p50_us",
        "small_mean_us",
        "large_p50_us",
        "large_mean_us",
        "ratio",
        "large_messages",
    ] {
        positive(&lines[3], key);
    }
    assert!(lines[3]["large_messages"].as_u64() > lines[3]["small_messages"].as_u64());
    for line in &lines[4..7] {
        for key in [
            "requests_per_s",
            "p50_us",
            "p99_us",
            "ratio_to_raw",
            "raw_commits_per_s",
        ] {
            positive(line, key);
        }
    }
    assert!(
        lines[4]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("one connection per request")),
        "{}",
        lines[4]
    );
    assert!(
        lines[5]["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("mosaic_client::socket::Session")),
        "{}",
        lines[5]
    );
    assert_eq!(lines[6]["clients"], 2, "quick sizes: two clients");
    for key in ["p50_us", "p99_us", "empty_inbox_p50_us", "answer_bytes"] {
        positive(&lines[7], key);
    }
    assert_eq!(lines[7]["messages"], 100, "every unread message is listed");
    for (line, capable, clients) in [(&lines[8], 1, 1), (&lines[9], 1, 3), (&lines[10], 3, 3)] {
        for key in ["p50_us", "p99_us", "raw_p50_us", "pane_http_p50_us"] {
            positive(line, key);
        }
        assert_eq!(line["capable"], capable, "{line}");
        assert_eq!(line["clients"], clients, "{line}");
        assert_eq!(line["commits_per_request"], 2, "{line}");
        assert_eq!(
            line["records_per_request"], 2.0,
            "action.allowed and browser.completed: {line}"
        );
    }
    for key in [
        "vm_hwm_mib",
        "vm_rss_connected_mib",
        "threads",
        "browser_trips",
        "busy_requests_per_s",
    ] {
        positive(&lines[11], key);
    }
    assert_eq!(lines[11]["clients"], 3);
    assert_eq!(
        lines[11]["busy_requests"], 8,
        "quick sizes: two agents, four requests each"
    );
    // The waiter may hear before the sender's answer arrives: any sign.
    for key in ["p50_us", "p99_us"] {
        assert!(
            lines[12][key].as_f64().is_some_and(f64::is_finite),
            "{key} is a number in {}",
            lines[12]
        );
    }
    for key in [
        "from_request_p50_us",
        "send_p50_us",
        "hop_p50_us",
        "immediate_p50_us",
        "n",
    ] {
        positive(&lines[12], key);
    }
    assert_eq!(lines[12]["n"], 5, "quick sizes: five wake rounds");
    for key in ["vm_rss_mib", "vm_hwm_mib", "threads", "broker_fds_waiting"] {
        positive(&lines[13], key);
    }
    assert_eq!(lines[13]["agents"], 5, "quick sizes: five idle agents");
    assert_eq!(
        lines[13]["waiting"], 5,
        "every agent's wait was open: {}",
        lines[13]
    );
    assert_eq!(lines[13]["refused"], 0, "{}", lines[13]);
    assert_eq!(lines[13]["broker_fds_released"], true, "{}", lines[13]);
    assert!(
        lines[13]["cpu_pct"].as_f64().is_some_and(|c| c >= 0.0),
        "{}",
        lines[13]
    );
    for key in [
        "small_boot_s",
        "small_checks_s",
        "large_boot_s",
        "large_checks_s",
        "large_limit_s",
        "ratio_large_small",
    ] {
        positive(&lines[14], key);
    }
    assert!(
        lines[14]["large_ledger_rows"].as_u64() > lines[14]["small_ledger_rows"].as_u64(),
        "{}",
        lines[14]
    );
    assert!(lines[14]["meets_limit"].is_boolean(), "{}", lines[14]);
    for key in ["quiet_p99_ms", "worst_p99_ms", "refusal_flood_lines"] {
        positive(&lines[15], key);
    }
    let phases: Vec<&str> = lines[15]["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| p["phase"].as_str().expect("a phase name"))
        .collect();
    assert_eq!(
        phases,
        [
            "quiet",
            "junk_socket",
            "partial_http",
            "proof_amplification",
            "refusal_flood"
        ]
    );
    for phase in lines[15]["phases"].as_array().expect("phases") {
        assert_eq!(phase["calls"], 3, "quick sizes: three calls: {phase}");
        // The CLI runs detached, so the human passes its proof wherever
        // this test runs, under every flood.
        assert_eq!(phase["ok"], 3, "every human call answered ok: {phase}");
    }
    assert!(
        lines[15]["store_growth_bytes_per_min"]
            .as_f64()
            .is_some_and(|g| g >= 0.0),
        "{}",
        lines[15]
    );
    for line in &lines[1..] {
        if line.get("target").is_some() {
            assert!(line["met"].is_boolean(), "a target comes with met: {line}");
        }
    }
    let sixteen = lines
        .iter()
        .find(|l| l["figure"] == "message_send_16_clients")
        .expect("the 16-client figure");
    assert_eq!(sixteen["target"], "ratio_to_raw >= 2.5", "{sixteen}");
    assert_eq!(sixteen["moonshot"], "ratio_to_raw >= 4", "{sixteen}");
    assert!(sixteen["moonshot_met"].is_boolean(), "{sixteen}");
    let ceilings = &lines[16];
    for shape in ["relay_1", "direct_1", "relay_16"] {
        for key in ["requests_per_s", "p50_us", "ratio_to_raw"] {
            positive(ceilings, &format!("{shape}_{key}"));
        }
    }
    positive(ceilings, "relay_16_requests_per_commit");
    positive(ceilings, "relay_16_committer_cpu_us_per_op");
    for line in &lines {
        assert!(line.get("error").is_none(), "no figure failed: {line}");
    }

    let left: Vec<_> = std::fs::read_dir(root.path())
        .expect("the data root is still there")
        .collect();
    assert!(left.is_empty(), "the bench removed its directory: {left:?}");
}

#[test]
fn a_bad_argument_is_one_json_error_line_and_a_failure() {
    let out = Command::new(env!("CARGO_BIN_EXE_mosaic-bench"))
        .arg("--bogus")
        .output()
        .expect("the bench runs");
    assert!(!out.status.success());
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    let line: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(line["figure"], "arguments");
    assert!(line["error"].is_string());
}

#[test]
fn a_missing_data_root_is_an_error_line_not_a_panic() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_mosaic-bench"))
        .args(["--quick", "--data-root"])
        .arg(root.path().join("missing"))
        .output()
        .expect("the bench runs");
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    let line: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(line["figure"], "environment");
    assert!(line["error"].is_string());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}
