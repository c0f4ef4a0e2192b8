//! The closings' check: [`EvidenceStore::closings`] against a reference
//! computed from what was committed, for every bound and several limits,
//! and one history read page by page.

use mosaic_domain::evidence::{DecisionActor, DecisionEvidence, Evidence, Stamped};
use mosaic_domain::BusinessId;

use super::evidence::*;
use super::scenario::Scenario;
use crate::conformance::{check, check_eq, fail};
use crate::store::{Closed, Closings, EvidenceStore};

/// What `closings` must answer, from `committed`: the n-th record
/// committed is at position n.
fn reference(
    committed: &[Stamped],
    business: &BusinessId,
    before: Option<u64>,
    limit: usize,
) -> Closings {
    let raised = |id| {
        committed.iter().find_map(|r| {
            let Evidence::Decision(DecisionEvidence::Raised(d)) = &r.evidence else {
                return None;
            };
            (&d.id == id).then(|| (**d).clone())
        })
    };
    let mut all: Vec<Closed> = (1_u64..)
        .zip(committed)
        .filter(|(seq, r)| {
            before.is_none_or(|b| *seq < b) && r.evidence.business() == Some(business)
        })
        .filter_map(|(seq, r)| {
            let id = r.evidence.closes()?;
            Some(Closed {
                seq,
                closing: r.clone(),
                decision: raised(id)
                    .unwrap_or_else(|| fail(format_args!("a closing without its raise"))),
            })
        })
        .collect();
    all.reverse();
    let listed = all.len().min(limit);
    Closings {
        rows: all[..listed].to_vec(),
        older: (all.len() - listed) as u64,
    }
}

fn read<S: EvidenceStore>(
    sc: &Scenario<'_, S>,
    business: &BusinessId,
    before: Option<u64>,
    limit: usize,
) -> Closings {
    sc.store
        .closings(business, before, limit)
        .unwrap_or_else(|e| fail(format_args!("closings failed: {e:?}")))
}

/// Every bound from before the first record to past the last, with limits
/// 0, 1, 2 and unbounded, in both businesses, matches the reference.
pub(super) fn closings_match_the_committed_history<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    for batch in varied_history() {
        sc.commit(batch);
    }
    let (a, b) = (acme(), globex());
    sc.commit(vec![
        raised(&b, 6),
        raised(&b, 7),
        resolved(&b, 7),
        seen(&b, 6),
        withdrawn(&b, 6),
        seen(&b, 7),
    ]);
    let every = reference(&sc.committed, &a, None, usize::MAX);
    check("the history closes decisions", every.rows.len() >= 4);
    let head = sc.committed.len() as u64;
    for business in [&a, &b] {
        for before in std::iter::once(None).chain((0..=head + 2).map(Some)) {
            for limit in [0, 1, 2, usize::MAX] {
                check_eq(
                    &format!("closings({business}, {before:?}, {limit})"),
                    read(&sc, business, before, limit),
                    reference(&sc.committed, business, before, limit),
                );
            }
        }
    }
}

/// A history read page by page: newest closing first, each with its
/// record, its position and its decision as raised; `seen` never listed,
/// before or after the closing; each page's `older` counts what the next
/// pages list.
pub(super) fn closings_page_newest_first<S: EvidenceStore>(store: &mut S) {
    let mut sc = Scenario::new(store);
    let (a, b) = (acme(), globex());
    let noted = Evidence::Decision(DecisionEvidence::Resolved {
        business: a.clone(),
        id: did(1),
        choice: mosaic_domain::evidence::OptionKey::yes(),
        by: DecisionActor::Human,
        note: Some("ship it\nnow".to_owned()),
    });
    sc.commit(vec![
        raised(&a, 1),
        raised(&a, 2),
        raised(&a, 3),
        raised(&b, 9),
    ]);
    let first = sc.commit(vec![seen(&a, 2), noted, seen(&a, 1)]);
    let second = sc.commit(vec![withdrawn(&a, 2), resolved(&b, 9)]);
    let third = sc.commit(vec![raised_superseding(&a, 4, 3), superseded(&a, 3, 4)]);
    let closed = |seq: u64, closing: &Stamped, n: u8| Closed {
        seq,
        closing: closing.clone(),
        decision: decision(&a, n),
    };
    let superseded_3 = closed(11, &third[1], 3);
    let withdrawn_2 = closed(8, &second[0], 2);
    let resolved_1 = closed(6, &first[1], 1);
    check_eq(
        "every closing of acme",
        read(&sc, &a, None, 100),
        Closings {
            rows: vec![
                superseded_3.clone(),
                withdrawn_2.clone(),
                resolved_1.clone(),
            ],
            older: 0,
        },
    );
    check_eq(
        "the first page of two",
        read(&sc, &a, None, 2),
        Closings {
            rows: vec![superseded_3, withdrawn_2],
            older: 1,
        },
    );
    check_eq(
        "the page before the last row",
        read(&sc, &a, Some(8), 2),
        Closings {
            rows: vec![resolved_1],
            older: 0,
        },
    );
    check_eq(
        "the page before the first closing",
        read(&sc, &a, Some(6), 2),
        Closings::default(),
    );
    check_eq(
        "no row asked: the count before the bound",
        read(&sc, &a, Some(9), 0),
        Closings {
            rows: Vec::new(),
            older: 2,
        },
    );
    check_eq(
        "the other business's",
        read(&sc, &b, None, 100)
            .rows
            .iter()
            .map(|c| c.seq)
            .collect::<Vec<_>>(),
        vec![9],
    );
    check_eq(
        "a business with none",
        read(
            &sc,
            &BusinessId::parse("initech").expect("an id"),
            None,
            100,
        ),
        Closings::default(),
    );
}
