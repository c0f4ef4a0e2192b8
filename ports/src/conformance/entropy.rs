//! The [`Entropy`] suite.

use std::collections::HashSet;
use std::hash::Hash;

use super::{check, check_eq, fail, run_checks, Check};
use crate::entropy::{Entropy, EntropyError};

/// Runs every entropy check, each on fresh sources from `make`.
///
/// `make` MUST return independently seeded sources, as two broker processes
/// would get: one check draws from two of them and requires different
/// output. (A deterministic test source passes by seeding each instance
/// differently.)
///
/// Covers: 1000 capabilities, claim tokens and each kind of id all distinct,
/// none all-zero; ids that survive their text form; `fill` of every length
/// fills the whole buffer with varied bytes.
///
/// # Panics
/// When any check fails, naming every failing check.
pub fn run<E: Entropy>(mut make: impl FnMut() -> E) {
    let checks: Vec<Check<'_, Pair<E>>> = vec![
        Check::new("capabilities_distinct_and_non_zero", capabilities::<E>),
        Check::new("claim_tokens_distinct_and_non_zero", claim_tokens::<E>),
        Check::new("ids_distinct_and_parseable", ids::<E>),
        Check::new("fill_every_length", fill_every_length::<E>),
        Check::new("sources_are_independent", sources_are_independent::<E>),
    ];
    run_checks("entropy", checks, || Pair {
        first: make(),
        second: make(),
    });
}

/// Two sources from `make`; most checks use only the first.
struct Pair<E> {
    first: E,
    second: E,
}

/// `draw`'s value, failing the check on an error.
#[track_caller]
fn draw<T>(what: &str, result: Result<T, EntropyError>) -> T {
    result.unwrap_or_else(|e| fail(format_args!("{what} failed: {e:?}")))
}

/// Checks that `values` are pairwise distinct.
#[track_caller]
fn check_distinct<T: Eq + Hash>(what: &str, values: Vec<T>) {
    let count = values.len();
    let distinct: HashSet<T> = values.into_iter().collect();
    check_eq(
        &format!("distinct {what} of {count}"),
        distinct.len(),
        count,
    );
}

/// The 64-hex-character form of an all-zero 256-bit secret.
fn zero_secret() -> String {
    "0".repeat(64)
}

fn capabilities<E: Entropy>(pair: &mut Pair<E>) {
    let caps: Vec<String> = (0..1000)
        .map(|_| draw("capability", pair.first.capability()).expose())
        .collect();
    check("no capability is all zero", !caps.contains(&zero_secret()));
    check_distinct("capabilities", caps);
}

fn claim_tokens<E: Entropy>(pair: &mut Pair<E>) {
    let tokens: Vec<String> = (0..1000)
        .map(|_| draw("claim token", pair.first.claim_token()).expose())
        .collect();
    check(
        "no claim token is all zero",
        !tokens.contains(&zero_secret()),
    );
    check_distinct("claim tokens", tokens);
}

fn ids<E: Entropy>(pair: &mut Pair<E>) {
    let e = &mut pair.first;
    let raw: Vec<[u8; 16]> = (0..1000)
        .map(|_| draw("uuid bytes", e.uuid_bytes()))
        .collect();
    check(
        "no uuid bytes are all zero",
        raw.iter().all(|b| b.iter().any(|&x| x != 0)),
    );
    check_distinct("uuid byte strings", raw);
    let mut texts = Vec::new();
    for _ in 0..1000 {
        let d = draw("decision id", e.decision_id());
        check_eq(
            "a decision id through its text form",
            d.to_string().parse(),
            Ok(d),
        );
        let m = draw("message id", e.message_id());
        check_eq(
            "a message id through its text form",
            m.to_string().parse(),
            Ok(m),
        );
        let v = draw("event id", e.event_id());
        check_eq(
            "an event id through its text form",
            v.to_string().parse(),
            Ok(v),
        );
        let r = draw("browser request id", e.browser_request_id());
        check_eq(
            "a browser request id through its text form",
            r.to_string().parse(),
            Ok(r),
        );
        texts.extend([d.to_string(), m.to_string(), v.to_string(), r.to_string()]);
    }
    check_distinct("ids of every kind", texts);
}

fn fill_every_length<E: Entropy>(pair: &mut Pair<E>) {
    for len in [0, 1, 7, 8, 9, 16, 31, 32, 33, 100, 4096] {
        let mut buf = vec![0u8; len];
        draw("fill", pair.first.fill(&mut buf));
        if len >= 16 {
            check(
                &format!("fill({len}) is not all zero"),
                buf.iter().any(|&b| b != 0),
            );
            // A source that fills only a prefix leaves the tail zero.
            let tail = &buf[len - 16..];
            check(
                &format!("the last 16 bytes of fill({len}) are not all zero"),
                tail.iter().any(|&b| b != 0),
            );
        }
        if len == 4096 {
            // 4096 uniform bytes miss a given value with probability
            // (255/256)^4096 < 1e-6, so 250 distinct values is a very safe
            // floor that still catches a constant or low-entropy source.
            let values: HashSet<u8> = buf.iter().copied().collect();
            check(
                &format!("fill(4096) uses {} byte values, want >= 250", values.len()),
                values.len() >= 250,
            );
        }
    }
}

fn sources_are_independent<E: Entropy>(pair: &mut Pair<E>) {
    let first: Vec<String> = (0..10)
        .map(|_| draw("capability", pair.first.capability()).expose())
        .collect();
    let second: Vec<String> = (0..10)
        .map(|_| draw("capability", pair.second.capability()).expose())
        .collect();
    let all: Vec<String> = first.into_iter().chain(second).collect();
    check_distinct("capabilities of two sources", all);
}
