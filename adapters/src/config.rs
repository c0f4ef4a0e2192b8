//! The normalized business definition as JSON (`spec/bus-broker.md`, "Start
//! and stop"), parsed strictly: unknown keys, wrong types and bad names
//! refuse with a static code; the domain then checks the cross-field rules.
//!
//! ```json
//! {"id": "acme", "human": "alice",
//!  "arbiters": {"technical": "lead", "delivery": "lead"},
//!  "roles": {"lead": {"authority": {"withinRole": ["message.send"], "crossRole": []},
//!                     "credentials": {"gitea": {"file": "/home/alice/.gitea", "rotateBy": "2027-01-31"}}}},
//!  "launch": {"by": "lead"}}
//! ```

use std::collections::BTreeMap;

use mosaic_domain::business::{
    AuthoritySpec, CredentialSource, GiteaCredential, RoleCredentials, RoleSpec, VikunjaCredential,
};
use mosaic_domain::{
    Action, Business, BusinessId, BusinessSpec, Date, HumanName, Refusal, RoleInstance,
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
    by: Option<String>,
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

/// Parses one business definition from JSON text.
///
/// # Errors
/// - `bad-config`: not JSON of this shape (unknown keys included), a bad
///   name, a credential reference naming neither or both of `file` and
///   `env`, or a date key that does not belong to its service;
/// - `bad-date`: a `rotateBy` or `expires` that is not a real `YYYY-MM-DD`;
/// - and the domain's rules (`Business::validate`).
pub fn business_from_json(text: &str) -> Result<Business, Refusal> {
    let json: BusinessJson = serde_json::from_str(text).map_err(|_| Refusal::BadConfig)?;
    business(json)
}

/// Parses one business definition from a JSON value.
///
/// # Errors
/// As [`business_from_json`].
pub fn business_from_value(value: serde_json::Value) -> Result<Business, Refusal> {
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

fn business(json: BusinessJson) -> Result<Business, Refusal> {
    let mut roles = BTreeMap::new();
    for (role, spec) in json.roles {
        let authority = match spec.authority {
            Some(a) => AuthoritySpec {
                within_role: actions(a.within_role)?,
                cross_role: actions(a.cross_role)?,
            },
            None => AuthoritySpec::default(),
        };
        let gitea = match &spec.credentials.gitea {
            Some(c) if c.expires.is_none() => Some(GiteaCredential {
                source: source(c)?,
                rotate_by: date(c.rotate_by.as_ref())?,
            }),
            Some(_) => return Err(Refusal::BadConfig),
            None => None,
        };
        let vikunja = match &spec.credentials.vikunja {
            Some(c) if c.rotate_by.is_none() => Some(VikunjaCredential {
                source: source(c)?,
                expires: date(c.expires.as_ref())?,
            }),
            Some(_) => return Err(Refusal::BadConfig),
            None => None,
        };
        roles.insert(
            name(&role, RoleInstance::parse)?,
            RoleSpec {
                authority,
                credentials: RoleCredentials { gitea, vikunja },
            },
        );
    }
    Business::validate(BusinessSpec {
        id: name(&json.id, BusinessId::parse)?,
        human: name(&json.human, HumanName::parse)?,
        technical_arbiter: name(&json.arbiters.technical, RoleInstance::parse)?,
        delivery_arbiter: name(&json.arbiters.delivery, RoleInstance::parse)?,
        roles,
        launch_by: json
            .launch
            .and_then(|l| l.by)
            .map(|by| name(&by, RoleInstance::parse))
            .transpose()?,
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
            assert_eq!(business_from_json(&text).err(), Some(code), "{text}");
        }
    }
}
