//! The host IPC: boot, `bindLaunch`, close, end of stdin, signals; the data
//! root's lock and the socket's mode.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};

use crate::support::{
    acme, acme_launches, assert_gone, boot_line, config, data_root, globex, is_cap, launch,
    launch_pid, mode_of, stand_in, start_time, without_last_at, Broker,
};

#[test]
fn boot_replies_with_the_socket_and_one_distinct_capability_per_launch_and_reader() {
    let root = data_root();
    let launches = vec![
        launch("acme", "lead", "lead-1"),
        launch("acme", "dev", "dev-1"),
        launch("globex", "dev", "g-dev-1"),
    ];
    let broker = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme(), globex()],
            &launches,
            &["acme", "globex", "acme"],
        ),
    );
    let reply = &broker.boot;
    let object = reply.as_object().expect("an object");
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["launches", "ok", "path", "readers"], "{reply}");
    assert_eq!(reply["ok"], json!(true));
    assert_eq!(
        reply["path"],
        json!(root.path().join("bus/bus.sock").to_str().expect("UTF-8"))
    );
    let caps: Vec<String> = reply["launches"]
        .as_array()
        .expect("launches")
        .iter()
        .chain(reply["readers"].as_array().expect("readers"))
        .map(|entry| entry["cap"].as_str().expect("a cap").to_owned())
        .collect();
    assert_eq!(caps.len(), 6);
    for cap in &caps {
        assert!(is_cap(cap), "{cap:?} is not 64 lowercase hex");
    }
    assert_eq!(
        caps.iter().collect::<HashSet<_>>().len(),
        6,
        "caps are distinct"
    );
    assert_eq!(
        reply["launches"],
        json!([
            {"business": "acme", "run": "lead-1", "cap": caps[0]},
            {"business": "acme", "run": "dev-1", "cap": caps[1]},
            {"business": "globex", "run": "g-dev-1", "cap": caps[2]},
        ])
    );
    assert_eq!(
        reply["readers"],
        json!([
            {"business": "acme", "cap": caps[3]},
            {"business": "globex", "cap": caps[4]},
            {"business": "acme", "cap": caps[5]},
        ])
    );
    // Each capability works and is bound to its own run or reader.
    broker.agent("lead-1").claim();
    broker.agent("dev-1").claim();
    assert_eq!(
        without_last_at(broker.reader(1).ok("agents", json!({}))),
        json!([{"role": "dev", "run": "g-dev-1", "harness": "pi", "address": null,
                "pid": launch_pid(), "start_time": start_time(),
                "holding": false, "revoked": false,
                "launching": true, "waitsOn": [], "exited": null,
                "ended": null, "restarts": 0, "usage": null,
                "lastVerb": null, "waiting": false}])
    );
    // Capabilities live only in the broker's memory: never logged, never
    // written to the store.
    let log = broker.close();
    assert!(log.contains("serving"), "{log}");
    let mut stored = Vec::new();
    for file in ["bus.sqlite", "bus.sqlite-wal"] {
        if let Ok(bytes) = std::fs::read(root.path().join("bus").join(file)) {
            stored.extend(bytes);
        }
    }
    assert!(stored.len() > 4096, "the store holds the launches");
    for cap in &caps {
        assert!(!log.contains(cap.as_str()), "a capability was logged");
        let binary: Vec<u8> = (0..32)
            .map(|i| u8::from_str_radix(&cap[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        for form in [cap.as_bytes(), &binary[..]] {
            assert!(
                !stored.windows(form.len()).any(|w| w == form),
                "a capability was stored"
            );
        }
    }
}

#[test]
fn boot_without_launches_or_readers_issues_no_capability() {
    let root = data_root();
    let broker = Broker::boot(root.path(), &config(root.path(), &[acme()], &[], &[]));
    assert_eq!(
        broker.boot,
        json!({"ok": true, "path": root.path().join("bus/bus.sock").to_str().expect("UTF-8"),
               "launches": [], "readers": []})
    );
    broker.close();
}

#[test]
fn the_bus_folder_socket_store_and_lock_are_private() {
    let root = data_root();
    let broker = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme()],
            &[launch("acme", "lead", "lead-1")],
            &[],
        ),
    );
    let bus = root.path().join("bus");
    assert_eq!(mode_of(&bus.join("bus.sock")), (0o600, true), "socket 0600");
    assert_eq!(mode_of(&bus), (0o700, false), "bus/ 0700");
    assert_eq!(mode_of(&bus.join("bus.sqlite")), (0o600, false));
    assert_eq!(mode_of(&bus.join("writer.lock")), (0o600, false));
    broker.close();
    assert!(bus.join("bus.sqlite").exists(), "the store stays");
}

#[test]
fn a_second_broker_on_the_same_data_root_refuses_lock_held() {
    let root = data_root();
    let cfg = config(
        root.path(),
        &[acme()],
        &[launch("acme", "lead", "lead-1")],
        &[],
    );
    let first = Broker::boot(root.path(), &cfg);
    let mut second = Broker::spawn(root.path());
    second.send(&boot_line(&cfg).to_string());
    let line = second.line().expect("a refusal line");
    assert_eq!(
        serde_json::from_str::<Value>(&line).expect("JSON"),
        json!({"ok": false, "error": "lock-held"})
    );
    assert_eq!(second.wait(), 2);
    // The refused broker took nothing away from the running one.
    assert!(root.path().join("bus/bus.sock").exists());
    assert!(root.path().join("bus/writer.lock").exists());
    first.agent("lead-1").claim();
    first.close();
}

#[test]
fn a_bad_boot_prints_one_static_code_and_exits_2() {
    let root = data_root();
    let good = config(
        root.path(),
        &[acme()],
        &[launch("acme", "lead", "lead-1")],
        &["acme"],
    );
    let edit = |pointer: &str, value: Value| {
        let mut cfg = good.clone();
        *cfg.pointer_mut(pointer).expect(pointer) = value;
        cfg
    };
    let mut unknown_key = good.clone();
    unknown_key["colour"] = json!("blue");
    let mut gated = acme();
    gated["roles"]["dev"]["authority"]["crossRole"] = json!(["repo.merge", "launch.revoke"]);
    let mut no_maps = acme();
    no_maps["roles"]["qa"] = json!({});
    let cases = [
        (unknown_key, "bad-config"),
        (edit("/dataRoot", json!("relative/root")), "bad-config"),
        (edit("/launches/0/role", json!("ghost")), "unknown-role"),
        (edit("/launches/0/harness", json!("codex")), "bad-config"),
        (edit("/launches/0/business", json!("globex")), "bad-config"),
        (edit("/readers", json!(["globex"])), "bad-config"),
        (edit("/businesses/acme", gated), "gated-in-authority"),
        (edit("/businesses/acme", no_maps), "bad-config"),
        (edit("/businesses/acme/id", json!("other")), "bad-config"),
        (
            edit(
                "/dataRoot",
                json!(root.path().join("missing").to_str().expect("UTF-8")),
            ),
            "unsafe-path",
        ),
    ];
    for (cfg, code) in cases {
        Broker::boot_refused(root.path(), &cfg, code);
    }
    // The same data root boots afterwards: no refusal left a lock behind.
    Broker::boot(root.path(), &good).close();
}

#[test]
fn a_data_root_others_may_write_refuses_unsafe_path() {
    let root = data_root();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    Broker::boot_refused(
        root.path(),
        &config(root.path(), &[acme()], &[], &[]),
        "unsafe-path",
    );
    assert!(!root.path().join("bus").exists(), "nothing was created");
}

#[test]
fn a_malformed_or_misplaced_first_line_refuses_and_exits_2() {
    let root = data_root();
    let cfg = config(root.path(), &[acme()], &[], &[]);
    let mut extra = boot_line(&cfg);
    extra["verbose"] = json!(true);
    let cases = [
        ("{\"op\":\"boot\"".to_owned(), "bad-request"),
        ("[]".to_owned(), "bad-request"),
        (r#"{"op":"close"}"#.to_owned(), "bad-request"),
        (r#"{"op":"bindLaunch"}"#.to_owned(), "bad-request"),
        // The first line must be a boot: any other op is out of place.
        (
            json!({"op": "bindLaunch", "record": launch("acme", "lead", "lead-1")}).to_string(),
            "bad-request",
        ),
        (r#"{"op":"boot"}"#.to_owned(), "bad-request"),
        (extra.to_string(), "unknown-key"),
    ];
    for (line, code) in cases {
        let mut broker = Broker::spawn(root.path());
        broker.send(&line);
        broker.expect_failure(code);
    }
    // End of stdin before any boot.
    let mut broker = Broker::spawn(root.path());
    broker.close_stdin();
    broker.expect_failure("bad-request");
}

#[test]
fn bind_launch_issues_a_new_working_capability() {
    let root = data_root();
    let mut broker = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme()],
            &[launch("acme", "lead", "lead-1")],
            &["acme"],
        ),
    );
    let dev = broker.bind_ok(&launch("acme", "dev", "dev-7"));
    dev.claim();
    let claimed: Vec<Value> = broker
        .agent("lead-1")
        .trail("dev")
        .into_iter()
        .map(|r| json!([r["kind"], r["run"]]))
        .collect();
    assert_eq!(
        claimed,
        [
            json!(["session.launched", "dev-7"]),
            json!(["role.claimed", "dev-7"])
        ]
    );
    broker.close();
}

#[test]
fn an_identical_rebind_succeeds_and_retires_the_old_capability() {
    let root = data_root();
    let record = launch("acme", "dev", "dev-1");
    let mut broker = Broker::boot(
        root.path(),
        &config(root.path(), &[acme()], std::slice::from_ref(&record), &[]),
    );
    let old = broker.agent("dev-1");
    old.claim();
    let new = broker.bind_ok(&record);
    assert_ne!(new.cap, old.cap);
    old.refused("role.claim", json!({}), "bad-capability");
    // The run is the same, so it still holds its role.
    assert_eq!(new.ok("role.claim", json!({})), json!({"status": "held"}));
    broker.close();
}

#[test]
fn a_changed_launch_identity_refuses_launch_mismatch_and_the_broker_keeps_serving() {
    let root = data_root();
    let mut record = launch("acme", "dev", "dev-1");
    record["address"] = json!("tmux:%3");
    let mut broker = Broker::boot(
        root.path(),
        &config(root.path(), &[acme()], std::slice::from_ref(&record), &[]),
    );
    let dev = broker.agent("dev-1");
    dev.claim();
    let mut no_address = record.clone();
    no_address
        .as_object_mut()
        .expect("an object")
        .remove("address");
    let changes = [
        ("/role", json!("qa")),
        ("/harness", json!("claude-code")),
        ("/address", json!("tmux:%4")),
    ];
    let mut changed: Vec<Value> = changes
        .into_iter()
        .map(|(pointer, value)| {
            let mut r = record.clone();
            *r.pointer_mut(pointer).expect(pointer) = value;
            r
        })
        .collect();
    changed.push(no_address);
    // Another live process of ours, with its own start time.
    let mut moved = record.clone();
    moved["pid"] = json!(stand_in(1).pid);
    moved["startTime"] = json!(stand_in(1).start_time);
    changed.push(moved);
    for r in &changed {
        assert_eq!(
            broker.bind_launch(r),
            json!({"ok": false, "error": "launch-mismatch"}),
            "{r}"
        );
        // Still serving, and the refused binding retired nothing.
        assert_eq!(dev.ok("role.claim", json!({})), json!({"status": "held"}));
    }
    // Other refusals of a binding keep the broker running too.
    for (r, code) in [
        (launch("acme", "ghost", "ghost-1"), "unknown-role"),
        (launch("nowhere", "dev", "x-1"), "bad-config"),
        (
            json!({"business": "acme", "role": "dev", "run": "dev-9"}),
            "bad-config",
        ),
    ] {
        assert_eq!(
            broker.bind_launch(&r),
            json!({"ok": false, "error": code}),
            "{r}"
        );
    }
    broker.bind_ok(&record);
    broker.close();
}

#[test]
fn an_unknown_host_op_prints_its_code_and_exits_2_cleanly() {
    let root = data_root();
    let mut broker = Broker::boot(root.path(), &config(root.path(), &[acme()], &[], &[]));
    assert_eq!(
        broker.host(&json!({"op": "reboot"})),
        json!({"ok": false, "error": "bad-request"})
    );
    assert_eq!(broker.wait(), 2);
    assert_gone(root.path());
}

#[test]
fn a_malformed_host_line_after_boot_exits_2_cleanly() {
    let root = data_root();
    for (line, code) in [
        ("not json", "bad-request"),
        (r#"{"op":"close","now":true}"#, "unknown-key"),
        (r#"{"op":"bindLaunch"}"#, "bad-request"),
        // Exactly one boot: a second is out of place.
        (
            &boot_line(&config(root.path(), &[acme()], &[], &[])).to_string(),
            "bad-request",
        ),
    ] {
        let mut broker = Broker::boot(root.path(), &config(root.path(), &[acme()], &[], &[]));
        broker.send(line);
        let reply: Value = serde_json::from_str(&broker.line().expect("a line")).expect("JSON");
        assert_eq!(reply, json!({"ok": false, "error": code}), "{line}");
        assert_eq!(broker.wait(), 2, "{line}");
        assert_gone(root.path());
    }
}

#[test]
fn end_of_stdin_closes_cleanly_with_exit_2() {
    let root = data_root();
    let mut broker = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme()],
            &[launch("acme", "lead", "lead-1")],
            &[],
        ),
    );
    broker.agent("lead-1").claim();
    broker.close_stdin();
    assert_eq!(broker.wait(), 2);
    assert_gone(root.path());
    // Closed, not crashed: the next broker starts without `unlock`.
    Broker::boot(root.path(), &config(root.path(), &[acme()], &[], &[])).close();
}

#[test]
fn sigterm_closes_cleanly_with_exit_0() {
    signal_closes_cleanly("TERM");
}

#[test]
fn sigint_closes_cleanly_with_exit_0() {
    signal_closes_cleanly("INT");
}

#[track_caller]
fn signal_closes_cleanly(signal: &str) {
    let root = data_root();
    let mut broker = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme()],
            &[launch("acme", "lead", "lead-1")],
            &[],
        ),
    );
    broker.agent("lead-1").claim();
    broker.signal(signal);
    assert_eq!(broker.wait(), 0, "SIG{signal}");
    assert_gone(root.path());
    Broker::boot(root.path(), &config(root.path(), &[acme()], &[], &[])).close();
}

#[test]
fn capabilities_vanish_with_the_process() {
    let root = data_root();
    let cfg = config(root.path(), &[acme()], &acme_launches(), &["acme"]);
    let first = Broker::boot(root.path(), &cfg);
    let (old_lead, old_reader) = (first.agent("lead-1"), first.reader(0));
    first.close();
    let second = Broker::boot(root.path(), &cfg);
    assert_ne!(second.cap("lead-1"), old_lead.cap);
    old_lead.refused("role.claim", json!({}), "bad-capability");
    old_reader.refused("inbox", json!({}), "bad-capability");
    second.agent("lead-1").claim();
    second.close();
}

#[test]
fn unsafe_existing_paths_refuse_and_are_left_as_they_are() {
    let root = data_root();
    let real = root.path().join("real");
    std::fs::create_dir(&real).expect("mkdir");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let link = root.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    Broker::boot_refused(&real, &config(&link, &[acme()], &[], &[]), "unsafe-path");
    let cfg = config(&real, &[acme()], &[], &[]);
    Broker::boot(&real, &cfg).close();
    let chmod = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    let (bus, db) = (real.join("bus"), real.join("bus/bus.sqlite"));
    chmod(&db, 0o644);
    Broker::boot_refused(&real, &cfg, "unsafe-path");
    assert_eq!(mode_of(&db), (0o644, false), "never repaired");
    chmod(&db, 0o600);
    chmod(&bus, 0o755);
    Broker::boot_refused(&real, &cfg, "unsafe-path");
    chmod(&bus, 0o700);
    // Something left at the socket's path is the operator's to clear.
    std::fs::write(bus.join("bus.sock"), b"").expect("a leftover");
    let mut broker = Broker::spawn(&real);
    broker.send(&boot_line(&cfg).to_string());
    assert_eq!(
        serde_json::from_str::<Value>(&broker.line().expect("a line")).expect("JSON"),
        json!({"ok": false, "error": "unsafe-path"})
    );
    assert_eq!(broker.wait(), 2);
    assert!(bus.join("bus.sock").exists(), "the leftover stays");
    assert!(!bus.join("writer.lock").exists(), "the lock was released");
    std::fs::remove_file(bus.join("bus.sock")).expect("clear it");
    Broker::boot(&real, &cfg).close();
}

#[test]
fn a_crashed_broker_is_never_reclaimed_automatically() {
    let root = data_root();
    let cfg = config(
        root.path(),
        &[acme()],
        &[launch("acme", "lead", "lead-1")],
        &[],
    );
    let mut crashed = Broker::boot(root.path(), &cfg);
    crashed.agent("lead-1").claim();
    crashed.signal("KILL");
    assert!(crashed.wait_status().code().is_none(), "killed");
    let bus = root.path().join("bus");
    let mut refused = Broker::spawn(root.path());
    refused.send(&boot_line(&cfg).to_string());
    assert_eq!(
        serde_json::from_str::<Value>(&refused.line().expect("a line")).expect("JSON"),
        json!({"ok": false, "error": "stale-lock"})
    );
    assert_eq!(refused.wait(), 2);
    for file in ["writer.lock", "bus.sock", "bus.sqlite"] {
        assert!(bus.join(file).exists(), "{file} is left for the operator");
    }
    // The operator's explicit way out.
    let unlock = std::process::Command::new(crate::support::BIN)
        .args(["unlock", "--data-root"])
        .arg(root.path())
        .output()
        .expect("run unlock");
    assert!(unlock.status.success(), "{unlock:?}");
    let restarted = Broker::boot(root.path(), &cfg);
    assert_eq!(
        restarted.agent("lead-1").ok("role.claim", json!({})),
        json!({"status": "held"}),
        "the evidence survived"
    );
    restarted.close();
}

/// Launch records that name no live process of ours, each with the code of
/// the check it fails: a pid that cannot exist (the kernel's `pid_max` is
/// one past the largest pid), a start time one tick off, and a process of
/// another user (a child run as `nobody` when the tests run as root, else
/// init).
fn records_of_no_process_of_ours() -> Vec<(Value, &'static str)> {
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .expect("pid_max")
        .trim()
        .parse()
        .expect("a number");
    let record = |pid: u32, start_time: u64| {
        let mut r = launch("acme", "dev", "dev-9");
        r["pid"] = json!(pid);
        r["startTime"] = json!(start_time);
        r
    };
    let (foreign_pid, foreign_start) = foreign_process();
    vec![
        (record(pid_max, start_time()), "launch-not-running"),
        (
            record(launch_pid(), start_time() + 1),
            "launch-start-mismatch",
        ),
        (record(foreign_pid, foreign_start), "launch-foreign-user"),
    ]
}

/// A live process that runs as another user, and its start time.
fn foreign_process() -> (u32, u64) {
    use mosaic_ports::ProcessTable as _;
    use std::os::unix::process::CommandExt as _;
    static FOREIGN: std::sync::OnceLock<(u32, u64, std::process::ChildStdin)> =
        std::sync::OnceLock::new();
    let table = mosaic_adapters::procfs::ProcFs::new();
    if !rustix::process::geteuid().is_root() {
        let init = table.process(1).expect("init");
        assert_ne!(
            init.uid,
            rustix::process::geteuid().as_raw(),
            "init is ours"
        );
        return (1, init.start_time);
    }
    let (pid, start, _) = FOREIGN.get_or_init(|| {
        // Never waited for: it exits with the test binary, when its input
        // closes, and init reaps it.
        #[allow(clippy::zombie_processes)]
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read _"])
            .uid(65534)
            .gid(65534)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("a child as nobody");
        let start = table.process(child.id()).expect("its stat").start_time;
        (child.id(), start, child.stdin.take().expect("its input"))
    });
    (*pid, *start)
}

#[test]
fn a_launch_of_no_live_process_of_ours_is_refused_at_boot_naming_its_run() {
    for (record, code) in records_of_no_process_of_ours() {
        let root = data_root();
        let cfg = config(
            root.path(),
            &[acme()],
            &[launch("acme", "lead", "lead-1"), record.clone()],
            &[],
        );
        Broker::boot_refused_run(root.path(), &cfg, code, "dev-9");
    }
}

#[test]
fn a_launch_of_no_live_process_of_ours_is_refused_at_bind_and_the_broker_serves_on() {
    let root = data_root();
    let mut broker = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[acme()],
            &[launch("acme", "lead", "lead-1")],
            &[],
        ),
    );
    let lead = broker.agent("lead-1");
    lead.claim();
    for (record, code) in records_of_no_process_of_ours() {
        assert_eq!(
            broker.bind_launch(&record),
            json!({"ok": false, "error": code}),
            "{record}"
        );
        assert_eq!(lead.ok("role.claim", json!({})), json!({"status": "held"}));
    }
    // The same run, for a live process of ours, binds.
    let good = launch("acme", "dev", "dev-9");
    broker.bind_ok(&good).claim();
    broker.close();
}

/// The launch block's `by` may be a list: the broker boots, and every role
/// it names raises `role.launch` within role while the others are gated.
#[test]
fn a_launch_block_naming_a_list_of_roles_boots_and_each_of_them_launches() {
    let root = data_root();
    let mut business = acme();
    business["launch"] = json!({"by": ["lead", "arch"]});
    let broker = Broker::boot(
        root.path(),
        &config(
            root.path(),
            &[business],
            &[
                launch("acme", "lead", "lead-1"),
                launch("acme", "arch", "arch-1"),
                launch("acme", "dev", "dev-1"),
            ],
            &[],
        ),
    );
    assert_eq!(broker.boot["ok"], json!(true), "{}", broker.boot);
    for run in ["lead-1", "arch-1"] {
        let agent = broker.agent(run);
        agent.claim();
        let own = agent.raise("role.launch", Some("qa"), json!({"choice": "yes"}));
        assert_eq!(
            (&own["class"], &own["status"]),
            (&json!("within-role"), &json!("resolved")),
            "{run}: {own}"
        );
    }
    let dev = broker.agent("dev-1");
    dev.claim();
    let other = dev.raise("role.launch", Some("qa"), json!({}));
    assert_eq!(
        (&other["class"], &other["route"]),
        (&json!("gated"), &json!("human")),
        "{other}"
    );
    broker.close();
}

/// A launch block that names an undefined role fails the boot, and the
/// line says which reference; so does a launcher named twice. An empty
/// list, or a `by` that is neither a role nor a list of roles, is a bad
/// configuration.
#[test]
fn a_bad_launch_block_fails_the_boot_and_names_the_reference() {
    let root = data_root();
    let cases = [
        (
            json!({"by": ["lead", "ghost"]}),
            json!({"ok": false, "error": "unknown-role", "reference": "acme launch.by ghost"}),
        ),
        (
            json!({"by": "ghost"}),
            json!({"ok": false, "error": "unknown-role", "reference": "acme launch.by ghost"}),
        ),
        (
            json!({"by": ["lead", "arch", "lead"]}),
            json!({"ok": false, "error": "bad-config", "reference": "acme launch.by lead"}),
        ),
        (
            json!({"by": []}),
            json!({"ok": false, "error": "bad-config"}),
        ),
        (
            json!({"by": 7}),
            json!({"ok": false, "error": "bad-config"}),
        ),
        (
            json!({"by": ["lead", 7]}),
            json!({"ok": false, "error": "bad-config"}),
        ),
    ];
    for (block, expected) in cases {
        let mut business = acme();
        business["launch"] = block.clone();
        let mut broker = Broker::spawn(root.path());
        broker.send(&boot_line(&config(root.path(), &[business], &[], &[])).to_string());
        let reply: Value =
            serde_json::from_str(&broker.line().expect("a refusal line")).expect("JSON");
        assert_eq!(reply, expected, "{block}");
        assert_eq!(broker.wait(), 2, "{block}");
        assert_gone(root.path());
    }
    // An arbiter is named the same way.
    let mut business = acme();
    business["arbiters"]["technical"] = json!("ghost");
    let mut broker = Broker::spawn(root.path());
    broker.send(&boot_line(&config(root.path(), &[business], &[], &[])).to_string());
    let reply: Value = serde_json::from_str(&broker.line().expect("a refusal line")).expect("JSON");
    assert_eq!(
        reply,
        json!({"ok": false, "error": "unknown-role", "reference": "acme arbiters.technical ghost"})
    );
    assert_eq!(broker.wait(), 2);
}
