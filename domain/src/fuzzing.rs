//! Plain functions the fuzz targets in `fuzz/` call, and that the tests in
//! `tests/` replay over the seed corpus, so CI exercises every target.
//!
//! Each one panics only when an invariant breaks; that panic is the finding.

use crate::{
    Action, BrowserRequestId, BusinessId, Capability, ClientId, Date, DecisionId, MessageId,
    RoleInstance, RunId, TaskRef, Timestamp,
};

/// Every strict parser: whatever it accepts must print back to exactly the
/// same text (one text form per value) and parse again to the same value.
pub fn parsers(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    round_trip(text, Timestamp::parse, Timestamp::to_string);
    round_trip(text, Date::parse, Date::to_string);
    round_trip(text, TaskRef::parse, TaskRef::to_string);
    round_trip(text, DecisionId::parse, DecisionId::to_string);
    round_trip(text, MessageId::parse, MessageId::to_string);
    round_trip(text, BrowserRequestId::parse, BrowserRequestId::to_string);
    round_trip(text, BusinessId::parse, BusinessId::to_string);
    round_trip(text, RoleInstance::parse, RoleInstance::to_string);
    round_trip(text, RunId::parse, RunId::to_string);
    round_trip(text, ClientId::parse, ClientId::to_string);
    round_trip(text, Action::parse, Action::to_string);
    round_trip(text, Capability::parse, Capability::expose);
}

fn round_trip<T: PartialEq + std::fmt::Debug, E>(
    text: &str,
    parse: impl Fn(&str) -> Result<T, E>,
    print: impl Fn(&T) -> String,
) {
    if let Ok(value) = parse(text) {
        let printed = print(&value);
        assert_eq!(
            printed, text,
            "a parsed value prints back to its only text form"
        );
        assert!(
            parse(&printed).is_ok_and(|again| again == value),
            "the printed form parses to the same value"
        );
    }
}
