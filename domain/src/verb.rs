//! The verb table: every socket verb declared once, as one row of
//! [`verbs!`](verbs): its wire name, who may call it, whether it only reads,
//! and what it does in one line.
//!
//! Everything else that names a verb comes from this table or is checked
//! against it by a test: the bus's command names ([`crate::bus::Command::verb`]),
//! the wire parser and each verb's argument type (`mosaic_adapters::wire`),
//! the MCP tools, the help of `mosaic-bus call` and `human`, and the verb
//! tables of `docs/protocol.md` and `docs/agents.md` (`tests/tests/docs.rs`).
//! Who may call a verb is decided here and nowhere else: the bus and the
//! change feed ask [`Verb::admit`]. The two trusted in-process calls are not
//! socket verbs; their names are [`AUTHORIZE`] and [`RECORD_EVENT`], and
//! their callers [`TRUSTED_CALLERS`].

use std::fmt;

use crate::Refusal;

/// The name of the trusted in-process API `authorize`, as the bus and its
/// refusal records call it. Not a socket verb.
pub const AUTHORIZE: &str = "authorize";
/// The name of the trusted in-process API `record_event`. Not a socket verb.
pub const RECORD_EVENT: &str = "record_event";
/// Who may use the trusted in-process calls: each acts for the agent whose
/// capability it carries.
pub const TRUSTED_CALLERS: &[CallerKind] = &[CallerKind::Agent];

/// Who a verb serves. A caller of another kind is refused ([`admit`]:
/// `human-only` for the human's verbs, `not-authorized` otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallerKind {
    /// An agent run, through its capability.
    Agent,
    /// A read-only capability of one business.
    Reader,
    /// The business's human, through the human CLI.
    Human,
}

impl CallerKind {
    /// Every caller kind.
    pub const ALL: [CallerKind; 3] = [CallerKind::Agent, CallerKind::Reader, CallerKind::Human];
}

/// Declares [`Verb`] from one row per verb, so its name, callers, access and
/// meaning can never drift apart.
macro_rules! verbs {
    ($($name:ident => $wire:literal, [$($caller:ident),+], $access:ident, $meaning:literal;)*) => {
        /// A socket verb: one row of the verb table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Verb {
            $(#[doc = concat!("`", $wire, "`: ", $meaning)] $name,)*
        }

        impl Verb {
            /// Every verb, in the table's order.
            pub const ALL: &'static [Verb] = &[$(Verb::$name,)*];

            /// The wire name, for example `"decision.raise"`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Verb::$name => $wire,)*
                }
            }

            /// Who may call the verb.
            pub const fn callers(self) -> &'static [CallerKind] {
                match self {
                    $(Verb::$name => &[$(CallerKind::$caller),+],)*
                }
            }

            /// Whether the verb only reads: it records nothing and is
            /// answered by the read side.
            pub const fn is_read(self) -> bool {
                match self {
                    $(Verb::$name => verbs!(@read $access),)*
                }
            }

            /// What the verb does, in one line.
            pub const fn meaning(self) -> &'static str {
                match self {
                    $(Verb::$name => $meaning,)*
                }
            }
        }
    };
    (@read read) => { true };
    (@read write) => { false };
}

verbs! {
    RoleClaim => "role.claim", [Agent], write,
        "Claim your role for this run; a revoked run never reclaims it.";
    RoleRelease => "role.release", [Agent], write,
        "Release the role you hold.";
    RoleRevoke => "role.revoke", [Agent], write,
        "Revoke the holder of a role, with a human-approved gated decision for this role and the holder it recorded.";
    DecisionRaise => "decision.raise", [Agent], write,
        "Raise a decision, routed once by the action's class for your role.";
    DecisionResolve => "decision.resolve", [Agent, Human], write,
        "Resolve a decision routed to you by choosing one of its options.";
    DecisionSeen => "decision.seen", [Agent, Human], write,
        "Acknowledge a decision routed to you without resolving it.";
    DecisionWithdraw => "decision.withdraw", [Agent, Human], write,
        "Withdraw a decision you raised.";
    MessageSend => "message.send", [Agent, Human], write,
        "Send a message to a role or to the human.";
    MessageReceive => "message.receive", [Agent], write,
        "Receive undelivered messages for your role; delivery is recorded at hand-off.";
    MessageRead => "message.read", [Agent, Human], write,
        "Acknowledge a message delivered to your run (the human: one addressed to the human).";
    EventEmit => "event.emit", [Agent], write,
        "Record a routine observation.";
    LaunchRevoke => "launch.revoke", [Human], write,
        "Switch launching off for the business.";
    LaunchRestore => "launch.restore", [Human], write,
        "Switch launching back on for the business.";
    RunEnd => "run.end", [Human], write,
        "End a run: it frees the role it held, its capability stops working, and its host stops it.";
    Inbox => "inbox", [Agent, Reader, Human], read,
        "Open decisions routed to the caller and its unread messages.";
    Tasks => "tasks", [Agent, Reader, Human], read,
        "The newest state of each task of the business, tombstones included.";
    Agents => "agents", [Agent, Reader, Human], read,
        "The bound runs of the business: role, harness, pid, holding, revoked, the open decisions each raised, and the launch switch.";
    Trail => "trail", [Agent, Reader, Human], read,
        "Every record linked to a task, decision, message or role, in write order.";
    Head => "head", [Reader, Human], read,
        "The head of the evidence's hash chain: its size, its hash, and the note to keep outside the store.";
    History => "history", [Reader, Human], read,
        "The business's closed decisions (resolved, withdrawn, superseded), newest closing first, 100 at a time.";
    Changes => "changes", [Agent, Reader, Human], read,
        "Wait for what concerns you after a cursor: pointers to messages, decisions and roles, never their content.";
    BrowserRequest => "browser.request", [Agent], write,
        "Ask the in-app browser pane to perform one action and wait for its result.";
}

impl Verb {
    /// The verb with this wire name.
    ///
    /// # Errors
    /// `unknown-verb` for any other text (names are case-sensitive).
    pub fn parse(text: &str) -> Result<Verb, Refusal> {
        Verb::ALL
            .iter()
            .copied()
            .find(|v| v.as_str() == text)
            .ok_or(Refusal::UnknownVerb)
    }

    /// Whether `caller` may use the verb.
    pub fn serves(self, caller: CallerKind) -> bool {
        self.callers().contains(&caller)
    }

    /// Refuses a caller the verb does not serve, as [`admit`] does.
    ///
    /// # Errors
    /// `human-only` or `not-authorized`, as [`admit`].
    pub fn admit(self, caller: CallerKind) -> Result<(), Refusal> {
        admit(self.callers(), caller)
    }
}

/// Refuses `caller` unless it is one of `callers`: `human-only` when only the
/// human may (the launch switch), so the caller learns who can, and
/// `not-authorized` otherwise.
///
/// # Errors
/// `human-only` or `not-authorized` for a caller not listed.
pub fn admit(callers: &[CallerKind], caller: CallerKind) -> Result<(), Refusal> {
    if callers.contains(&caller) {
        Ok(())
    } else if callers == [CallerKind::Human] {
        Err(Refusal::HumanOnly)
    } else {
        Err(Refusal::NotAuthorized)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_parse_back() {
        let mut seen = HashSet::new();
        for &verb in Verb::ALL {
            assert!(seen.insert(verb.as_str()), "duplicate {verb}");
            assert_eq!(Verb::parse(verb.as_str()), Ok(verb));
            assert!(!verb.callers().is_empty(), "{verb}");
            assert!(verb.meaning().ends_with('.'), "{verb}");
        }
        assert_eq!(Verb::parse(AUTHORIZE), Err(Refusal::UnknownVerb));
        assert_eq!(Verb::parse(RECORD_EVENT), Err(Refusal::UnknownVerb));
        assert_eq!(Verb::parse("Role.claim"), Err(Refusal::UnknownVerb));
    }

    #[test]
    fn a_verb_serves_exactly_its_callers_and_prints_its_name() {
        let serves = |verb: Verb| {
            [CallerKind::Agent, CallerKind::Reader, CallerKind::Human].map(|c| verb.serves(c))
        };
        assert_eq!(serves(Verb::RoleClaim), [true, false, false]);
        assert_eq!(serves(Verb::MessageSend), [true, false, true]);
        assert_eq!(serves(Verb::Inbox), [true, true, true]);
        assert_eq!(Verb::DecisionResolve.to_string(), "decision.resolve");
    }

    #[test]
    fn a_caller_not_served_is_refused_human_only_where_only_the_human_is() {
        let of = |verb: Verb| CallerKind::ALL.map(|c| verb.admit(c));
        let (no, human_only) = (Err(Refusal::NotAuthorized), Err(Refusal::HumanOnly));
        assert_eq!(of(Verb::RoleClaim), [Ok(()), no, no]);
        assert_eq!(of(Verb::LaunchRevoke), [human_only, human_only, Ok(())]);
        assert_eq!(of(Verb::Changes), [Ok(()), Ok(()), Ok(())]);
        assert_eq!(
            CallerKind::ALL.map(|c| admit(TRUSTED_CALLERS, c)),
            [Ok(()), no, no]
        );
    }
}
