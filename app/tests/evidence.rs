//! Keeping the evidence, with real processes: `mosaic-bus backup` while
//! eight clients write, `mosaic-bus verify` on the copy and on tampered
//! stores, and a broker booted from the copy and refusing an edit made
//! behind the triggers (the `seq` in its log).

#[path = "support/mod.rs"]
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mosaic_client::socket::Client;
use serde_json::{json, Map, Value};

use support::{boot_line, config, count, launch, open_db, Broker, BIN, WAIT};

const CLIENTS: usize = 8;

fn business() -> Value {
    let roles: Map<String, Value> = (0..CLIENTS)
        .map(|i| {
            (
                format!("w{i}"),
                json!({"authority": {"withinRole": ["message.send"], "crossRole": ["repo.merge"]}}),
            )
        })
        .collect();
    json!({
        "id": "keep",
        "human": "carol",
        "arbiters": {"technical": "w0", "delivery": "w1"},
        "roles": roles,
    })
}

fn cfg(root: &Path) -> Value {
    let launches: Vec<Value> = (0..CLIENTS)
        .map(|i| launch("keep", &format!("w{i}"), &format!("r{i}")))
        .collect();
    config(root, &[business()], &launches, &["keep"])
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run mosaic-bus")
}

fn ledger_size(root: &Path) -> i64 {
    count(&open_db(root), "SELECT count(*) FROM ledger", [])
}

/// `verify`'s one JSON line and exit code.
fn verify(db: &Path, notes: &[&Path]) -> (Value, Option<i32>) {
    let mut args = vec!["verify", "--db", db.to_str().unwrap()];
    for note in notes {
        args.extend(["--head", note.to_str().unwrap()]);
    }
    let out = run(&args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
    (
        serde_json::from_str(&stdout).expect("JSON"),
        out.status.code(),
    )
}

#[test]
fn backup_while_eight_clients_write_is_a_verified_snapshot_a_broker_boots_on() {
    let root = support::data_root();
    let config = cfg(root.path());
    let broker = Broker::boot(root.path(), &config);
    for i in 0..CLIENTS {
        broker.agent(&format!("r{i}")).claim();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (stop, acked) = (Arc::clone(&stop), Arc::clone(&acked));
            let (socket, cap) = (broker.socket.clone(), broker.cap(&format!("r{i}")));
            std::thread::spawn(move || {
                let client = Client::new(&socket, &cap);
                let to = format!("w{}", (i + 1) % CLIENTS);
                let mut k = 0;
                while !stop.load(Ordering::Relaxed) {
                    k += 1;
                    let body = format!("c{i}-m{k}");
                    client
                        .call("message.send", json!({"to": to, "body": body}))
                        .expect("a send is acknowledged");
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Writes are under way before the copy starts.
    let deadline = Instant::now() + WAIT;
    while acked.load(Ordering::Relaxed) < 200 {
        assert!(Instant::now() < deadline, "the clients never got going");
        std::thread::sleep(support::POLL);
    }
    let copies = tempfile::tempdir().unwrap();
    let copy = copies.path().join("bus-copy.sqlite");
    let before = ledger_size(root.path());
    let note_file = copies.path().join("bus-copy.note");
    let out = run(&[
        "backup",
        "--data-root",
        root.path().to_str().unwrap(),
        "--to",
        copy.to_str().unwrap(),
        "--note",
        note_file.to_str().unwrap(),
    ]);
    let after = ledger_size(root.path());
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().expect("a client thread");
    }
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "backup: {stderr}");
    // `verify`'s one line: ok, the size, the head and the note.
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    let printed: Value = serde_json::from_str(&stdout).expect("a JSON line");
    assert!(stdout.starts_with(r#"{"ok":true,"size":"#), "{stdout}");
    let mut keys: Vec<&String> = printed.as_object().expect("an object").keys().collect();
    keys.sort();
    assert_eq!(keys, ["head", "note", "ok", "size"], "{printed}");
    assert_eq!(printed["ok"], json!(true));
    let note = printed["note"].as_str().expect("a note").to_owned();
    let lines: Vec<&str> = note.lines().collect();
    assert_eq!(lines.len(), 3, "{note:?}");
    assert!(lines[0].starts_with("mosaic-bus/"), "{note:?}");
    let size: i64 = lines[1].parse().expect("a size");
    assert_eq!(printed["size"], json!(size));
    assert_eq!(printed["head"], json!(lines[2]));
    assert!(
        before <= size && size <= after,
        "the copy's size {size} lies between {before} and {after}"
    );
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // `--note` wrote the note alone, 0600.
    assert_eq!(std::fs::read_to_string(&note_file).unwrap(), note);
    let mode = std::fs::metadata(&note_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // The copy verifies against its own note: the line `backup` printed.
    let (line, code) = verify(&copy, &[&note_file]);
    assert_eq!(code, Some(0), "{line}");
    assert_eq!(line, printed);
    // So does the live store, which extends the note.
    broker.close();
    let (line, code) = verify(&root.path().join("bus").join("bus.sqlite"), &[&note_file]);
    assert_eq!(code, Some(0), "{line}");
    assert!(line["size"].as_i64().unwrap() >= size);

    // An existing FILE is refused, and left alone; so is an existing note
    // file, before any copy is made.
    let kept = std::fs::read(&copy).unwrap();
    let again = run(&[
        "backup",
        "--data-root",
        root.path().to_str().unwrap(),
        "--to",
        copy.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "{\"ok\":false,\"error\":\"unsafe-path\"}\n"
    );
    assert_eq!(std::fs::read(&copy).unwrap(), kept);
    let other = copies.path().join("other.sqlite");
    let again = run(&[
        "backup",
        "--data-root",
        root.path().to_str().unwrap(),
        "--to",
        other.to_str().unwrap(),
        "--note",
        note_file.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "{\"ok\":false,\"error\":\"unsafe-path\"}\n"
    );
    assert!(!other.exists(), "no copy was made");
    assert_eq!(std::fs::read_to_string(&note_file).unwrap(), note);

    // A broker boots on a data root made from the copy.
    let restored = support::data_root();
    let bus = restored.path().join("bus");
    std::fs::create_dir(&bus).unwrap();
    std::fs::set_permissions(&bus, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::copy(&copy, bus.join("bus.sqlite")).unwrap();
    std::fs::set_permissions(
        bus.join("bus.sqlite"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let broker = Broker::boot(restored.path(), &cfg(restored.path()));
    let trail = broker.reader(0).ok("trail", json!({"subject": "w0"}));
    assert!(!trail.as_array().expect("records").is_empty());
    broker.close();
}

/// The edit of the issue, made by hand: drop `messages_no_update`, change
/// a body, create the trigger again with the same SQL. The broker refuses
/// to boot with `integrity-failed` and logs the record's `seq`; `verify`
/// names it too.
#[test]
fn a_body_edited_behind_the_triggers_is_refused_at_boot_and_named_by_verify() {
    let root = support::data_root();
    let config = cfg(root.path());
    let broker = Broker::boot(root.path(), &config);
    let w0 = broker.agent("r0");
    w0.claim();
    for k in 0..3 {
        w0.ok(
            "message.send",
            json!({"to": "w1", "body": format!("note {k}")}),
        );
    }
    broker.close();
    let db = root.path().join("bus").join("bus.sqlite");
    let (line, code) = verify(&db, &[]);
    assert_eq!(code, Some(0), "{line}");
    let note_file = root.path().join("before.note");
    std::fs::write(&note_file, line["note"].as_str().unwrap()).unwrap();

    let conn = rusqlite::Connection::open(&db).unwrap();
    let seq: i64 = conn
        .query_row("SELECT seq FROM messages WHERE body = 'note 1'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let trigger: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'messages_no_update'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute_batch(&format!(
        "DROP TRIGGER messages_no_update; \
         UPDATE messages SET body = 'note one' WHERE seq = {seq}; {trigger};"
    ))
    .unwrap();
    drop(conn);

    let (line, code) = verify(&db, &[]);
    assert_eq!(
        (line, code),
        (
            json!({"ok": false, "error": "integrity-failed", "seq": seq}),
            Some(1)
        )
    );
    let mut refused = Broker::spawn(root.path());
    refused.send(&boot_line(&config).to_string());
    let reply: Value = serde_json::from_str(&refused.line().expect("a line")).unwrap();
    assert_eq!(reply, json!({"ok": false, "error": "integrity-failed"}));
    assert_eq!(refused.wait(), 2);
    let log = refused.stderr();
    assert!(log.contains(&format!("seq={seq}")), "{log}");
}

#[test]
fn verify_reports_truncated_forked_and_usage_with_its_exit_codes() {
    let root = support::data_root();
    let config = cfg(root.path());
    let broker = Broker::boot(root.path(), &config);
    broker.agent("r0").claim();
    broker.close();
    let db = root.path().join("bus").join("bus.sqlite");
    let older = root.path().join("older.sqlite");
    std::fs::copy(&db, &older).unwrap();
    let broker = Broker::boot(root.path(), &config);
    broker.agent("r1").claim();
    broker.close();
    let (line, code) = verify(&db, &[]);
    assert_eq!(code, Some(0), "{line}");
    let later = root.path().join("later.note");
    std::fs::write(&later, line["note"].as_str().unwrap()).unwrap();
    assert_eq!(
        verify(&older, &[&later]),
        (json!({"ok": false, "error": "truncated"}), Some(1))
    );
    // A note of the same size with another hash: a fork.
    let note = line["note"].as_str().unwrap();
    let mut fields: Vec<String> = note.lines().map(str::to_owned).collect();
    fields[2] = format!("{}=", "A".repeat(43));
    let forked = root.path().join("forked.note");
    std::fs::write(&forked, format!("{}\n", fields.join("\n"))).unwrap();
    assert_eq!(
        verify(&db, &[&forked]),
        (json!({"ok": false, "error": "forked"}), Some(1))
    );
    // Exit 2: no such file, a note that is not one, a usage error.
    assert_eq!(verify(&root.path().join("none.sqlite"), &[]).1, Some(2));
    let junk = root.path().join("junk.note");
    std::fs::write(&junk, "not a note\n").unwrap();
    assert_eq!(
        verify(&db, &[&junk]),
        (json!({"ok": false, "error": "bad-request"}), Some(2))
    );
    let out = run(&["verify"]);
    assert_eq!(out.status.code(), Some(2));
    let line: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(line, json!({"ok": false, "error": "bad-request"}));
    // The line's keys come in the documented order.
    let out = run(&[
        "verify",
        "--db",
        older.to_str().unwrap(),
        "--head",
        later.to_str().unwrap(),
    ]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"ok\":false,\"error\":\"truncated\"}\n"
    );
}

/// `head` answers readers with the chain's size, head and note; the note
/// is the one `verify` finds on the closed store. Agents may not ask.
#[test]
fn head_gives_readers_the_note_verify_finds() {
    let root = support::data_root();
    let broker = Broker::boot(root.path(), &cfg(root.path()));
    let w0 = broker.agent("r0");
    w0.claim();
    w0.ok("message.send", json!({"to": "w1", "body": "kept"}));
    let head = broker.reader(0).ok("head", json!({}));
    let size = ledger_size(root.path());
    assert_eq!(head["size"], json!(size), "{head}");
    let note = head["note"].as_str().expect("a note").to_owned();
    let lines: Vec<&str> = note.lines().collect();
    assert_eq!(lines.len(), 3, "{note:?}");
    assert_eq!(lines[1], size.to_string());
    assert_eq!(Some(lines[2]), head["head"].as_str());
    // `mosaic-bus head` prints the same note, from a reader's cap file.
    let cap_file = root.path().join("reader.cap");
    std::fs::write(&cap_file, &broker.reader(0).cap).unwrap();
    std::fs::set_permissions(&cap_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = run(&[
        "head",
        "--socket",
        broker.socket.to_str().unwrap(),
        "--cap-file",
        cap_file.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), note);
    // (Its refusal is a record too: the store grows past the note.)
    w0.refused("head", json!({}), "not-authorized");
    broker.close();
    let note_file = root.path().join("head.note");
    std::fs::write(&note_file, &note).unwrap();
    let (line, code) = verify(&root.path().join("bus").join("bus.sqlite"), &[&note_file]);
    assert_eq!(code, Some(0), "the store extends the note: {line}");
    assert_eq!(line["size"], json!(size + 1));
}
