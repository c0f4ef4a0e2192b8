//! Which records share a typed row (`mosaic-bus/5`): a send's
//! `action.allowed` rides on its message's row when every column of the
//! grant follows from the message, which saves a send two B-trees (the
//! grant's table and its subject index). The writer asks [`plan`] for
//! each record of a stage; the ledger pass and the view `actions_allowed`
//! derive the carried grant from the message the same way.

use mosaic_domain::evidence::{Evidence, MessageEvidence, Recipient, Sender, Stamped, Subject};

/// Whether a record shares a typed row with the record beside it: a
/// send's `action.allowed` is carried by its message's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carry {
    /// The record has a typed row of its own and carries nothing.
    Alone,
    /// An `action.allowed` whose typed row is the next record's message.
    ByNext,
    /// A message that carries the `action.allowed` before it, with this
    /// grant (`within-role` or `approved`).
    Previous(&'static str),
}

/// The grant with which `message`'s row can carry `allowed`, the record
/// right before it: when every column of `allowed` follows from the
/// message (`mosaic-bus/5`, the view `actions_allowed`), else `None`, and
/// each keeps a row of its own.
fn carried(allowed: &Stamped, message: &Stamped) -> Option<&'static str> {
    let (Evidence::Allowed(a), Evidence::Message(MessageEvidence::Sent(m))) =
        (&allowed.evidence, &message.evidence)
    else {
        return None;
    };
    let Sender::Agent(from) = &m.from else {
        return None;
    };
    let (target, subject) = match &m.to {
        Recipient::Role(r) => (r.as_str(), Some(Subject::Role(r.clone()))),
        Recipient::Human => ("human", None),
    };
    let same = a.business == m.business
        && &a.agent == from
        && a.action.as_str() == "message.send"
        && a.target.as_ref().map(ToString::to_string).as_deref() == Some(target)
        && a.subject == subject;
    if !same {
        return None;
    }
    match a.decision {
        None => Some("within-role"),
        Some(d) if m.decision == Some(d) => Some("approved"),
        Some(_) => None,
    }
}

/// How each of `records`, staged together in this order, is written: a
/// grant followed by the message that can carry it is [`Carry::ByNext`],
/// that message [`Carry::Previous`], every other record [`Carry::Alone`].
pub(crate) fn plan(records: &[Stamped]) -> Vec<Carry> {
    let mut plan = Vec::with_capacity(records.len());
    // The grant of the record at hand when the record before it rides on it.
    let mut carrying: Option<&'static str> = None;
    for (i, record) in records.iter().enumerate() {
        plan.push(match carrying.take() {
            Some(grant) => Carry::Previous(grant),
            None => match records.get(i + 1).and_then(|next| carried(record, next)) {
                Some(grant) => {
                    carrying = Some(grant);
                    Carry::ByNext
                }
                None => Carry::Alone,
            },
        });
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_domain::evidence::{ActionAllowed, AgentRef, MessageRecord};
    use mosaic_domain::{
        Action, BusinessId, DecisionId, MessageId, RoleInstance, RunId, Target, Timestamp,
    };

    fn agent(role: &str) -> AgentRef {
        AgentRef {
            role: RoleInstance::parse(role).unwrap(),
            run: RunId::parse("r1").unwrap(),
        }
    }

    fn at(evidence: Evidence) -> Stamped {
        Stamped {
            at: Timestamp::from_unix_ms(1).unwrap(),
            evidence,
        }
    }

    /// `lead`'s grant to send to `dev`, with `decision`.
    fn grant(target: &str, decision: Option<DecisionId>) -> Stamped {
        at(Evidence::Allowed(ActionAllowed {
            business: BusinessId::parse("acme").unwrap(),
            agent: agent("lead"),
            action: Action::parse("message.send").unwrap(),
            target: Some(Target::parse(target).unwrap()),
            decision,
            subject: Some(Subject::Role(RoleInstance::parse("dev").unwrap())),
        }))
    }

    /// `lead`'s message to `dev`, citing `decision`.
    fn message(decision: Option<DecisionId>) -> Stamped {
        at(Evidence::Message(MessageEvidence::Sent(Box::new(
            MessageRecord {
                id: MessageId::from_random([1; 16]),
                business: BusinessId::parse("acme").unwrap(),
                from: Sender::Agent(agent("lead")),
                to: Recipient::Role(RoleInstance::parse("dev").unwrap()),
                class: None,
                body: String::new(),
                in_reply_to: None,
                corrects: None,
                decision,
                request: None,
            },
        ))))
    }

    #[test]
    fn a_grant_rides_on_the_message_after_it_only_when_the_message_says_all_of_it() {
        let d = DecisionId::from_random([2; 16]);
        let other = DecisionId::from_random([3; 16]);
        let carried = |grant: &'static str| vec![Carry::ByNext, Carry::Previous(grant)];
        let apart = vec![Carry::Alone, Carry::Alone];
        assert_eq!(
            plan(&[grant("dev", None), message(None)]),
            carried("within-role")
        );
        // A within-role send may cite a decision it does not spend.
        assert_eq!(
            plan(&[grant("dev", None), message(Some(d))]),
            carried("within-role")
        );
        assert_eq!(
            plan(&[grant("dev", Some(d)), message(Some(d))]),
            carried("approved")
        );
        assert_eq!(plan(&[grant("dev", Some(d)), message(Some(other))]), apart);
        assert_eq!(plan(&[grant("ops", None), message(None)]), apart);
        assert_eq!(plan(&[message(None), grant("dev", None)]), apart);
        assert_eq!(
            plan(&[grant("dev", None), grant("dev", None), message(None)]),
            [Carry::Alone, Carry::ByNext, Carry::Previous("within-role")]
        );
    }
}
