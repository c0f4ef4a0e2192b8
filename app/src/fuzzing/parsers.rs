//! The adapters' parsers as the broker meets them: host lines, business
//! definitions and the pane's posted bodies.

use mosaic_adapters::config::{
    boot_from_value, business_from_json, business_from_value, ConfigError,
};
use mosaic_adapters::wire::browser::{
    claim_body, result_body, ADDRESS_REFUSED_ERROR, TOO_LARGE_ERROR,
};
use mosaic_adapters::wire::host::{
    bind_reply, boot_error, boot_reply, end_reply, host_error, parse_host_line, HostRequest,
};
use mosaic_adapters::wire::{self, parse_json};
use mosaic_domain::browser::PaneOutcome;
use mosaic_domain::business::CredentialSource;
use mosaic_domain::evidence::LaunchRecord;
use mosaic_domain::{Action, ActionClass, Business, BusinessId, Refusal, RoleInstance};

use super::request_line::capability;
use serde_json::{json, Value};

/// One line of the host channel.
///
/// Invariants:
/// - it parses the same way twice, and text that is not strict JSON is
///   `bad-request`;
/// - every answer the broker would give about it (`host_error`,
///   `boot_error`, `bind_reply`, `boot_reply`) is one line of strict JSON
///   that names the same business, run, code and reference;
/// - a parsed launch record re-encodes to a `bindLaunch` line that parses
///   to the same record, and the `agents` projection shows its fields;
/// - a parsed `endRun` re-encodes to a line that parses to the same run
///   and ending, whose cause follows its status and signal;
/// - a parsed boot configuration is consistent (every launch and reader
///   names a configured business, each business once, absolute paths) and,
///   with everything but its businesses re-encoded, parses to itself.
pub fn host_line(data: &[u8]) {
    let parsed = parse_host_line(data);
    assert_eq!(parsed, parse_host_line(data), "parsing is deterministic");
    if parse_json(data).is_err() {
        assert_eq!(
            parsed,
            Err(Refusal::BadRequest.into()),
            "not JSON is bad-request"
        );
    }
    let cap = capability('f');
    match parsed {
        Err(error) => {
            let answer = strict(&host_error(error.refusal));
            assert_eq!(answer["ok"], false);
            assert_eq!(answer["error"], error.refusal.code());
            // A boot that fails names the reference at fault, if any.
            let answer = strict(&boot_error(error.refusal, error.reference.as_deref(), None));
            assert_eq!(answer["error"], error.refusal.code());
            assert_eq!(answer["reference"], json!(error.reference));
        }
        Ok(HostRequest::Close) => {}
        Ok(HostRequest::EndRun(end)) => {
            let answer = strict(&end_reply(end.as_ref().map(|_| ()).map_err(|r| *r)));
            assert_eq!(answer["ok"], end.is_ok());
            if let Ok((run, ending)) = end {
                let line = json!({"op": "endRun", "run": run.as_str(),
                    "status": ending.status(), "signal": ending.signal()});
                assert_eq!(
                    parse_host_line(line.to_string().as_bytes()),
                    Ok(HostRequest::EndRun(Ok((run, ending)))),
                    "an end re-encodes to itself"
                );
                let failed = ending.signal().is_some() || ending.status().is_some_and(|s| s != 0);
                assert_eq!(
                    ending.cause() == mosaic_domain::evidence::EndCause::Failed,
                    failed,
                    "a host's end is failed exactly for a non-zero status or a signal"
                );
            }
        }
        Ok(HostRequest::BindLaunch(record)) => {
            let line = json!({"op": "bindLaunch", "record": launch_json(&record)}).to_string();
            assert_eq!(
                parse_host_line(line.as_bytes()),
                Ok(HostRequest::BindLaunch(record.clone())),
                "a launch record re-encodes to itself"
            );
            let shown = wire::agent_json(
                &record,
                false,
                false,
                true,
                &[],
                None,
                wire::RunLife::default(),
            );
            assert_eq!(shown["role"], record.role.as_str());
            assert_eq!(shown["run"], record.run.as_str());
            assert_eq!(shown["harness"], record.harness.as_str());
            assert_eq!(shown["address"], json!(record.address));
            assert_eq!(shown["pid"], record.pid);
            assert_eq!(shown["start_time"], record.start_time);
            let answer = strict(&bind_reply(Ok((
                record.business.clone(),
                record.run.clone(),
                cap.clone(),
            ))));
            assert_eq!(answer["launch"]["business"], record.business.as_str());
            assert_eq!(answer["launch"]["run"], record.run.as_str());
            assert_eq!(answer["launch"]["cap"], cap.expose());
        }
        Ok(HostRequest::Boot(config)) => {
            let ids: std::collections::BTreeSet<_> =
                config.businesses.iter().map(Business::id).collect();
            assert_eq!(ids.len(), config.businesses.len(), "each business once");
            assert!(config.launches.iter().all(|l| ids.contains(&l.business)));
            assert!(config.readers.iter().all(|r| ids.contains(r)));
            assert!(config.data_root.is_absolute());
            assert!(config.repo_roots.iter().all(|p| p.is_absolute()));

            let original = parse_json(data).expect("a parsed line is JSON");
            let mut encoded = json!({
                "dataRoot": config.data_root.to_str(),
                "businesses": original["config"]["businesses"],
                "launches": config.launches.iter().map(launch_json).collect::<Vec<_>>(),
                "readers": config.readers.iter().map(BusinessId::as_str).collect::<Vec<_>>(),
                "repoRoots": config.repo_roots.iter().map(|p| p.to_str()).collect::<Vec<_>>(),
            });
            if let Some(listen) = &config.browser_listen {
                encoded["browser"] = json!({"listen": listen});
            }
            assert_eq!(
                boot_from_value(encoded).as_ref(),
                Ok(&*config),
                "a boot configuration re-encodes to itself"
            );

            let launches: Vec<_> = config
                .launches
                .iter()
                .map(|l| (l.business.clone(), l.run.clone(), cap.clone()))
                .collect();
            let readers: Vec<_> = config
                .readers
                .iter()
                .map(|r| (r.clone(), cap.clone()))
                .collect();
            let socket = config.data_root.join("bus/bus.sock");
            let answer = strict(&boot_reply(&socket, &launches, &readers, None));
            let shown = answer["launches"].as_array().map_or(0, Vec::len);
            assert_eq!(shown, launches.len(), "the boot answer lists every launch");
            for (i, (business, run, _)) in launches.iter().enumerate() {
                assert_eq!(answer["launches"][i]["business"], business.as_str());
                assert_eq!(answer["launches"][i]["run"], run.as_str());
            }
            for (i, (business, _)) in readers.iter().enumerate() {
                assert_eq!(answer["readers"][i]["business"], business.as_str());
            }
        }
    }
}

/// A launch record in the host's shape.
fn launch_json(record: &LaunchRecord) -> Value {
    json!({
        "business": record.business.as_str(),
        "role": record.role.as_str(),
        "run": record.run.as_str(),
        "harness": record.harness.as_str(),
        "address": record.address,
        "pid": record.pid,
        "startTime": record.start_time,
    })
}

/// An answer as the host reads it: one line, strict JSON.
fn strict(answer: &Value) -> Value {
    let line = answer.to_string();
    assert!(!line.contains('\n'), "an answer is one line");
    parse_json(line.as_bytes()).expect("an answer is strict JSON")
}

/// One normalized business definition (`business_from_json`, the loader of
/// `up`'s config and of each business in a boot configuration).
///
/// Invariants: it loads the same way twice; strict JSON text loads to the
/// same result through the text loader, the value loader and a boot
/// configuration that holds it under its id; and a business that loads says
/// back what its source says: id, human, arbiters, roles, the class of each
/// listed action, the launch block, and every credential reference.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let loaded = business_from_json(text);
    assert_eq!(loaded, business_from_json(text), "loading is deterministic");
    let Ok(value) = parse_json(data) else {
        return;
    };
    assert_eq!(
        business_from_value(value.clone()),
        loaded,
        "the text and value loaders agree"
    );
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("x")
        .to_owned();
    let boot =
        boot_from_value(json!({"dataRoot": "/srv/mosaic", "businesses": {id: value.clone()}}));
    assert_eq!(
        boot.map(|c| c.businesses),
        loaded.clone().map(|b| vec![b]),
        "a boot configuration loads its business the same way"
    );
    match loaded {
        Ok(business) => says_back(&value, &business),
        Err(ConfigError {
            refusal,
            reference: Some(reference),
        }) => names_its_reference(&value, refusal, &reference),
        Err(ConfigError {
            reference: None, ..
        }) => {}
    }
}

/// A refusal that names a role reference names one of the source's:
/// `"<business> <field> <role>"`, an undefined role for `unknown-role`, a
/// launcher listed twice for `bad-config`.
fn names_its_reference(source: &Value, refusal: Refusal, reference: &str) {
    let parts: Vec<&str> = reference.split(' ').collect();
    let [business, field, role] = parts[..] else {
        panic!("a reference is three words: {reference:?}");
    };
    assert_eq!(source["id"], business, "{reference}");
    let given = match field {
        "arbiters.technical" => vec![&source["arbiters"]["technical"]],
        "arbiters.delivery" => vec![&source["arbiters"]["delivery"]],
        "launch.by" => {
            let by = &source["launch"]["by"];
            by.as_array()
                .map_or_else(|| vec![by], |roles| roles.iter().collect())
        }
        _ => panic!("an unknown field in {reference:?}"),
    };
    let times = given.iter().filter(|r| **r == role).count();
    if refusal == Refusal::UnknownRole {
        assert!(times >= 1, "{reference}: the source names it");
        assert!(
            source["roles"].get(role).is_none(),
            "{reference}: undefined"
        );
    } else {
        assert_eq!(refusal, Refusal::BadConfig, "{reference}");
        assert_eq!(field, "launch.by", "{reference}");
        assert!(times >= 2, "{reference}: listed twice");
    }
}

/// Compares a loaded business with the JSON it came from.
fn says_back(source: &Value, business: &Business) {
    assert_eq!(source["id"], business.id().as_str());
    assert_eq!(source["human"], business.human().as_str());
    assert_eq!(
        source["arbiters"]["technical"],
        business.arbiter(true).as_str()
    );
    assert_eq!(
        source["arbiters"]["delivery"],
        business.arbiter(false).as_str()
    );
    let roles = source["roles"]
        .as_object()
        .expect("a loaded business has roles");
    assert_eq!(roles.len(), business.roles().count(), "every role, once");
    // `by` is one role or a non-empty list of them.
    let by = &source["launch"]["by"];
    let launchers: Vec<&str> = match by.as_array() {
        Some(roles) => roles.iter().filter_map(Value::as_str).collect(),
        None => by.as_str().into_iter().collect(),
    };
    assert!(
        by.is_null() || by.is_string() || by.as_array().is_some_and(|r| !r.is_empty()),
        "a loaded launch block's by: {by}"
    );
    let unlisted = Action::parse("fuzz.unlisted").expect("a valid action");
    let launch = Action::parse(mosaic_domain::business::ROLE_LAUNCH).expect("a valid action");
    for (name, spec) in roles {
        let role = RoleInstance::parse(name).expect("a loaded role name is valid");
        let loaded = business.role(&role).expect("every source role is loaded");
        let mut listed = false;
        for (list, class) in [
            ("withinRole", ActionClass::WithinRole),
            ("crossRole", ActionClass::CrossRole),
        ] {
            for action in spec["authority"][list].as_array().into_iter().flatten() {
                let action = action.as_str().and_then(|a| Action::parse(a).ok());
                let action = action.expect("a loaded action is valid");
                listed |= action == unlisted;
                assert_eq!(business.class_of(&role, &action), class, "{name}: {action}");
            }
        }
        if !listed {
            assert_eq!(business.class_of(&role, &unlisted), ActionClass::Gated);
        }
        let launches = if launchers.contains(&name.as_str()) {
            ActionClass::WithinRole
        } else {
            ActionClass::Gated
        };
        assert_eq!(business.class_of(&role, &launch), launches, "{name}");

        let credentials = loaded.credentials();
        let services = [
            (
                "gitea",
                "rotateBy",
                credentials.gitea.as_ref().map(|c| (&c.source, c.rotate_by)),
            ),
            (
                "vikunja",
                "expires",
                credentials.vikunja.as_ref().map(|c| (&c.source, c.expires)),
            ),
        ];
        for (service, date_key, loaded) in services {
            let given = &spec["credentials"][service];
            let Some((source, date)) = loaded else {
                assert!(given.is_null(), "{name}: {service} is loaded when given");
                continue;
            };
            let (key, text) = match source {
                CredentialSource::File(path) => ("file", path),
                CredentialSource::Env(var) => ("env", var),
            };
            assert_eq!(given[key], text.as_str(), "{name}: {service}");
            assert_eq!(
                given[date_key].as_str(),
                date.map(|d| d.to_string()).as_deref(),
                "{name}: {service} {date_key}"
            );
        }
    }
}

// The world's fixed ids, checked against the documentation above.
/// One body posted to browser control's claim or result route.
///
/// Invariants:
/// - each parser gives the same answer twice, and a refusal is
///   `bad-request` (the routes answer it as HTTP 400);
/// - an accepted claim body re-encodes to one that parses to the same
///   request and client, or, when its ids are of another form (answered
///   `granted:false`), to one that is again of another form;
/// - an accepted result body re-encodes to one that parses to the same
///   request, claim token and outcome, or to no request and the same
///   outcome when its id or token is of another form (answered
///   `matched:false`): `Done` with the same data for `ok:true` (`null`
///   when it had none), `TooLarge` exactly for the follow-up code, `Failed`
///   for any other error or none.
pub fn browser_bodies(data: &[u8]) {
    let claim = claim_body(data);
    assert_eq!(
        claim,
        claim_body(data),
        "a claim body parses the same way twice"
    );
    match &claim {
        Ok(Some((request, client))) => {
            let again = json!({"requestId": request.to_string(), "clientId": client.as_str()});
            assert_eq!(claim_body(again.to_string().as_bytes()), claim);
        }
        Ok(None) => {
            let again = json!({"requestId": UNADDRESSED, "clientId": "pane-1"});
            assert_eq!(claim_body(again.to_string().as_bytes()), claim);
        }
        Err(refusal) => assert_eq!(*refusal, Refusal::BadRequest),
    }
    let body = match result_body(data) {
        Ok(body) => body,
        Err(refusal) => {
            assert_eq!(refusal, Refusal::BadRequest);
            assert_eq!(
                result_body(data).err(),
                Some(refusal),
                "refused the same way twice"
            );
            return;
        }
    };
    let mut again = match &body.claim {
        Some((request, token)) => {
            json!({"requestId": request.to_string(), "claimToken": token.expose()})
        }
        None => json!({"requestId": UNADDRESSED, "claimToken": UNADDRESSED}),
    };
    match &body.outcome {
        PaneOutcome::Done(data) => {
            again["ok"] = json!(true);
            // `null` data is sent as no data: the two parse alike.
            if !data.is_null() {
                again["data"] = data.clone();
            }
        }
        PaneOutcome::TooLarge => {
            again["ok"] = json!(false);
            again["error"] = json!(TOO_LARGE_ERROR);
        }
        PaneOutcome::AddressRefused => {
            again["ok"] = json!(false);
            again["error"] = json!(ADDRESS_REFUSED_ERROR);
        }
        PaneOutcome::Failed => {
            again["ok"] = json!(false);
            again["error"] = json!("action-failed");
        }
    }
    let reparsed = result_body(again.to_string().as_bytes()).expect("a re-encoded result parses");
    match (&reparsed.claim, &body.claim) {
        (Some((request, token)), Some((original, held))) => {
            assert_eq!(request, original);
            assert!(token.ct_eq(held), "the claim token survives");
        }
        (None, None) => {}
        (Some(_), None) | (None, Some(_)) => panic!("the request is addressed again, or not"),
    }
    assert_eq!(reparsed.outcome, body.outcome);
}

/// A string of no id's form: names no request, is no claim token.
const UNADDRESSED: &str = "forged";
