//! A randomized property: no input panics or yields a foreign code.

use super::*;

/// SplitMix64: a tiny deterministic generator, so a failure names its seed
/// and case and replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Every code `parse_request` may answer with.
const PARSE_CODES: [&str; 8] = [
    "bad-request",
    "request-too-large",
    "unknown-verb",
    "unknown-key",
    "bad-capability",
    "bad-id",
    "bad-task-ref",
    "unknown-action",
];

fn valid_requests() -> Vec<String> {
    vec![
        req("role.claim", "{}"),
        format!(r#"{{"cap":"{CAP}","verb":"agents"}}"#),
        req(
            "role.revoke",
            &format!(r#"{{"role":"dev-1","decision":"{D1}"}}"#),
        ),
        req("decision.raise", &raise_args().to_string()),
        req(
            "decision.resolve",
            &format!(r#"{{"id":"{D1}","choice":"no","note":"n"}}"#),
        ),
        req("decision.withdraw", &format!(r#"{{"id":"{D1}"}}"#)),
        req(
            "message.send",
            &format!(
                r#"{{"to":"dev","body":"hi","class":"INFO","in_reply_to":"{M1}","decision":"{D2}"}}"#
            ),
        ),
        req("message.read", &format!(r#"{{"id":"{M1}"}}"#)),
        req(
            "event.emit",
            r#"{"kind":"action.allowed","body":{"action":"routine","target":"t"},"subject":"vikunja:3/41"}"#,
        ),
        req("trail", &format!(r#"{{"subject":"{D1}"}}"#)),
    ]
}

const TRICKY_STRINGS: [&str; 24] = [
    "",
    "human",
    "lead",
    "a/b",
    "vikunja:3/41",
    "vikunja:0/1",
    "vikunja:01/1",
    D1,
    "11111111-1111-4111-8111-11111111111G",
    "ABABABAB-abab-4bab-abab-abababababab",
    CAP,
    "action.allowed",
    "routine",
    "technical",
    "delivery",
    "REQUEST",
    "request",
    "yes",
    "y e s",
    "browser.request",
    "role.claim",
    "approvalChoice",
    "\u{0}",
    "\u{feff}",
];

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 3 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.below(2) == 0),
        2 => json!(rng.next() as i64),
        3 => json!(f64::from_bits(rng.next() & 0x7fef_ffff_ffff_ffff)),
        4 => json!(*rng.pick(&TRICKY_STRINGS)),
        5 => Value::Array(
            (0..rng.below(3))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        6 => {
            let mut map = serde_json::Map::new();
            for _ in 0..rng.below(3) {
                map.insert(random_key(rng), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
        _ => {
            let n = rng.below(300);
            let mut v = Value::Null;
            for _ in 0..n {
                v = json!([v]);
            }
            v
        }
    }
}

fn random_key(rng: &mut Rng) -> String {
    let keys: Vec<&str> = Verb::ALL
        .iter()
        .flat_map(|v| v.arg_keys().iter().copied())
        .chain(["cap", "verb", "args", "key", "text", "action", "zzz", "Cap"])
        .collect();
    (*rng.pick(&keys)).to_owned()
}

/// Applies one structural change somewhere in `node`: here, or (two times
/// in three) in a random child.
fn mutate_value(rng: &mut Rng, node: &mut Value) {
    let len = match &*node {
        Value::Object(map) => map.len(),
        Value::Array(items) => items.len(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => 0,
    };
    if len > 0 && rng.below(3) != 0 {
        let i = rng.below(len);
        let child = match node {
            Value::Object(map) => map.values_mut().nth(i),
            Value::Array(items) => items.get_mut(i),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => None,
        };
        if let Some(child) = child {
            mutate_value(rng, child);
        }
        return;
    }
    match rng.below(6) {
        0 => *node = random_value(rng, 0),
        1 => *node = json!(*rng.pick(&TRICKY_STRINGS)),
        2 => {
            if let Value::Object(map) = node {
                let k = random_key(rng);
                map.insert(k, random_value(rng, 1));
            }
        }
        3 => {
            if let Value::Object(map) = node {
                if let Some(k) = map.keys().nth(rng.below(map.len())).cloned() {
                    map.remove(&k);
                }
            }
        }
        4 => *node = json!([node.take()]),
        _ => *node = Value::Null,
    }
}

/// Applies one byte-level change.
fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>) {
    const ALPHABET: &[u8] = b"{}[]\":,\\ 0123456789eE+-.truefalsn\xff\xc3\x80";
    let at = rng.below(bytes.len() + 1);
    match rng.below(5) {
        0 if at < bytes.len() => {
            bytes.remove(at);
        }
        1 => bytes.insert(at, *rng.pick(ALPHABET)),
        2 if at < bytes.len() => bytes[at] = rng.next() as u8,
        3 => bytes.truncate(at),
        _ => {
            let end = (at + rng.below(16)).min(bytes.len());
            let slice = bytes[at..end].to_vec();
            let to = rng.below(bytes.len() + 1);
            bytes.splice(to..to, slice);
        }
    }
}

#[track_caller]
fn check_input(bytes: &[u8], tally: &mut (u32, u32)) {
    let first = parse_request(bytes);
    assert_eq!(first, parse_request(bytes), "deterministic");
    match first {
        Ok(request) => {
            tally.0 += 1;
            assert!(Verb::ALL.contains(&request.call.verb()));
            // Dispatch never panics either, whatever the runtime answers.
            let _ = request
                .call
                .into_dispatch(|| [1; 16], |_| Err(Refusal::UnknownReference));
        }
        Err(refusal) => {
            tally.1 += 1;
            assert!(Refusal::ALL.contains(&refusal));
            assert!(
                PARSE_CODES.contains(&refusal.code()),
                "unexpected {refusal} for {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

#[test]
fn random_bytes_and_mutated_requests_give_a_request_or_a_static_code() {
    const CASES: u64 = 512;
    let seeds = valid_requests();
    for line in &seeds {
        parse_request(line.as_bytes()).unwrap_or_else(|r| panic!("{line}: {r}"));
    }
    let mut tally = (0, 0);
    for case in 0..CASES {
        let mut rng = Rng(0x5eed_0000 + case);
        // Random bytes, biased towards JSON punctuation.
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(2) == 0 {
                    *rng.pick(b"{}[]\":, \"capverbargs0123456789abcdef")
                } else {
                    rng.next() as u8
                }
            })
            .collect();
        check_input(&bytes, &mut tally);
        // JSON-level mutations of a valid request, then maybe byte-level ones.
        let seed: &String = rng.pick(&seeds);
        let mut value: Value = serde_json::from_str(seed).unwrap();
        for _ in 0..=rng.below(3) {
            mutate_value(&mut rng, &mut value);
        }
        let mut bytes = value.to_string().into_bytes();
        check_input(&bytes, &mut tally);
        for _ in 0..rng.below(4) {
            mutate_bytes(&mut rng, &mut bytes);
        }
        check_input(&bytes, &mut tally);
        // Byte-level mutations of a valid request alone.
        let mut bytes = rng.pick(&seeds).clone().into_bytes();
        for _ in 0..=rng.below(3) {
            mutate_bytes(&mut rng, &mut bytes);
        }
        check_input(&bytes, &mut tally);
    }
    assert!(
        tally.0 > 50 && tally.1 > 500,
        "both outcomes exercised: {tally:?}"
    );
}

#[test]
fn changes_takes_a_non_negative_integer_cursor_and_a_clamped_timeout() {
    use mosaic_adapters::wire::{Call, Dispatch, Query};
    let dispatch = |args: serde_json::Value| {
        Call::parse(Verb::Changes, Some(args)).and_then(|call| {
            call.into_dispatch(
                || unreachable!("changes draws no id"),
                |_| unreachable!("changes names no subject"),
            )
        })
    };
    let query = |since, ms| {
        Ok(Dispatch::Query(Query::Changes {
            since,
            wait: std::time::Duration::from_millis(ms),
        }))
    };
    assert_eq!(dispatch(serde_json::json!({})), query(None, 30_000));
    assert_eq!(
        dispatch(serde_json::json!({"since": 0, "timeoutMs": 999_999})),
        query(Some(0), 120_000)
    );
    assert_eq!(
        dispatch(serde_json::json!({"since": u64::MAX, "timeoutMs": 5})),
        query(Some(u64::MAX), 1_000)
    );
    for bad in [
        r#"{"since":"3"}"#,
        r#"{"since":-1}"#,
        r#"{"since":2.5}"#,
        r#"{"timeoutMs":"1"}"#,
    ] {
        refuses(&req("changes", bad), "bad-request");
    }
}
