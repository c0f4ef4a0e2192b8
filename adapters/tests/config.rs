//! The business definition's launch block (`"launch": {"by": …}`): one
//! role or a non-empty list of roles, each defined and named once. Every
//! role it names may `role.launch` without a decision; a refusal about a
//! role reference says which one.

use mosaic_adapters::config::{boot_from_value, business_from_json, ConfigError};
use mosaic_domain::business::ActionClass;
use mosaic_domain::{Action, Business, Refusal, RoleInstance};
use serde_json::{json, Value};

/// `acme` with three roles and `launch` as given (`null`: no block).
fn acme(launch: Value) -> String {
    let mut business = json!({
        "id": "acme", "human": "alice",
        "arbiters": {"technical": "lead", "delivery": "lead"},
        "roles": {
            "lead": {"authority": {"withinRole": [], "crossRole": []}},
            "ops": {"authority": {"withinRole": [], "crossRole": []}},
            "dev": {"authority": {"withinRole": [], "crossRole": []}}
        }
    });
    if !launch.is_null() {
        business["launch"] = launch;
    }
    business.to_string()
}

/// The roles of `business` whose `role.launch` is within role.
fn launchers(business: &Business) -> Vec<&str> {
    let launch = Action::parse("role.launch").expect("an action");
    business
        .roles()
        .filter(|(role, _)| business.class_of(role, &launch) == ActionClass::WithinRole)
        .map(|(role, _)| role.as_str())
        .collect()
}

#[track_caller]
fn loads(launch: Value) -> Business {
    business_from_json(&acme(launch.clone())).unwrap_or_else(|e| panic!("{launch}: {e:?}"))
}

#[track_caller]
fn refused(launch: Value) -> ConfigError {
    match business_from_json(&acme(launch.clone())) {
        Ok(_) => panic!("{launch} loads"),
        Err(error) => error,
    }
}

fn error(refusal: Refusal, reference: Option<&str>) -> ConfigError {
    ConfigError {
        refusal,
        reference: reference.map(str::to_owned),
    }
}

#[test]
fn by_names_one_role_or_a_list_of_roles() {
    assert_eq!(launchers(&loads(json!({"by": "ops"}))), ["ops"]);
    assert_eq!(launchers(&loads(json!({"by": ["ops"]}))), ["ops"]);
    assert_eq!(
        launchers(&loads(json!({"by": ["ops", "lead"]}))),
        ["lead", "ops"]
    );
    // One role and a list of that one role are the same definition.
    assert_eq!(loads(json!({"by": "ops"})), loads(json!({"by": ["ops"]})));
}

#[test]
fn no_block_and_no_by_name_no_launcher() {
    for launch in [Value::Null, json!({}), json!({"by": null})] {
        assert!(launchers(&loads(launch.clone())).is_empty(), "{launch}");
    }
}

#[test]
fn a_role_the_list_names_launches_and_nothing_else_changes() {
    let business = loads(json!({"by": ["ops", "dev"]}));
    let role = |r: &str| RoleInstance::parse(r).expect("a role");
    let action = |a: &str| Action::parse(a).expect("an action");
    for r in ["ops", "dev"] {
        assert_eq!(
            business.class_of(&role(r), &action("role.launch")),
            ActionClass::WithinRole,
            "{r}"
        );
        for gated in ["role.revoke", "launch.revoke", "launch.restore"] {
            assert_eq!(
                business.class_of(&role(r), &action(gated)),
                ActionClass::Gated,
                "{r}: {gated}"
            );
        }
    }
    assert_eq!(
        business.class_of(&role("lead"), &action("role.launch")),
        ActionClass::Gated
    );
}

#[test]
fn an_undefined_or_repeated_launcher_is_refused_by_name() {
    assert_eq!(
        refused(json!({"by": "ghost"})),
        error(Refusal::UnknownRole, Some("acme launch.by ghost"))
    );
    assert_eq!(
        refused(json!({"by": ["ops", "ghost", "phantom"]})),
        error(Refusal::UnknownRole, Some("acme launch.by ghost"))
    );
    assert_eq!(
        refused(json!({"by": ["ops", "dev", "ops"]})),
        error(Refusal::BadConfig, Some("acme launch.by ops"))
    );
}

#[test]
fn a_by_of_another_shape_is_a_bad_config() {
    for launch in [
        json!({"by": []}),
        json!({"by": 7}),
        json!({"by": {"role": "ops"}}),
        json!({"by": ["ops", 7]}),
        json!({"by": [["ops"]]}),
        json!({"by": ["Not A Role"]}),
        json!({"by": "ops", "extra": 1}),
        json!("ops"),
    ] {
        assert_eq!(
            refused(launch.clone()),
            error(Refusal::BadConfig, None),
            "{launch}"
        );
    }
}

#[test]
fn an_undefined_arbiter_is_named_too() {
    let mut business: Value = serde_json::from_str(&acme(Value::Null)).expect("JSON");
    business["arbiters"]["delivery"] = json!("ghost");
    assert_eq!(
        business_from_json(&business.to_string()).err(),
        Some(error(
            Refusal::UnknownRole,
            Some("acme arbiters.delivery ghost")
        ))
    );
}

#[test]
fn a_boot_configuration_carries_the_reference() {
    let business: Value =
        serde_json::from_str(&acme(json!({"by": ["lead", "ghost"]}))).expect("JSON");
    let boot = json!({"dataRoot": "/srv/mosaic", "businesses": {"acme": business}});
    assert_eq!(
        boot_from_value(boot).err(),
        Some(error(Refusal::UnknownRole, Some("acme launch.by ghost")))
    );
}
