//! The human CLI's process proof: is the process at the other end of the
//! socket the human's own `mosaic-bus human`, started from a terminal, and
//! not something an agent ran?
//!
//! # What the proof establishes
//!
//! [`check`] reads the process table (the [`ProcessTable`] port: `/proc` in
//! production, synthetic ancestries in tests) and accepts a request only when
//! all of this holds at the time of the request:
//!
//! - the peer (pid and uid from `SO_PEERCRED`) runs as the broker's user, in
//!   the broker's own PID, mount and user namespaces
//!   ([`ProcessTable::namespaces`], taken for the broker once at boot), and
//!   is exactly the broker's own executable ([`HumanClaim::exe`]): the same
//!   path, and the same file by device and inode
//!   ([`ProcessTable::exe_identity`]), both taken from the broker's running
//!   image once at boot ([`BrokerExe::of`]);
//! - the peer's environment is readable and carries [`NONCE_ENV`] exactly
//!   once, with the very nonce the request carries: the CLI re-executes
//!   itself with a fresh nonce ([`fresh_nonce`]), so the nonce ties the
//!   request to the process image the broker inspects;
//! - neither the peer nor any ancestor up to pid 1 carries one of the
//!   [`RUN_MARKERS`] that agent harnesses and our own launcher put into the
//!   environments of what they run, or is a launch the broker bound (its pid
//!   *and* start time are in the launch registry);
//! - the ancestry is a well-formed chain: no pid twice, no process vanishing
//!   or changing while it is read, no parent younger than its child (a reused
//!   pid), at most [`MAX_ANCESTORS`] steps.
//!
//! Each step is re-checked after its parent has been read: the child must
//! still have the same start time and the same parent, so the parent that
//! was inspected really is the one it had (a process whose parent exits is
//! reparented before the parent's pid can be reused).
//!
//! An ancestor whose environment the kernel will not show (`EACCES`: a
//! process of another user, such as `sshd` or `init`) skips only the marker
//! check; its start time and the launch registry still apply. Every other
//! failure to read refuses, and the CLI itself must have a readable
//! environment.
//!
//! # What it does not establish
//!
//! This is a check against *cooperative* agents, inside the trust limit the
//! spec states ("Human and reader paths", lead decision 62):
//!
//! - A process running as the same user *in the broker's namespaces* can
//!   detach from its agent and clear its environment (for example
//!   `setsid -f env -i mosaic-bus human …`): once reparented to init with no
//!   marker left, nothing in `/proc` distinguishes it from the human, and it
//!   passes. Likewise a same-user process can race pid reuse or rewrite
//!   what it exposes. The agents `up` starts in its sandbox are in other
//!   namespaces, so the namespace rule refuses everything they run; an
//!   agent that a host starts unsandboxed still has this opening.
//! - Markers are the ones listed in [`RUN_MARKERS`]; a harness that sets none
//!   of them is only caught by the launch registry.
//! - Replacing the binary at its path while the broker runs (a rename or a
//!   copy over it, a delete and a new file) leaves the path the same but
//!   gives a CLI started from it another file, with another device or
//!   inode: every proof fails until the broker restarts on the new binary,
//!   the safe direction. The path alone would not show it: the broker took
//!   its path at boot, and the new CLI reports that very path. The file
//!   itself cannot be rewritten in place while the broker executes it (the
//!   kernel refuses writes to a running image, `ETXTBSY`), so the same
//!   device and inode mean the broker's own bytes.
//! - Reading `/proc` is Linux-specific.
//!
//! [`check`] reports *why* a proof failed ([`ProofFailure`]) for tests and
//! for one log line; [`prove`] is what the broker answers with: always the
//! one static code `human-proof-failed`, never the reason.

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;

use mosaic_domain::Refusal;
use mosaic_ports::process::Environ;
use mosaic_ports::{Entropy, ExeIdentity, Namespaces, ProcessError, ProcessInfo, ProcessTable};

/// The variable the human CLI puts its nonce in when it re-executes itself.
pub const NONCE_ENV: &str = "MOSAIC_HUMAN_NONCE";

/// Environment variables that mark a process as run by an agent. A marker
/// matches by its exact name, whatever its value (empty included), on the
/// peer or on any ancestor whose environment is readable.
///
/// Only variables a harness sets *for what it runs* belong here; variables a
/// human may export in a shell profile to configure a tool (`CODEX_HOME`,
/// `PI_CODING_AGENT_DIR`, `CLAUDE_CONFIG_DIR`) would refuse the human and
/// are deliberately absent.
pub const RUN_MARKERS: &[&str] = &[
    // Our launcher (`mosaic-bus up`) gives every agent it starts its run id
    // here (`LaunchRecord::run`); Pi, Claude and Codex seats launched by
    // Mosaic all carry it.
    "MOSAIC_RUN_ID",
    // Claude Code sets `CLAUDECODE=1` in the shells it spawns (its Bash tool
    // and hooks); a nested `claude` refuses to start when it sees it.
    "CLAUDECODE",
    // Claude Code records how it was started (`cli`, `sdk-ts`, `sdk-py`, …)
    // in its own environment, so every child inherits it; the Agent SDKs set
    // it when they spawn the CLI.
    "CLAUDE_CODE_ENTRYPOINT",
    // Codex CLI injects the conversation's thread id into every shell-tool
    // environment (`CODEX_THREAD_ID_ENV_VAR`,
    // codex-rs/protocol/src/shell_environment.rs).
    "CODEX_THREAD_ID",
    // Codex CLI sets this to `1` for shell-tool commands whose sandbox policy
    // denies the network (`CODEX_SANDBOX_NETWORK_DISABLED_ENV_VAR`,
    // codex-rs/core/src/spawn.rs).
    "CODEX_SANDBOX_NETWORK_DISABLED",
    // Codex CLI sets this (`seatbelt` on macOS) for processes it spawns
    // under its sandbox (`CODEX_SANDBOX_ENV_VAR`, codex-rs/core/src/spawn.rs).
    "CODEX_SANDBOX",
    // Pi's CLI entry point sets `PI_CODING_AGENT=true` in its own
    // environment at startup, so its bash tool and every other child inherit
    // it (badlogic/pi-mono, packages/coding-agent/src/cli.ts).
    "PI_CODING_AGENT",
];

/// How many ancestors the walk reads before it refuses: a terminal, a
/// multiplexer, shells and editors nest a dozen or two deep, and each
/// ancestor costs reads (its environment up to
/// [`mosaic_ports::process::MAX_ENVIRON`]), so this bounds the work one
/// request can cause.
pub const MAX_ANCESTORS: usize = 64;

/// The shortest nonce accepted: 128 bits as lowercase hex.
pub const NONCE_MIN_LEN: usize = 32;

/// The longest nonce accepted, so a request cannot make the broker compare
/// arbitrarily long text.
pub const NONCE_MAX_LEN: usize = 128;

/// What the broker knows about a request that claims to come from the human
/// CLI: the kernel's word on the peer, the broker's own identity, and the
/// nonce the request carried.
#[derive(Clone, PartialEq, Eq)]
pub struct HumanClaim {
    /// The peer's pid, from `SO_PEERCRED`.
    pub peer_pid: u32,
    /// The peer's uid, from `SO_PEERCRED`.
    pub peer_uid: u32,
    /// The broker's own uid: the human is the user the broker runs as.
    pub broker_uid: u32,
    /// The exact executable the CLI must be: the broker's own, taken at
    /// boot.
    pub exe: BrokerExe,
    /// The broker's own PID, mount and user namespaces, taken at boot: the
    /// CLI must be in the very same ones.
    pub namespaces: Namespaces,
    /// The nonce sent in the request.
    pub nonce: String,
}

/// The broker's own executable, as the kernel reported it once at boot: its
/// path and the device and inode of the running image. A human CLI must be
/// both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerExe {
    /// The resolved path (`/proc/<pid>/exe`'s text).
    pub path: PathBuf,
    /// The file the process runs, whatever its path names later.
    pub identity: ExeIdentity,
}

impl BrokerExe {
    /// Process `pid`'s executable as `table` reports it; the broker reads
    /// its own (`std::process::id()`) at boot, before any binary at its
    /// path could have been replaced under it.
    ///
    /// # Errors
    /// `storage-unavailable` when the path or the file's identity cannot
    /// be read: without them no proof can pass, so the broker does not
    /// boot.
    pub fn of(table: &dyn ProcessTable, pid: u32) -> Result<BrokerExe, Refusal> {
        let path = table
            .process(pid)
            .ok()
            .and_then(|info| info.exe)
            .ok_or(Refusal::StorageUnavailable)?;
        let identity = table
            .exe_identity(pid)
            .map_err(|_| Refusal::StorageUnavailable)?;
        Ok(BrokerExe { path, identity })
    }
}

impl fmt::Debug for HumanClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HumanClaim")
            .field("peer_pid", &self.peer_pid)
            .field("peer_uid", &self.peer_uid)
            .field("broker_uid", &self.broker_uid)
            .field("exe", &self.exe)
            .field("namespaces", &self.namespaces)
            .field("nonce", &"<redacted>")
            .finish()
    }
}

/// Why a proof failed. Internal: for tests and the broker's log, never on
/// the wire (the client only ever sees `human-proof-failed`). No variant
/// carries environment values, so logging one cannot leak a nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofFailure {
    /// The request's nonce is not 32 to 128 lowercase hex characters.
    NonceMalformed,
    /// The peer does not run as the broker's user (by `SO_PEERCRED` or by
    /// `/proc`).
    UidMismatch,
    /// The peer is in another namespace than the broker: a sandbox's, say.
    OtherNamespace {
        /// Which: `pid`, `mount` or `user`.
        kind: &'static str,
    },
    /// The peer's namespaces could not be read.
    NamespacesUnreadable,
    /// The peer's executable (its path, or its device and inode) is
    /// unreadable.
    ExeMissing,
    /// The peer's executable path is not the broker's.
    ExeMismatch,
    /// The peer's executable has the broker's path but is another file
    /// (device and inode): the binary was replaced at that path.
    ExeReplaced,
    /// The kernel will not show the peer's environment (`EACCES`).
    PeerEnvironDenied,
    /// The peer carries a run marker.
    PeerRunMarker {
        /// The marker's name.
        marker: &'static str,
    },
    /// The peer's environment has no [`NONCE_ENV`].
    NonceMissing,
    /// The peer's environment has [`NONCE_ENV`] more than once.
    NonceDuplicated,
    /// The peer's nonce is not the request's.
    NonceMismatch,
    /// The peer is a launch the broker bound (pid and start time).
    PeerIsLaunch,
    /// A pid appears twice in the ancestry.
    AncestryLoop {
        /// The pid met again.
        pid: u32,
    },
    /// More than [`MAX_ANCESTORS`] ancestors.
    AncestryTooLong,
    /// A process of the chain (the peer or an ancestor) is gone.
    Gone {
        /// The process.
        pid: u32,
    },
    /// A process of the chain could not be read for another reason.
    Unreadable {
        /// The process.
        pid: u32,
    },
    /// Read again, a process had another start time or another parent: the
    /// one first read is gone, or it was reparented during the walk.
    Changed {
        /// The process.
        pid: u32,
    },
    /// A parent started after its child: the pid was reused.
    ParentStartedAfterChild {
        /// The parent's pid.
        parent: u32,
        /// The child's pid.
        child: u32,
    },
    /// An ancestor is a launch the broker bound (pid and start time).
    AncestorIsLaunch {
        /// The ancestor.
        pid: u32,
    },
    /// An ancestor carries a run marker.
    AncestorRunMarker {
        /// The ancestor.
        pid: u32,
        /// The marker's name.
        marker: &'static str,
    },
    /// An environment (the peer's or an ancestor's) could not be read for a
    /// reason other than `EACCES` or the process being gone, or is larger
    /// than [`mosaic_ports::process::MAX_ENVIRON`].
    EnvironUnreadable {
        /// The process.
        pid: u32,
    },
    /// The proof was given up (its deadline passed, or its request went
    /// away) before it was done: nothing more was read.
    Abandoned,
}

impl ProofFailure {
    /// What the failure names of a fixed set (a run marker, a namespace's
    /// kind), or `""`: with [`ProofFailure::cause`], the key its log lines
    /// are counted under when they are bounded
    /// ([`mosaic_domain::log_windows`]).
    pub fn detail(&self) -> &'static str {
        match *self {
            ProofFailure::PeerRunMarker { marker }
            | ProofFailure::AncestorRunMarker { marker, .. } => marker,
            ProofFailure::OtherNamespace { kind } => kind,
            ProofFailure::NonceMalformed
            | ProofFailure::UidMismatch
            | ProofFailure::NamespacesUnreadable
            | ProofFailure::ExeMissing
            | ProofFailure::ExeMismatch
            | ProofFailure::ExeReplaced
            | ProofFailure::PeerEnvironDenied
            | ProofFailure::NonceMissing
            | ProofFailure::NonceDuplicated
            | ProofFailure::NonceMismatch
            | ProofFailure::PeerIsLaunch
            | ProofFailure::AncestryLoop { .. }
            | ProofFailure::AncestryTooLong
            | ProofFailure::Gone { .. }
            | ProofFailure::Unreadable { .. }
            | ProofFailure::Changed { .. }
            | ProofFailure::ParentStartedAfterChild { .. }
            | ProofFailure::AncestorIsLaunch { .. }
            | ProofFailure::EnvironUnreadable { .. }
            | ProofFailure::Abandoned => "",
        }
    }

    /// The failure's static name.
    pub fn cause(&self) -> &'static str {
        match self {
            ProofFailure::NonceMalformed => "nonce-malformed",
            ProofFailure::UidMismatch => "uid-mismatch",
            ProofFailure::OtherNamespace { .. } => "other-namespace",
            ProofFailure::NamespacesUnreadable => "namespaces-unreadable",
            ProofFailure::ExeMissing => "exe-missing",
            ProofFailure::ExeMismatch => "exe-mismatch",
            ProofFailure::ExeReplaced => "exe-replaced",
            ProofFailure::PeerEnvironDenied => "peer-environ-denied",
            ProofFailure::PeerRunMarker { .. } => "peer-run-marker",
            ProofFailure::NonceMissing => "nonce-missing",
            ProofFailure::NonceDuplicated => "nonce-duplicated",
            ProofFailure::NonceMismatch => "nonce-mismatch",
            ProofFailure::PeerIsLaunch => "peer-is-launch",
            ProofFailure::AncestryLoop { .. } => "ancestry-loop",
            ProofFailure::AncestryTooLong => "ancestry-too-long",
            ProofFailure::Gone { .. } => "gone",
            ProofFailure::Unreadable { .. } => "unreadable",
            ProofFailure::Changed { .. } => "changed",
            ProofFailure::ParentStartedAfterChild { .. } => "parent-started-after-child",
            ProofFailure::AncestorIsLaunch { .. } => "ancestor-is-launch",
            ProofFailure::AncestorRunMarker { .. } => "ancestor-run-marker",
            ProofFailure::EnvironUnreadable { .. } => "environ-unreadable",
            ProofFailure::Abandoned => "abandoned",
        }
    }
}

impl fmt::Display for ProofFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ProofFailure::NonceMalformed => f.write_str("the request's nonce is malformed"),
            ProofFailure::UidMismatch => f.write_str("the peer is not the broker's user"),
            ProofFailure::OtherNamespace { kind } => {
                write!(f, "the peer is in another {kind} namespace than the broker")
            }
            ProofFailure::NamespacesUnreadable => {
                f.write_str("the peer's namespaces are unreadable")
            }
            ProofFailure::ExeMissing => f.write_str("the peer's executable is unreadable"),
            ProofFailure::ExeMismatch => f.write_str("the peer is not the broker's executable"),
            ProofFailure::ExeReplaced => {
                f.write_str("the peer's executable is another file at the broker's path")
            }
            ProofFailure::PeerEnvironDenied => f.write_str("the peer's environment is denied"),
            ProofFailure::PeerRunMarker { marker } => {
                write!(f, "the peer carries the run marker {marker}")
            }
            ProofFailure::NonceMissing => f.write_str("the peer has no nonce"),
            ProofFailure::NonceDuplicated => f.write_str("the peer has more than one nonce"),
            ProofFailure::NonceMismatch => f.write_str("the peer's nonce is not the request's"),
            ProofFailure::PeerIsLaunch => f.write_str("the peer is a bound launch"),
            ProofFailure::AncestryLoop { pid } => write!(f, "pid {pid} appears twice"),
            ProofFailure::AncestryTooLong => {
                write!(f, "more than {MAX_ANCESTORS} ancestors")
            }
            ProofFailure::Gone { pid } => write!(f, "pid {pid} vanished during the walk"),
            ProofFailure::Unreadable { pid } => write!(f, "pid {pid} is unreadable"),
            ProofFailure::Changed { pid } => write!(f, "pid {pid} changed during the walk"),
            ProofFailure::ParentStartedAfterChild { parent, child } => {
                write!(f, "parent {parent} started after its child {child}")
            }
            ProofFailure::AncestorIsLaunch { pid } => {
                write!(f, "ancestor {pid} is a bound launch")
            }
            ProofFailure::AncestorRunMarker { pid, marker } => {
                write!(f, "ancestor {pid} carries the run marker {marker}")
            }
            ProofFailure::EnvironUnreadable { pid } => {
                write!(f, "the environment of pid {pid} is unreadable")
            }
            ProofFailure::Abandoned => f.write_str("the proof was given up before it was done"),
        }
    }
}

/// The answer to a human claim: `Ok` when [`check`] accepts it, otherwise
/// [`Refusal::HumanProofFailed`], never the reason. The broker's pipeline
/// runs [`check_until`] and logs the reason, at a bounded rate.
///
/// `launched(pid, start_time)` says whether that process is a launch the
/// broker bound; the broker answers it from `Launches::records()`.
///
/// # Errors
/// [`Refusal::HumanProofFailed`], whatever the reason.
pub fn prove(
    table: &dyn ProcessTable,
    claim: &HumanClaim,
    launched: &dyn Fn(u32, u64) -> bool,
) -> Result<(), Refusal> {
    check(table, claim, launched).map_err(|_| Refusal::HumanProofFailed)
}

/// The proof itself, as described in the module documentation, reporting
/// the first rule that fails.
///
/// # Errors
/// The [`ProofFailure`] of the first failed rule.
pub fn check(
    table: &dyn ProcessTable,
    claim: &HumanClaim,
    launched: &dyn Fn(u32, u64) -> bool,
) -> Result<(), ProofFailure> {
    check_until(table, claim, launched, &|| false)
}

/// [`check`], given up with [`ProofFailure::Abandoned`] as soon as
/// `abandoned()` says so; it is asked before every read of the process
/// table.
///
/// # Errors
/// The [`ProofFailure`] of the first failed rule, or
/// [`ProofFailure::Abandoned`].
pub fn check_until(
    table: &dyn ProcessTable,
    claim: &HumanClaim,
    launched: &dyn Fn(u32, u64) -> bool,
    abandoned: &(dyn Fn() -> bool + Sync),
) -> Result<(), ProofFailure> {
    let table = Abandonable { table, abandoned };
    match checked(&table, claim, launched) {
        Err(_) if abandoned() => Err(ProofFailure::Abandoned),
        outcome => outcome,
    }
}

/// The rules of [`check`], in order, over `table`.
fn checked(
    table: &dyn ProcessTable,
    claim: &HumanClaim,
    launched: &dyn Fn(u32, u64) -> bool,
) -> Result<(), ProofFailure> {
    if !is_nonce(&claim.nonce) {
        return Err(ProofFailure::NonceMalformed);
    }
    if claim.peer_uid != claim.broker_uid {
        return Err(ProofFailure::UidMismatch);
    }
    let peer = read(table, claim.peer_pid)?;
    if peer.uid != claim.broker_uid {
        return Err(ProofFailure::UidMismatch);
    }
    // A pid reused since `read` is caught by the walk.
    same_namespaces(table, peer.pid, &claim.namespaces)?;
    match &peer.exe {
        None => return Err(ProofFailure::ExeMissing),
        Some(exe) if *exe != claim.exe.path => return Err(ProofFailure::ExeMismatch),
        Some(_) => {}
    }
    // The path says where the file was found; only the device and inode say
    // it is the broker's own file. A pid reused since `read` is caught by
    // the walk, which reads the peer again after its parent.
    match table.exe_identity(peer.pid) {
        Ok(identity) if identity == claim.exe.identity => {}
        Ok(_) => return Err(ProofFailure::ExeReplaced),
        Err(ProcessError::Gone) => return Err(ProofFailure::Gone { pid: peer.pid }),
        Err(ProcessError::Denied | ProcessError::Unreadable(_)) => {
            return Err(ProofFailure::ExeMissing)
        }
    }
    if launched(peer.pid, peer.start_time) {
        return Err(ProofFailure::PeerIsLaunch);
    }
    let environ = match table.environ(peer.pid) {
        Ok(environ) => environ,
        Err(ProcessError::Denied) => return Err(ProofFailure::PeerEnvironDenied),
        Err(ProcessError::Gone) => return Err(ProofFailure::Gone { pid: peer.pid }),
        Err(ProcessError::Unreadable(_)) => {
            return Err(ProofFailure::EnvironUnreadable { pid: peer.pid })
        }
    };
    if let Some(marker) = run_marker(&environ) {
        return Err(ProofFailure::PeerRunMarker { marker });
    }
    nonce_matches(&environ, &claim.nonce)?;
    walk(table, peer, launched)
}

/// The checks of a human line that need no proof, which the broker makes
/// before it gives the line a place in the human's reserve: the peer runs
/// as the broker's user (`SO_PEERCRED`'s `peer_uid`), in the broker's own
/// PID, mount and user namespaces. [`check`] makes the same ones, by the
/// same code, before its walk. A sandboxed agent's line fails here, so it
/// never takes a reserve place; a same-user process in the broker's
/// namespaces passes, and its proof decides.
///
/// # Errors
/// [`ProofFailure::UidMismatch`], [`ProofFailure::OtherNamespace`],
/// [`ProofFailure::NamespacesUnreadable`] or [`ProofFailure::Gone`].
pub fn may_be_human(
    table: &dyn ProcessTable,
    peer_pid: u32,
    peer_uid: u32,
    broker_uid: u32,
    broker_namespaces: &Namespaces,
) -> Result<(), ProofFailure> {
    if peer_uid != broker_uid {
        return Err(ProofFailure::UidMismatch);
    }
    same_namespaces(table, peer_pid, broker_namespaces)
}

/// Whether `pid` is in the broker's own PID, mount and user namespaces.
/// Seen from another namespace, the ancestry, the environment and even the
/// executable can be whatever its maker chose (a sandbox's own init, a
/// fresh `/proc`): only the broker's own namespaces are the human's.
fn same_namespaces(
    table: &dyn ProcessTable,
    pid: u32,
    broker: &Namespaces,
) -> Result<(), ProofFailure> {
    match table.namespaces(pid) {
        Ok(ns) if ns.pid != broker.pid => Err(ProofFailure::OtherNamespace { kind: "pid" }),
        Ok(ns) if ns.mnt != broker.mnt => Err(ProofFailure::OtherNamespace { kind: "mount" }),
        Ok(ns) if ns.user != broker.user => Err(ProofFailure::OtherNamespace { kind: "user" }),
        Ok(_) => Ok(()),
        Err(ProcessError::Gone) => Err(ProofFailure::Gone { pid }),
        Err(ProcessError::Denied | ProcessError::Unreadable(_)) => {
            Err(ProofFailure::NamespacesUnreadable)
        }
    }
}

/// A process table that refuses every read once its proof was given up,
/// so the walk stops at its next read.
struct Abandonable<'a> {
    table: &'a dyn ProcessTable,
    abandoned: &'a (dyn Fn() -> bool + Sync),
}

/// Why a read was not made: the proof was given up.
#[derive(Debug)]
struct GivenUp;

impl fmt::Display for GivenUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the proof was given up")
    }
}

impl std::error::Error for GivenUp {}

impl Abandonable<'_> {
    /// `Err` (a [`GivenUp`] source) once the proof was given up.
    fn go_on(&self) -> Result<(), ProcessError> {
        if (self.abandoned)() {
            return Err(ProcessError::Unreadable(Box::new(GivenUp)));
        }
        Ok(())
    }
}

impl ProcessTable for Abandonable<'_> {
    fn process(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        self.go_on()?;
        self.table.process(pid)
    }

    fn environ(&self, pid: u32) -> Result<Environ, ProcessError> {
        self.go_on()?;
        self.table.environ(pid)
    }

    fn exe_identity(&self, pid: u32) -> Result<ExeIdentity, ProcessError> {
        self.go_on()?;
        self.table.exe_identity(pid)
    }

    fn namespaces(&self, pid: u32) -> Result<Namespaces, ProcessError> {
        self.go_on()?;
        self.table.namespaces(pid)
    }
}

/// A fresh nonce for the CLI's re-execution: 256 random bits as 64
/// lowercase hex characters.
///
/// # Errors
/// [`Refusal::HumanProofFailed`] when the entropy source fails: without a
/// nonce there can be no proof, and no weaker randomness is used instead.
pub fn fresh_nonce(entropy: &mut dyn Entropy) -> Result<String, Refusal> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut bytes = [0u8; 32];
    entropy
        .fill(&mut bytes)
        .map_err(|_| Refusal::HumanProofFailed)?;
    let mut nonce = String::with_capacity(64);
    for b in bytes {
        nonce.push(char::from(HEX[usize::from(b >> 4)]));
        nonce.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    Ok(nonce)
}

/// Walks from `peer`'s parent up to pid 1 (or to a process whose parent is
/// 0, the root of a PID namespace), checking every ancestor.
fn walk(
    table: &dyn ProcessTable,
    peer: ProcessInfo,
    launched: &dyn Fn(u32, u64) -> bool,
) -> Result<(), ProofFailure> {
    let mut seen = HashSet::from([peer.pid]);
    let mut child = peer;
    let mut ancestors = 0usize;
    while child.pid != 1 && child.ppid != 0 {
        let pid = child.ppid;
        if !seen.insert(pid) {
            return Err(ProofFailure::AncestryLoop { pid });
        }
        ancestors += 1;
        if ancestors > MAX_ANCESTORS {
            return Err(ProofFailure::AncestryTooLong);
        }
        let parent = read(table, pid)?;
        if parent.start_time > child.start_time {
            return Err(ProofFailure::ParentStartedAfterChild {
                parent: pid,
                child: child.pid,
            });
        }
        if launched(pid, parent.start_time) {
            return Err(ProofFailure::AncestorIsLaunch { pid });
        }
        match table.environ(pid) {
            Ok(environ) => {
                if let Some(marker) = run_marker(&environ) {
                    return Err(ProofFailure::AncestorRunMarker { pid, marker });
                }
            }
            // EACCES (another user's process): only the marker check is
            // skipped; start time and launch registry were checked above.
            Err(ProcessError::Denied) => {}
            Err(ProcessError::Gone) => return Err(ProofFailure::Gone { pid }),
            Err(ProcessError::Unreadable(_)) => {
                return Err(ProofFailure::EnvironUnreadable { pid })
            }
        }
        // The child still has this parent, so the process just inspected is
        // the parent it had, and the child's own environment (read before)
        // was its own.
        unchanged(table, &child)?;
        child = parent;
    }
    // The last process read: its environment was its own.
    unchanged(table, &child)
}

/// Reads `pid`, mapping the port's errors to proof failures.
fn read(table: &dyn ProcessTable, pid: u32) -> Result<ProcessInfo, ProofFailure> {
    match table.process(pid) {
        Ok(info) if info.pid == pid => Ok(info),
        Ok(_) => Err(ProofFailure::Unreadable { pid }),
        Err(ProcessError::Gone) => Err(ProofFailure::Gone { pid }),
        Err(ProcessError::Denied | ProcessError::Unreadable(_)) => {
            Err(ProofFailure::Unreadable { pid })
        }
    }
}

/// Reads `before.pid` again: it must be the same process with the same
/// parent.
fn unchanged(table: &dyn ProcessTable, before: &ProcessInfo) -> Result<(), ProofFailure> {
    let now = read(table, before.pid)?;
    if now.start_time != before.start_time || now.ppid != before.ppid {
        return Err(ProofFailure::Changed { pid: before.pid });
    }
    Ok(())
}

/// The first run marker in `environ`, by exact name.
fn run_marker(environ: &Environ) -> Option<&'static str> {
    environ.iter().find_map(|(name, _)| {
        RUN_MARKERS
            .iter()
            .copied()
            .find(|marker| marker.as_bytes() == name.as_slice())
    })
}

/// The peer's environment must hold [`NONCE_ENV`] exactly once, with exactly
/// `nonce`.
fn nonce_matches(environ: &Environ, nonce: &str) -> Result<(), ProofFailure> {
    let mut values = environ
        .iter()
        .filter(|(name, _)| name.as_slice() == NONCE_ENV.as_bytes())
        .map(|(_, value)| value);
    let value = values.next().ok_or(ProofFailure::NonceMissing)?;
    if values.next().is_some() {
        return Err(ProofFailure::NonceDuplicated);
    }
    if !same_secret(value, nonce.as_bytes()) {
        return Err(ProofFailure::NonceMismatch);
    }
    Ok(())
}

/// 32 to 128 lowercase hex characters.
fn is_nonce(nonce: &str) -> bool {
    (NONCE_MIN_LEN..=NONCE_MAX_LEN).contains(&nonce.len())
        && nonce
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Compares in time independent of where the values differ (the length is
/// not secret: a well-formed nonce's length is public).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}
