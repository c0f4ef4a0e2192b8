//! The one refusal type. Every way the broker says "no" is a variant here, and
//! every variant has a static, documented wire code.

use std::fmt;

/// Declares [`Refusal`] with its wire codes in one list, so the enum, its
/// codes and [`Refusal::ALL`] can never drift apart.
macro_rules! refusals {
    ($($(#[doc = $doc:literal])* $name:ident => $code:literal,)*) => {
        /// A refusal with a static code. Never carries driver or OS text.
        ///
        /// The `Display` form is the wire code itself, so formatting a refusal
        /// can never leak anything but the code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Refusal {
            $($(#[doc = $doc])* $name,)*
        }

        impl Refusal {
            /// Every refusal, in declaration order.
            pub const ALL: &'static [Refusal] = &[$(Refusal::$name,)*];

            /// The static wire code, for example `"decision-consumed"`.
            pub fn code(self) -> &'static str {
                match self {
                    $(Refusal::$name => $code,)*
                }
            }
        }
    };
}

refusals! {
    /// The request is not a JSON object of the expected shape or types.
    BadRequest => "bad-request",
    /// The request line is longer than 64 KiB.
    RequestTooLarge => "request-too-large",
    /// The request line did not arrive within the 5 s read deadline.
    RequestTimeout => "request-timeout",
    /// The verb is not one the broker knows.
    UnknownVerb => "unknown-verb",
    /// The arguments carry a key the verb does not define.
    UnknownKey => "unknown-key",
    /// A role instance that the business does not define.
    UnknownRole => "unknown-role",
    /// A decision, message or other id that does not exist.
    UnknownReference => "unknown-reference",
    /// An action name that is malformed or not allowed in this place.
    UnknownAction => "unknown-action",
    /// A decision option key that the decision does not offer.
    UnknownOption => "unknown-option",
    /// A timestamp that is not in canonical `YYYY-MM-DDTHH:mm:ss.sssZ` form.
    BadTimestamp => "bad-timestamp",
    /// A date that is not a real `YYYY-MM-DD` calendar day.
    BadDate => "bad-date",
    /// An identifier with a bad form (charset, length, UUID layout).
    BadId => "bad-id",
    /// A task ref that is not `vikunja:<project>/<task>` with positive numbers.
    BadTaskRef => "bad-task-ref",
    /// Browser action parameters that fail validation.
    BadParameters => "bad-parameters",
    /// A business definition or boot configuration that fails validation.
    BadConfig => "bad-config",
    /// A gated-only action listed in an authority map.
    GatedInAuthority => "gated-in-authority",
    /// The capability is unknown, malformed or of the wrong kind.
    BadCapability => "bad-capability",
    /// The caller does not hold the role this verb needs.
    NotHolder => "not-holder",
    /// Another run holds the role.
    RoleHeld => "role-held",
    /// This run was revoked from this role and may never hold it again.
    RunRevoked => "run-revoked",
    /// Launching is switched off for this business.
    LaunchRevoked => "launch-revoked",
    /// A rebinding whose role, harness, address or process differs from the record.
    LaunchMismatch => "launch-mismatch",
    /// The standalone host could not start an agent or hand it its capability.
    LaunchFailed => "launch-failed",
    /// The role's holder changed since the revoke decision was raised.
    HolderChanged => "holder-changed",
    /// Only the human may do this.
    HumanOnly => "human-only",
    /// The human CLI's process proof failed.
    HumanProofFailed => "human-proof-failed",
    /// A reference into another business.
    CrossBusiness => "cross-business",
    /// Neither authority nor an approved decision allows this.
    NotAuthorized => "not-authorized",
    /// The caller is not the decision's resolver.
    NotResolver => "not-resolver",
    /// The caller did not raise this decision.
    NotRaiser => "not-raiser",
    /// The decision is still open.
    DecisionOpen => "decision-open",
    /// The decision is resolved, withdrawn or superseded.
    DecisionClosed => "decision-closed",
    /// The decision's approval was already used.
    DecisionConsumed => "decision-consumed",
    /// The decision's recorded class no longer matches policy.
    DecisionMismatch => "decision-mismatch",
    /// A blocking decision needs a strict task ref.
    TaskRefRequired => "task-ref-required",
    /// A within-role decision must carry its `choice` at raise.
    ChoiceRequired => "choice-required",
    /// The message was not delivered to the caller's run.
    NotDelivered => "not-delivered",
    /// No connected client can serve the browser action.
    NoBrowserClient => "no-browser-client",
    /// The browser request was not settled in time.
    BrowserTimeout => "browser-timeout",
    /// The browser request was aborted before it settled.
    BrowserAborted => "browser-aborted",
    /// The pane's result was larger than the result limit.
    BrowserResultTooLarge => "browser-result-too-large",
    /// The pane reported that the action failed.
    BrowserFailed => "browser-failed",
    /// The evidence store could not commit or read.
    StorageUnavailable => "storage-unavailable",
    /// The response is larger than the client's 4 MiB limit.
    ResponseTooLarge => "response-too-large",
    /// The connection ended before a reply: the action may or may not have happened.
    OutcomeUnknown => "outcome-unknown",
    /// The client could not reach the broker; nothing was sent.
    BrokerUnavailable => "broker-unavailable",
    /// A trusted service callback failed.
    ServiceFailed => "service-failed",
    /// A Vikunja token on or after its expiry date (from midnight UTC): it is not used.
    CredentialExpired => "credential-expired",
    /// A request, result or record contains a loaded service token: refused before anything was written or returned.
    CredentialLeak => "credential-leak",
    /// Another broker holds the writer lock.
    LockHeld => "lock-held",
    /// A writer lock remains from a broker that did not close cleanly.
    StaleLock => "stale-lock",
    /// `unlock` found no writer lock: there is nothing to recover.
    NoLock => "no-lock",
    /// A path is a symlink, has unsafe permissions or the wrong owner.
    UnsafePath => "unsafe-path",
    /// The database schema differs from the pinned one.
    SchemaMismatch => "schema-mismatch",
    /// The database failed an integrity check.
    IntegrityFailed => "integrity-failed",
}

impl Refusal {
    /// The refusal with this wire code, if any.
    pub fn from_code(code: &str) -> Option<Refusal> {
        Refusal::ALL.iter().copied().find(|r| r.code() == code)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_kebab_case_and_match_display() {
        let mut seen = HashSet::new();
        for &r in Refusal::ALL {
            let code = r.code();
            assert!(seen.insert(code), "duplicate code {code}");
            assert!(code.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'));
            assert_eq!(r.to_string(), code);
            assert_eq!(Refusal::from_code(code), Some(r));
        }
    }

    #[test]
    fn the_design_minimum_set_is_present() {
        let minimum = "bad-request request-too-large unknown-verb unknown-key unknown-role \
            unknown-reference unknown-action bad-capability not-holder role-held run-revoked \
            launch-revoked not-authorized not-resolver decision-open decision-consumed \
            decision-mismatch cross-business storage-unavailable response-too-large \
            outcome-unknown human-proof-failed service-failed lock-held stale-lock unsafe-path \
            schema-mismatch integrity-failed";
        for code in minimum.split_whitespace() {
            assert!(Refusal::from_code(code).is_some(), "missing {code}");
        }
    }
}
