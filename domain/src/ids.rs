//! Strict identifier newtypes. Each has exactly one text form, checked by its
//! `parse`, and no way to build an invalid value.
//!
//! Random ids and secrets are made from bytes the caller supplies (the
//! entropy port), because the domain has no randomness of its own.

use std::fmt;
use std::str::FromStr;

use crate::Refusal;

/// Declares a string newtype checked by `$check` (a `fn(&str) -> bool`).
macro_rules! name_type {
    ($(#[$meta:meta])* $name:ident, $check:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Parses the text form.
            ///
            /// # Errors
            /// `bad-id` when the text is not a valid value of this type.
            pub fn parse(text: &str) -> Result<Self, Refusal> {
                let check: fn(&str) -> bool = $check;
                if check(text) {
                    Ok(Self(text.to_owned()))
                } else {
                    Err(Refusal::BadId)
                }
            }

            /// The text form.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = Refusal;
            fn from_str(text: &str) -> Result<Self, Refusal> {
                Self::parse(text)
            }
        }
    };
}

/// 1 to 64 characters: an ASCII letter or digit, then letters, digits, `.`, `_`, `-`.
fn is_name(text: &str) -> bool {
    is_token(text, 64)
}

fn is_token(text: &str, max: usize) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

name_type!(
    /// A business id, for example `acme`.
    BusinessId,
    is_name
);
name_type!(
    /// A role instance within a business, for example `dev-1`. `human` is
    /// reserved for the human recipient and is never a role instance.
    RoleInstance,
    |t| is_name(t) && t != "human"
);
name_type!(
    /// A launch's run id, chosen by the trusted launcher (1 to 128 characters).
    RunId,
    |t| is_token(t, 128)
);
name_type!(
    /// A browser client's self-chosen id (1 to 128 characters).
    ClientId,
    |t| is_token(t, 128)
);
name_type!(
    /// The configured human of a business, for example `alice`.
    HumanName,
    is_name
);

/// Declares a UUID-shaped id: 128 random bits, lowercase hyphenated text.
macro_rules! uuid_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name([u8; 16]);

        impl $name {
            /// Builds a version-4 UUID from 16 random bytes.
            pub fn from_random(mut bytes: [u8; 16]) -> Self {
                bytes[6] = (bytes[6] & 0x0f) | 0x40;
                bytes[8] = (bytes[8] & 0x3f) | 0x80;
                Self(bytes)
            }

            /// Parses lowercase hyphenated `8-4-4-4-12` hex.
            ///
            /// # Errors
            /// `bad-id` for any other text.
            pub fn parse(text: &str) -> Result<Self, Refusal> {
                parse_uuid(text).map(Self).ok_or(Refusal::BadId)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_uuid(f, &self.0)
            }
        }

        impl FromStr for $name {
            type Err = Refusal;
            fn from_str(text: &str) -> Result<Self, Refusal> {
                Self::parse(text)
            }
        }
    };
}

uuid_type!(
    /// A decision id.
    DecisionId
);
uuid_type!(
    /// A message id.
    MessageId
);
uuid_type!(
    /// A broker event id (evidence rows, human inputs).
    EventId
);
uuid_type!(
    /// A browser request id.
    BrowserRequestId
);

const UUID_DASHES: [usize; 4] = [8, 13, 18, 23];

fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let b = text.as_bytes();
    if b.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibbles = 0;
    for (i, &c) in b.iter().enumerate() {
        if UUID_DASHES.contains(&i) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        let v = lower_hex(c)?;
        out[nibbles / 2] |= v << (4 * (1 - nibbles % 2));
        nibbles += 1;
    }
    Some(out)
}

fn write_uuid(f: &mut fmt::Formatter<'_>, bytes: &[u8; 16]) -> fmt::Result {
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            f.write_str("-")?;
        }
        write!(f, "{byte:02x}")?;
    }
    Ok(())
}

fn lower_hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Declares a 256-bit secret: 64 lowercase hex characters on the wire, and a
/// `Debug` form that never shows the value.
macro_rules! secret_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone)]
        pub struct $name([u8; 32]);

        /// Equality is [`Self::ct_eq`]: a lookup of a presented secret
        /// (a registry's map, a token check) takes the same time wherever
        /// the values differ.
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.ct_eq(other)
            }
        }

        impl Eq for $name {}

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.0.hash(state);
            }
        }

        impl $name {
            /// Wraps 32 random bytes.
            pub fn from_random(bytes: [u8; 32]) -> Self {
                Self(bytes)
            }

            /// Parses 64 lowercase hex characters.
            ///
            /// # Errors
            /// `bad-capability` for any other text.
            pub fn parse(text: &str) -> Result<Self, Refusal> {
                let b = text.as_bytes();
                if b.len() != 64 {
                    return Err(Refusal::BadCapability);
                }
                let mut out = [0u8; 32];
                for (i, pair) in b.chunks_exact(2).enumerate() {
                    let hi = lower_hex(pair[0]).ok_or(Refusal::BadCapability)?;
                    let lo = lower_hex(pair[1]).ok_or(Refusal::BadCapability)?;
                    out[i] = hi << 4 | lo;
                }
                Ok(Self(out))
            }

            /// The 64-character wire form. Only adapters that hand the secret
            /// to its owner call this.
            pub fn expose(&self) -> String {
                self.0.iter().map(|b| format!("{b:02x}")).collect()
            }

            /// Compares in time independent of where the values differ.
            pub fn ct_eq(&self, other: &Self) -> bool {
                let differ = self.0.iter().zip(other.0.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
                // Kept opaque, so the fold is not turned into an early exit.
                std::hint::black_box(differ) == 0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($name), "(<redacted>)"))
            }
        }
    };
}

secret_type!(
    /// A broker capability: 256 random bits bound to one run or one reader.
    /// Never stored, never logged, gone with the process.
    Capability
);
secret_type!(
    /// The token a browser client receives when its claim wins; only it can
    /// post the request's result.
    ClaimToken
);

/// A strict task ref, `vikunja:<project>/<task>`: both numbers positive,
/// without leading zeros or signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskRef {
    project: u64,
    task: u64,
}

impl TaskRef {
    /// Parses the strict form.
    ///
    /// # Errors
    /// `bad-task-ref` for anything else, including numbers beyond `u64`.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        let rest = text.strip_prefix("vikunja:").ok_or(Refusal::BadTaskRef)?;
        let (project, task) = rest.split_once('/').ok_or(Refusal::BadTaskRef)?;
        Ok(Self {
            project: positive(project).ok_or(Refusal::BadTaskRef)?,
            task: positive(task).ok_or(Refusal::BadTaskRef)?,
        })
    }

    /// The Vikunja project number.
    pub fn project(self) -> u64 {
        self.project
    }

    /// The Vikunja task number.
    pub fn task(self) -> u64 {
        self.task
    }
}

fn positive(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.is_empty() || b[0] == b'0' || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    text.parse().ok()
}

impl fmt::Display for TaskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vikunja:{}/{}", self.project, self.task)
    }
}

/// An action name: dot-separated lowercase segments, for example
/// `message.send`, `browser.click` or `routine` (at most 64 characters).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Action(String);

impl Action {
    /// Parses an action name.
    ///
    /// # Errors
    /// `unknown-action` for a malformed name.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        let segment_ok = |s: &str| {
            let b = s.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_lowercase()
                && b.iter()
                    .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        };
        if text.len() <= 64 && text.split('.').all(segment_ok) {
            Ok(Self(text.to_owned()))
        } else {
            Err(Refusal::UnknownAction)
        }
    }

    /// The text form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `<namespace>.<name>` from two segments the crate knows are valid
    /// (lowercase words); a unit test checks every use.
    pub(crate) fn joined(namespace: &'static str, name: &'static str) -> Self {
        Self(format!("{namespace}.{name}"))
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What an action is aimed at: a role instance, a URL origin, a repository.
/// Free text of 1 to 512 characters without control characters; equality is
/// exact.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target(String);

impl Target {
    /// Parses a target.
    ///
    /// # Errors
    /// `bad-request` for empty, oversized or control-character text.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        if !text.is_empty() && text.len() <= 512 && !text.chars().any(char::is_control) {
            Ok(Self(text.to_owned()))
        } else {
            Err(Refusal::BadRequest)
        }
    }

    /// The text form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&RoleInstance> for Target {
    fn from(role: &RoleInstance) -> Self {
        Self(role.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_one_to_512_characters_without_controls_and_prints_as_given() {
        let longest = "t".repeat(512);
        for good in ["dev", "https://example.com:8443", longest.as_str(), "é ü"] {
            let target = Target::parse(good).unwrap();
            assert_eq!(
                (target.as_str(), target.to_string()),
                (good, good.to_owned())
            );
        }
        let too_long = "t".repeat(513);
        for bad in ["", too_long.as_str(), "line\nbreak", "\u{7f}", "tab\t"] {
            assert_eq!(Target::parse(bad), Err(Refusal::BadRequest), "{bad:?}");
        }
    }

    #[test]
    fn an_action_prints_as_it_parses() {
        let action = Action::parse("message.send").unwrap();
        assert_eq!(action.to_string(), "message.send");
    }

    #[test]
    fn task_refs_are_strict() {
        let r = TaskRef::parse("vikunja:3/41").unwrap();
        assert_eq!((r.project(), r.task()), (3, 41));
        assert_eq!(r.to_string(), "vikunja:3/41");
        for bad in [
            "vikunja:0/1",
            "vikunja:1/0",
            "vikunja:01/1",
            "vikunja:1/01",
            "vikunja:+1/1",
            "vikunja:-1/1",
            "vikunja:1/1/1",
            "vikunja:1",
            "vikunja:/1",
            "Vikunja:1/1",
            "vikunja:1 /1",
            "vikunja:99999999999999999999/1",
            "gitea:1/1",
        ] {
            assert_eq!(TaskRef::parse(bad), Err(Refusal::BadTaskRef), "{bad}");
        }
    }

    #[test]
    fn uuids_round_trip_and_reject_other_forms() {
        let id = DecisionId::from_random([0xab; 16]);
        let text = id.to_string();
        assert_eq!(text, "abababab-abab-4bab-abab-abababababab");
        assert_eq!(DecisionId::parse(&text), Ok(id));
        for bad in [
            "ABABABAB-abab-4bab-abab-abababababab",
            "abababababab-4bab-abab-abababababab",
            "abababab-abab-4bab-abab-ababababababab",
            "{abababab-abab-4bab-abab-abababababab}",
            "",
        ] {
            assert_eq!(DecisionId::parse(bad), Err(Refusal::BadId), "{bad}");
        }
    }

    #[test]
    fn secrets_round_trip_and_never_print() {
        let cap = Capability::from_random([7; 32]);
        assert_eq!(Capability::parse(&cap.expose()), Ok(cap.clone()));
        assert!(!format!("{cap:?}").contains("0707"));
        assert!(cap.ct_eq(&Capability::from_random([7; 32])));
        assert!(!cap.ct_eq(&Capability::from_random([8; 32])));
        assert_eq!(Capability::parse("07"), Err(Refusal::BadCapability));
        assert_eq!(
            Capability::parse(&"G".repeat(64)),
            Err(Refusal::BadCapability)
        );
    }

    #[test]
    fn names_and_actions_are_checked() {
        assert!(RoleInstance::parse("dev-1").is_ok());
        assert_eq!(RoleInstance::parse("human"), Err(Refusal::BadId));
        assert_eq!(RoleInstance::parse("a/b"), Err(Refusal::BadId));
        assert_eq!(BusinessId::parse(""), Err(Refusal::BadId));
        assert_eq!(BusinessId::parse(&"a".repeat(65)), Err(Refusal::BadId));
        assert!(Action::parse("browser.click").is_ok());
        assert!(Action::parse("routine").is_ok());
        for bad in ["", ".x", "x.", "X", "x..y", "1x", "x y"] {
            assert_eq!(Action::parse(bad), Err(Refusal::UnknownAction), "{bad}");
        }
    }
}
