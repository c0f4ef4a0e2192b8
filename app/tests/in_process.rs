//! The library form of the broker: `start_broker`, `bind_launch`, the trusted
//! adapter API (`authorize`, `record_event`) and `close`, in this process.

use mosaic_adapters::config::boot_from_value;
use mosaic_app::runtime::start_broker;
use mosaic_client::socket::Client;
use mosaic_domain::authority::Grant;
use mosaic_domain::evidence::Subject;
use mosaic_domain::{Action, Refusal, TaskRef};
use serde_json::json;

#[test]
fn an_in_process_host_binds_authorizes_records_and_closes() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let business: serde_json::Value =
        serde_json::from_str(mosaic_app::commands::demo::EXAMPLE_BUSINESS).unwrap();
    let business = business.get("business").cloned().unwrap_or(business);
    let config = boot_from_value(json!({
        "dataRoot": dir.path(),
        "businesses": {"acme": business},
        "launches": [{"business": "acme", "role": "dev", "run": "d1", "harness": "pi", "pid": std::process::id(), "startTime": own_start()}],
        "readers": ["acme"],
        "repoRoots": []
    }))
    .expect("valid boot config");
    let (broker, booted) = start_broker(config).expect("the broker starts");
    let dev = booted.launches[0].cap.clone();
    let client = Client::new(&booted.socket, dev.expose());
    assert_eq!(
        client.call("role.claim", json!({})),
        Ok(json!({"status": "claimed"}))
    );

    assert_eq!(
        broker.authorize(&dev, Action::parse("repo.push").unwrap(), None, None),
        Ok(Grant::WithinRole)
    );
    assert_eq!(
        broker.authorize(&dev, Action::parse("repo.merge").unwrap(), None, None),
        Err(Refusal::NotAuthorized)
    );
    let reader = booted.readers[0].cap.clone();
    assert_eq!(
        broker.authorize(&reader, Action::parse("repo.push").unwrap(), None, None),
        Err(Refusal::NotAuthorized)
    );

    let task = Subject::Task(TaskRef::parse("vikunja:3/41").unwrap());
    assert_eq!(
        broker.record_event(
            &dev,
            "task.updated",
            &json!({"state": "doing"}),
            Some(task.clone())
        ),
        Ok(())
    );
    assert_eq!(
        broker.record_event(
            &dev,
            "task.updated",
            &json!({"task_ref": "vikunja:3/42"}),
            Some(task.clone())
        ),
        Err(Refusal::BadRequest),
        "a task ref in the body must match the subject"
    );
    assert_eq!(
        broker.record_event(
            &dev,
            "task.created",
            &json!({"requirement": "R-1"}),
            Some(task.clone())
        ),
        Err(Refusal::BadRequest)
    );
    assert_eq!(
        broker.record_event(&dev, "human.input", &json!({}), None),
        Err(Refusal::NotAuthorized)
    );
    assert_eq!(
        broker.record_event(&dev, "launch.revoke", &json!({}), None),
        Err(Refusal::NotAuthorized)
    );
    assert_eq!(
        broker.record_event(
            &dev,
            "browser.completed",
            &json!({"action": "snapshot", "ok": true}),
            Some(Subject::Role(
                mosaic_domain::RoleInstance::parse("dev").unwrap()
            ))
        ),
        Err(Refusal::NotAuthorized),
        "only the broker records what a browser request came to"
    );
    let tasks = Client::new(&booted.socket, reader.expose())
        .call("tasks", json!({}))
        .expect("tasks");
    assert_eq!(tasks[0]["task_ref"], "vikunja:3/41");
    assert_eq!(tasks[0]["kind"], "task.updated");

    // A later launch gets a working capability; the same run bound again gets
    // a new one and its old one stops working.
    let record = |harness: &str, start: u64| {
        mosaic_adapters::config::launch_from_value(json!({
            "business": "acme", "role": "lead", "run": "l1", "harness": harness, "pid": std::process::id(), "startTime": start
        }))
        .unwrap()
    };
    let start = own_start();
    let first = broker.bind_launch(record("pi", start)).expect("bound");
    let lead = Client::new(&booted.socket, first.cap.expose());
    assert_eq!(
        lead.call("role.claim", json!({})),
        Ok(json!({"status": "claimed"}))
    );
    let again = broker.bind_launch(record("pi", start)).expect("rebound");
    assert_eq!(lead.call("inbox", json!({})), Err(Refusal::BadCapability));
    assert!(Client::new(&booted.socket, again.cap.expose())
        .call("inbox", json!({}))
        .is_ok());
    assert_eq!(
        broker.bind_launch(record("claude-code", start)).err(),
        Some(Refusal::LaunchMismatch)
    );
    assert_eq!(
        broker.bind_launch(record("pi", start + 1)).err(),
        Some(Refusal::LaunchStartMismatch)
    );

    broker.close().expect("clean close");
    assert!(!dir.path().join("bus/bus.sock").exists());
    assert!(!dir.path().join("bus/writer.lock").exists());
    assert_eq!(
        client.call("inbox", json!({})),
        Err(Refusal::BrokerUnavailable)
    );
}

/// This test process's start time: the broker runs in it, and its launch
/// records name it.
fn own_start() -> u64 {
    mosaic_adapters::procfs::ProcFs::new()
        .current()
        .expect("our own stat")
        .start_time
}
