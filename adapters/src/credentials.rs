//! Service credentials that stay inside the broker.
//!
//! Three parts, each usable alone:
//!
//! - [`FileEnvCredentials`]: the real [`Credentials`] port. It reads a file
//!   reference only after proving it safe (absolute; regular, not a symlink;
//!   owned by the broker's effective uid; mode exactly 0600; one link; at
//!   most 16 KiB; outside every protected root) and opens it with
//!   `O_NOFOLLOW`, refusing a file whose device and inode differ from the
//!   ones checked. Environment references read the broker's own variables.
//! - [`Token`]: the token syntax (`[A-Za-z0-9._~-]`, at least 16 characters,
//!   at most one terminal LF) as a type whose `Debug`/`Display` never show
//!   the value.
//! - [`CredentialStore`]: every token of every role instance (and of the
//!   read-only tracker identity `business/@sync`), loaded once at boot and
//!   kept only in memory. Use goes through a callback
//!   ([`CredentialStore::use_token`]); status is metadata only
//!   ([`CredentialStore::status`]).
//!
//! Nothing read is ever logged or put into an error: errors are
//! [`CredentialError`] values or [`Refusal`] codes, and boot failures name
//! the reference (`"acme/dev gitea"`), never its content.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use mosaic_domain::business::{CredentialSource, RoleCredentials};
use mosaic_domain::{Business, BusinessId, Date, Refusal, Timestamp};
use mosaic_ports::{CredentialError, Credentials};

/// The largest credential read, in bytes.
pub const MAX_CREDENTIAL_LEN: usize = 16 * 1024;

/// The fewest characters a token has (the terminal LF not counted).
pub const MIN_TOKEN_LEN: usize = 16;

/// A Vikunja token whose expiry is at most this many days away (counted in
/// UTC calendar days from today) is reported as
/// [`CredentialState::Expiring`].
pub const EXPIRING_WITHIN_DAYS: i64 = 14;

/// The instance part of the read-only tracker identity's key,
/// `business/@sync`.
pub const SYNC_INSTANCE: &str = "@sync";

const DAY_MS: i64 = 86_400_000;

// ---------------------------------------------------------------------------
// The real port
// ---------------------------------------------------------------------------

/// The real [`Credentials`] source: token files on the local file system
/// and environment variables of the broker process.
///
/// `protected` are the roots no token file may be inside: the broker's own
/// repository root, every declared project root, every `repoRoots` entry
/// and the data root. Containment is decided on canonical paths (symlinks
/// resolved) by whole components, so `/src/repo-secrets/t` is outside
/// `/src/repo`, and `/home/a/link/t` is inside `/src/repo` when `link`
/// points there. A root that cannot be canonicalised (it, or part of it,
/// does not exist) is first normalised lexically (`.` and `..` resolved),
/// then its longest existing ancestor is canonicalised: `<repo>/missing/..`
/// protects `<repo>`.
#[derive(Debug, Clone)]
pub struct FileEnvCredentials {
    protected: Vec<PathBuf>,
    /// The uid every credential file must belong to.
    owner: u32,
}

/// A file reference that passed every check on its path, remembered by
/// device and inode until [`CheckedFile::open`] reads it.
///
/// [`FileEnvCredentials::read`] is [`FileEnvCredentials::check`] followed
/// by [`CheckedFile::open`]; the two are separate so the window between
/// them (where a swap would happen) can be exercised deterministically.
#[derive(Debug)]
pub struct CheckedFile<'a> {
    source: &'a FileEnvCredentials,
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Default for FileEnvCredentials {
    /// A source with no protected roots, for this process's own files.
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl FileEnvCredentials {
    /// A source whose token files must lie outside every root in
    /// `protected`.
    pub fn new(protected: Vec<PathBuf>) -> Self {
        Self {
            protected,
            owner: rustix::process::geteuid().as_raw(),
        }
    }

    /// The same source, whose files must belong to `uid` instead of this
    /// process's effective uid (a broker started for another user's files;
    /// a test of the owner rule that needs no second user).
    #[must_use]
    pub fn owned_by(mut self, uid: u32) -> Self {
        self.owner = uid;
        self
    }

    /// The first step of reading a file reference: checks `path` without
    /// opening it.
    ///
    /// # Errors
    /// - [`CredentialError::UnsafePath`]: not absolute, a symlink, not a
    ///   regular file, more than one hard link, or inside a protected root;
    /// - [`CredentialError::UnsafePermissions`]: not owned by the effective
    ///   uid (or the one [`FileEnvCredentials::owned_by`] names), or a mode
    ///   other than exactly 0600;
    /// - [`CredentialError::TooLarge`]: larger than 16 KiB;
    /// - [`CredentialError::Missing`]: nothing at `path`;
    /// - [`CredentialError::Unreadable`]: the path cannot be examined.
    pub fn check(&self, path: &str) -> Result<CheckedFile<'_>, CredentialError> {
        let path = Path::new(path);
        if !path.is_absolute() {
            return Err(CredentialError::UnsafePath);
        }
        let meta = std::fs::symlink_metadata(path).map_err(|e| io_error(&e))?;
        check_metadata(&meta, self.owner)?;
        let canonical = std::fs::canonicalize(path).map_err(|e| io_error(&e))?;
        if self.is_protected(&canonical) {
            return Err(CredentialError::UnsafePath);
        }
        Ok(CheckedFile {
            source: self,
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    fn is_protected(&self, canonical: &Path) -> bool {
        self.protected
            .iter()
            .any(|root| canonical.starts_with(canonical_root(root)))
    }
}

/// `root` as the kernel would resolve it, or as close as it can be when
/// part of it does not exist: lexically normalised, with its longest
/// existing ancestor canonicalised and the rest appended.
fn canonical_root(root: &Path) -> PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(root) {
        return canonical;
    }
    let lexical = lexically_normal(root);
    let mut rest = Vec::new();
    let mut base = lexical.as_path();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(base) {
            return rest.iter().rev().fold(canonical, |path, c| path.join(c));
        }
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                base = parent;
            }
            (Some(_) | None, None) | (None, Some(_)) => return lexical,
        }
    }
}

/// `.` dropped and each `..` taking away the component before it (never
/// above the root), without looking at the file system.
fn lexically_normal(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => {
                normal.push(component);
            }
        }
    }
    normal
}

impl CheckedFile<'_> {
    /// The second step: opens the checked path with `O_NOFOLLOW` (and
    /// `O_NONBLOCK`, so a FIFO swapped in cannot stall the broker), refuses
    /// a file that is not the one checked, re-checks the open file, and
    /// reads it.
    ///
    /// # Errors
    /// [`CredentialError::UnsafePath`] when the path now names another file
    /// (different device or inode, or a symlink) or the open file resolves
    /// into a protected root; otherwise as [`FileEnvCredentials::check`].
    pub fn open(self) -> Result<Vec<u8>, CredentialError> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&self.path)
            .map_err(|e| match e.raw_os_error() {
                // A symlink put in place after the check.
                Some(libc::ELOOP) => CredentialError::UnsafePath,
                Some(_) | None => io_error(&e),
            })?;
        let meta = file.metadata().map_err(|_| CredentialError::Unreadable)?;
        if meta.dev() != self.dev || meta.ino() != self.ino {
            return Err(CredentialError::UnsafePath);
        }
        check_metadata(&meta, self.source.owner)?;
        if let Some(opened) = opened_path(&file) {
            if self.source.is_protected(&opened) {
                return Err(CredentialError::UnsafePath);
            }
        }
        read_bounded(file)
    }
}

impl Credentials for FileEnvCredentials {
    fn read(&self, source: &CredentialSource) -> Result<Vec<u8>, CredentialError> {
        match source {
            CredentialSource::File(path) => self.check(path)?.open(),
            CredentialSource::Env(name) => read_env(name),
        }
    }
}

/// The checks on a file's metadata that hold both before and after open.
fn check_metadata(meta: &Metadata, owner: u32) -> Result<(), CredentialError> {
    if !meta.file_type().is_file() || meta.nlink() != 1 {
        return Err(CredentialError::UnsafePath);
    }
    if meta.uid() != owner || meta.mode() & 0o7777 != 0o600 {
        return Err(CredentialError::UnsafePermissions);
    }
    if meta.len() > MAX_CREDENTIAL_LEN as u64 {
        return Err(CredentialError::TooLarge);
    }
    Ok(())
}

/// Where the kernel says an open file is, when `/proc` can tell.
fn opened_path(file: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

/// Reads at most 16 KiB, refusing more (the file may have grown since its
/// `stat`).
fn read_bounded(file: File) -> Result<Vec<u8>, CredentialError> {
    let mut content = Vec::with_capacity(MAX_CREDENTIAL_LEN + 1);
    file.take(MAX_CREDENTIAL_LEN as u64 + 1)
        .read_to_end(&mut content)
        .map_err(|_| CredentialError::Unreadable)?;
    if content.len() > MAX_CREDENTIAL_LEN {
        wipe(&mut content);
        return Err(CredentialError::TooLarge);
    }
    Ok(content)
}

/// Reads an environment variable of the broker. A name that no variable can
/// have (empty, or with `=` or NUL) is [`CredentialError::Missing`], never a
/// panic.
fn read_env(name: &str) -> Result<Vec<u8>, CredentialError> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(CredentialError::Missing);
    }
    let value = std::env::var_os(name).ok_or(CredentialError::Missing)?;
    let bytes = value.as_bytes();
    if bytes.len() > MAX_CREDENTIAL_LEN {
        return Err(CredentialError::TooLarge);
    }
    Ok(bytes.to_vec())
}

/// Maps an OS error without keeping its text.
fn io_error(e: &io::Error) -> CredentialError {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR) => CredentialError::Missing,
        Some(libc::ELOOP) => CredentialError::UnsafePath,
        Some(_) | None => CredentialError::Unreadable,
    }
}

/// Overwrites secret bytes before their memory is released (best effort).
fn wipe(bytes: &mut [u8]) {
    for b in bytes.iter_mut() {
        *b = 0;
    }
    std::hint::black_box(bytes);
}

// ---------------------------------------------------------------------------
// Token syntax
// ---------------------------------------------------------------------------

/// Why content is not a token. Never carries the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// A byte outside `[A-Za-z0-9._~-]` (a second terminal LF is
    /// [`TokenError::TrailingNewlines`]).
    #[error("token has a character outside [A-Za-z0-9._~-]")]
    BadAlphabet,
    /// Fewer than 16 characters.
    #[error("token shorter than 16 characters")]
    TooShort,
    /// More than one terminal LF.
    #[error("token ends in more than one newline")]
    TrailingNewlines,
}

/// A service token: only `[A-Za-z0-9._~-]`, at least 16 characters. Held
/// without its terminal LF.
///
/// `Debug` and `Display` never show it; the bytes are reachable only
/// through [`Token::with`]. Not `Clone`; the memory is overwritten on drop.
pub struct Token(Box<[u8]>);

impl Token {
    /// Parses file or variable content: the token, optionally followed by
    /// one LF.
    ///
    /// # Errors
    /// See [`TokenError`]. The checks look at every byte, so the error
    /// does not depend on where a bad byte is.
    pub fn parse(content: &[u8]) -> Result<Token, TokenError> {
        let body = content.strip_suffix(b"\n").unwrap_or(content);
        if body.ends_with(b"\n") {
            return Err(TokenError::TrailingNewlines);
        }
        if !body.iter().all(|&b| is_token_byte(b)) {
            return Err(TokenError::BadAlphabet);
        }
        if body.len() < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort);
        }
        Ok(Token(body.into()))
    }

    /// Calls `f` with the token's bytes (without the terminal LF).
    pub fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.0)
    }

    /// Whether `haystack` contains this token.
    fn found_in(&self, haystack: &[u8]) -> bool {
        haystack.windows(self.0.len()).any(|w| w == &*self.0)
    }
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-')
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        wipe(&mut self.0);
    }
}

// ---------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------

/// A service a token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    /// Gitea: has a rotation date (a warning), never an expiry.
    Gitea,
    /// Vikunja: has an expiry date, from whose midnight UTC it is not used.
    Vikunja,
}

impl Service {
    /// `gitea` or `vikunja`.
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Gitea => "gitea",
            Service::Vikunja => "vikunja",
        }
    }

    /// The service named `text`, if any.
    pub fn parse(text: &str) -> Option<Service> {
        match text {
            "gitea" => Some(Service::Gitea),
            "vikunja" => Some(Service::Vikunja),
            _ => None,
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A credential's condition at some instant. Metadata only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialState {
    /// Usable, nothing due.
    Valid,
    /// A Vikunja token that expires in `days` (1 to
    /// [`EXPIRING_WITHIN_DAYS`]) UTC calendar days; still usable.
    Expiring {
        /// Days from today's date to the expiry date.
        days: i64,
    },
    /// A Vikunja token on or after its expiry date: not used.
    Expired,
    /// A Gitea token on or after its `rotateBy` date: a warning, still
    /// usable.
    RotationDue,
}

impl CredentialState {
    /// `valid`, `expiring`, `expired` or `rotation-due`.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialState::Valid => "valid",
            CredentialState::Expiring { .. } => "expiring",
            CredentialState::Expired => "expired",
            CredentialState::RotationDue => "rotation-due",
        }
    }
}

/// One line of [`CredentialStore::status`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialStatus {
    /// `business/instance` or `business/@sync`.
    pub key: String,
    /// The service.
    pub service: Service,
    /// The condition.
    pub state: CredentialState,
}

struct Entry {
    token: Token,
    rotate_by: Option<Date>,
    expires: Option<Date>,
}

/// Every service token of the broker, read once at boot and kept only in
/// memory. A restart picks up a rotation.
///
/// Keys are `business/instance` for role instances and `business/@sync` for
/// the read-only tracker identity (which has no agent capability).
pub struct CredentialStore {
    entries: BTreeMap<(String, Service), Entry>,
}

impl fmt::Debug for CredentialStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialStore")
            .field("keys", &self.entries.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl CredentialStore {
    /// Reads and checks every credential reference, once.
    ///
    /// `sync` holds the references of each business's read-only tracker
    /// identity (`business/@sync`). The business definition has no place
    /// for them yet, so the boot configuration passes them here; a business
    /// may appear at most once, and must be one of `businesses`.
    ///
    /// # Errors
    /// The first bad reference, as a static code and the reference's name
    /// (`"acme/dev gitea"`, `"acme/@sync vikunja"`), never its content:
    /// - `unsafe-path`: [`CredentialError::UnsafePath`] or
    ///   [`CredentialError::UnsafePermissions`];
    /// - `bad-config`: missing, too large, unreadable, not a token, or a
    ///   `sync` entry for an unknown or repeated business.
    pub fn load(
        businesses: &[Business],
        sync: &[(BusinessId, RoleCredentials)],
        source: &dyn Credentials,
    ) -> Result<Self, (Refusal, String)> {
        let mut refs: Vec<(String, &RoleCredentials)> = Vec::new();
        for business in businesses {
            for (instance, role) in business.roles() {
                refs.push((format!("{}/{instance}", business.id()), role.credentials()));
            }
        }
        for (business, creds) in sync {
            let key = format!("{business}/{SYNC_INSTANCE}");
            let known = businesses.iter().any(|b| b.id() == business);
            if !known || refs.iter().any(|(k, _)| *k == key) {
                return Err((Refusal::BadConfig, key));
            }
            refs.push((key, creds));
        }
        let mut entries = BTreeMap::new();
        for (key, creds) in refs {
            if let Some(gitea) = &creds.gitea {
                let token = load_one(source, &gitea.source, &key, Service::Gitea)?;
                let entry = Entry {
                    token,
                    rotate_by: gitea.rotate_by,
                    expires: None,
                };
                entries.insert((key.clone(), Service::Gitea), entry);
            }
            if let Some(vikunja) = &creds.vikunja {
                let token = load_one(source, &vikunja.source, &key, Service::Vikunja)?;
                let entry = Entry {
                    token,
                    rotate_by: None,
                    expires: vikunja.expires,
                };
                entries.insert((key, Service::Vikunja), entry);
            }
        }
        Ok(Self { entries })
    }

    /// The condition of every credential at `now` (from the injected
    /// clock), ordered by key then service. Metadata only.
    pub fn status(&self, now: Timestamp) -> Vec<CredentialStatus> {
        self.entries
            .iter()
            .map(|((key, service), entry)| CredentialStatus {
                key: key.clone(),
                service: *service,
                state: entry.state(now),
            })
            .collect()
    }

    /// Calls `callback` with the token of `service` for `key`
    /// (`business/instance` or `business/@sync`); only the callback sees
    /// it. The callback must not spawn children with it, log it or persist
    /// it. A panic in the callback is not caught: a callback must not panic
    /// with text derived from the token. Results are not scanned here; use
    /// [`CredentialStore::use_token_checked`] for byte-like results, or
    /// [`CredentialStore::contains_known_token`] on anything about to be
    /// written or returned.
    ///
    /// # Errors
    /// - `unknown-reference`: no such credential;
    /// - `credential-expired`: a Vikunja token at or after midnight UTC of
    ///   its expiry date (the callback is not called);
    /// - `service-failed`: the callback returned an error (dropped unseen:
    ///   none of its text is kept).
    pub fn use_token<T, E>(
        &self,
        key: &str,
        service: Service,
        now: Timestamp,
        callback: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<T, Refusal> {
        let entry = self
            .entries
            .get(&(key.to_owned(), service))
            .ok_or(Refusal::UnknownReference)?;
        if entry.state(now) == CredentialState::Expired {
            return Err(Refusal::CredentialExpired);
        }
        entry
            .token
            .with(callback)
            .map_err(|_| Refusal::ServiceFailed)
    }

    /// As [`CredentialStore::use_token`] for byte-like results, which are
    /// also refused (`credential-leak`, the value dropped) when they contain
    /// any known token.
    ///
    /// # Errors
    /// As [`CredentialStore::use_token`].
    pub fn use_token_checked<T: AsRef<[u8]>, E>(
        &self,
        key: &str,
        service: Service,
        now: Timestamp,
        callback: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<T, Refusal> {
        let value = self.use_token(key, service, now, callback)?;
        if self.contains_known_token(value.as_ref()) {
            return Err(Refusal::CredentialLeak);
        }
        Ok(value)
    }

    /// Whether `bytes` contain any loaded token. Every token is held
    /// without its terminal LF, so this also finds it with the LF. Callers
    /// refuse keys, request payloads and evidence for which this is true
    /// before anything is written.
    pub fn contains_known_token(&self, bytes: &[u8]) -> bool {
        self.entries.values().any(|e| e.token.found_in(bytes))
    }

    /// How many credentials are loaded.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no credential is loaded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl Entry {
    fn state(&self, now: Timestamp) -> CredentialState {
        let today = now.date();
        if let Some(expires) = self.expires {
            let days = (expires.midnight().unix_ms() - today.midnight().unix_ms()) / DAY_MS;
            if days <= 0 {
                return CredentialState::Expired;
            }
            if days <= EXPIRING_WITHIN_DAYS {
                return CredentialState::Expiring { days };
            }
        }
        match self.rotate_by {
            Some(rotate_by) if today >= rotate_by => CredentialState::RotationDue,
            Some(_) | None => CredentialState::Valid,
        }
    }
}

fn load_one(
    source: &dyn Credentials,
    reference: &CredentialSource,
    key: &str,
    service: Service,
) -> Result<Token, (Refusal, String)> {
    let name = || format!("{key} {service}");
    let mut content = source.read(reference).map_err(|e| {
        let code = match e {
            CredentialError::UnsafePath | CredentialError::UnsafePermissions => Refusal::UnsafePath,
            CredentialError::Missing | CredentialError::TooLarge | CredentialError::Unreadable => {
                Refusal::BadConfig
            }
        };
        (code, name())
    })?;
    let token = Token::parse(&content);
    wipe(&mut content);
    token.map_err(|_| (Refusal::BadConfig, name()))
}
