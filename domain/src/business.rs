//! The normalized business definition and the action
//! policy derived from it.
//!
//! S1 owns loading and resolving definitions; the broker receives them already
//! normalized and only checks the rules it relies on: every map present, every
//! named role defined, and no gated-only action in an authority map.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Action, BusinessId, Date, HumanName, Refusal, RoleInstance, Verb};

/// The action of launching a role's agent (by a role that may launch it,
/// as the business's `launch` block says); refused while launching is
/// switched off.
pub const ROLE_LAUNCH: &str = "role.launch";

/// The nine actions that are always gated and may not appear in authority
/// maps. Three are the actions of the verbs of the same name.
pub const GATED_ONLY: [&str; 9] = [
    Verb::RoleRevoke.as_str(),
    ROLE_LAUNCH,
    Verb::LaunchRevoke.as_str(),
    Verb::LaunchRestore.as_str(),
    "authority.change",
    "credential.change",
    "repo.force-push",
    "repo.delete",
    "release.publish",
];

/// Whether an action is one of [`GATED_ONLY`].
pub fn is_gated_only(action: &Action) -> bool {
    GATED_ONLY.contains(&action.as_str())
}

/// How an action is decided for a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionClass {
    /// Listed in the role's `withinRole`: the role decides alone.
    WithinRole,
    /// Listed in the role's `crossRole`: an arbiter decides.
    CrossRole,
    /// Anything else, and every gated-only action: the human decides.
    Gated,
}

impl ActionClass {
    /// Every class, in the order above.
    pub const ALL: [ActionClass; 3] = [
        ActionClass::WithinRole,
        ActionClass::CrossRole,
        ActionClass::Gated,
    ];

    /// The wire name: `within-role`, `cross-role` or `gated`.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionClass::WithinRole => "within-role",
            ActionClass::CrossRole => "cross-role",
            ActionClass::Gated => "gated",
        }
    }

    /// The class with this wire name.
    ///
    /// # Errors
    /// `bad-request` for any other text.
    pub fn parse(text: &str) -> Result<ActionClass, Refusal> {
        ActionClass::ALL
            .into_iter()
            .find(|c| c.as_str() == text)
            .ok_or(Refusal::BadRequest)
    }
}

/// A role's authority as given, before validation. `None` is a missing map,
/// which refuses; an empty list grants nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthoritySpec {
    /// Actions the role decides alone.
    pub within_role: Option<Vec<Action>>,
    /// Actions an arbiter decides for the role.
    pub cross_role: Option<Vec<Action>>,
}

/// Where a service token comes from. The broker reads it; agents never see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// An absolute path to a 0600 file owned by the broker's user.
    File(String),
    /// The name of an environment variable of the broker process.
    Env(String),
}

/// A Gitea token reference with its rotation date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiteaCredential {
    /// Where the token is.
    pub source: CredentialSource,
    /// The day from which rotation is due (a warning, not an expiry).
    pub rotate_by: Option<Date>,
}

/// A Vikunja token reference with its expiry date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VikunjaCredential {
    /// Where the token is.
    pub source: CredentialSource,
    /// From midnight UTC of this day the token is not used.
    pub expires: Option<Date>,
}

/// The service credentials of one role instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleCredentials {
    /// The Gitea token reference, if the role uses Gitea.
    pub gitea: Option<GiteaCredential>,
    /// The Vikunja token reference, if the role uses Vikunja.
    pub vikunja: Option<VikunjaCredential>,
}

/// A role instance as given, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleSpec {
    /// The role's authority maps.
    pub authority: AuthoritySpec,
    /// The role's service credential references.
    pub credentials: RoleCredentials,
}

/// A business as given by S1, before validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusinessSpec {
    /// The business id.
    pub id: BusinessId,
    /// The one human of this business.
    pub human: HumanName,
    /// The technical arbiter role.
    pub technical_arbiter: RoleInstance,
    /// The delivery arbiter role.
    pub delivery_arbiter: RoleInstance,
    /// The role instances.
    pub roles: BTreeMap<RoleInstance, RoleSpec>,
    /// The launch block's `by`, as given: the roles allowed `role.launch`
    /// without a decision (empty when the block names none).
    pub launch_by: Vec<RoleInstance>,
}

/// A field of a business definition that names a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoleField {
    /// The technical arbiter.
    TechnicalArbiter,
    /// The delivery arbiter.
    DeliveryArbiter,
    /// One of the launch block's `by` roles.
    LaunchBy,
}

/// A role named by a business definition: where, and the name given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleReference {
    /// The field that names it.
    pub field: RoleField,
    /// The name it gives.
    pub role: RoleInstance,
}

/// Why [`Business::validate`] refused a definition: the code and, when a
/// role reference is at fault (an undefined role, a launcher named twice),
/// which one, so a boot failure can name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBusiness {
    /// The code.
    pub refusal: Refusal,
    /// The role reference at fault, if one is.
    pub reference: Option<RoleReference>,
}

impl From<Refusal> for InvalidBusiness {
    fn from(refusal: Refusal) -> Self {
        Self {
            refusal,
            reference: None,
        }
    }
}

impl From<InvalidBusiness> for Refusal {
    fn from(invalid: InvalidBusiness) -> Self {
        invalid.refusal
    }
}

/// A role's validated authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    within_role: BTreeSet<Action>,
    cross_role: BTreeSet<Action>,
}

/// A validated role instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    authority: Authority,
    credentials: RoleCredentials,
}

impl Role {
    /// The role's service credential references.
    pub fn credentials(&self) -> &RoleCredentials {
        &self.credentials
    }
}

/// A validated business definition. Built only by [`Business::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Business {
    id: BusinessId,
    human: HumanName,
    technical_arbiter: RoleInstance,
    delivery_arbiter: RoleInstance,
    roles: BTreeMap<RoleInstance, Role>,
    launch_by: BTreeSet<RoleInstance>,
}

impl Business {
    /// Checks a business as given.
    ///
    /// # Errors
    /// - `bad-config`: an authority map is missing, an action is listed
    ///   twice, or the launch block names a role twice (with that
    ///   reference);
    /// - `unknown-role`: an arbiter or a launch block role is undefined
    ///   (with that reference; the arbiters are checked first, then the
    ///   launchers in the order given);
    /// - `gated-in-authority`: a gated-only action appears in an authority map.
    pub fn validate(spec: BusinessSpec) -> Result<Self, InvalidBusiness> {
        let mut roles = BTreeMap::new();
        for (name, role) in spec.roles {
            let (Some(within), Some(cross)) =
                (role.authority.within_role, role.authority.cross_role)
            else {
                return Err(Refusal::BadConfig.into());
            };
            let mut all = BTreeSet::new();
            for action in within.iter().chain(cross.iter()) {
                if is_gated_only(action) {
                    return Err(Refusal::GatedInAuthority.into());
                }
                if !all.insert(action) {
                    return Err(Refusal::BadConfig.into());
                }
            }
            let authority = Authority {
                within_role: within.into_iter().collect(),
                cross_role: cross.into_iter().collect(),
            };
            roles.insert(
                name,
                Role {
                    authority,
                    credentials: role.credentials,
                },
            );
        }
        let at_fault = |refusal: Refusal, field: RoleField, role: &RoleInstance| InvalidBusiness {
            refusal,
            reference: Some(RoleReference {
                field,
                role: role.clone(),
            }),
        };
        let arbiters = [
            (RoleField::TechnicalArbiter, &spec.technical_arbiter),
            (RoleField::DeliveryArbiter, &spec.delivery_arbiter),
        ];
        let launchers = spec.launch_by.iter().map(|r| (RoleField::LaunchBy, r));
        for (field, role) in arbiters.into_iter().chain(launchers) {
            if !roles.contains_key(role) {
                return Err(at_fault(Refusal::UnknownRole, field, role));
            }
        }
        let mut launch_by = BTreeSet::new();
        for role in spec.launch_by {
            if launch_by.contains(&role) {
                return Err(at_fault(Refusal::BadConfig, RoleField::LaunchBy, &role));
            }
            launch_by.insert(role);
        }
        Ok(Self {
            id: spec.id,
            human: spec.human,
            technical_arbiter: spec.technical_arbiter,
            delivery_arbiter: spec.delivery_arbiter,
            roles,
            launch_by,
        })
    }

    /// The business id.
    pub fn id(&self) -> &BusinessId {
        &self.id
    }

    /// The configured human.
    pub fn human(&self) -> &HumanName {
        &self.human
    }

    /// The role instance, if the business defines it.
    pub fn role(&self, role: &RoleInstance) -> Option<&Role> {
        self.roles.get(role)
    }

    /// Every role instance with its definition.
    pub fn roles(&self) -> impl Iterator<Item = (&RoleInstance, &Role)> {
        self.roles.iter()
    }

    /// The arbiter for a cross-role decision: technical for the technical
    /// domain, otherwise delivery.
    pub fn arbiter(&self, technical: bool) -> &RoleInstance {
        if technical {
            &self.technical_arbiter
        } else {
            &self.delivery_arbiter
        }
    }

    /// The class of `action` for `role`.
    ///
    /// `role.launch` is within-role for every role the launch block names;
    /// every other gated-only action is always gated; an action the role does
    /// not list (or a role the business does not define) is gated.
    pub fn class_of(&self, role: &RoleInstance, action: &Action) -> ActionClass {
        if action.as_str() == ROLE_LAUNCH && self.launch_by.contains(role) {
            return ActionClass::WithinRole;
        }
        if is_gated_only(action) {
            return ActionClass::Gated;
        }
        match self.roles.get(role) {
            Some(r) if r.authority.within_role.contains(action) => ActionClass::WithinRole,
            Some(r) if r.authority.cross_role.contains(action) => ActionClass::CrossRole,
            Some(_) | None => ActionClass::Gated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_is_read_back_from_its_wire_name_and_no_other_name_is_one() {
        let names: Vec<&str> = ActionClass::ALL.map(ActionClass::as_str).to_vec();
        assert_eq!(names, ["within-role", "cross-role", "gated"]);
        for class in ActionClass::ALL {
            assert_eq!(ActionClass::parse(class.as_str()), Ok(class));
        }
        for other in ["", "Gated", "within_role", "gated ", "human"] {
            assert_eq!(
                ActionClass::parse(other),
                Err(Refusal::BadRequest),
                "{other:?}"
            );
        }
    }

    fn a(s: &str) -> Action {
        Action::parse(s).unwrap()
    }
    fn r(s: &str) -> RoleInstance {
        RoleInstance::parse(s).unwrap()
    }
    fn spec(within: Option<Vec<Action>>, cross: Option<Vec<Action>>) -> BusinessSpec {
        let role = RoleSpec {
            authority: AuthoritySpec {
                within_role: within,
                cross_role: cross,
            },
            credentials: RoleCredentials::default(),
        };
        BusinessSpec {
            id: BusinessId::parse("acme").unwrap(),
            human: HumanName::parse("alice").unwrap(),
            technical_arbiter: r("dev"),
            delivery_arbiter: r("dev"),
            roles: [(r("dev"), role.clone()), (r("ops"), role)]
                .into_iter()
                .collect(),
            launch_by: vec![],
        }
    }

    #[test]
    fn a_validated_business_keeps_its_roles_credentials_and_class_names() {
        let mut s = spec(Some(vec![]), Some(vec![]));
        let credentials = RoleCredentials {
            gitea: Some(GiteaCredential {
                source: CredentialSource::Env("GITEA_TOKEN".into()),
                rotate_by: None,
            }),
            vikunja: None,
        };
        s.roles.get_mut(&r("dev")).unwrap().credentials = credentials.clone();
        let b = Business::validate(s).unwrap();
        let roles: Vec<&RoleInstance> = b.roles().map(|(name, _)| name).collect();
        assert_eq!(roles, [&r("dev"), &r("ops")]);
        assert_eq!(b.role(&r("dev")).map(Role::credentials), Some(&credentials));
        let names = [
            ActionClass::WithinRole,
            ActionClass::CrossRole,
            ActionClass::Gated,
        ]
        .map(ActionClass::as_str);
        assert_eq!(names, ["within-role", "cross-role", "gated"]);
    }

    #[test]
    fn classes_follow_the_authority_maps() {
        let b = Business::validate(spec(
            Some(vec![a("message.send")]),
            Some(vec![a("repo.merge")]),
        ))
        .unwrap();
        assert_eq!(
            b.class_of(&r("dev"), &a("message.send")),
            ActionClass::WithinRole
        );
        assert_eq!(
            b.class_of(&r("dev"), &a("repo.merge")),
            ActionClass::CrossRole
        );
        assert_eq!(b.class_of(&r("dev"), &a("repo.push")), ActionClass::Gated);
        assert_eq!(b.class_of(&r("qa"), &a("message.send")), ActionClass::Gated);
        assert_eq!(b.class_of(&r("dev"), &a("role.launch")), ActionClass::Gated);
    }

    #[test]
    fn launch_by_makes_role_launch_within_role_for_that_role_only() {
        let mut s = spec(Some(vec![]), Some(vec![]));
        s.launch_by = vec![r("dev")];
        let b = Business::validate(s).unwrap();
        assert_eq!(
            b.class_of(&r("dev"), &a("role.launch")),
            ActionClass::WithinRole
        );
        assert_eq!(b.class_of(&r("ops"), &a("role.launch")), ActionClass::Gated);
        assert_eq!(b.class_of(&r("dev"), &a("role.revoke")), ActionClass::Gated);
    }

    #[test]
    fn every_role_the_launch_block_names_may_launch() {
        let mut s = spec(Some(vec![]), Some(vec![]));
        s.launch_by = vec![r("ops"), r("dev")];
        let b = Business::validate(s).unwrap();
        for role in ["dev", "ops"] {
            assert_eq!(
                b.class_of(&r(role), &a("role.launch")),
                ActionClass::WithinRole,
                "{role}"
            );
            assert_eq!(
                b.class_of(&r(role), &a("launch.revoke")),
                ActionClass::Gated
            );
        }
        assert_eq!(
            b.class_of(&r("qa"), &a("role.launch")),
            ActionClass::Gated,
            "a role the business lacks"
        );
    }

    #[test]
    fn a_bad_role_reference_is_named() {
        let named = |refusal, field, role: &str| {
            Err(InvalidBusiness {
                refusal,
                reference: Some(RoleReference {
                    field,
                    role: r(role),
                }),
            })
        };
        let mut s = spec(Some(vec![]), Some(vec![]));
        s.launch_by = vec![r("dev"), r("qa")];
        assert_eq!(
            Business::validate(s),
            named(Refusal::UnknownRole, RoleField::LaunchBy, "qa")
        );
        let mut s = spec(Some(vec![]), Some(vec![]));
        s.launch_by = vec![r("dev"), r("ops"), r("dev")];
        assert_eq!(
            Business::validate(s),
            named(Refusal::BadConfig, RoleField::LaunchBy, "dev")
        );
        let mut s = spec(Some(vec![]), Some(vec![]));
        s.technical_arbiter = r("qa");
        s.launch_by = vec![r("lead")];
        assert_eq!(
            Business::validate(s),
            named(Refusal::UnknownRole, RoleField::TechnicalArbiter, "qa")
        );
        let mut s = spec(Some(vec![]), Some(vec![]));
        s.delivery_arbiter = r("qa");
        assert_eq!(
            Business::validate(s),
            named(Refusal::UnknownRole, RoleField::DeliveryArbiter, "qa")
        );
    }

    #[test]
    fn validation_refuses_missing_maps_gated_actions_and_unknown_roles() {
        let validate = |s| Business::validate(s).map_err(Refusal::from);
        assert_eq!(validate(spec(None, Some(vec![]))), Err(Refusal::BadConfig));
        assert_eq!(validate(spec(Some(vec![]), None)), Err(Refusal::BadConfig));
        for gated in GATED_ONLY {
            assert_eq!(
                validate(spec(Some(vec![]), Some(vec![a(gated)]))),
                Err(Refusal::GatedInAuthority)
            );
        }
        let dup = spec(Some(vec![a("x")]), Some(vec![a("x")]));
        assert_eq!(validate(dup), Err(Refusal::BadConfig));
        let mut s = spec(Some(vec![]), Some(vec![]));
        s.delivery_arbiter = r("qa");
        assert_eq!(validate(s), Err(Refusal::UnknownRole));
        let mut s = spec(Some(vec![]), Some(vec![]));
        s.launch_by = vec![r("qa")];
        assert_eq!(validate(s), Err(Refusal::UnknownRole));
    }
}
