//! The decision text rule: a
//! decision's words refuse every control and format character (a newline
//! only in the question and the notes), within their caps; message bodies
//! keep every byte. Through the socket of a real broker.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::{acme, acme_launches, config, data_root, raise_args, Agent, Broker};

/// acme with every run of `acme_launches` and one reader.
fn acme_broker(root: &Path) -> Broker {
    Broker::boot(root, &config(root, &[acme()], &acme_launches(), &["acme"]))
}

/// Agents of `broker` that claimed their roles, in the order given.
fn claimed<const N: usize>(broker: &Broker, runs: [&str; N]) -> [Agent; N] {
    runs.map(|run| {
        let agent = broker.agent(run);
        agent.claim();
        agent
    })
}

/// Each character class the rule names, by the name a failure shows: the
/// terminal's controls, a bidi override, a zero-width space, a tag
/// character, a carriage return and a newline.
const HIDDEN: [(&str, char); 7] = [
    ("ESC", '\u{1b}'),
    ("BEL", '\u{7}'),
    ("U+202E", '\u{202e}'),
    ("U+200B", '\u{200b}'),
    ("U+E0041", '\u{e0041}'),
    ("CR", '\r'),
    ("LF", '\n'),
];

/// The arguments of a plain raise with `value` at `field` (`key` is the
/// second option's key, `text` the first option's text).
fn with(field: &str, value: &str) -> Value {
    let mut args = raise_args("repo.merge", Some("main"), json!({}));
    let slot = match field {
        "key" => &mut args["options"][1]["key"],
        "text" => &mut args["options"][0]["text"],
        field => &mut args[field],
    };
    *slot = json!(value);
    args
}

/// `text` with `c` after its first character.
fn spoil(text: &str, c: char) -> String {
    format!("{}{c}{}", &text[..1], &text[1..])
}

/// The one-line fields of a raise, each with a valid value.
const ONE_LINE: [(&str, &str); 8] = [
    ("action", "repo.merge"),
    ("target", "main"),
    ("key", "no"),
    ("text", "Yes"),
    ("recommendation", "yes"),
    ("domain", "technical"),
    ("task_ref", "vikunja:3/41"),
    ("requirement_ref", "REQ-7"),
];

#[test]
fn decision_raise_refuses_every_hidden_character_in_every_field() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [dev] = claimed(&b, ["dev-1"]);
    for (field, valid) in ONE_LINE {
        // The valid value is accepted, so each refusal is the character's.
        dev.ok("decision.raise", with(field, valid));
        for (name, c) in HIDDEN {
            let args = with(field, &spoil(valid, c));
            let got = dev.call("decision.raise", args.clone());
            assert_eq!(
                got.as_ref().map_err(|r| r.code()),
                Err("bad-request"),
                "{name} in {field}: {args}"
            );
        }
    }
    for (name, c) in HIDDEN {
        let args = with("question", &spoil("Proceed?", c));
        let got = dev.call("decision.raise", args.clone());
        let expected = if c == '\n' {
            Ok(())
        } else {
            Err("bad-request")
        };
        assert_eq!(
            got.as_ref().map(|_| ()).map_err(|r| r.code()),
            expected,
            "{name} in the question: {args}"
        );
    }
    b.close();
}

#[test]
fn the_notes_of_resolve_seen_and_withdraw_refuse_hidden_characters_but_not_newlines() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    let id = dev.raise("repo.merge", Some("main"), json!({}))["id"].clone();
    let calls = [
        (&lead, "decision.seen", json!({"id": id})),
        (&dev, "decision.withdraw", json!({"id": id})),
        (
            &lead,
            "decision.resolve",
            json!({"id": id, "choice": "yes"}),
        ),
    ];
    for (agent, verb, args) in &calls {
        for (name, c) in HIDDEN {
            if c == '\n' {
                continue;
            }
            let mut args = args.clone();
            args["note"] = json!(format!("Seen{c} by lead"));
            let got = agent.call(verb, args.clone());
            assert_eq!(
                got.as_ref().map_err(|r| r.code()),
                Err("bad-request"),
                "{name} in the note of {verb}: {args}"
            );
        }
    }
    // Nothing was recorded by the refusals, and a note of several lines is
    // accepted by each verb (the withdraw on a second decision, as the
    // resolve closes the first).
    let mut seen = calls[0].2.clone();
    seen["note"] = json!("Seen.\nMerging after lunch.");
    assert_eq!(lead.ok("decision.seen", seen)["status"], "open");
    let mut resolve = calls[2].2.clone();
    resolve["note"] = json!("Yes.\nGo.");
    assert_eq!(lead.ok("decision.resolve", resolve)["status"], "resolved");
    let other = dev.raise("repo.merge", Some("main"), json!({}))["id"].clone();
    let withdrawn = dev.ok(
        "decision.withdraw",
        json!({"id": other, "note": "Not needed.\nDone by hand."}),
    );
    assert_eq!(withdrawn["status"], "withdrawn");
    let kinds = dev.trail_kinds(id.as_str().expect("an id"));
    assert_eq!(
        kinds,
        ["decision.raised", "decision.seen", "decision.resolved"]
    );
    b.close();
}

#[test]
fn the_caps_count_characters_and_hold_at_the_limit_not_one_over() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, dev] = claimed(&b, ["lead-1", "dev-1"]);
    // Two bytes a character, so a cap counted in bytes would fail here.
    let chars = |n: usize| "é".repeat(n);
    let raise = |field: &str, n: usize| {
        let mut args = raise_args("repo.merge", Some("main"), json!({}));
        if field == "text" {
            args["options"][0]["text"] = json!(chars(n));
        } else {
            args[field] = json!(chars(n));
        }
        dev.call("decision.raise", args).map(|d| d["id"].clone())
    };
    for (field, cap) in [
        ("question", 4_000),
        ("text", 500),
        ("recommendation", 2_000),
    ] {
        assert!(raise(field, cap).is_ok(), "{field} at {cap}");
        assert_eq!(
            raise(field, cap + 1).map_err(|r| r.code()),
            Err("bad-request"),
            "{field} at {}",
            cap + 1
        );
    }
    let id = raise("question", 10).expect("a decision");
    for verb in ["decision.seen", "decision.resolve"] {
        let mut args = json!({"id": id, "note": chars(2_001)});
        if verb == "decision.resolve" {
            args["choice"] = json!("yes");
        }
        lead.refused(verb, args.clone(), "bad-request");
        args["note"] = json!(chars(2_000));
        lead.ok(verb, args);
    }
    let other = raise("question", 10).expect("a decision");
    dev.refused(
        "decision.withdraw",
        json!({"id": other, "note": chars(2_001)}),
        "bad-request",
    );
    dev.ok(
        "decision.withdraw",
        json!({"id": other, "note": chars(2_000)}),
    );
    b.close();
}

#[test]
fn message_bodies_keep_every_byte_through_receive_and_trail() {
    let root = data_root();
    let b = acme_broker(root.path());
    let [lead, qa] = claimed(&b, ["lead-1", "qa-1"]);
    // Every C0 control but NUL, DEL, the C1 range's CSI, and the hidden
    // characters the decision rule refuses: a compiler's coloured output
    // and worse, which the body keeps as evidence.
    let mut body: String = (1u8..0x20).map(char::from).collect();
    body.push_str("\u{7f}\u{9b}\u{202e}\u{200b}\u{e0041}\u{2028}");
    body.push_str("\u{1b}]52;c;ZWNobyAncm0gLXJmIH4n\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J");
    let id = lead.send("qa", &body, json!({}));
    let received = qa.ok("message.receive", json!({}));
    assert_eq!(received[0]["id"], id);
    assert_eq!(received[0]["body"].as_str(), Some(body.as_str()));
    let trail = lead.trail(id.as_str().expect("an id"));
    assert_eq!(trail[0]["kind"], "message.sent");
    assert_eq!(trail[0]["body"].as_str(), Some(body.as_str()));
    b.close();
}
