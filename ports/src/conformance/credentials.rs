//! The [`Credentials`] suite.

use mosaic_domain::business::CredentialSource;

use super::{check, check_eq, run_checks, Check};
use crate::credentials::{CredentialError, Credentials};

/// Credential references the harness prepared, with what reading each MUST
/// give. For the real adapter: token files it wrote (0600, 0644, a symlink,
/// 16 KiB and one byte more, a path inside a protected root) and variables
/// it set; for the fake: the same map built into it.
#[derive(Debug, Clone, Default)]
pub struct CredentialFixture {
    /// References that MUST read as exactly these bytes.
    pub readable: Vec<(CredentialSource, Vec<u8>)>,
    /// References that MUST fail with exactly this error.
    pub refused: Vec<(CredentialSource, CredentialError)>,
}

/// Runs every credential check, each on a fresh source from `make`, against
/// the references of `fixture` and references no harness can make readable:
/// relative and empty paths ([`CredentialError::UnsafePath`]) and
/// environment variable names that cannot exist, which MUST be
/// [`CredentialError::Missing`] and MUST NOT panic.
///
/// # Panics
/// When any check fails, naming every failing check.
pub fn run<C: Credentials>(mut make: impl FnMut() -> C, fixture: &CredentialFixture) {
    let checks: Vec<Check<'_, Subject<'_, C>>> = vec![
        Check::new("fixture_is_meaningful", fixture_is_meaningful::<C>),
        Check::new("readable_references", readable_references::<C>),
        Check::new("readable_twice", readable_twice::<C>),
        Check::new("refused_references", refused_references::<C>),
        Check::new("relative_paths_are_unsafe", relative_paths_are_unsafe::<C>),
        Check::new(
            "impossible_variables_are_missing",
            impossible_variables_are_missing::<C>,
        ),
    ];
    run_checks("credentials", checks, || Subject {
        source: make(),
        fixture,
    });
}

/// A source under test and the fixture it was prepared for.
struct Subject<'f, C> {
    source: C,
    fixture: &'f CredentialFixture,
}

fn fixture_is_meaningful<C: Credentials>(s: &mut Subject<'_, C>) {
    check(
        "the fixture has a readable reference",
        !s.fixture.readable.is_empty(),
    );
    check(
        "the fixture has a refused reference",
        !s.fixture.refused.is_empty(),
    );
}

fn readable_references<C: Credentials>(s: &mut Subject<'_, C>) {
    for (source, content) in &s.fixture.readable {
        check_eq(
            &format!("read({source:?})"),
            s.source.read(source),
            Ok::<_, CredentialError>(content.clone()),
        );
    }
}

fn readable_twice<C: Credentials>(s: &mut Subject<'_, C>) {
    for (source, content) in &s.fixture.readable {
        let _first = s.source.read(source);
        check_eq(
            &format!("a second read({source:?})"),
            s.source.read(source),
            Ok::<_, CredentialError>(content.clone()),
        );
    }
}

fn refused_references<C: Credentials>(s: &mut Subject<'_, C>) {
    for (source, error) in &s.fixture.refused {
        check_eq(
            &format!("read({source:?})"),
            s.source.read(source),
            Err::<Vec<u8>, _>(*error),
        );
    }
}

fn relative_paths_are_unsafe<C: Credentials>(s: &mut Subject<'_, C>) {
    for path in ["", "token", "./token", "secrets/../token"] {
        let source = CredentialSource::File(path.to_owned());
        check_eq(
            &format!("read({source:?})"),
            s.source.read(&source),
            Err::<Vec<u8>, _>(CredentialError::UnsafePath),
        );
    }
}

fn impossible_variables_are_missing<C: Credentials>(s: &mut Subject<'_, C>) {
    // `std::env::var_os` may panic on these names; the adapter must not.
    for name in ["", "A=B", "A\0B", "MOSAIC_CONFORMANCE_NEVER_SET_6F1D0C2A"] {
        let source = CredentialSource::Env(name.to_owned());
        check_eq(
            &format!("read({source:?})"),
            s.source.read(&source),
            Err::<Vec<u8>, _>(CredentialError::Missing),
        );
    }
}
