//! The trusted \`record_event\`: the kinds it refuses, where an event is filed,
//! and the rules of its body.

use super::*;

fn observed(kind: &str, subject: Option<Subject>, request: Option<EventId>) -> Evidence {
    Evidence::Observed(mosaic_domain::evidence::Observation {
        business: acme(),
        agent: agent("ops", "o1"),
        kind: kind.into(),
        body: "{}".into(),
        subject,
        request,
    })
}

#[test]
fn record_event_refuses_the_kinds_only_the_broker_or_the_human_produce() {
    let mut f = Fixture::new();
    f.claim("ops", "o1");
    let ops = caller("ops", "o1");
    for kind in [
        "action.allowed",
        "human.input",
        "launch.revoked",
        "session.launched",
        "role.claimed",
        "decision.raised",
        "message.sent",
        "browser.completed",
    ] {
        f.refuse(&ops, record(kind, None, None), Refusal::NotAuthorized);
    }
    // Only the exact `action.allowed` kind is the bus's: other `action.`
    // kinds are an adapter's to record.
    f.expect(
        &ops,
        record("action.reviewed", None, None),
        Ok(Reply::Done),
        &[observed("action.reviewed", None, None)],
    );
}

#[test]
fn task_events_are_filed_under_their_task_and_only_a_created_task_names_its_request() {
    let mut f = Fixture::new();
    f.claim("ops", "o1");
    let ops = caller("ops", "o1");
    let task = Some(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap()));
    let input = Some(EventId::from_random([7; 16]));
    f.refuse(
        &ops,
        record("task.updated", None, None),
        Refusal::BadRequest,
    );
    f.refuse(
        &ops,
        record("task.updated", Some(Subject::Role(role("dev"))), None),
        Refusal::BadRequest,
    );
    f.refuse(
        &ops,
        record("task.updated", task.clone(), input),
        Refusal::BadRequest,
    );
    f.refuse(
        &ops,
        record("task.created", task.clone(), None),
        Refusal::BadRequest,
    );
    f.refuse(&ops, record("ci.passed", None, input), Refusal::BadRequest);
    f.expect(
        &ops,
        record("task.updated", task.clone(), None),
        Ok(Reply::Done),
        &[observed("task.updated", task.clone(), None)],
    );
    f.expect(
        &ops,
        record("task.created", task.clone(), input),
        Ok(Reply::Done),
        &[observed("task.created", task.clone(), input)],
    );
    f.expect(
        &ops,
        record("ci.passed", task.clone(), None),
        Ok(Reply::Done),
        &[observed("ci.passed", task, None)],
    );
}

#[test]
fn an_event_is_filed_only_under_a_role_or_decision_of_its_business() {
    let mut f = Fixture::new();
    f.claim("ops", "o1");
    let ops = caller("ops", "o1");
    let nobody = Some(Subject::Role(role("nobody")));
    let unknown = Some(Subject::Decision(did(9)));
    let routine = |subject: Option<Subject>| Command::EmitRoutine {
        target: None,
        subject,
    };
    f.refuse(&ops, routine(nobody.clone()), Refusal::UnknownRole);
    f.refuse(&ops, routine(unknown.clone()), Refusal::UnknownReference);
    f.refuse(
        &ops,
        record("ci.passed", nobody, None),
        Refusal::UnknownRole,
    );
    f.refuse(
        &ops,
        record("ci.passed", unknown, None),
        Refusal::UnknownReference,
    );
    let lead = Some(Subject::Role(role("lead")));
    f.expect(
        &ops,
        routine(lead.clone()),
        Ok(Reply::Done),
        &[Evidence::Allowed(ActionAllowed {
            business: acme(),
            agent: agent("ops", "o1"),
            action: act("routine"),
            target: None,
            decision: None,
            subject: lead.clone(),
        })],
    );
    f.raise("ops", "o1", 1, raise("repo.merge", None));
    let decision = Some(Subject::Decision(did(1)));
    f.expect(
        &ops,
        record("ci.passed", decision.clone(), None),
        Ok(Reply::Done),
        &[observed("ci.passed", decision, None)],
    );
}

/// A `record_event` body with these fields, the text standing for them.
fn body<'a>(
    task_ref: BodyField<'a>,
    requirement: BodyField<'a>,
    request: BodyField<'a>,
) -> EventBody<'a> {
    EventBody {
        text: "{}".into(),
        task_ref,
        requirement,
        request,
    }
}

#[test]
fn a_task_ref_in_a_body_is_text_naming_the_task_the_event_is_filed_under() {
    use BodyField::{Absent, NotText, Text};
    let task = Some(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap()));
    let event = |task_ref, subject| {
        Command::record_event(act("task.updated"), body(task_ref, Absent, Absent), subject)
    };
    assert_eq!(
        event(Text("vikunja:3/41"), task.clone()),
        Ok(Command::RecordEvent {
            kind: act("task.updated"),
            body: "{}".into(),
            subject: task.clone(),
            request: None,
        })
    );
    assert_eq!(event(Absent, task.clone()).map(|_| ()), Ok(()));
    assert_eq!(event(NotText, task.clone()), Err(Refusal::BadRequest));
    assert_eq!(
        event(Text("vikunja:3/42"), task.clone()),
        Err(Refusal::BadRequest)
    );
    assert_eq!(event(Text("vikunja:3/41"), None), Err(Refusal::BadRequest));
    assert_eq!(
        event(Text("no task"), task),
        Err(TaskRef::parse("no task").unwrap_err())
    );
}

#[test]
fn a_created_task_names_a_requirement_and_the_human_input_that_asked_for_it() {
    use BodyField::{Absent, NotText, Text};
    let task = Some(Subject::Task(TaskRef::parse("vikunja:3/41").unwrap()));
    let input = EventId::from_random([7; 16]).to_string();
    let created = |kind: &str, requirement, request| {
        Command::record_event(act(kind), body(Absent, requirement, request), task.clone())
    };
    assert_eq!(
        created("task.created", Text("R-1"), Text(&input)),
        Ok(Command::RecordEvent {
            kind: act("task.created"),
            body: "{}".into(),
            subject: task.clone(),
            request: Some(EventId::from_random([7; 16])),
        })
    );
    for requirement in [Absent, NotText, Text("")] {
        assert_eq!(
            created("task.created", requirement, Text(&input)),
            Err(Refusal::BadRequest),
            "{requirement:?}"
        );
    }
    for request in [Absent, NotText] {
        assert_eq!(
            created("task.created", Text("R-1"), request),
            Err(Refusal::BadRequest),
            "{request:?}"
        );
    }
    assert_eq!(
        created("task.created", Text("R-1"), Text("not an id")),
        Err(EventId::parse("not an id").unwrap_err())
    );
    // Other kinds name no request, whatever their body holds.
    assert_eq!(
        created("task.updated", Absent, Text(&input)),
        Ok(record("task.updated", task.clone(), None))
    );
}
