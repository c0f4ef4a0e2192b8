//! The human CLI's process proof ([`mosaic_app::runtime::human_proof`]).
//!
//! First over synthetic ancestries ([`FakeProcessTable`]): a clean chain
//! peer → shell → terminal → init passes, and every rule refuses on its own,
//! each test changing one process of that chain. Then with real processes
//! read through `/proc` ([`ProcFs`]): a `cat` that waits on its stdin plays
//! the CLI, so the run marker, the launch registry and the clean case are
//! checked against what the kernel really reports.
//!
//! The clean case starts its `cat` detached (`support::detached`), so it
//! proves wherever the test runs, even under an agent's run marker.
//!
//! Nothing sleeps: a real child is used only after it has echoed a line (or,
//! detached, blocks reading its stdin), so it has exec'd and its
//! environment is final.

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use mosaic_adapters::procfs::ProcFs;
use mosaic_app::runtime::human_proof::{
    check, check_until, fresh_nonce, prove, BrokerExe, HumanClaim, ProofFailure, MAX_ANCESTORS,
    NONCE_ENV, RUN_MARKERS,
};
use mosaic_domain::Refusal;
use mosaic_ports::fakes::{
    FailingEntropy, FakeEnviron, FakeProcess, FakeProcessTable, SeededEntropy, HOST_NAMESPACES,
};
use mosaic_ports::process::Environ;
use mosaic_ports::{ExeIdentity, NamespaceId, Namespaces, ProcessError, ProcessInfo, ProcessTable};
use support::detached::{detached, Pending};

// ---------------------------------------------------------------------------
// The synthetic chain: init (1) → terminal (5) → shell (10) → peer (20).

const EXE: &str = "/usr/local/bin/mosaic-bus";
/// The device and inode of the broker's running image: the file at [`EXE`]
/// when it booted.
const EXE_FILE: ExeIdentity = ExeIdentity {
    dev: 2049,
    ino: 777,
};
const NONCE: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const OTHER_NONCE: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
const HUMAN: u32 = 1000;
const PEER: u32 = 20;
const SHELL: u32 = 10;
const TERMINAL: u32 = 5;
const INIT: u32 = 1;

fn init() -> FakeProcess {
    FakeProcess::new(INIT, 0)
        .uid(0)
        .start_time(1)
        .exe("/sbin/init")
}

fn terminal() -> FakeProcess {
    FakeProcess::new(TERMINAL, INIT)
        .start_time(50)
        .exe("/usr/bin/foot")
        .env([("TERM", "foot"), ("HOME", "/home/h")])
}

fn shell() -> FakeProcess {
    shell_under(TERMINAL)
}

/// The shell, as a child of `ppid`.
fn shell_under(ppid: u32) -> FakeProcess {
    FakeProcess::new(SHELL, ppid)
        .start_time(100)
        .exe("/usr/bin/bash")
        .env([("HOME", "/home/h"), ("SHELL", "/usr/bin/bash")])
}

/// The CLI after its re-execution: the broker's executable, the nonce in its
/// environment.
fn peer() -> FakeProcess {
    FakeProcess::new(PEER, SHELL)
        .start_time(200)
        .exe(EXE)
        .exe_identity(EXE_FILE.dev, EXE_FILE.ino)
        .env([("HOME", "/home/h"), (NONCE_ENV, NONCE)])
}

fn chain() -> FakeProcessTable {
    FakeProcessTable::new()
        .with(init())
        .with(terminal())
        .with(shell())
        .with(peer())
}

fn claim() -> HumanClaim {
    HumanClaim {
        peer_pid: PEER,
        peer_uid: HUMAN,
        broker_uid: HUMAN,
        exe: BrokerExe {
            path: PathBuf::from(EXE),
            identity: EXE_FILE,
        },
        namespaces: HOST_NAMESPACES,
        nonce: NONCE.to_owned(),
    }
}

fn no_launch(_pid: u32, _start_time: u64) -> bool {
    false
}

/// The one assertion every synthetic test makes: what [`check`] answers for
/// this table, claim and launch registry.
#[track_caller]
fn assert_check(
    table: &dyn ProcessTable,
    claim: &HumanClaim,
    launched: &dyn Fn(u32, u64) -> bool,
    expected: Result<(), ProofFailure>,
) {
    assert_eq!(check(table, claim, launched), expected);
}

#[track_caller]
fn assert_proven(table: &dyn ProcessTable) {
    assert_check(table, &claim(), &no_launch, Ok(()));
}

#[track_caller]
fn assert_refused(table: &dyn ProcessTable, failure: ProofFailure) {
    assert_check(table, &claim(), &no_launch, Err(failure));
}

// ---------------------------------------------------------------------------
// Positive classification.

#[test]
fn a_clean_chain_to_init_is_the_human() {
    assert_proven(&chain());
    assert_eq!(prove(&chain(), &claim(), &no_launch), Ok(()));
}

#[test]
fn a_chain_ending_at_a_namespace_root_is_the_human() {
    // In a PID namespace the walk ends where the parent is 0, not at pid 1.
    let table = FakeProcessTable::new()
        .with(FakeProcess::new(TERMINAL, 0).start_time(50))
        .with(shell())
        .with(peer());
    assert_proven(&table);
}

#[test]
fn the_walk_stops_after_pid_1() {
    // Whatever pid 1 names as its parent is never read, marker or not.
    let table = chain()
        .with(FakeProcess::new(INIT, 99).uid(0).start_time(1))
        .with(
            FakeProcess::new(99, 0)
                .start_time(1)
                .env([("CLAUDECODE", "1")]),
        );
    assert_proven(&table);
    assert_eq!(table.reads(99), 0);
}

#[test]
fn a_parent_started_in_the_same_tick_is_not_a_reused_pid() {
    assert_proven(&chain().with(terminal().start_time(100)));
}

#[test]
fn variables_that_only_resemble_markers_are_not_markers() {
    // Exact names only: prefixes, suffixes, other case, tool configuration
    // a human may export, and marker names as values all pass.
    let table = chain().with(shell().env([
        ("CLAUDECODE_X", "1"),
        ("XCLAUDECODE", "1"),
        ("claudecode", "1"),
        ("MOSAIC_RUN", "x"),
        ("MOSAIC_RUN_ID_OLD", "x"),
        ("CODEX_HOME", "/home/h/.codex"),
        ("PI_CODING_AGENT_DIR", "/home/h/.pi"),
        ("CLAUDE_CONFIG_DIR", "/home/h/.claude"),
        ("NOTE", "CLAUDECODE=1"),
    ]));
    assert_proven(&table);
}

#[test]
fn another_users_ancestor_environment_skips_only_the_marker_check() {
    // The marker is there, but EACCES hides it: the proof passes...
    let hidden = || shell().uid(0).environ(FakeEnviron::Denied);
    assert_proven(&chain().with(hidden()));
    assert_proven(&chain().with(init().environ(FakeEnviron::Denied)));

    // ...while the launch registry still applies to that ancestor...
    let launched = |pid: u32, start: u64| pid == SHELL && start == 100;
    assert_check(
        &chain().with(hidden()),
        &claim(),
        &launched,
        Err(ProofFailure::AncestorIsLaunch { pid: SHELL }),
    );

    // ...and so does the start-time rule.
    assert_refused(
        &chain().with(hidden().start_time(250)),
        ProofFailure::ParentStartedAfterChild {
            parent: SHELL,
            child: PEER,
        },
    );
}

#[test]
fn a_peer_at_the_brokers_path_running_another_file_is_refused() {
    // The binary was replaced at its path after the broker booted: the
    // path matches, the device or the inode does not.
    for (dev, ino) in [
        (EXE_FILE.dev, EXE_FILE.ino + 1),
        (EXE_FILE.dev + 1, EXE_FILE.ino),
    ] {
        let table = chain().with(peer().exe_identity(dev, ino));
        assert_refused(&table, ProofFailure::ExeReplaced);
        assert_eq!(
            prove(&table, &claim(), &no_launch),
            Err(Refusal::HumanProofFailed)
        );
    }
}

#[test]
fn a_peer_whose_executable_file_is_unreadable_is_refused() {
    let table = chain().with(
        FakeProcess::new(PEER, SHELL)
            .start_time(200)
            .exe(EXE)
            .env([("HOME", "/home/h"), (NONCE_ENV, NONCE)]),
    );
    assert_refused(&table, ProofFailure::ExeMissing);
    // Gone between its `stat` and its executable.
    assert_refused(
        &chain().with(peer().gone_after(1)),
        ProofFailure::Gone { pid: PEER },
    );
}

#[test]
fn the_brokers_exe_is_its_path_and_its_file() {
    assert_eq!(
        BrokerExe::of(&chain(), PEER),
        Ok(BrokerExe {
            path: PathBuf::from(EXE),
            identity: EXE_FILE,
        })
    );
    // Without either, no proof could pass: the broker does not boot.
    let no_file = FakeProcessTable::new().with(FakeProcess::new(PEER, 1).exe(EXE));
    let no_path = FakeProcessTable::new().with(FakeProcess::new(PEER, 1).exe_identity(1, 2));
    for table in [no_file, no_path, FakeProcessTable::new()] {
        assert_eq!(
            BrokerExe::of(&table, PEER),
            Err(Refusal::StorageUnavailable)
        );
    }
}

#[test]
fn prove_answers_only_the_static_code() {
    let refused = prove(&chain().with(peer().exe("/tmp/x")), &claim(), &no_launch);
    assert_eq!(refused, Err(Refusal::HumanProofFailed));
    assert_eq!(Refusal::HumanProofFailed.code(), "human-proof-failed");
}

#[test]
fn the_claim_never_shows_its_nonce() {
    let shown = format!("{:?}", claim());
    assert!(!shown.contains(NONCE), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
}

#[test]
fn no_reason_shows_environment_values() {
    // Every reason is a fixed sentence plus pids and marker names.
    let table = chain().with(peer().env([(NONCE_ENV, OTHER_NONCE)]));
    let failure = check(&table, &claim(), &no_launch).expect_err("refused");
    let shown = failure.to_string();
    assert!(!shown.contains(NONCE) && !shown.contains(OTHER_NONCE));
    assert_eq!(shown, "the peer's nonce is not the request's");
}

// ---------------------------------------------------------------------------
// The peer.

/// The host's namespaces with one of pid, mount and user moved to
/// `other`, each with the name a refusal gives it.
fn other_namespaces(other: NamespaceId) -> [(Namespaces, &'static str); 3] {
    [
        (
            Namespaces {
                pid: other,
                ..HOST_NAMESPACES
            },
            "pid",
        ),
        (
            Namespaces {
                mnt: other,
                ..HOST_NAMESPACES
            },
            "mount",
        ),
        (
            Namespaces {
                user: other,
                ..HOST_NAMESPACES
            },
            "user",
        ),
    ]
}

#[test]
fn a_peer_in_another_namespace_is_refused_naming_which() {
    let other = NamespaceId { dev: 4, ino: 99 };
    for (namespaces, kind) in other_namespaces(other) {
        // Everything else about the peer is the human's own CLI.
        let table = chain().with(peer().namespaces(namespaces));
        assert_refused(&table, ProofFailure::OtherNamespace { kind });
        assert_eq!(
            ProofFailure::OtherNamespace { kind }.to_string(),
            format!("the peer is in another {kind} namespace than the broker")
        );
    }
    let table = chain().with(peer().namespaces_denied());
    assert_refused(&table, ProofFailure::NamespacesUnreadable);
}

#[test]
fn a_peer_of_another_user_by_its_credentials_is_refused() {
    let claim = HumanClaim {
        peer_uid: HUMAN + 1,
        ..claim()
    };
    assert_check(&chain(), &claim, &no_launch, Err(ProofFailure::UidMismatch));
}

#[test]
fn a_peer_of_another_user_by_proc_is_refused() {
    assert_refused(
        &chain().with(peer().uid(HUMAN + 1)),
        ProofFailure::UidMismatch,
    );
}

#[test]
fn a_peer_running_another_executable_is_refused() {
    assert_refused(
        &chain().with(peer().exe("/tmp/mosaic-bus")),
        ProofFailure::ExeMismatch,
    );
    // A replaced binary: the kernel reports the old path as deleted.
    assert_refused(
        &chain().with(peer().exe(format!("{EXE} (deleted)"))),
        ProofFailure::ExeMismatch,
    );
}

#[test]
fn a_peer_without_a_readable_executable_is_refused() {
    let anonymous = FakeProcess::new(PEER, SHELL)
        .start_time(200)
        .env([(NONCE_ENV, NONCE)]);
    assert_refused(&chain().with(anonymous), ProofFailure::ExeMissing);
}

#[test]
fn a_peer_that_is_gone_is_refused() {
    let table = chain();
    assert!(table.remove(PEER));
    assert_refused(&table, ProofFailure::Gone { pid: PEER });
    // Gone between its stat and its environ.
    assert_refused(
        &chain().with(peer().gone_after(1)),
        ProofFailure::Gone { pid: PEER },
    );
    assert_refused(
        &chain().with(peer().environ(FakeEnviron::Gone)),
        ProofFailure::Gone { pid: PEER },
    );
}

#[test]
fn a_peer_with_an_unreadable_stat_is_refused() {
    assert_refused(
        &chain().with(peer().stat_unreadable()),
        ProofFailure::Unreadable { pid: PEER },
    );
}

#[test]
fn a_peer_whose_environment_is_denied_is_refused() {
    // The EACCES exemption is for ancestors only: the CLI itself must show
    // its nonce.
    assert_refused(
        &chain().with(peer().environ(FakeEnviron::Denied)),
        ProofFailure::PeerEnvironDenied,
    );
}

#[test]
fn a_peer_whose_environment_is_unreadable_is_refused() {
    assert_refused(
        &chain().with(peer().environ(FakeEnviron::Unreadable)),
        ProofFailure::EnvironUnreadable { pid: PEER },
    );
}

#[test]
fn a_missing_nonce_is_refused() {
    assert_refused(
        &chain().with(peer().env([("HOME", "/home/h")])),
        ProofFailure::NonceMissing,
    );
    // The name must be exact.
    assert_refused(
        &chain().with(peer().env([("MOSAIC_HUMAN_NONCE_2", NONCE)])),
        ProofFailure::NonceMissing,
    );
}

#[test]
fn a_different_nonce_is_refused() {
    assert_refused(
        &chain().with(peer().env([(NONCE_ENV, OTHER_NONCE)])),
        ProofFailure::NonceMismatch,
    );
    // A prefix, an extension and an empty value are different nonces too.
    for value in [&NONCE[..32], &format!("{NONCE}0"), ""] {
        assert_refused(
            &chain().with(peer().env([(NONCE_ENV, value)])),
            ProofFailure::NonceMismatch,
        );
    }
}

#[test]
fn a_duplicated_nonce_is_refused() {
    assert_refused(
        &chain().with(peer().env([(NONCE_ENV, NONCE), (NONCE_ENV, NONCE)])),
        ProofFailure::NonceDuplicated,
    );
    assert_refused(
        &chain().with(peer().env([(NONCE_ENV, OTHER_NONCE), (NONCE_ENV, NONCE)])),
        ProofFailure::NonceDuplicated,
    );
}

#[test]
fn a_malformed_nonce_in_the_request_is_refused() {
    let too_long = "a".repeat(129);
    for nonce in [
        &NONCE[..31],
        "",
        &NONCE.to_uppercase(),
        "0123456789abcdef0123456789abcdeg",
        too_long.as_str(),
    ] {
        // The peer carries the very same text, so only its form fails.
        let table = chain().with(peer().env([(NONCE_ENV, nonce)]));
        let claim = HumanClaim {
            nonce: nonce.to_owned(),
            ..claim()
        };
        assert_check(
            &table,
            &claim,
            &no_launch,
            Err(ProofFailure::NonceMalformed),
        );
    }
}

#[test]
fn the_shortest_and_longest_nonces_are_accepted() {
    let longest = "f".repeat(128);
    for nonce in [&NONCE[..32], longest.as_str()] {
        let table = chain().with(peer().env([(NONCE_ENV, nonce)]));
        let claim = HumanClaim {
            nonce: nonce.to_owned(),
            ..claim()
        };
        assert_check(&table, &claim, &no_launch, Ok(()));
    }
}

#[test]
fn a_run_marker_on_the_peer_is_refused() {
    for &marker in RUN_MARKERS {
        for value in ["", "1"] {
            let table = chain().with(peer().env([(NONCE_ENV, NONCE), (marker, value)]));
            assert_refused(&table, ProofFailure::PeerRunMarker { marker });
        }
    }
}

#[test]
fn a_peer_that_is_a_known_launch_is_refused() {
    let launched = |pid: u32, start: u64| pid == PEER && start == 200;
    assert_check(
        &chain(),
        &claim(),
        &launched,
        Err(ProofFailure::PeerIsLaunch),
    );
}

// ---------------------------------------------------------------------------
// The ancestry.

#[test]
fn each_run_marker_on_each_ancestor_is_refused() {
    let ancestors: [(u32, fn() -> FakeProcess); 3] =
        [(SHELL, shell), (TERMINAL, terminal), (INIT, init)];
    for (pid, ancestor) in ancestors {
        for &marker in RUN_MARKERS {
            for value in ["", "x"] {
                let table = chain().with(ancestor().env([("HOME", "/home/h"), (marker, value)]));
                assert_refused(&table, ProofFailure::AncestorRunMarker { pid, marker });
            }
        }
    }
}

#[test]
fn the_marker_list_is_the_documented_one() {
    assert_eq!(
        RUN_MARKERS,
        [
            "MOSAIC_RUN_ID",
            "CLAUDECODE",
            "CLAUDE_CODE_ENTRYPOINT",
            "CODEX_THREAD_ID",
            "CODEX_SANDBOX_NETWORK_DISABLED",
            "CODEX_SANDBOX",
            "PI_CODING_AGENT",
        ]
    );
}

#[test]
fn a_loop_in_the_ancestry_is_refused() {
    // shell (10) → 11 → shell (10) again.
    let table = chain()
        .with(FakeProcess::new(SHELL, 11).start_time(100))
        .with(FakeProcess::new(11, SHELL).start_time(90));
    assert_refused(&table, ProofFailure::AncestryLoop { pid: SHELL });
}

#[test]
fn a_process_that_is_its_own_parent_is_refused() {
    let table = chain().with(shell_under(SHELL));
    assert_refused(&table, ProofFailure::AncestryLoop { pid: SHELL });
}

#[test]
fn a_loop_back_to_the_peer_is_refused() {
    let table = chain().with(FakeProcess::new(SHELL, PEER).start_time(100));
    assert_refused(&table, ProofFailure::AncestryLoop { pid: PEER });
}

#[test]
fn an_ancestor_gone_mid_walk_is_refused() {
    // The terminal exits after its first read.
    assert_refused(
        &chain().with(terminal().gone_after(1)),
        ProofFailure::Gone { pid: TERMINAL },
    );
    // A parent that no longer exists at all.
    assert_refused(
        &chain().with(shell().environ(FakeEnviron::Gone)),
        ProofFailure::Gone { pid: SHELL },
    );
    let table = chain();
    assert!(table.remove(TERMINAL));
    assert_refused(&table, ProofFailure::Gone { pid: TERMINAL });
}

#[test]
fn a_parent_started_after_its_child_is_refused() {
    assert_refused(
        &chain().with(terminal().start_time(101)),
        ProofFailure::ParentStartedAfterChild {
            parent: TERMINAL,
            child: SHELL,
        },
    );
    assert_refused(
        &chain().with(shell().start_time(201)),
        ProofFailure::ParentStartedAfterChild {
            parent: SHELL,
            child: PEER,
        },
    );
}

#[test]
fn a_known_launch_among_the_ancestors_is_refused() {
    let launched = |pid: u32, start: u64| pid == TERMINAL && start == 50;
    assert_check(
        &chain(),
        &claim(),
        &launched,
        Err(ProofFailure::AncestorIsLaunch { pid: TERMINAL }),
    );
}

#[test]
fn a_launch_recorded_under_a_reused_pid_is_not_this_process() {
    // The registry holds pid 10 with another start time: another process.
    let launched = |pid: u32, start: u64| pid == SHELL && start == 7;
    assert_check(&chain(), &claim(), &launched, Ok(()));
}

#[test]
fn an_ancestor_with_an_unreadable_stat_is_refused() {
    assert_refused(
        &chain().with(terminal().stat_unreadable()),
        ProofFailure::Unreadable { pid: TERMINAL },
    );
}

#[test]
fn an_ancestor_whose_environment_is_unreadable_is_refused() {
    // Only EACCES is exempt.
    assert_refused(
        &chain().with(shell().environ(FakeEnviron::Unreadable)),
        ProofFailure::EnvironUnreadable { pid: SHELL },
    );
}

/// `peer` under `count` ancestors that are not init, under init.
fn tall_chain(count: u32) -> FakeProcessTable {
    let first = 100_000;
    let top = first + count - 1;
    let table = FakeProcessTable::new().with(init());
    for pid in first..=top {
        let parent = if pid == top { INIT } else { pid + 1 };
        // Start times fall going up, so no parent is younger than its child.
        table.insert(FakeProcess::new(pid, parent).start_time(u64::from(top - pid) + 2));
    }
    table.with(
        FakeProcess::new(PEER, first)
            .start_time(u64::from(count) + 2)
            .exe(EXE)
            .exe_identity(EXE_FILE.dev, EXE_FILE.ino)
            .env([(NONCE_ENV, NONCE)]),
    )
}

#[test]
fn the_walk_is_bounded() {
    let bound = u32::try_from(MAX_ANCESTORS).expect("bound fits a pid");
    // Init is an ancestor too.
    assert_proven(&tall_chain(bound - 1));
    assert_refused(&tall_chain(bound), ProofFailure::AncestryTooLong);
}

#[test]
fn the_walk_stops_far_below_four_thousand_ancestors() {
    // What one request can make the broker read: the same for a chain of
    // a hundred ancestors as for one of four thousand, and a small part of
    // it.
    let reads = |height: u32| {
        let table = GivesUp {
            table: tall_chain(height),
            // `check` never asks whether to give up.
            nth: usize::MAX,
            reads: AtomicUsize::new(0),
            given_up: std::sync::atomic::AtomicBool::new(false),
        };
        assert_refused(&table, ProofFailure::AncestryTooLong);
        table.reads.load(Ordering::SeqCst)
    };
    let tall = reads(4_000);
    assert_eq!(tall, reads(100), "the walk stops at the same ancestor");
    assert!(tall <= 200, "{tall} reads for one proof");
}

/// A [`FakeProcessTable`] that counts its reads and, at the `nth`, gives
/// the proof up (as the broker does at the proof's deadline).
struct GivesUp {
    table: FakeProcessTable,
    nth: usize,
    reads: AtomicUsize,
    given_up: std::sync::atomic::AtomicBool,
}

impl GivesUp {
    fn count(&self) {
        if self.reads.fetch_add(1, Ordering::SeqCst) + 1 == self.nth {
            self.given_up.store(true, Ordering::SeqCst);
        }
    }
}

impl ProcessTable for GivesUp {
    fn process(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        self.count();
        self.table.process(pid)
    }

    fn environ(&self, pid: u32) -> Result<Environ, ProcessError> {
        self.count();
        self.table.environ(pid)
    }

    fn exe_identity(&self, pid: u32) -> Result<ExeIdentity, ProcessError> {
        self.count();
        self.table.exe_identity(pid)
    }

    fn namespaces(&self, pid: u32) -> Result<Namespaces, ProcessError> {
        self.count();
        self.table.namespaces(pid)
    }
}

#[test]
fn a_proof_given_up_reads_nothing_more() {
    let table = GivesUp {
        table: tall_chain(40),
        nth: 9,
        reads: AtomicUsize::new(0),
        given_up: std::sync::atomic::AtomicBool::new(false),
    };
    let abandoned = || table.given_up.load(Ordering::SeqCst);
    assert_eq!(
        check_until(&table, &claim(), &no_launch, &abandoned),
        Err(ProofFailure::Abandoned)
    );
    // The read that gave it up was the last one.
    assert_eq!(table.reads.load(Ordering::SeqCst), 9);
}

#[test]
fn an_ancestor_environment_past_its_cap_is_unreadable() {
    let big = "x".repeat(mosaic_ports::process::MAX_ENVIRON);
    let table = FakeProcessTable::new()
        .with(init())
        .with(terminal())
        .with(shell().env([("BIG", big.as_str())]))
        .with(peer());
    assert_refused(&table, ProofFailure::EnvironUnreadable { pid: SHELL });
}

/// A [`FakeProcessTable`] in which process `pid` is replaced by
/// `replacement` just before its `nth` read, as an exit, a reparenting or a
/// pid reuse would during the walk.
struct ReplacedMidWalk {
    table: FakeProcessTable,
    pid: u32,
    nth: usize,
    reads: AtomicUsize,
    replacement: Mutex<Option<FakeProcess>>,
}

impl ReplacedMidWalk {
    fn new(table: FakeProcessTable, pid: u32, nth: usize, replacement: FakeProcess) -> Self {
        Self {
            table,
            pid,
            nth,
            reads: AtomicUsize::new(0),
            replacement: Mutex::new(Some(replacement)),
        }
    }
}

impl ProcessTable for ReplacedMidWalk {
    fn process(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        if pid == self.pid && self.reads.fetch_add(1, Ordering::SeqCst) + 1 == self.nth {
            let replacement = self.replacement.lock().expect("lock").take();
            if let Some(process) = replacement {
                self.table.insert(process);
            }
        }
        self.table.process(pid)
    }

    fn environ(&self, pid: u32) -> Result<Environ, ProcessError> {
        self.table.environ(pid)
    }

    fn exe_identity(&self, pid: u32) -> Result<ExeIdentity, ProcessError> {
        self.table.exe_identity(pid)
    }

    fn namespaces(&self, pid: u32) -> Result<Namespaces, ProcessError> {
        self.table.namespaces(pid)
    }
}

#[test]
fn an_ancestor_reparented_during_the_walk_is_refused() {
    // The terminal exits after the shell was read: the shell now belongs to
    // init, so the terminal that was inspected may no longer be its parent.
    let table = ReplacedMidWalk::new(chain(), SHELL, 2, shell_under(INIT));
    assert_refused(&table, ProofFailure::Changed { pid: SHELL });
}

#[test]
fn a_peer_pid_reused_during_the_walk_is_refused() {
    // The CLI exits and another process with its pid starts: its environment
    // was read from the first, the walk ran from the first.
    let table = ReplacedMidWalk::new(chain(), PEER, 2, peer().start_time(300));
    assert_refused(&table, ProofFailure::Changed { pid: PEER });
}

#[test]
fn the_last_ancestor_is_read_again_after_its_environment() {
    let table = ReplacedMidWalk::new(chain(), INIT, 2, init().start_time(2));
    assert_refused(&table, ProofFailure::Changed { pid: INIT });
}

// ---------------------------------------------------------------------------
// The nonce.

#[test]
fn a_fresh_nonce_is_64_lowercase_hex_and_proves() {
    let mut entropy = SeededEntropy::new(7);
    let nonce = fresh_nonce(&mut entropy).expect("nonce");
    assert_eq!(nonce.len(), 64);
    assert!(nonce
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    assert_ne!(fresh_nonce(&mut entropy).expect("nonce"), nonce);

    let table = chain().with(peer().env([(NONCE_ENV, nonce.as_str())]));
    let claim = HumanClaim { nonce, ..claim() };
    assert_check(&table, &claim, &no_launch, Ok(()));
}

#[test]
fn no_nonce_without_entropy() {
    assert_eq!(
        fresh_nonce(&mut FailingEntropy),
        Err(Refusal::HumanProofFailed)
    );
}

#[path = "human_proof/procfs.rs"]
mod procfs;

#[path = "human_proof/reserve.rs"]
mod reserve;
