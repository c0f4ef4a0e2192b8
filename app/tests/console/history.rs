//! The History view in a real terminal: the human resolves a decision,
//! finds it in History above one an agent withdrew, sees a new closing
//! arrive without a key, and opens its trail with `Enter`.

use serde_json::json;

use crate::support::WAIT;
use crate::{acme_broker, answer_yes, console_command, data_root, Tmux};

/// The History view's selected row, without its frame.
fn selected_row(tmux: &Tmux) -> String {
    tmux.rows()
        .into_iter()
        .map(|row| row.trim_start_matches('│').to_owned())
        .find(|row| row.starts_with("> "))
        .unwrap_or_default()
}

#[test]
fn the_human_finds_a_resolved_decision_in_history_and_opens_its_trail() {
    let root = data_root();
    let b = acme_broker(root.path());
    let (ops, dev) = (b.agent("ops-1"), b.agent("dev-1"));
    ops.claim();
    dev.claim();
    let tmux = Tmux::start(&console_command(&b.socket), 120, 40);
    tmux.wait_for("Nothing is waiting on you", WAIT);

    let merge = dev.raise("repo.merge", Some("acme/main"), json!({}));
    dev.ok("decision.withdraw", json!({"id": merge["id"]}));
    let d = ops.raise("message.send", Some("qa"), json!({}));
    tmux.wait_for("decision · ops/ops-1 · message.send on qa", WAIT);
    tmux.keys(&["]"]);
    tmux.wait_for("Approving (yes) grants ops/ops-1 message.send on qa", WAIT);
    answer_yes(&tmux);

    // Back to the inbox, then Decision, Agents, Trail, Activity, History.
    tmux.keys(&["Escape"]);
    tmux.wait_for("Nothing is waiting on you", WAIT);
    tmux.keys(&["Tab", "Tab", "Tab", "Tab", "Tab"]);
    tmux.wait_for("History: Enter opens a decision's trail", WAIT);
    let mine = "resolved with yes by human · ops/ops-1 · message.send on qa";
    let theirs = "withdrawn by dev · dev/dev-1 · repo.merge on acme/main";
    let screen = tmux.wait_for(theirs, WAIT);
    let (at_mine, at_theirs) = (screen.find(mine), screen.find(theirs));
    assert!(
        at_mine.is_some() && at_mine < at_theirs,
        "the newest closing first:\n{screen}"
    );
    assert!(selected_row(&tmux).contains(mine), "{screen}");

    // A closing arrives while the view is open: read again, no key.
    let other = dev.raise("repo.merge", Some("acme/dev"), json!({}));
    dev.ok("decision.withdraw", json!({"id": other["id"]}));
    let screen = tmux.wait_for(
        "withdrawn by dev · dev/dev-1 · repo.merge on acme/dev",
        WAIT,
    );
    let row = selected_row(&tmux);
    assert!(
        row.contains(mine),
        "the selection stays on its row: {row}\n{screen}"
    );

    tmux.keys(&["Enter"]);
    let id = d["id"].as_str().expect("an id");
    tmux.wait_for(&format!("Trail of {id}"), WAIT);
    tmux.wait_for("the human resolved it with yes", WAIT);
    tmux.keys(&["q"]);
    tmux.wait_gone();
    b.close();
}
