//! Service credentials against real files: the real credential
//! source ([`FileEnvCredentials`]) with one test per refusal, the token
//! syntax, and the [`CredentialStore`] (load, status, use).
//!
//! Every test works in its own private temp folder (0700). The foreign-owner
//! case asks the source for files of another uid, so it needs no second
//! user and no root.

use std::os::unix::fs::{symlink, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use mosaic_adapters::config::business_from_json;
use mosaic_adapters::credentials::{
    CredentialState, CredentialStore, FileEnvCredentials, Service, Token, TokenError,
    EXPIRING_WITHIN_DAYS,
};
use mosaic_domain::business::{CredentialSource, RoleCredentials, VikunjaCredential};
use mosaic_domain::{Business, BusinessId, Date, Refusal, Timestamp};
use mosaic_ports::conformance::credentials::{run, CredentialFixture};
use mosaic_ports::fakes::FakeCredentials;
use mosaic_ports::{CredentialError, Credentials};

const TOKEN: &[u8] = b"gitea-0123456789abcdefXYZ~._";
const TOKEN_LF: &[u8] = b"gitea-0123456789abcdefXYZ~._\n";
const OTHER: &[u8] = b"vikunja_ABCDEFGHIJKLMNOP.0123";

// --- Harness ----------------------------------------------------------------

/// A private temp folder with a secrets folder, a data root and a repo root.
struct Layout {
    dir: tempfile::TempDir,
}

impl Layout {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("mosaic-credentials-")
            .tempdir()
            .expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        for sub in ["secrets", "data", "repo"] {
            std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
        }
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn source(&self) -> FileEnvCredentials {
        FileEnvCredentials::new(vec![self.path("data"), self.path("repo")])
    }

    /// Writes `content` at `rel` with `mode` (set after the umask).
    fn write(&self, rel: &str, content: &[u8], mode: u32) -> String {
        let path = self.path(rel);
        write_file(&path, content, mode);
        path.to_str().expect("utf-8").to_owned()
    }
}

fn write_file(path: &Path, content: &[u8], mode: u32) {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, content))
        .expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn file(path: &str) -> CredentialSource {
    CredentialSource::File(path.to_owned())
}

fn read(source: &FileEnvCredentials, path: &str) -> Result<Vec<u8>, CredentialError> {
    source.read(&file(path))
}

fn t(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("timestamp")
}

fn d(text: &str) -> Date {
    Date::parse(text).expect("date")
}

// --- The real source: one test per refusal ------------------------------------

#[test]
fn a_private_file_outside_every_root_reads_exactly() {
    let l = Layout::new();
    let p = l.write("secrets/gitea", TOKEN_LF, 0o600);
    assert_eq!(read(&l.source(), &p), Ok(TOKEN_LF.to_vec()));
}

#[test]
fn a_symlink_is_unsafe_even_to_a_good_file() {
    let l = Layout::new();
    let target = l.write("secrets/gitea", TOKEN, 0o600);
    symlink(&target, l.path("secrets/link")).expect("symlink");
    let link = l.path("secrets/link");
    assert_eq!(
        read(&l.source(), link.to_str().expect("utf-8")),
        Err(CredentialError::UnsafePath)
    );
}

#[test]
fn mode_0640_and_other_modes_are_unsafe_permissions() {
    let l = Layout::new();
    for (i, mode) in [0o640, 0o644, 0o400, 0o700, 0o4600, 0o604]
        .into_iter()
        .enumerate()
    {
        let p = l.write(&format!("secrets/t{i}"), TOKEN, mode);
        assert_eq!(
            read(&l.source(), &p),
            Err(CredentialError::UnsafePermissions),
            "{mode:o}"
        );
    }
}

#[test]
fn a_foreign_owner_is_unsafe_permissions() {
    let l = Layout::new();
    let p = l.write("secrets/gitea", TOKEN, 0o600);
    let me = rustix::process::geteuid().as_raw();
    // The file is this process's; to a source whose files must be another
    // uid's, it is a foreign owner's, with no second user needed.
    let other = if me == 65534 { 65533 } else { 65534 };
    assert_eq!(
        l.source().owned_by(other).read(&file(&p)),
        Err(CredentialError::UnsafePermissions)
    );
    assert_eq!(
        l.source().owned_by(me).read(&file(&p)).as_deref(),
        Ok(TOKEN),
        "the same file, to its owner"
    );
}

#[test]
fn more_than_16_kib_is_too_large_and_16_kib_is_not() {
    let l = Layout::new();
    let exact = l.write("secrets/exact", &vec![b'a'; 16 * 1024], 0o600);
    assert_eq!(read(&l.source(), &exact).map(|v| v.len()), Ok(16 * 1024));
    let over = l.write("secrets/over", &vec![b'a'; 16 * 1024 + 1], 0o600);
    assert_eq!(read(&l.source(), &over), Err(CredentialError::TooLarge));
}

#[test]
fn inside_the_data_root_is_unsafe() {
    let l = Layout::new();
    let p = l.write("data/gitea", TOKEN, 0o600);
    assert_eq!(read(&l.source(), &p), Err(CredentialError::UnsafePath));
    std::fs::create_dir(l.path("data/deep")).expect("mkdir");
    let deep = l.write("data/deep/gitea", TOKEN, 0o600);
    assert_eq!(read(&l.source(), &deep), Err(CredentialError::UnsafePath));
}

#[test]
fn inside_a_repo_root_is_unsafe_also_through_a_symlinked_folder_or_dot_dot() {
    let l = Layout::new();
    let p = l.write("repo/gitea", TOKEN, 0o600);
    assert_eq!(read(&l.source(), &p), Err(CredentialError::UnsafePath));
    // A folder symlink into the repo does not hide it.
    symlink(l.path("repo"), l.path("secrets/into-repo")).expect("symlink");
    let via = l.path("secrets/into-repo/gitea");
    assert_eq!(
        read(&l.source(), via.to_str().expect("utf-8")),
        Err(CredentialError::UnsafePath)
    );
    let dotted = l.path("secrets/../repo/gitea");
    assert_eq!(
        read(&l.source(), dotted.to_str().expect("utf-8")),
        Err(CredentialError::UnsafePath)
    );
}

#[test]
fn a_root_that_cannot_be_canonicalised_protects_what_it_names() {
    let l = Layout::new();
    let p = l.write("repo/gitea", TOKEN, 0o600);
    // `missing/..` cannot be canonicalised; lexically it is the repo.
    let dotted = FileEnvCredentials::new(vec![l.path("repo/missing/..")]);
    assert_eq!(read(&dotted, &p), Err(CredentialError::UnsafePath));
    // A root that does not exist yet still protects through a symlinked parent.
    symlink(l.path("repo"), l.path("secrets/into-repo")).expect("symlink");
    let future = FileEnvCredentials::new(vec![l.path("secrets/into-repo/./later/../")]);
    assert_eq!(read(&future, &p), Err(CredentialError::UnsafePath));
    // And a missing root protects nothing else.
    let elsewhere = FileEnvCredentials::new(vec![l.path("data/missing/../../gone")]);
    assert_eq!(read(&elsewhere, &p), Ok(TOKEN.to_vec()));
}

#[test]
fn roots_compare_by_components_not_string_prefixes() {
    let l = Layout::new();
    std::fs::create_dir(l.path("repo-secrets")).expect("mkdir");
    let p = l.write("repo-secrets/gitea", TOKEN, 0o600);
    assert_eq!(read(&l.source(), &p), Ok(TOKEN.to_vec()));
}

#[test]
fn a_directory_and_a_fifo_are_not_regular_files() {
    let l = Layout::new();
    std::fs::create_dir(l.path("secrets/dir")).expect("mkdir");
    std::fs::set_permissions(
        l.path("secrets/dir"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    let dir = l.path("secrets/dir");
    assert_eq!(
        read(&l.source(), dir.to_str().expect("utf-8")),
        Err(CredentialError::UnsafePath)
    );
    let fifo = l.path("secrets/fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert_eq!(
        read(&l.source(), fifo.to_str().expect("utf-8")),
        Err(CredentialError::UnsafePath)
    );
}

#[test]
fn a_second_hard_link_is_unsafe() {
    let l = Layout::new();
    let p = l.write("secrets/gitea", TOKEN, 0o600);
    std::fs::hard_link(&p, l.path("repo/copy")).expect("link");
    assert_eq!(read(&l.source(), &p), Err(CredentialError::UnsafePath));
}

#[test]
fn a_file_swapped_between_check_and_open_is_unsafe() {
    let l = Layout::new();
    let p = l.write("secrets/gitea", TOKEN, 0o600);
    let source = l.source();
    let checked = source.check(&p).expect("check");
    // Replace the checked file by another private file, same path.
    let other = l.write("secrets/other", OTHER, 0o600);
    std::fs::rename(&other, &p).expect("rename");
    assert_eq!(checked.open(), Err(CredentialError::UnsafePath));

    // A symlink swapped in is refused by O_NOFOLLOW.
    let q = l.write("secrets/vikunja", TOKEN, 0o600);
    let checked = source.check(&q).expect("check");
    std::fs::remove_file(&q).expect("rm");
    symlink(&p, &q).expect("symlink");
    assert_eq!(checked.open(), Err(CredentialError::UnsafePath));

    // Without a swap, check then open reads.
    let r = l.write("secrets/plain", TOKEN, 0o600);
    assert_eq!(source.check(&r).expect("check").open(), Ok(TOKEN.to_vec()));
}

#[test]
fn missing_files_and_relative_paths() {
    let l = Layout::new();
    let p = l.path("secrets/none");
    assert_eq!(
        read(&l.source(), p.to_str().expect("utf-8")),
        Err(CredentialError::Missing)
    );
    assert_eq!(
        read(&l.source(), "secrets/gitea"),
        Err(CredentialError::UnsafePath)
    );
}

#[test]
fn the_conformance_suite_passes_against_the_real_source() {
    let l = Layout::new();
    let var = format!("MOSAIC_CREDENTIALS_TEST_{}", std::process::id());
    std::env::set_var(&var, "env-token-0123456789abcdef");
    let good = l.write("secrets/gitea", TOKEN_LF, 0o600);
    let loose = l.write("secrets/loose", TOKEN, 0o644);
    let link = l.path("secrets/link");
    symlink(&good, &link).expect("symlink");
    let exact = l.write("secrets/exact", &vec![b'x'; 16 * 1024], 0o600);
    let over = l.write("secrets/over", &vec![b'x'; 16 * 1024 + 1], 0o600);
    let in_data = l.write("data/gitea", TOKEN, 0o600);
    let in_repo = l.write("repo/gitea", TOKEN, 0o600);
    let fixture = CredentialFixture {
        readable: vec![
            (file(&good), TOKEN_LF.to_vec()),
            (file(&exact), vec![b'x'; 16 * 1024]),
            (
                CredentialSource::Env(var.clone()),
                b"env-token-0123456789abcdef".to_vec(),
            ),
        ],
        refused: vec![
            (file(&loose), CredentialError::UnsafePermissions),
            (
                file(link.to_str().expect("utf-8")),
                CredentialError::UnsafePath,
            ),
            (file(&over), CredentialError::TooLarge),
            (file(&in_data), CredentialError::UnsafePath),
            (file(&in_repo), CredentialError::UnsafePath),
        ],
    };
    run(|| l.source(), &fixture);
    std::env::remove_var(&var);
}

// --- Token syntax -------------------------------------------------------------

#[test]
fn token_syntax() {
    assert!(Token::parse(TOKEN).is_ok());
    assert!(Token::parse(TOKEN_LF).is_ok());
    assert!(Token::parse(b"0123456789abcdef").is_ok());
    assert!(Token::parse(b"AZaz09._~-AZaz09._~-").is_ok());
    Token::parse(TOKEN_LF)
        .expect("token")
        .with(|bytes| assert_eq!(bytes, TOKEN));
    for bad in [
        &b"0123456789abcde/"[..],
        b"0123456789abcdef ",
        b"0123456789 abcdef",
        b"0123456789abcdef\r\n",
        b"0123456789+bcdef",
        b"\n0123456789abcdef",
        "0123456789abcdé".as_bytes(),
        b"0123456789abcdef\0",
    ] {
        assert_eq!(
            Token::parse(bad).map(|_| ()),
            Err(TokenError::BadAlphabet),
            "{bad:?}"
        );
    }
    assert_eq!(
        Token::parse(b"0123456789abcde").map(|_| ()),
        Err(TokenError::TooShort)
    );
    assert_eq!(
        Token::parse(b"0123456789abcde\n").map(|_| ()),
        Err(TokenError::TooShort)
    );
    assert_eq!(Token::parse(b"").map(|_| ()), Err(TokenError::TooShort));
    assert_eq!(
        Token::parse(b"0123456789abcdef\n\n").map(|_| ()),
        Err(TokenError::TrailingNewlines)
    );
}

#[test]
fn a_bad_date_is_refused_at_config_level() {
    for bad in [
        "2027-02-29",
        "2027-1-31",
        "27-01-31",
        "2027-01-31T00:00",
        "2027/01/31",
    ] {
        assert_eq!(Date::parse(bad), Err(Refusal::BadDate), "{bad}");
        let json = business_json(&format!(
            r#"{{"gitea":{{"file":"/secrets/g","rotateBy":"{bad}"}}}}"#
        ));
        assert_eq!(
            business_from_json(&json).map_err(Refusal::from).err(),
            Some(Refusal::BadDate)
        );
        let json = business_json(&format!(r#"{{"vikunja":{{"env":"V","expires":"{bad}"}}}}"#));
        assert_eq!(
            business_from_json(&json).map_err(Refusal::from).err(),
            Some(Refusal::BadDate)
        );
    }
}

// --- The store ----------------------------------------------------------------

fn business_json(credentials: &str) -> String {
    format!(
        r#"{{"id":"acme","human":"alice","arbiters":{{"technical":"dev","delivery":"dev"}},
            "roles":{{"dev":{{"authority":{{"withinRole":[],"crossRole":[]}},
                              "credentials":{credentials}}}}}}}"#
    )
}

fn acme(gitea: Option<Date>, vikunja: Option<Date>) -> Business {
    let mut creds = Vec::new();
    if let Some(date) = gitea {
        creds.push(format!(
            r#""gitea":{{"file":"/secrets/gitea","rotateBy":"{date}"}}"#
        ));
    }
    if let Some(date) = vikunja {
        creds.push(format!(
            r#""vikunja":{{"env":"VIKUNJA","expires":"{date}"}}"#
        ));
    }
    business_from_json(&business_json(&format!("{{{}}}", creds.join(",")))).expect("business")
}

fn fake() -> FakeCredentials {
    FakeCredentials::new()
        .with_file("/secrets/gitea", TOKEN_LF.to_vec())
        .with_env("VIKUNJA", OTHER.to_vec())
}

fn acme_id() -> BusinessId {
    BusinessId::parse("acme").expect("id")
}

fn sync_refs() -> Vec<(BusinessId, RoleCredentials)> {
    vec![(
        acme_id(),
        RoleCredentials {
            gitea: None,
            vikunja: Some(VikunjaCredential {
                source: CredentialSource::Env("SYNC".into()),
                expires: None,
            }),
        },
    )]
}

#[test]
fn vikunja_refuses_from_midnight_utc_of_its_expiry_date() {
    let b = acme(None, Some(d("2027-01-31")));
    let store = CredentialStore::load(&[b], &[], &fake()).expect("load");
    let before = t("2027-01-30T23:59:59.999Z");
    let at = t("2027-01-31T00:00:00.000Z");
    let used = store.use_token("acme/dev", Service::Vikunja, before, |bytes| {
        Ok::<_, ()>(bytes == OTHER)
    });
    assert_eq!(used, Ok(true));
    let mut called = false;
    let refused = store.use_token("acme/dev", Service::Vikunja, at, |_| {
        called = true;
        Ok::<_, ()>(())
    });
    assert_eq!(refused, Err(Refusal::CredentialExpired));
    assert!(!called, "the callback must not run for an expired token");
    assert_eq!(
        store.status(before)[0].state,
        CredentialState::Expiring { days: 1 }
    );
    assert_eq!(store.status(at)[0].state, CredentialState::Expired);
}

#[test]
fn expiring_starts_fourteen_days_before_the_expiry_date() {
    let b = acme(None, Some(d("2027-01-31")));
    let store = CredentialStore::load(&[b], &[], &fake()).expect("load");
    assert_eq!(EXPIRING_WITHIN_DAYS, 14);
    assert_eq!(
        store.status(t("2027-01-16T23:59:59.999Z"))[0].state,
        CredentialState::Valid
    );
    assert_eq!(
        store.status(t("2027-01-17T00:00:00.000Z"))[0].state,
        CredentialState::Expiring { days: 14 }
    );
}

#[test]
fn a_due_gitea_rotation_is_a_warning_not_an_expiry() {
    let b = acme(Some(d("2027-01-31")), None);
    let store = CredentialStore::load(&[b], &[], &fake()).expect("load");
    let before = t("2027-01-30T23:59:59.999Z");
    let due = t("2027-06-01T00:00:00.000Z");
    assert_eq!(store.status(before)[0].state, CredentialState::Valid);
    let status = store.status(due);
    assert_eq!(status[0].state, CredentialState::RotationDue);
    assert_eq!(status[0].state.as_str(), "rotation-due");
    assert_eq!(
        (status[0].key.as_str(), status[0].service),
        ("acme/dev", Service::Gitea)
    );
    let used = store.use_token("acme/dev", Service::Gitea, due, |bytes| {
        Ok::<_, ()>(bytes == TOKEN)
    });
    assert_eq!(used, Ok(true));
}

#[test]
fn the_sync_identity_is_keyed_business_at_sync() {
    let b = acme(Some(d("2027-01-31")), None);
    let creds = fake().with_env("SYNC", b"sync-0123456789abcdef".to_vec());
    let store =
        CredentialStore::load(std::slice::from_ref(&b), &sync_refs(), &creds).expect("load");
    let now = t("2027-01-01T00:00:00.000Z");
    let keys: Vec<_> = store
        .status(now)
        .into_iter()
        .map(|s| (s.key, s.service))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("acme/@sync".to_owned(), Service::Vikunja),
            ("acme/dev".to_owned(), Service::Gitea)
        ]
    );
    assert_eq!(
        store.use_token("acme/@sync", Service::Vikunja, now, |b| Ok::<_, ()>(
            b.len()
        )),
        Ok(21)
    );
    // Unknown business for @sync, and a repeated one.
    let other = vec![(
        BusinessId::parse("other").expect("id"),
        RoleCredentials::default(),
    )];
    assert_eq!(
        CredentialStore::load(std::slice::from_ref(&b), &other, &creds).err(),
        Some((Refusal::BadConfig, "other/@sync".to_owned()))
    );
    let twice = [sync_refs(), sync_refs()].concat();
    assert_eq!(
        CredentialStore::load(&[b], &twice, &creds).err(),
        Some((Refusal::BadConfig, "acme/@sync".to_owned()))
    );
}

#[test]
fn unknown_credentials_and_callback_errors() {
    let b = acme(Some(d("2027-01-31")), None);
    let store = CredentialStore::load(&[b], &[], &fake()).expect("load");
    let now = t("2027-01-01T00:00:00.000Z");
    assert_eq!(
        store.use_token("acme/dev", Service::Vikunja, now, |_| Ok::<_, ()>(())),
        Err(Refusal::UnknownReference)
    );
    assert_eq!(
        store.use_token("acme/ops", Service::Gitea, now, |_| Ok::<_, ()>(())),
        Err(Refusal::UnknownReference)
    );
    let failed = store.use_token("acme/dev", Service::Gitea, now, |bytes| {
        Err::<(), String>(format!("upstream said {}", String::from_utf8_lossy(bytes)))
    });
    assert_eq!(failed, Err(Refusal::ServiceFailed));
}

#[test]
fn returned_values_with_a_known_token_are_refused() {
    let b = acme(Some(d("2027-01-31")), Some(d("2027-12-31")));
    let store = CredentialStore::load(&[b], &[], &fake()).expect("load");
    let now = t("2027-01-01T00:00:00.000Z");
    let leaked = store.use_token_checked("acme/dev", Service::Gitea, now, |bytes| {
        Ok::<_, ()>(format!(
            "Authorization: token {}",
            String::from_utf8_lossy(bytes)
        ))
    });
    assert_eq!(leaked, Err(Refusal::CredentialLeak));
    // Another service's token is found too.
    let crossed = store.use_token_checked("acme/dev", Service::Gitea, now, |_| {
        Ok::<_, ()>(OTHER.to_vec())
    });
    assert_eq!(crossed, Err(Refusal::CredentialLeak));
    let clean = store.use_token_checked("acme/dev", Service::Gitea, now, |_| {
        Ok::<_, ()>(b"{\"ok\":true}".to_vec())
    });
    assert_eq!(clean, Ok(b"{\"ok\":true}".to_vec()));
    assert!(store.contains_known_token(TOKEN));
    assert!(store.contains_known_token(TOKEN_LF));
    assert!(store.contains_known_token(b"{\"k\":\"gitea-0123456789abcdefXYZ~._\"}"));
    assert!(!store.contains_known_token(&TOKEN[..TOKEN.len() - 1]));
    assert!(!store.contains_known_token(b""));
}

#[test]
fn boot_refuses_a_bad_reference_naming_it_never_its_content() {
    let b = acme(Some(d("2027-01-31")), Some(d("2027-12-31")));
    let cases: Vec<(FakeCredentials, Refusal, &str)> = vec![
        (
            fake().with_file("/secrets/gitea", b"0123456789abcdef\n\n".to_vec()),
            Refusal::BadConfig,
            "acme/dev gitea",
        ),
        (
            fake().with_env("VIKUNJA", b"short-token".to_vec()),
            Refusal::BadConfig,
            "acme/dev vikunja",
        ),
        (
            fake().with_env("VIKUNJA", b"secret token with spaces".to_vec()),
            Refusal::BadConfig,
            "acme/dev vikunja",
        ),
        (
            fake().with_error(file("/secrets/gitea"), CredentialError::UnsafePermissions),
            Refusal::UnsafePath,
            "acme/dev gitea",
        ),
        (
            FakeCredentials::new().with_file("/secrets/gitea", TOKEN.to_vec()),
            Refusal::BadConfig,
            "acme/dev vikunja",
        ),
    ];
    for (creds, code, name) in cases {
        let err =
            CredentialStore::load(std::slice::from_ref(&b), &[], &creds).expect_err("refused");
        assert_eq!(err, (code, name.to_owned()));
        assert!(!err.1.contains("secret") && !err.1.contains("0123"));
    }
}

#[test]
fn boot_through_the_real_source_refuses_an_unsafe_file() {
    let l = Layout::new();
    let p = l.write("repo/gitea", TOKEN, 0o600);
    let b = business_from_json(&business_json(&format!(r#"{{"gitea":{{"file":"{p}"}}}}"#)))
        .expect("business");
    assert_eq!(
        CredentialStore::load(&[b], &[], &l.source()).err(),
        Some((Refusal::UnsafePath, "acme/dev gitea".to_owned()))
    );
    let q = l.write("secrets/gitea", TOKEN, 0o600);
    let b = business_from_json(&business_json(&format!(r#"{{"gitea":{{"file":"{q}"}}}}"#)))
        .expect("business");
    let store = CredentialStore::load(&[b], &[], &l.source()).expect("load");
    assert_eq!(store.len(), 1);
}

#[test]
fn tokens_never_appear_in_debug_display_or_error_text() {
    let token = Token::parse(TOKEN_LF).expect("token");
    let shown = format!("{token:?} {token} {token:#?}");
    assert!(!shown.contains("gitea-0123"), "{shown}");

    let b = acme(Some(d("2027-01-31")), Some(d("2027-01-31")));
    let store = CredentialStore::load(&[b], &[], &fake()).expect("load");
    let now = t("2027-02-01T00:00:00.000Z");
    let mut text = format!("{store:?} {store:#?} {:?}", store.status(now));
    let err = store
        .use_token("acme/dev", Service::Gitea, now, |bytes| {
            Err::<(), _>(bytes.to_vec())
        })
        .expect_err("failed");
    text.push_str(&format!("{err:?} {err}"));
    let expired = store
        .use_token("acme/dev", Service::Vikunja, now, |_| Ok::<_, ()>(()))
        .expect_err("expired");
    text.push_str(&format!("{expired:?} {expired}"));
    for e in [
        CredentialError::Missing,
        CredentialError::UnsafePath,
        CredentialError::UnsafePermissions,
        CredentialError::TooLarge,
        CredentialError::Unreadable,
    ] {
        text.push_str(&format!("{e:?} {e}"));
    }
    for e in [
        TokenError::BadAlphabet,
        TokenError::TooShort,
        TokenError::TrailingNewlines,
    ] {
        text.push_str(&format!("{e:?} {e}"));
    }
    let bad = CredentialStore::load(
        &[acme(None, Some(d("2027-01-31")))],
        &[],
        &fake().with_env("VIKUNJA", b"vikunja_ABCDEFGHIJKLMNOP.0123\n\n".to_vec()),
    )
    .expect_err("bad");
    text.push_str(&format!("{bad:?}"));
    for secret in [TOKEN, OTHER] {
        let needle = String::from_utf8_lossy(secret).into_owned();
        assert!(!text.contains(&needle), "{text}");
        assert!(!text.contains(&needle[..12]), "{text}");
    }
}

#[test]
fn gitea_and_vikunja_references_are_both_optional() {
    let b = acme(None, None);
    let store = CredentialStore::load(&[b], &[], &FakeCredentials::new()).expect("load");
    assert!(store.is_empty());
}
