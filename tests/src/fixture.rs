//! The business and names the cross-crate tests share.
//!
//! Business `acme` has three roles: `lead` (both arbiters, named by the
//! launch block, sends messages within role, merges cross-role), `dev`
//! (sends and pushes within role, merges cross-role) and `ops` (no
//! authority at all). [`policy_b`] is the same business after a policy
//! change that makes `repo.merge` gated for `dev`.

use mosaic_domain::bus::{Caller, Command};
use mosaic_domain::business::{AuthoritySpec, RoleSpec};
use mosaic_domain::decisions::RaiseInput;
use mosaic_domain::evidence::{AgentRef, DecisionOption, OptionKey, RaiseFields};
use mosaic_domain::{
    Action, Business, BusinessId, BusinessSpec, DecisionId, EventId, HumanName, RoleInstance,
    RunId, Target, Timestamp,
};

/// The three roles of `acme`, in a fixed order.
pub const ROLES: [&str; 3] = ["lead", "dev", "ops"];

/// Parses a timestamp from Unix milliseconds.
pub fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(ms).expect("test times are in range")
}

/// The business id `acme`.
pub fn acme() -> BusinessId {
    BusinessId::parse("acme").expect("valid id")
}

/// A role instance.
pub fn role(name: &str) -> RoleInstance {
    RoleInstance::parse(name).expect("valid role")
}

/// An action.
pub fn action(name: &str) -> Action {
    Action::parse(name).expect("valid action")
}

/// An option key.
pub fn key(name: &str) -> OptionKey {
    OptionKey::parse(name).expect("valid key")
}

/// The run `run` working as `role`.
pub fn agent(role_name: &str, run: &str) -> AgentRef {
    AgentRef {
        role: role(role_name),
        run: RunId::parse(run).expect("valid run"),
    }
}

/// The capability caller for `run` as `role` in `acme`.
pub fn caller(role_name: &str, run: &str) -> Caller {
    Caller::Agent {
        business: acme(),
        agent: agent(role_name, run),
    }
}

/// The proven human of `acme`, with a `human.input` id derived from `n`.
pub fn human(n: u64) -> Caller {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&n.to_be_bytes());
    Caller::Human {
        business: acme(),
        input: EventId::from_random(b),
    }
}

/// A decision id derived from `n`.
pub fn decision_id(n: u64) -> DecisionId {
    let mut b = [0xd0; 16];
    b[..8].copy_from_slice(&n.to_be_bytes());
    DecisionId::from_random(b)
}

/// The options `yes` and `no`.
pub fn yes_no() -> Vec<DecisionOption> {
    vec![
        DecisionOption {
            key: key("yes"),
            text: "Yes".into(),
        },
        DecisionOption {
            key: key("no"),
            text: "No".into(),
        },
    ]
}

fn business(dev_cross: &[&str]) -> Business {
    let spec = |within: &[&str], cross: &[&str]| RoleSpec {
        authority: AuthoritySpec {
            within_role: Some(within.iter().map(|a| action(a)).collect()),
            cross_role: Some(cross.iter().map(|a| action(a)).collect()),
        },
        credentials: Default::default(),
    };
    Business::validate(BusinessSpec {
        id: acme(),
        human: HumanName::parse("alice").expect("valid name"),
        technical_arbiter: role("lead"),
        delivery_arbiter: role("lead"),
        roles: [
            (role("lead"), spec(&["message.send"], &["repo.merge"])),
            (role("dev"), spec(&["message.send", "repo.push"], dev_cross)),
            (role("ops"), spec(&[], &[])),
        ]
        .into_iter()
        .collect(),
        launch_by: vec![role("lead")],
    })
    .expect("the fixture business is valid")
}

/// `acme` under its first policy.
pub fn policy_a() -> Vec<Business> {
    vec![business(&["repo.merge"])]
}

/// `acme` after `repo.merge` became gated for `dev`.
pub fn policy_b() -> Vec<Business> {
    vec![business(&[])]
}

/// `decision.raise` of decision `id` asking `May I {act}?` of `target`,
/// with the options [`yes_no`] and nothing else set.
///
/// # Panics
/// When `act` or `target` is not well-formed: a test's own mistake.
pub fn raise(id: u64, act: &str, target: Option<&str>) -> Command {
    Command::Raise {
        id: decision_id(id),
        input: Box::new(RaiseInput {
            fields: RaiseFields {
                action: action(act),
                target: target.map(|t| Target::parse(t).expect("valid target")),
                question: format!("May I {act}?"),
                options: yes_no(),
                recommendation: "yes".into(),
                blocking: false,
                technical: false,
                project: None,
                task_ref: None,
                requirement_ref: None,
                supersedes: None,
            },
            choice: None,
            approval_choice: None,
        }),
    }
}
