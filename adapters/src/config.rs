//! The normalized business definition as JSON, as the host hands it to
//! the broker at boot (docs/host.md), parsed strictly: unknown keys, wrong types and bad names
//! refuse with a static code; the domain then checks the cross-field rules.
//!
//! ```json
//! {"id": "acme", "human": "alice",
//!  "arbiters": {"technical": "lead", "delivery": "lead"},
//!  "roles": {"lead": {"authority": {"withinRole": ["repo.push"], "crossRole": ["repo.merge"]},
//!                     "credentials": {"gitea": {"file": "/home/alice/.gitea", "rotateBy": "2027-01-31"}}}},
//!  "launch": {"by": "lead"}}
//! ```
//!
//! The launch block's `by` names the roles that may launch without a
//! decision: one role (`"lead"`) or a list of them (`["lead", "ops"]`,
//! non-empty, each once). A refusal that concerns a role reference (an
//! undefined role, a launcher named twice) says which one ([`ConfigError`]).

use std::collections::BTreeMap;

use mosaic_domain::business::{
    AuthoritySpec, CredentialSource, GiteaCredential, RoleCredentials, RoleField, RoleReference,
    RoleSpec, VikunjaCredential,
};
use mosaic_domain::{
    Action, Business, BusinessId, BusinessSpec, Date, HumanName, InvalidBusiness, Refusal,
    RoleInstance,
};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BusinessJson {
    id: String,
    human: String,
    arbiters: ArbitersJson,
    roles: BTreeMap<String, RoleJson>,
    launch: Option<LaunchJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArbitersJson {
    technical: String,
    delivery: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LaunchJson {
    by: Option<LaunchersJson>,
}

/// `by`: one role, or a list of roles.
#[derive(Deserialize)]
#[serde(untagged)]
enum LaunchersJson {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleJson {
    authority: Option<AuthorityJson>,
    #[serde(default)]
    credentials: CredentialsJson,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AuthorityJson {
    within_role: Option<Vec<String>>,
    cross_role: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CredentialsJson {
    gitea: Option<CredentialJson>,
    vikunja: Option<CredentialJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CredentialJson {
    file: Option<String>,
    env: Option<String>,
    rotate_by: Option<String>,
    expires: Option<String>,
}

/// Why a configuration was refused: its static code and, when a role
/// reference of a business is at fault, which one, as `"<business>
/// <field> <role>"`: `"acme launch.by ops"`, `"acme arbiters.technical
/// qa"`. The host's boot failure line carries it as `reference`, as it
/// does a bad credential reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The code.
    pub refusal: Refusal,
    /// The reference at fault, if one is named.
    pub reference: Option<String>,
}

impl From<Refusal> for ConfigError {
    fn from(refusal: Refusal) -> Self {
        Self {
            refusal,
            reference: None,
        }
    }
}

impl From<ConfigError> for Refusal {
    fn from(error: ConfigError) -> Self {
        error.refusal
    }
}

/// The text of a business's role reference.
fn role_reference(business: &BusinessId, reference: &RoleReference) -> String {
    let field = match reference.field {
        RoleField::TechnicalArbiter => "arbiters.technical",
        RoleField::DeliveryArbiter => "arbiters.delivery",
        RoleField::LaunchBy => "launch.by",
    };
    format!("{business} {field} {}", reference.role)
}

/// Parses one business definition from JSON text.
///
/// # Errors
/// - `bad-config`: not JSON of this shape (unknown keys included), a bad
///   name, a credential reference naming neither or both of `file` and
///   `env`, a date key that does not belong to its service, or a launch
///   block whose `by` is an empty list;
/// - `bad-date`: a `rotateBy` or `expires` that is not a real `YYYY-MM-DD`;
/// - and the domain's rules (`Business::validate`), with the role
///   reference at fault named.
pub fn business_from_json(text: &str) -> Result<Business, ConfigError> {
    let json: BusinessJson = serde_json::from_str(text).map_err(|_| Refusal::BadConfig)?;
    business(json)
}

/// Parses one business definition from a JSON value.
///
/// # Errors
/// As [`business_from_json`].
pub fn business_from_value(value: serde_json::Value) -> Result<Business, ConfigError> {
    let json: BusinessJson = serde_json::from_value(value).map_err(|_| Refusal::BadConfig)?;
    business(json)
}

fn name<T>(text: &str, parse: fn(&str) -> Result<T, Refusal>) -> Result<T, Refusal> {
    parse(text).map_err(|_| Refusal::BadConfig)
}

fn actions(list: Option<Vec<String>>) -> Result<Option<Vec<Action>>, Refusal> {
    list.map(|l| l.iter().map(|a| name(a, Action::parse)).collect())
        .transpose()
}

fn source(c: &CredentialJson) -> Result<CredentialSource, Refusal> {
    match (&c.file, &c.env) {
        (Some(path), None) => Ok(CredentialSource::File(path.clone())),
        (None, Some(var)) => Ok(CredentialSource::Env(var.clone())),
        (Some(_), Some(_)) | (None, None) => Err(Refusal::BadConfig),
    }
}

fn date(text: Option<&String>) -> Result<Option<Date>, Refusal> {
    text.map(|d| Date::parse(d)).transpose()
}

/// `{gitea?, vikunja?}`: each names one `file` or `env`, and only its own
/// service's date (`rotateBy` for Gitea, `expires` for Vikunja).
fn credentials(json: &CredentialsJson) -> Result<RoleCredentials, Refusal> {
    let gitea = match &json.gitea {
        Some(c) if c.expires.is_none() => Some(GiteaCredential {
            source: source(c)?,
            rotate_by: date(c.rotate_by.as_ref())?,
        }),
        Some(_) => return Err(Refusal::BadConfig),
        None => None,
    };
    let vikunja = match &json.vikunja {
        Some(c) if c.rotate_by.is_none() => Some(VikunjaCredential {
            source: source(c)?,
            expires: date(c.expires.as_ref())?,
        }),
        Some(_) => return Err(Refusal::BadConfig),
        None => None,
    };
    Ok(RoleCredentials { gitea, vikunja })
}

/// The launch block's roles: none without a block or a `by`, one, or a
/// non-empty list (whose repeats the domain refuses, by name).
fn launchers(launch: Option<LaunchJson>) -> Result<Vec<RoleInstance>, Refusal> {
    let names = match launch.and_then(|l| l.by) {
        None => Vec::new(),
        Some(LaunchersJson::One(role)) => vec![role],
        Some(LaunchersJson::Many(roles)) if roles.is_empty() => return Err(Refusal::BadConfig),
        Some(LaunchersJson::Many(roles)) => roles,
    };
    names.iter().map(|r| name(r, RoleInstance::parse)).collect()
}

fn business(json: BusinessJson) -> Result<Business, ConfigError> {
    let mut roles = BTreeMap::new();
    for (role, spec) in json.roles {
        let authority = match spec.authority {
            Some(a) => AuthoritySpec {
                within_role: actions(a.within_role)?,
                cross_role: actions(a.cross_role)?,
            },
            None => AuthoritySpec::default(),
        };
        roles.insert(
            name(&role, RoleInstance::parse)?,
            RoleSpec {
                authority,
                credentials: credentials(&spec.credentials)?,
            },
        );
    }
    let id = name(&json.id, BusinessId::parse)?;
    Business::validate(BusinessSpec {
        id: id.clone(),
        human: name(&json.human, HumanName::parse)?,
        technical_arbiter: name(&json.arbiters.technical, RoleInstance::parse)?,
        delivery_arbiter: name(&json.arbiters.delivery, RoleInstance::parse)?,
        roles,
        launch_by: launchers(json.launch)?,
    })
    .map_err(|InvalidBusiness { refusal, reference }| ConfigError {
        refusal,
        reference: reference.map(|r| role_reference(&id, &r)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACME: &str = r#"{"id":"acme","human":"alice","arbiters":{"technical":"lead","delivery":"lead"},
        "roles":{"lead":{"authority":{"withinRole":["message.send"],"crossRole":[]}},
                 "dev":{"authority":{"withinRole":[],"crossRole":["repo.merge"]},
                        "credentials":{"vikunja":{"env":"DEV_VIKUNJA","expires":"2027-01-31"}}}},
        "launch":{"by":"lead"}}"#;

    #[test]
    fn a_normalized_business_parses() {
        let b = business_from_json(ACME).unwrap();
        assert_eq!(b.id().as_str(), "acme");
        assert!(b
            .role(&RoleInstance::parse("dev").unwrap())
            .unwrap()
            .credentials()
            .vikunja
            .is_some());
    }

    #[test]
    fn bad_shapes_refuse_with_static_codes() {
        let cases = [
            (
                ACME.replace(r#""human":"alice""#, r#""human":"alice","extra":1"#),
                Refusal::BadConfig,
            ),
            (
                ACME.replace(r#""withinRole":["message.send"],"#, ""),
                Refusal::BadConfig,
            ),
            (
                ACME.replace(r#"{"withinRole":[],"crossRole":["repo.merge"]}"#, "null"),
                Refusal::BadConfig,
            ),
            (ACME.replace("2027-01-31", "2027-02-30"), Refusal::BadDate),
            (
                ACME.replace(r#""env":"DEV_VIKUNJA","#, ""),
                Refusal::BadConfig,
            ),
            (
                ACME.replace(r#""expires""#, r#""rotateBy""#),
                Refusal::BadConfig,
            ),
            (
                ACME.replace(
                    r#""crossRole":["repo.merge"]"#,
                    r#""crossRole":["role.revoke"]"#,
                ),
                Refusal::GatedInAuthority,
            ),
            (
                ACME.replace(r#""delivery":"lead""#, r#""delivery":"ghost""#),
                Refusal::UnknownRole,
            ),
            (
                ACME.replace(r#""id":"acme""#, r#""id":"a/b""#),
                Refusal::BadConfig,
            ),
            ("[]".to_owned(), Refusal::BadConfig),
            ("{".to_owned(), Refusal::BadConfig),
        ];
        for (text, code) in cases {
            assert_eq!(
                business_from_json(&text).map_err(Refusal::from).err(),
                Some(code),
                "{text}"
            );
        }
    }
}

/// The boot configuration the trusted host sends (`{"op":"boot","config":…}`).
/// Its `Default` is empty but for the data root, which a start refuses
/// (`unsafe-path`) until it is set to an absolute path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootConfig {
    /// The existing data root the broker owns `bus/` in.
    pub data_root: std::path::PathBuf,
    /// Every business, validated.
    pub businesses: Vec<Business>,
    /// The launches the host already performed, bound at boot.
    pub launches: Vec<mosaic_domain::evidence::LaunchRecord>,
    /// One reader capability is issued per entry.
    pub readers: Vec<BusinessId>,
    /// Source checkouts that credential files must stay out of.
    pub repo_roots: Vec<std::path::PathBuf>,
    /// The businesses' project roots; credential files must stay out of
    /// them too.
    pub project_roots: Vec<std::path::PathBuf>,
    /// The credential references of each business's read-only tracker
    /// identity, `business/@sync` (it has no agent capability).
    pub sync: Vec<(BusinessId, RoleCredentials)>,
    /// Where browser control listens, when enabled (`127.0.0.1:PORT`).
    pub browser_listen: Option<String>,
    /// The private addresses (loopback, private, link-local) the human's
    /// browser may be sent to all the same, each `host:port`
    /// (`browser.allowPrivate`); every other one is refused.
    pub browser_allow_private: Vec<mosaic_domain::browser::AllowedAddress>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BootJson {
    data_root: String,
    businesses: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    launches: Vec<serde_json::Value>,
    #[serde(default)]
    readers: Vec<String>,
    #[serde(default)]
    repo_roots: Vec<String>,
    #[serde(default)]
    project_roots: Vec<String>,
    #[serde(default)]
    sync: BTreeMap<String, CredentialsJson>,
    browser: Option<BrowserJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BrowserJson {
    listen: String,
    #[serde(default)]
    allow_private: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LaunchRecordJson {
    business: String,
    role: String,
    run: String,
    harness: String,
    address: Option<String>,
    pid: u32,
    start_time: u64,
}

/// Parses a launch record `{business, role, run, harness, address?, pid,
/// startTime}`; `startTime` is field 22 of `/proc/<pid>/stat`.
///
/// # Errors
/// `bad-config` for any other shape, a bad name, an unknown harness, or pid 0.
pub fn launch_from_value(
    value: serde_json::Value,
) -> Result<mosaic_domain::evidence::LaunchRecord, Refusal> {
    let l: LaunchRecordJson = serde_json::from_value(value).map_err(|_| Refusal::BadConfig)?;
    if l.pid == 0
        || l.address
            .as_deref()
            .is_some_and(|a| a.is_empty() || a.len() > 512)
    {
        return Err(Refusal::BadConfig);
    }
    Ok(mosaic_domain::evidence::LaunchRecord {
        business: name(&l.business, BusinessId::parse)?,
        role: name(&l.role, RoleInstance::parse)?,
        run: name(&l.run, mosaic_domain::RunId::parse)?,
        harness: mosaic_domain::evidence::Harness::parse(&l.harness)?,
        address: l.address,
        pid: l.pid,
        start_time: l.start_time,
    })
}

/// Parses and validates the whole boot configuration: every business (its
/// map key must equal its `id`), every launch (of a configured business),
/// every reader (a configured business), absolute paths.
///
/// # Errors
/// `bad-config` for any shape, name or cross-reference problem, and the
/// codes of [`business_from_value`] (with its reference) and
/// [`launch_from_value`].
pub fn boot_from_value(value: serde_json::Value) -> Result<BootConfig, ConfigError> {
    let json: BootJson = serde_json::from_value(value).map_err(|_| Refusal::BadConfig)?;
    let absolute = |p: &str| {
        let path = std::path::PathBuf::from(p);
        if path.is_absolute() {
            Ok(path)
        } else {
            Err(Refusal::BadConfig)
        }
    };
    let mut businesses = Vec::new();
    for (id, definition) in json.businesses {
        let business = business_from_value(definition)?;
        if business.id().as_str() != id {
            return Err(Refusal::BadConfig.into());
        }
        businesses.push(business);
    }
    let known = |b: &BusinessId| businesses.iter().any(|x| x.id() == b);
    let launches = json
        .launches
        .into_iter()
        .map(launch_from_value)
        .collect::<Result<Vec<_>, _>>()?;
    if launches.iter().any(|l| !known(&l.business)) {
        return Err(Refusal::BadConfig.into());
    }
    let readers = json
        .readers
        .iter()
        .map(|r| name(r, BusinessId::parse))
        .collect::<Result<Vec<_>, _>>()?;
    if readers.iter().any(|r| !known(r)) {
        return Err(Refusal::BadConfig.into());
    }
    let mut sync = Vec::new();
    for (business, refs) in &json.sync {
        let business = name(business, BusinessId::parse)?;
        if !known(&business) {
            return Err(Refusal::BadConfig.into());
        }
        sync.push((business, credentials(refs)?));
    }
    let paths = |list: &[String]| list.iter().map(|p| absolute(p)).collect::<Result<_, _>>();
    let (browser_listen, allow_private) = match json.browser {
        Some(browser) => (Some(browser.listen), browser.allow_private),
        None => (None, Vec::new()),
    };
    let browser_allow_private = allow_private
        .iter()
        .map(|a| mosaic_domain::browser::AllowedAddress::parse(a))
        .collect::<Result<_, _>>()?;
    Ok(BootConfig {
        data_root: absolute(&json.data_root)?,
        businesses,
        launches,
        readers,
        repo_roots: paths(&json.repo_roots)?,
        project_roots: paths(&json.project_roots)?,
        sync,
        browser_listen,
        browser_allow_private,
    })
}

#[cfg(test)]
mod boot_tests {
    use super::*;

    const ACME: &str = r#"{"id":"acme","human":"alice","arbiters":{"technical":"lead","delivery":"lead"},
        "roles":{"lead":{"authority":{"withinRole":[],"crossRole":[]}},
                 "dev":{"authority":{"withinRole":[],"crossRole":[]}}}}"#;

    fn boot(extra: &str) -> serde_json::Value {
        let text = format!(
            r#"{{"dataRoot":"/srv/mosaic","businesses":{{"acme":{ACME}}},
                "launches":[{{"business":"acme","role":"dev","run":"r1","harness":"pi","pid":42,"startTime":1234}}],
                "readers":["acme"],"repoRoots":["/src/mosaic"]{extra}}}"#
        );
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn a_boot_configuration_parses() {
        let config = boot_from_value(boot(r#","browser":{"listen":"127.0.0.1:0"}"#)).unwrap();
        assert_eq!(config.businesses.len(), 1);
        assert_eq!(config.launches[0].start_time, 1234);
        assert_eq!(config.readers[0].as_str(), "acme");
        assert_eq!(config.browser_listen.as_deref(), Some("127.0.0.1:0"));
        assert!(config.project_roots.is_empty() && config.sync.is_empty());
        assert!(config.browser_allow_private.is_empty());
    }

    #[test]
    fn the_browser_may_be_allowed_private_addresses_by_name_and_port() {
        let config = boot_from_value(boot(
            r#","browser":{"listen":"127.0.0.1:0","allowPrivate":["LocalHost:3000","[::1]:8080","0x7f.1:9"]}"#,
        ))
        .unwrap();
        let allowed: Vec<String> = config
            .browser_allow_private
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(allowed, ["localhost:3000", "[::1]:8080", "127.0.0.1:9"]);
        for bad in [
            r#"["localhost"]"#,
            r#"["localhost:0"]"#,
            r#"[":80"]"#,
            r#"["a b:80"]"#,
            r#"["[::g]:80"]"#,
            r#""x:1""#,
        ] {
            let line = format!(r#","browser":{{"listen":"127.0.0.1:0","allowPrivate":{bad}}}"#);
            assert_eq!(
                boot_from_value(boot(&line)).map(|_| ()),
                Err(Refusal::BadConfig.into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn project_roots_and_sync_references_are_optional_boot_keys() {
        let config = boot_from_value(boot(
            r#","projectRoots":["/src/acme-app"],
               "sync":{"acme":{"vikunja":{"env":"ACME_SYNC","expires":"2027-01-31"}}}"#,
        ))
        .unwrap();
        assert_eq!(
            config.project_roots,
            [std::path::PathBuf::from("/src/acme-app")]
        );
        let (business, refs) = &config.sync[0];
        assert_eq!(business.as_str(), "acme");
        assert!(refs.vikunja.is_some() && refs.gitea.is_none());
        let bad = [
            r#","projectRoots":["relative"]"#,
            r#","sync":{"globex":{}}"#,
            r#","sync":{"acme":{"gitea":{"env":"X","expires":"2027-01-31"}}}"#,
            r#","sync":{"acme":{"gitea":{"env":"X","file":"/x"}}}"#,
        ];
        for extra in bad {
            assert_eq!(
                boot_from_value(boot(extra)).map_err(Refusal::from).err(),
                Some(Refusal::BadConfig),
                "{extra}"
            );
        }
    }

    #[test]
    fn a_bad_boot_configuration_refuses_with_static_codes() {
        let bad = |value: serde_json::Value| boot_from_value(value).map_err(Refusal::from).err();
        assert_eq!(bad(boot(r#","extra":1"#)), Some(Refusal::BadConfig));
        let edits: [(&str, serde_json::Value); 6] = [
            ("/dataRoot", "relative/path".into()),
            ("/readers", serde_json::json!(["globex"])),
            ("/launches/0/harness", "codex".into()),
            ("/launches/0/pid", 0.into()),
            ("/launches/0/business", "globex".into()),
            ("/businesses/acme/id", "other".into()),
        ];
        for (pointer, value) in edits {
            let mut v = boot("");
            *v.pointer_mut(pointer).unwrap() = value;
            assert_eq!(bad(v), Some(Refusal::BadConfig), "{pointer}");
        }
    }
}
