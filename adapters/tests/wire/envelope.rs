//! The request envelope: the line, its top-level keys, the capability and the
//! verb, each refused with its exact code.

use super::*;

#[test]
fn invalid_utf8_is_bad_request() {
    let mut line = req("role.claim", "{}").into_bytes();
    line[2] = 0xff;
    refuses_bytes(&line, "bad-request");
    let line = format!(r#"{{"cap":"{CAP}","verb":"trail","args":{{"subject":"a"#);
    let mut bytes = line.into_bytes();
    bytes.extend_from_slice(b"\xc3\x28\"}}");
    refuses_bytes(&bytes, "bad-request");
}

#[test]
fn text_that_is_not_one_json_value_is_bad_request() {
    for line in [
        "",
        " ",
        "{",
        "nul",
        "{'cap':1}",
        "\u{feff}{}",
        &format!("{} {{}}", req("role.claim", "{}")),
        &format!("{}x", req("role.claim", "{}")),
        &req("trail", r#"{"subject":"\ud800"}"#),
    ] {
        refuses(line, "bad-request");
    }
    // Surrounding whitespace is not a second value.
    assert_eq!(
        call(&format!(" \t{}\r ", req("role.claim", "{}"))),
        Call::RoleClaim
    );
}

#[test]
fn a_non_object_is_bad_request() {
    for line in [
        "[]",
        "1",
        "\"x\"",
        "null",
        "true",
        &format!("[{}]", req("agents", "{}")),
    ] {
        refuses(line, "bad-request");
    }
}

#[test]
fn a_repeated_key_is_bad_request_at_every_depth() {
    refuses(
        &format!(r#"{{"cap":"{CAP}","cap":"{CAP}","verb":"agents"}}"#),
        "bad-request",
    );
    refuses(
        &req("trail", r#"{"subject":"lead","subject":"dev"}"#),
        "bad-request",
    );
    refuses(
        &req(
            "decision.raise",
            r#"{"action":"repo.merge","question":"q","options":[{"key":"yes","key":"no","text":"t"}],
               "recommendation":"r","blocking":false}"#,
        ),
        "bad-request",
    );
}

#[test]
fn an_unknown_top_level_key_is_unknown_key_before_anything_else() {
    refuses(
        &format!(r#"{{"cap":"{CAP}","verb":"agents","id":1}}"#),
        "unknown-key",
    );
    refuses(r#"{"cap":5,"verb":7,"business":"acme"}"#, "unknown-key");
    refuses(r#"{"Cap":"x"}"#, "unknown-key");
}

#[test]
fn a_missing_or_mistyped_cap_or_verb_is_bad_request() {
    for line in [
        r#"{}"#.to_owned(),
        r#"{"verb":"agents"}"#.to_owned(),
        format!(r#"{{"cap":"{CAP}"}}"#),
        format!(r#"{{"cap":["{CAP}"],"verb":"agents"}}"#),
        r#"{"cap":null,"verb":"agents"}"#.to_owned(),
        format!(r#"{{"cap":"{CAP}","verb":null}}"#),
        format!(r#"{{"cap":"{CAP}","verb":{{"name":"agents"}}}}"#),
    ] {
        refuses(&line, "bad-request");
    }
}

#[test]
fn a_cap_that_is_not_64_lowercase_hex_is_bad_capability() {
    for cap in [
        String::new(),
        CAP[..63].to_owned(),
        format!("{CAP}0"),
        CAP.to_uppercase(),
        format!("g{}", &CAP[1..]),
        format!(" {}", &CAP[1..]),
    ] {
        refuses(
            &format!(r#"{{"cap":"{cap}","verb":"agents"}}"#),
            "bad-capability",
        );
    }
    // The capability is checked before the verb.
    refuses(r#"{"cap":"x","verb":"nope"}"#, "bad-capability");
}

#[test]
fn an_unknown_verb_is_unknown_verb() {
    for verb in [
        "",
        "Role.claim",
        "role.claim ",
        "role",
        "authorize",
        "record_event",
        "recordEvent",
        "browser.open",
        "bindLaunch",
    ] {
        refuses(&req(verb, "{}"), "unknown-verb");
    }
    // The verb is checked before its arguments.
    refuses(
        &req("browser.click", r#"{"action":"open"}"#),
        "unknown-verb",
    );
    refuses(
        &req("browser.request", r#"{"action":"open","url":"x"}"#),
        "unknown-key",
    );
}

#[test]
fn args_that_are_not_an_object_are_bad_request() {
    for args in ["null", "[]", "\"\"", "0", "true"] {
        refuses(&req("role.claim", args), "bad-request");
    }
}

#[test]
fn oversized_lines_are_request_too_large_before_parsing() {
    // The socket frames lines with the same limit.
    assert_eq!(MAX_REQUEST_BYTES, mosaic_client::socket::MAX_REQUEST);
    let base = req("role.claim", "{}");
    let exact = format!("{base}{}", " ".repeat(MAX_REQUEST_BYTES - base.len()));
    assert_eq!(exact.len(), MAX_REQUEST_BYTES);
    assert_eq!(call(&exact), Call::RoleClaim);
    refuses(&format!("{exact} "), "request-too-large");
    refuses_bytes(&vec![0xff; MAX_REQUEST_BYTES + 1], "request-too-large");
}

#[test]
fn deep_nesting_and_huge_numbers_are_bad_request_without_panicking() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    refuses(
        &req("trail", &format!(r#"{{"subject":{deep}}}"#)),
        "bad-request",
    );
    refuses(&deep, "bad-request");
    let objects = format!("{}1{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
    refuses(&objects, "bad-request");
    // Far past the line limit, the JSON parser alone still stops early.
    assert_eq!(
        parse_json("[".repeat(1_000_000).as_bytes()),
        Err(Refusal::BadRequest)
    );
    // Just inside serde_json's limit is fine JSON, and the wrong type.
    let ok_depth = format!("{}{}", "[".repeat(100), "]".repeat(100));
    refuses(
        &req("trail", &format!(r#"{{"subject":{ok_depth}}}"#)),
        "bad-request",
    );
    for number in [
        "1e999999999".to_owned(),
        "-1e400".to_owned(),
        format!("1{}", "0".repeat(60_000)),
        "123456789012345678901234567890".to_owned(),
        "0.000000000000000000000000000001e-999999".to_owned(),
    ] {
        refuses(
            &req("trail", &format!(r#"{{"subject":{number}}}"#)),
            "bad-request",
        );
    }
}
