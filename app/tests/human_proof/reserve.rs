//! The checks a human line passes before it may take a place in the human's
//! reserve ([`may_be_human`]): the same uid and namespace rules as the
//! proof, made by the same code, and nothing of the proof's walk.

use mosaic_app::runtime::human_proof::may_be_human;

use super::*;

/// [`may_be_human`] for the synthetic chain's peer, as the broker asks it.
fn admitted(table: &FakeProcessTable, peer_uid: u32) -> Result<(), ProofFailure> {
    may_be_human(table, PEER, peer_uid, HUMAN, &HOST_NAMESPACES)
}

#[test]
fn the_human_and_a_same_namespace_forger_may_take_a_reserve_place() {
    assert_eq!(admitted(&chain(), HUMAN), Ok(()));
    // A forger in the broker's namespaces passes these checks; its proof
    // fails later, on its one reserve line.
    let forger = chain().with(peer().exe("/usr/bin/python3").env([(RUN_MARKERS[0], "x")]));
    assert_eq!(admitted(&forger, HUMAN), Ok(()));
    assert!(check(&forger, &claim(), &no_launch).is_err());
}

#[test]
fn a_peer_in_any_other_namespace_or_of_another_user_may_not() {
    let other = NamespaceId { dev: 4, ino: 1000 };
    for (namespaces, kind) in other_namespaces(other) {
        let sandboxed = chain().with(peer().namespaces(namespaces));
        assert_eq!(
            admitted(&sandboxed, HUMAN),
            Err(ProofFailure::OtherNamespace { kind })
        );
        // The proof refuses it for the same reason.
        assert_eq!(
            check(&sandboxed, &claim(), &no_launch),
            Err(ProofFailure::OtherNamespace { kind })
        );
    }
    let denied = chain().with(peer().namespaces_denied());
    assert_eq!(
        admitted(&denied, HUMAN),
        Err(ProofFailure::NamespacesUnreadable)
    );
    assert_eq!(
        admitted(&chain(), HUMAN + 1),
        Err(ProofFailure::UidMismatch)
    );
    let gone = FakeProcessTable::new().with(init());
    assert_eq!(
        admitted(&gone, HUMAN),
        Err(ProofFailure::Gone { pid: PEER })
    );
}

#[test]
fn this_process_is_in_its_own_namespaces_by_proc() {
    let table = ProcFs::new();
    let me = std::process::id();
    let mine = table.namespaces(me).expect("our own namespaces");
    let uid = std::fs::metadata("/proc/self").expect("/proc/self").uid();
    assert_eq!(may_be_human(&table, me, uid, uid, &mine), Ok(()));
    let elsewhere = Namespaces {
        mnt: NamespaceId {
            ino: mine.mnt.ino ^ 1,
            ..mine.mnt
        },
        ..mine
    };
    assert_eq!(
        may_be_human(&table, me, uid, uid, &elsewhere),
        Err(ProofFailure::OtherNamespace { kind: "mount" })
    );
}
