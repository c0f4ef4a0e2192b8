//! The keys of an agent that say how it does its work in its `workdir`:
//! `"tools"` (its harness's own tools, or the bus's alone), `"git"` (the
//! identity its commits carry) and `"userConfig"` (the human's own
//! harness setup, read-only), parsed into a [`WorkSpec`]. docs/agents.md
//! says what each does for users, docs/host.md why `"all"` is safe in the
//! sandbox.

use mosaic_domain::{BusinessId, Refusal, RoleInstance};
use serde::Deserialize;

/// Which tools a harness agent has (`"tools"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tools {
    /// Its harness's own tools (files, shell, search) beside the bus's,
    /// run without asking inside the sandbox: the default with a
    /// `workdir`.
    All,
    /// The bus's tools alone: the default without a `workdir`.
    Bus,
}

impl Tools {
    /// Its name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Tools::All => "all",
            Tools::Bus => "bus",
        }
    }
}

/// The name and address an agent's commits carry (`"git"`), for author and
/// committer both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitIdentity {
    /// `GIT_AUTHOR_NAME` and `GIT_COMMITTER_NAME`.
    pub name: String,
    /// `GIT_AUTHOR_EMAIL` and `GIT_COMMITTER_EMAIL`.
    pub email: String,
}

impl GitIdentity {
    /// `ROLE (BUSINESS) <ROLE@BUSINESS.invalid>`: whose commit it is, at an
    /// address that can never be delivered to (`.invalid` is reserved).
    pub fn of(role: &RoleInstance, business: &BusinessId) -> GitIdentity {
        GitIdentity {
            name: format!("{} ({})", role.as_str(), business.as_str()),
            email: format!("{}@{}.invalid", role.as_str(), business.as_str()),
        }
    }

    /// The variables git reads them from, so no file of the agent's holds
    /// them and a repository's own configuration cannot change them.
    pub fn env(&self) -> [(&'static str, &str); 4] {
        [
            ("GIT_AUTHOR_NAME", self.name.as_str()),
            ("GIT_AUTHOR_EMAIL", self.email.as_str()),
            ("GIT_COMMITTER_NAME", self.name.as_str()),
            ("GIT_COMMITTER_EMAIL", self.email.as_str()),
        ]
    }
}

/// How one agent works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkSpec {
    /// `"tools"`, its default applied.
    pub tools: Tools,
    /// `"git"`, or the role's own identity.
    pub git: GitIdentity,
    /// `"userConfig"`: bind the human's own harness setup read-only.
    pub user_config: bool,
}

/// The `"git"` object as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GitJson {
    name: String,
    email: String,
}

/// The work keys of one agent as written.
pub(super) struct WorkKeys {
    pub(super) tools: Option<Tools>,
    pub(super) git: Option<GitJson>,
    pub(super) user_config: Option<bool>,
}

impl WorkKeys {
    /// The agent's [`WorkSpec`]: `harness` says whether `up` starts its
    /// harness itself (`"tools"` and `"userConfig"` are for those alone),
    /// `workdir` whether it has one.
    ///
    /// # Errors
    /// `bad-config` for `"tools"` or `"userConfig"` on a command, and for a
    /// `"git"` name or email that is empty, holds a control character or
    /// one of `<>` (git refuses those, or reads them as the address's
    /// edges).
    pub(super) fn parse(
        self,
        role: &RoleInstance,
        business: &BusinessId,
        harness: bool,
        workdir: bool,
    ) -> Result<WorkSpec, Refusal> {
        if !harness && (self.tools.is_some() || self.user_config.is_some()) {
            return Err(Refusal::BadConfig);
        }
        let git = match self.git {
            None => GitIdentity::of(role, business),
            Some(json) => {
                let bad = |text: &str| {
                    text.trim().is_empty()
                        || text.chars().any(|c| c.is_control() || "<>".contains(c))
                };
                if bad(&json.name) || bad(&json.email) {
                    return Err(Refusal::BadConfig);
                }
                GitIdentity {
                    name: json.name,
                    email: json.email,
                }
            }
        };
        let tools = self
            .tools
            .unwrap_or(if workdir { Tools::All } else { Tools::Bus });
        Ok(WorkSpec {
            tools,
            git,
            user_config: self.user_config.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(tools: Option<Tools>, git: Option<(&str, &str)>) -> WorkKeys {
        WorkKeys {
            tools,
            git: git.map(|(name, email)| GitJson {
                name: name.to_owned(),
                email: email.to_owned(),
            }),
            user_config: None,
        }
    }

    #[test]
    fn tools_default_to_all_with_a_workdir_and_the_identity_to_the_role_s() {
        let role = RoleInstance::parse("dev").unwrap();
        let acme = BusinessId::parse("acme").unwrap();
        let with = keys(None, None).parse(&role, &acme, true, true).unwrap();
        assert_eq!(with.tools, Tools::All);
        assert_eq!(
            (with.git.name.as_str(), with.git.email.as_str()),
            ("dev (acme)", "dev@acme.invalid")
        );
        let without = keys(None, None).parse(&role, &acme, true, false).unwrap();
        assert_eq!(without.tools, Tools::Bus);
        let chosen = keys(Some(Tools::Bus), Some(("Dev Bot", "dev@example.com")))
            .parse(&role, &acme, true, true)
            .unwrap();
        assert_eq!(chosen.tools, Tools::Bus);
        assert_eq!(chosen.git.env()[1], ("GIT_AUTHOR_EMAIL", "dev@example.com"));
        assert_eq!(chosen.git.env()[2], ("GIT_COMMITTER_NAME", "Dev Bot"));
        for bad in [
            ("", "a@b"),
            ("a", " "),
            ("a<b", "a@b"),
            ("a", "a@b>"),
            ("a\n", "a@b"),
        ] {
            assert_eq!(
                keys(None, Some(bad)).parse(&role, &acme, true, true),
                Err(Refusal::BadConfig),
                "{bad:?}"
            );
        }
        assert_eq!(
            keys(Some(Tools::All), None).parse(&role, &acme, false, true),
            Err(Refusal::BadConfig)
        );
    }
}
