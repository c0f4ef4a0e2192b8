//! The decision text rule: what the human approves is what the agent
//! wrote. A raise whose words hide a control or format character, or run
//! past their caps, is refused `bad-request` and records nothing; so is a
//! resolve, seen or withdraw note that does.

use mosaic_domain::decisions::{check_note, check_raise_text};
use mosaic_domain::text::{MAX_NOTE, MAX_OPTION_TEXT, MAX_QUESTION, MAX_RECOMMENDATION};

use super::*;

/// A raise's words, each field changed one at a time by the tests.
fn words() -> RaiseFields {
    let mut fields = raise("repo.merge", Some("repo/main")).fields;
    fields.task_ref = Some(TaskRef::parse("vikunja:3/17").unwrap());
    fields.requirement_ref = Some("REQ-12".into());
    fields.question = "Merge login-fix?\nCI is green; café ✓ 日本語".into();
    fields
}

/// Each way a raise's words may break the rule, named.
fn broken_words() -> Vec<(&'static str, RaiseFields)> {
    let with = |change: &dyn Fn(&mut RaiseFields)| {
        let mut fields = words();
        change(&mut fields);
        fields
    };
    vec![
        (
            "a bidi override in the target",
            with(&|f| f.target = Some(Target::parse("repo/\u{202e}niam").unwrap())),
        ),
        (
            "a zero-width space in the target",
            with(&|f| f.target = Some(Target::parse("main\u{200b}").unwrap())),
        ),
        (
            "an escape sequence in the question",
            with(&|f| f.question = "Merge?\u{1b}[2J".into()),
        ),
        (
            "a carriage return in the question",
            with(&|f| f.question = "Merge?\r\nYes".into()),
        ),
        (
            "a question past its cap",
            with(&|f| f.question = "q".repeat(MAX_QUESTION + 1)),
        ),
        (
            "a line break in an option's text",
            with(&|f| f.options[1].text = "No\nreally".into()),
        ),
        (
            "a format character in an option's text",
            with(&|f| f.options[0].text = "Yes\u{2066}".into()),
        ),
        (
            "an option's text past its cap",
            with(&|f| f.options[0].text = "y".repeat(MAX_OPTION_TEXT + 1)),
        ),
        (
            "a line break in the recommendation",
            with(&|f| f.recommendation = "yes\nno".into()),
        ),
        (
            "a recommendation past its cap",
            with(&|f| f.recommendation = "r".repeat(MAX_RECOMMENDATION + 1)),
        ),
        (
            "a control character in the requirement",
            with(&|f| f.requirement_ref = Some("REQ\u{7}12".into())),
        ),
        (
            "a tag character in the requirement",
            with(&|f| f.requirement_ref = Some("REQ-12\u{e0041}".into())),
        ),
    ]
}

#[test]
fn a_raise_s_words_pass_when_nothing_is_hidden_and_each_field_is_within_its_cap() {
    assert_eq!(check_raise_text(&words()), Ok(()));
    let mut at_caps = words();
    at_caps.question = "é".repeat(MAX_QUESTION);
    at_caps.options[0].text = "y".repeat(MAX_OPTION_TEXT);
    at_caps.recommendation = "r".repeat(MAX_RECOMMENDATION);
    assert_eq!(check_raise_text(&at_caps), Ok(()));
}

#[test]
fn a_raise_s_words_are_refused_for_any_one_field_that_breaks_the_rule() {
    for (what, fields) in broken_words() {
        assert_eq!(
            check_raise_text(&fields),
            Err(Refusal::BadRequest),
            "{what}"
        );
    }
}

#[test]
fn a_raise_whose_words_break_the_rule_is_refused_and_records_nothing() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    for (what, fields) in broken_words() {
        let mut input = raise("repo.merge", None);
        input.fields = fields;
        let (reply, evidence) = f.run(&caller("dev", "r1"), raising(1, input));
        assert_eq!(
            (reply.map(|_| ()), evidence),
            (Err(Refusal::BadRequest), vec![]),
            "{what}"
        );
        assert_eq!(f.bus.decisions().get(&did(1)), None, "{what}");
    }
    let mut clean = raise("repo.merge", None);
    clean.fields = words();
    let raised = f.raise("dev", "r1", 1, clean);
    assert_eq!(raised.record.fields, words(), "kept as written");
}

#[test]
fn a_note_may_span_lines_up_to_its_cap_and_hide_nothing() {
    assert_eq!(check_note(None), Ok(()));
    assert_eq!(check_note(Some("")), Ok(()));
    assert_eq!(
        check_note(Some("Looked at it.\nMerging after lunch.")),
        Ok(())
    );
    assert_eq!(check_note(Some(&"n".repeat(MAX_NOTE))), Ok(()));
    for bad in [
        "n".repeat(MAX_NOTE + 1),
        "ok\u{1b}]52;c;ZWNobw==\u{7}".to_owned(),
        "ok\r\nfine".to_owned(),
        "ok\u{202e}".to_owned(),
        "ok\u{feff}".to_owned(),
        "tab\there".to_owned(),
    ] {
        assert_eq!(check_note(Some(&bad)), Err(Refusal::BadRequest), "{bad:?}");
    }
}

#[test]
fn resolve_seen_and_withdraw_refuse_a_note_that_breaks_the_rule_and_record_nothing() {
    let mut f = Fixture::new();
    f.claim("dev", "r1");
    f.claim("lead", "l1");
    f.raise("dev", "r1", 1, raise("repo.merge", None));
    let (lead, dev) = (caller("lead", "l1"), caller("dev", "r1"));
    let hostile = || Some("fine\u{1b}[8m hidden".to_owned());
    let long = || Some("n".repeat(MAX_NOTE + 1));
    for note in [hostile(), long()] {
        let with = |note: Option<String>| {
            [
                (
                    lead.clone(),
                    Command::Resolve {
                        id: did(1),
                        choice: key("yes"),
                        note: note.clone(),
                    },
                ),
                (
                    lead.clone(),
                    Command::Seen {
                        id: did(1),
                        note: note.clone(),
                    },
                ),
                (dev.clone(), Command::Withdraw { id: did(1), note }),
            ]
        };
        for (by, command) in with(note) {
            let verb = command.verb();
            f.expect(&by, command, Err(Refusal::BadRequest), &[]);
            assert_eq!(
                f.bus.decisions().get(&did(1)).unwrap().status,
                Status::Open,
                "{verb}"
            );
        }
    }
    // The same verbs with a note of several clean lines are recorded, the
    // note kept as written.
    let note = Some("Checked the diff.\nShip it.".to_owned());
    let (_, evidence) = f.run(
        &lead,
        Command::Seen {
            id: did(1),
            note: note.clone(),
        },
    );
    assert_eq!(
        evidence,
        [Evidence::Decision(DecisionEvidence::Seen {
            business: acme(),
            id: did(1),
            by: DecisionActor::Agent(agent("lead", "l1")),
            note: note.clone(),
        })]
    );
    let (reply, evidence) = f.run(
        &lead,
        Command::Resolve {
            id: did(1),
            choice: key("yes"),
            note: note.clone(),
        },
    );
    assert!(reply.is_ok(), "{reply:?}");
    assert_eq!(
        evidence,
        [Evidence::Decision(DecisionEvidence::Resolved {
            business: acme(),
            id: did(1),
            choice: key("yes"),
            by: DecisionActor::Agent(agent("lead", "l1")),
            note: note.clone(),
        })]
    );
    f.raise("dev", "r1", 2, raise("repo.merge", None));
    let (reply, evidence) = f.run(
        &dev,
        Command::Withdraw {
            id: did(2),
            note: note.clone(),
        },
    );
    assert!(reply.is_ok(), "{reply:?}");
    assert_eq!(
        evidence,
        [Evidence::Decision(DecisionEvidence::Withdrawn {
            business: acme(),
            id: did(2),
            by: DecisionActor::Agent(agent("dev", "r1")),
            note,
        })]
    );
}
