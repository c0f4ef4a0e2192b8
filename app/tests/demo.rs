//! The README's run command works: the demo plays its exchange end to end.

use std::process::Command;

#[test]
fn the_demo_plays_the_exchange_and_prints_the_trail() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_mosaic-bus"))
        .args(["demo", "--data-root"])
        .arg(dir.path())
        .output()
        .expect("run the demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    let step = |name: &str| {
        lines
            .iter()
            .find(|l| l["step"] == name)
            .unwrap_or_else(|| panic!("no step {name}"))
    };
    assert_eq!(
        step("dev asks the arbiter to merge")["result"]["route"],
        "lead"
    );
    assert_eq!(step("lead approves")["result"]["status"], "resolved");
    assert_eq!(
        step("dev spends the approval")["result"]["grant"],
        "approval"
    );
    assert_eq!(
        step("dev tries to spend it again")["error"],
        "decision-consumed"
    );
    assert_eq!(step("lead acknowledges")["ok"], true);
    let trail: Vec<&str> = lines.iter().filter_map(|l| l["fact"].as_str()).collect();
    assert_eq!(
        trail,
        [
            "decision.raised",
            "decision.resolved",
            "approval.consumed",
            "action.allowed",
            "message.sent"
        ]
    );
    assert!(dir.path().join("bus/bus.sqlite").exists());
    assert!(
        !dir.path().join("bus/writer.lock").exists(),
        "the demo releases its lock"
    );

    // A second run on the same data root opens the verified store and plays again.
    let again = Command::new(env!("CARGO_BIN_EXE_mosaic-bus"))
        .args(["demo", "--data-root"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}
