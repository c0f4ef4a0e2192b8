//! The one refusal type. Every way the broker says "no" is a variant here, and
//! every variant has a static, documented wire code.

use std::fmt;

/// Declares [`Refusal`] with its wire codes and meanings in one list, so
/// the enum, its codes, its meanings and [`Refusal::ALL`] can never drift
/// apart. The meaning is the variant's doc, the refusal table of
/// `docs/protocol.md` (`tests/tests/docs.rs` checks it) and the first
/// sentence of an MCP tool error.
macro_rules! refusals {
    ($($name:ident => $code:literal, $meaning:literal,)*) => {
        /// A refusal with a static code. Never carries driver or OS text.
        ///
        /// The `Display` form is the wire code itself, so formatting a refusal
        /// can never leak anything but the code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Refusal {
            $(#[doc = $meaning] $name,)*
        }

        impl Refusal {
            /// Every refusal, in declaration order.
            pub const ALL: &'static [Refusal] = &[$(Refusal::$name,)*];

            /// The static wire code, for example `"decision-consumed"`.
            pub const fn code(self) -> &'static str {
                match self {
                    $(Refusal::$name => $code,)*
                }
            }

            /// What the refusal means, in one sentence.
            pub const fn meaning(self) -> &'static str {
                match self {
                    $(Refusal::$name => $meaning,)*
                }
            }
        }
    };
}

refusals! {
    BadRequest => "bad-request",
        "The request is not a JSON object of the expected shape or types.",
    RequestTooLarge => "request-too-large",
        "The request line is longer than 64 KiB.",
    RequestTimeout => "request-timeout",
        "The request line did not arrive within the 5 s read deadline.",
    UnknownVerb => "unknown-verb",
        "The verb is not one the broker knows.",
    UnknownKey => "unknown-key",
        "The arguments carry a key the verb does not define.",
    UnknownRole => "unknown-role",
        "A role instance that the business does not define.",
    UnknownReference => "unknown-reference",
        "A decision, message or other id that does not exist.",
    UnknownAction => "unknown-action",
        "An action name that is malformed or not allowed in this place.",
    UnknownOption => "unknown-option",
        "A decision option key that the decision does not offer.",
    BadTimestamp => "bad-timestamp",
        "A timestamp that is not in canonical `YYYY-MM-DDTHH:mm:ss.sssZ` form.",
    BadDate => "bad-date",
        "A date that is not a real `YYYY-MM-DD` calendar day.",
    BadId => "bad-id",
        "An identifier with a bad form (charset, length, UUID layout).",
    BadTaskRef => "bad-task-ref",
        "A task ref that is not `vikunja:<project>/<task>` with positive numbers.",
    BadParameters => "bad-parameters",
        "Browser action parameters that fail validation.",
    BadConfig => "bad-config",
        "A business definition or boot configuration that fails validation.",
    GatedInAuthority => "gated-in-authority",
        "A gated-only action listed in an authority map.",
    BadCapability => "bad-capability",
        "The capability is unknown, malformed or of the wrong kind.",
    NotHolder => "not-holder",
        "The caller does not hold the role this verb needs.",
    RoleHeld => "role-held",
        "Another run holds the role.",
    RunRevoked => "run-revoked",
        "This run was revoked from this role and may never hold it again.",
    RunEnded => "run-ended",
        "This run has ended (its process is gone, the human ended it, or its budget ran out): its capability no longer works and it holds no role.",
    LaunchRevoked => "launch-revoked",
        "Launching is switched off for this business.",
    LaunchMismatch => "launch-mismatch",
        "A rebinding whose role, harness, address or process differs from the record.",
    LaunchFailed => "launch-failed",
        "The standalone host could not start an agent or hand it its capability.",
    SandboxUnavailable => "sandbox-unavailable",
        "The configuration requires a sandbox for its agents and bubblewrap (`bwrap`) is missing or cannot start one.",
    LaunchNotRunning => "launch-not-running",
        "A launch record's pid names no running process.",
    LaunchStartMismatch => "launch-start-mismatch",
        "A launch record's start time is not its process's (clock ticks since boot, field 22 of /proc/<pid>/stat).",
    LaunchForeignUser => "launch-foreign-user",
        "A launch record's process runs as another user than the broker.",
    HolderChanged => "holder-changed",
        "The role's holder changed since the revoke decision was raised.",
    HumanOnly => "human-only",
        "Only the human may do this.",
    HumanProofFailed => "human-proof-failed",
        "The human CLI's process proof failed.",
    CrossBusiness => "cross-business",
        "A reference into another business.",
    NotAuthorized => "not-authorized",
        "Neither authority nor an approved decision allows this.",
    NotResolver => "not-resolver",
        "The caller is not the decision's resolver.",
    NotRaiser => "not-raiser",
        "The caller did not raise this decision.",
    DecisionOpen => "decision-open",
        "The decision is still open.",
    DecisionClosed => "decision-closed",
        "The decision is resolved, withdrawn or superseded.",
    DecisionConsumed => "decision-consumed",
        "The decision's approval was already used.",
    DecisionMismatch => "decision-mismatch",
        "The decision's recorded class no longer matches policy.",
    TaskRefRequired => "task-ref-required",
        "A blocking decision needs a strict task ref.",
    ChoiceRequired => "choice-required",
        "A within-role decision must carry its `choice` at raise.",
    NotDelivered => "not-delivered",
        "The message was not delivered to the caller's run.",
    NoBrowserClient => "no-browser-client",
        "No connected client can serve the browser action.",
    BrowserTimeout => "browser-timeout",
        "The browser request was not settled in time.",
    BrowserAborted => "browser-aborted",
        "The browser request was aborted before it settled.",
    BrowserResultTooLarge => "browser-result-too-large",
        "The pane's result was larger than the result limit.",
    BrowserFailed => "browser-failed",
        "The pane reported that the action failed.",
    BrowserAddressRefused => "browser-address-refused",
        "The browser may not go to a loopback, private, link-local or unspecified address the browser configuration does not name.",
    StorageUnavailable => "storage-unavailable",
        "The evidence store could not commit or read.",
    ResponseTooLarge => "response-too-large",
        "The response is larger than the client's 4 MiB limit.",
    OutcomeUnknown => "outcome-unknown",
        "The connection ended before a reply: the action may or may not have happened.",
    BrokerUnavailable => "broker-unavailable",
        "The client could not reach the broker; nothing was sent.",
    BadResponse => "bad-response",
        "The broker's answer lacks a field this client reads, or has one of another type: client and broker differ in version.",
    ServiceFailed => "service-failed",
        "A trusted service callback failed.",
    CredentialExpired => "credential-expired",
        "A Vikunja token on or after its expiry date (from midnight UTC): it is not used.",
    CredentialLeak => "credential-leak",
        "A request, result or record contains a loaded service token: refused before anything was written or returned.",
    LockHeld => "lock-held",
        "Another broker holds the writer lock.",
    StaleLock => "stale-lock",
        "A writer lock remains from a broker that did not close cleanly.",
    NoLock => "no-lock",
        "`unlock` found no writer lock: there is nothing to recover.",
    UnsafePath => "unsafe-path",
        "A path is a symlink, has unsafe permissions or the wrong owner, or would show an agent the data root or the secrets folder.",
    SchemaMismatch => "schema-mismatch",
        "The database schema differs from the pinned one.",
    IntegrityFailed => "integrity-failed",
        "The database failed an integrity check.",
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
            schema-mismatch integrity-failed run-ended";
        for code in minimum.split_whitespace() {
            assert!(Refusal::from_code(code).is_some(), "missing {code}");
        }
    }
}
