//! The [`ProcessTable`] suite.

use super::{check, check_eq, fail, run_checks, Check};
use crate::process::{Environ, ExeIdentity, Namespaces, ProcessError, ProcessInfo, ProcessTable};

/// Processes the harness prepared for the suite. For the `/proc` adapter:
/// the test process itself (or a child it spawned with a known environment)
/// and a pid that is free; for the fake: processes built into its table.
#[derive(Debug, Clone)]
pub struct ProcessFixture {
    /// A process that stays alive, unchanged, while the suite runs.
    pub alive: u32,
    /// A pid with no process while the suite runs.
    pub gone: u32,
    /// A `(name, value)` pair in `alive`'s environment.
    pub env_var: (Vec<u8>, Vec<u8>),
    /// A process whose environment the kernel refuses to show (`EACCES`) but
    /// whose `stat` is readable: for the `/proc` adapter, pid 1 read by
    /// another user than its own.
    pub denied: u32,
    /// Processes whose every field the table MUST report exactly, for
    /// example a child whose command name contains `) (`, so a start time
    /// parsed before the last `)` shows.
    pub expect: Vec<ProcessInfo>,
    /// Processes and the [`ExeIdentity`] the table MUST report for each,
    /// for example the test process itself with the device and inode of
    /// its `current_exe`; `alive` SHOULD be among them.
    pub exe_identities: Vec<(u32, ExeIdentity)>,
    /// Processes and the [`Namespaces`] the table MUST report for each,
    /// for example the test process with those of `/proc/self/ns/*`;
    /// `alive` SHOULD be among them.
    pub namespaces: Vec<(u32, Namespaces)>,
    /// A process in other namespaces than `alive` (a child in a new PID
    /// namespace, say), when the harness can provide one: the table MUST
    /// tell the two apart.
    pub elsewhere: Option<u32>,
}

/// Runs every process-table check, each on a fresh table from `make`,
/// against the processes of `fixture`.
///
/// # Panics
/// When any check fails, naming every failing check.
pub fn run<P: ProcessTable>(mut make: impl FnMut() -> P, fixture: &ProcessFixture) {
    let checks: Vec<Check<'_, Subject<'_, P>>> = vec![
        Check::new("alive_process", alive_process::<P>),
        Check::new("alive_process_is_stable", alive_process_is_stable::<P>),
        Check::new("gone_process", gone_process::<P>),
        Check::new("alive_environ", alive_environ::<P>),
        Check::new("gone_environ", gone_environ::<P>),
        Check::new("denied_environ", denied_environ::<P>),
        Check::new("expected_processes", expected_processes::<P>),
        Check::new("expected_exe_identities", expected_exe_identities::<P>),
        Check::new("exe_identity_is_stable", exe_identity_is_stable::<P>),
        Check::new("gone_exe_identity", gone_exe_identity::<P>),
        Check::new("expected_namespaces", expected_namespaces::<P>),
        Check::new("namespaces_are_stable", namespaces_are_stable::<P>),
        Check::new("gone_namespaces", gone_namespaces::<P>),
        Check::new("other_namespaces_differ", other_namespaces_differ::<P>),
    ];
    run_checks("process table", checks, || Subject {
        table: make(),
        fixture,
    });
}

/// A table under test and the fixture it was prepared for.
struct Subject<'f, P> {
    table: P,
    fixture: &'f ProcessFixture,
}

/// The name of an error variant, for comparing errors that are not `Eq`.
fn kind(error: &ProcessError) -> &'static str {
    match error {
        ProcessError::Gone => "Gone",
        ProcessError::Denied => "Denied",
        ProcessError::Unreadable(_) => "Unreadable",
    }
}

#[track_caller]
fn process<P: ProcessTable>(s: &Subject<'_, P>, pid: u32) -> ProcessInfo {
    s.table
        .process(pid)
        .unwrap_or_else(|e| fail(format_args!("process({pid}) failed: {e:?}")))
}

fn alive_process<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let pid = s.fixture.alive;
    check_eq("pid of the alive process", process(s, pid).pid, pid);
}

fn alive_process_is_stable<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let first = process(s, s.fixture.alive);
    let second = process(s, s.fixture.alive);
    check_eq("a second read of the alive process", second, first);
}

fn gone_process<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let pid = s.fixture.gone;
    check_eq(
        &format!("process({pid}) of a free pid"),
        s.table.process(pid).map_err(|e| kind(&e)),
        Err::<ProcessInfo, &str>("Gone"),
    );
}

fn alive_environ<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let pid = s.fixture.alive;
    let vars = s
        .table
        .environ(pid)
        .unwrap_or_else(|e| fail(format_args!("environ({pid}) failed: {e:?}")));
    check(
        &format!("environ({pid}) holds {:?}", s.fixture.env_var),
        vars.contains(&s.fixture.env_var),
    );
}

fn gone_environ<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let pid = s.fixture.gone;
    check_eq(
        &format!("environ({pid}) of a free pid"),
        s.table.environ(pid).map_err(|e| kind(&e)),
        Err::<Environ, &str>("Gone"),
    );
}

fn denied_environ<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let pid = s.fixture.denied;
    check_eq(
        &format!("environ({pid}) of a process we may not inspect"),
        s.table.environ(pid).map_err(|e| kind(&e)),
        Err::<Environ, &str>("Denied"),
    );
    // A refused environment skips only the environment check: the process
    // itself must still be readable for the ancestry walk.
    check_eq("its pid", process(s, pid).pid, pid);
}

fn expected_processes<P: ProcessTable>(s: &mut Subject<'_, P>) {
    for expected in &s.fixture.expect {
        check_eq(
            &format!("process({})", expected.pid),
            process(s, expected.pid),
            expected.clone(),
        );
    }
}

fn expected_exe_identities<P: ProcessTable>(s: &mut Subject<'_, P>) {
    for &(pid, expected) in &s.fixture.exe_identities {
        check_eq(
            &format!("exe_identity({pid})"),
            s.table.exe_identity(pid).map_err(|e| kind(&e)),
            Ok(expected),
        );
    }
}

fn exe_identity_is_stable<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let pid = s.fixture.alive;
    let first = s.table.exe_identity(pid).map_err(|e| kind(&e));
    check_eq(
        &format!("a second exe_identity({pid})"),
        s.table.exe_identity(pid).map_err(|e| kind(&e)),
        first,
    );
}

fn gone_exe_identity<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let pid = s.fixture.gone;
    check_eq(
        &format!("exe_identity({pid}) of a free pid"),
        s.table.exe_identity(pid).map_err(|e| kind(&e)),
        Err::<ExeIdentity, &str>("Gone"),
    );
}

fn expected_namespaces<P: ProcessTable>(s: &mut Subject<'_, P>) {
    for &(pid, expected) in &s.fixture.namespaces {
        check_eq(
            &format!("namespaces({pid})"),
            s.table.namespaces(pid).map_err(|e| kind(&e)),
            Ok(expected),
        );
    }
}

fn namespaces_are_stable<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let pid = s.fixture.alive;
    let first = s.table.namespaces(pid).map_err(|e| kind(&e));
    check(&format!("namespaces({pid}) read"), first.is_ok());
    check_eq(
        &format!("a second namespaces({pid})"),
        s.table.namespaces(pid).map_err(|e| kind(&e)),
        first,
    );
}

fn gone_namespaces<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let pid = s.fixture.gone;
    check_eq(
        &format!("namespaces({pid}) of a free pid"),
        s.table.namespaces(pid).map_err(|e| kind(&e)),
        Err::<Namespaces, &str>("Gone"),
    );
}

fn other_namespaces_differ<P: ProcessTable>(s: &mut Subject<'_, P>) {
    let Some(other) = s.fixture.elsewhere else {
        return;
    };
    let alive = s.fixture.alive;
    let (a, b) = (s.table.namespaces(alive), s.table.namespaces(other));
    match (a, b) {
        (Ok(a), Ok(b)) => check(
            &format!("namespaces({other}) differ from namespaces({alive}): {b:?} {a:?}"),
            a.pid != b.pid,
        ),
        (a, b) => fail(format_args!("namespaces read: {a:?} {b:?}")),
    }
}
