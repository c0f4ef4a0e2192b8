//! Service credentials inside the running broker: boot loads every
//! reference once and names a bad one without its content; a token sent in
//! a request, hidden in JSON escapes, or handed to the trusted API refuses
//! with `credential-leak` before anything is written; `use_credential` gives
//! the token only to its callback. After each scenario the token's bytes are
//! nowhere: not in the database or its WAL, not in a reply, a log line or an
//! error.
//!
//! The per-reference refusals (symlink, mode, owner, size, roots, swap,
//! syntax, dates) are tested against the credential source itself in
//! `tests/tests/credentials.rs`; here they are checked through boot.

#[path = "support/mod.rs"]
mod support;

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use mosaic_adapters::config::boot_from_value;
use mosaic_adapters::credentials::{CredentialState, Service};
use mosaic_app::runtime::start_broker;
use mosaic_client::socket::Client;
use mosaic_domain::evidence::Subject;
use mosaic_domain::{Refusal, TaskRef};
use serde_json::{json, Value};

use support::{acme, boot_line, config, data_root, launch, Broker};

const GITEA: &str = "gitea-0123456789abcdefXYZ~._";
const VIKUNJA: &str = "vikunja_ABCDEFGHIJKLMNOP.0123";
const SYNC: &str = "sync-token-zyxwvutsrqponm-42";

/// A private folder outside every protected root, holding token files.
struct Secrets {
    dir: tempfile::TempDir,
}

impl Secrets {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("mosaic-secrets-")
            .tempdir()
            .expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        Secrets { dir }
    }

    /// Writes `content` to `name` with `mode`; returns the absolute path.
    fn file(&self, name: &str, content: &str, mode: u32) -> String {
        write_token(&self.dir.path().join(name), content, mode)
    }
}

fn write_token(path: &Path, content: &str, mode: u32) -> String {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .expect("create token file");
    std::io::Write::write_all(&mut file, content.as_bytes()).expect("write token");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path.to_str().expect("UTF-8").to_owned()
}

/// acme with dev's Gitea token in `gitea_file`, lead's Vikunja token in the
/// environment variable `ACME_LEAD_VIKUNJA`, and the tracker identity's
/// Vikunja token in `sync_file`.
fn credential_config(root: &Path, gitea_file: &str, sync_file: &str) -> Value {
    let mut business = acme();
    business["roles"]["dev"]["credentials"] =
        json!({"gitea": {"file": gitea_file, "rotateBy": "2099-01-31"}});
    business["roles"]["lead"]["credentials"] =
        json!({"vikunja": {"env": "ACME_LEAD_VIKUNJA", "expires": "2099-12-31"}});
    let launches = [
        launch("acme", "lead", "lead-1"),
        launch("acme", "dev", "dev-1"),
    ];
    let mut config = config(root, &[business], &launches, &["acme"]);
    config["sync"] = json!({"acme": {"vikunja": {"file": sync_file}}});
    config
}

/// Every file of the data root's `bus/` folder (DB, WAL, SHM, lock), read now.
fn store_bytes(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    std::fs::read_dir(root.join("bus"))
        .expect("bus dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read store file");
            (p, bytes)
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Fails if any token appears in any of `places`.
#[track_caller]
fn assert_no_token<'a>(places: impl IntoIterator<Item = (String, &'a [u8])>) {
    let mut checked = 0;
    for (name, bytes) in places {
        for token in [GITEA, VIKUNJA, SYNC] {
            assert!(!contains(bytes, token), "a token leaked into {name}");
        }
        checked += 1;
    }
    assert!(checked > 0, "nothing was checked");
}

/// A JSON string literal spelling `text` with every character escaped, so
/// the raw request line does not contain it but the parsed value does.
fn escaped(text: &str) -> String {
    let body: String = text
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    format!("\"{body}\"")
}

#[test]
fn a_full_scenario_with_tokens_leaves_no_token_bytes_anywhere() {
    let root = data_root();
    let secrets = Secrets::new();
    let gitea = secrets.file("gitea", &format!("{GITEA}\n"), 0o600);
    let sync = secrets.file("sync", SYNC, 0o600);
    let mut broker = Broker::spawn_with_env(root.path(), &[("ACME_LEAD_VIKUNJA", VIKUNJA)]);
    let boot = broker.host(&boot_line(&credential_config(root.path(), &gitea, &sync)));
    assert_eq!(boot["ok"], json!(true), "{boot}");
    broker.socket = PathBuf::from(boot["path"].as_str().expect("path"));
    broker.boot = boot.clone();
    let replies = std::cell::RefCell::new(vec![boot.to_string()]);
    let lead = broker.agent("lead-1");
    let dev = broker.agent("dev-1");
    let answer = |agent: &support::Agent, verb: &str, args: Value| {
        let got = agent.call(verb, args);
        replies.borrow_mut().push(format!("{got:?}"));
        got
    };

    // An ordinary working day.
    assert!(answer(&lead, "role.claim", json!({})).is_ok());
    assert!(answer(&dev, "role.claim", json!({})).is_ok());
    let raised = answer(
        &dev,
        "decision.raise",
        support::raise_args("repo.merge", Some("acme/app"), json!({})),
    )
    .expect("raise");
    assert!(answer(&lead, "inbox", json!({})).is_ok());
    assert!(answer(
        &lead,
        "decision.resolve",
        json!({"id": raised["id"], "choice": "yes"})
    )
    .is_ok());
    let sent = answer(
        &lead,
        "message.send",
        json!({"to": "dev", "body": "ship it"}),
    )
    .expect("send");
    assert!(answer(&dev, "message.receive", json!({})).is_ok());
    assert!(answer(&dev, "message.read", json!({"id": sent["id"]})).is_ok());

    // A token in a request line refuses before the broker parses it.
    for token in [GITEA, VIKUNJA, SYNC] {
        let got = answer(
            &lead,
            "message.send",
            json!({"to": "dev", "body": format!("token {token}")}),
        );
        assert_eq!(got, Err(Refusal::CredentialLeak));
        let got = answer(&dev, "trail", json!({"subject": token}));
        assert_eq!(got, Err(Refusal::CredentialLeak));
    }
    // Hidden in JSON escapes it passes the line check, and the evidence
    // guard refuses it before anything is written; the refusal is recorded
    // without the content.
    let line = format!(
        r#"{{"cap":"{}","verb":"message.send","args":{{"to":"dev","body":{}}}}}"#,
        lead.cap,
        escaped(GITEA)
    );
    let got = support::raw(&broker.socket, line.as_bytes());
    replies.borrow_mut().push(got.to_string());
    assert_eq!(got, json!({"ok": false, "error": "credential-leak"}));
    let line = format!(
        r#"{{"cap":"{}","verb":"event.emit","args":{{"kind":"action.allowed","body":{{"action":"routine","target":{}}}}}}}"#,
        dev.cap,
        escaped(VIKUNJA)
    );
    let got = support::raw(&broker.socket, line.as_bytes());
    replies.borrow_mut().push(got.to_string());
    assert_eq!(got, json!({"ok": false, "error": "credential-leak"}));
    let undelivered = answer(&dev, "message.receive", json!({})).expect("receive");
    assert_eq!(undelivered, json!([]), "no leaking message was stored");
    let live = store_bytes(root.path());
    assert!(
        live.iter()
            .any(|(p, _)| p.to_string_lossy().ends_with("-wal")),
        "the WAL is checked while live"
    );
    let log = broker.close();
    let closed = store_bytes(root.path());
    let replies = replies.into_inner();
    // Every refusal is evidence, recorded without the content.
    let db = support::open_db(root.path());
    let mut statement = db
        .prepare("SELECT run, verb FROM refusals WHERE code = 'credential-leak' ORDER BY seq")
        .expect("query");
    let leaks: Vec<(String, String)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("read");
    let line_leaks = [("lead-1", "message.send"), ("dev-1", "trail")].repeat(3);
    let expected: Vec<(String, String)> = line_leaks
        .into_iter()
        .chain([("lead-1", "message.send"), ("dev-1", "event.emit")])
        .map(|(run, verb)| (run.to_owned(), verb.to_owned()))
        .collect();
    assert_eq!(leaks, expected);
    assert_no_token(
        live.iter()
            .chain(closed.iter())
            .map(|(p, b)| (p.display().to_string(), b.as_slice()))
            .chain(replies.iter().map(|r| ("a reply".to_owned(), r.as_bytes())))
            .chain([("the broker's stderr".to_owned(), log.as_bytes())]),
    );
}

#[test]
fn boot_names_a_bad_reference_never_its_content() {
    let root = data_root();
    let secrets = Secrets::new();
    let repo = data_root();
    let project = data_root();
    // Named through a folder that does not exist, so it cannot be
    // canonicalised: it still protects what it names.
    let dotted = data_root();
    let dotted_root = format!("{}/missing/..", dotted.path().display());
    let good = secrets.file("good", GITEA, 0o600);
    let cases: Vec<(String, &str, &str)> = vec![
        (
            secrets.file("loose", GITEA, 0o640),
            "unsafe-path",
            "mode 0640",
        ),
        (
            write_token(&root.path().join("token"), GITEA, 0o600),
            "unsafe-path",
            "inside the data root",
        ),
        (
            write_token(&repo.path().join("token"), GITEA, 0o600),
            "unsafe-path",
            "inside a repo root",
        ),
        (
            write_token(&project.path().join("token"), GITEA, 0o600),
            "unsafe-path",
            "inside a project root",
        ),
        (
            write_token(&dotted.path().join("token"), GITEA, 0o600),
            "unsafe-path",
            "inside a repo root named with `..`",
        ),
        (
            secrets.file("two-lf", &format!("{GITEA}\n\n"), 0o600),
            "bad-config",
            "two trailing newlines",
        ),
        (
            secrets.file("short", "0123456789abcde", 0o600),
            "bad-config",
            "too short",
        ),
        (
            secrets.file("alphabet", "secret token with spaces", 0o600),
            "bad-config",
            "bad alphabet",
        ),
        (
            secrets.dir.path().join("missing").display().to_string(),
            "bad-config",
            "missing",
        ),
    ];
    for (gitea, code, why) in cases {
        let mut config = credential_config(root.path(), &gitea, &good);
        config["repoRoots"] = json!([repo.path(), dotted_root]);
        config["projectRoots"] = json!([project.path()]);
        let mut broker = Broker::spawn_with_env(root.path(), &[("ACME_LEAD_VIKUNJA", VIKUNJA)]);
        broker.send(&boot_line(&config).to_string());
        let line = broker.line().expect("a refusal line");
        let reply: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(
            reply,
            json!({"ok": false, "error": code, "reference": "acme/dev gitea"}),
            "{why}"
        );
        assert_eq!(broker.wait(), 2, "{why}");
        support::assert_gone(root.path());
        let stderr = broker.stderr();
        assert_no_token([
            (why.to_owned(), line.as_bytes()),
            (format!("stderr, {why}"), stderr.as_bytes()),
        ]);
        assert!(
            !line.contains("secret") && !line.contains("0123456789abcde"),
            "{why}: {line}"
        );
    }
    // The environment reference and the tracker identity are named too.
    let mut broker = Broker::spawn(root.path());
    broker.send(&boot_line(&credential_config(root.path(), &good, &good)).to_string());
    let reply: Value = serde_json::from_str(&broker.line().expect("line")).expect("JSON");
    assert_eq!(
        reply,
        json!({"ok": false, "error": "bad-config", "reference": "acme/lead vikunja"})
    );
    assert_eq!(broker.wait(), 2);
}

#[test]
fn in_process_adapters_use_tokens_only_inside_their_callback() {
    let root = data_root();
    let secrets = Secrets::new();
    let gitea = secrets.file("gitea", GITEA, 0o600);
    let sync = secrets.file("sync", SYNC, 0o600);
    let mut config = credential_config(root.path(), &gitea, &sync);
    // This process's environment is shared by the other tests: the lead's
    // reference reads a file here.
    let vikunja = secrets.file("vikunja", VIKUNJA, 0o600);
    config["businesses"]["acme"]["roles"]["lead"]["credentials"] =
        json!({"vikunja": {"file": vikunja, "expires": "2099-12-31"}});
    let (broker, booted) = start_broker(boot_from_value(config).expect("config")).expect("boot");
    let dev = booted
        .launches
        .iter()
        .find(|l| l.run.as_str() == "dev-1")
        .expect("dev")
        .cap
        .clone();
    let client = Client::new(&booted.socket, dev.expose());
    assert_eq!(
        client.call("role.claim", json!({})),
        Ok(json!({"status": "claimed"}))
    );

    // Only the callback sees the token; what it returns is checked.
    let seen = broker.use_credential("acme/dev", Service::Gitea, |token| {
        Ok::<_, ()>(json!({"length": token.len(), "matches": token == GITEA.as_bytes()}))
    });
    assert_eq!(seen, Ok(json!({"length": GITEA.len(), "matches": true})));
    let sync_seen = broker.use_credential("acme/@sync", Service::Vikunja, |token| {
        Ok::<_, ()>(json!(token == SYNC.as_bytes()))
    });
    assert_eq!(sync_seen, Ok(json!(true)));
    let echoed = broker.use_credential("acme/dev", Service::Gitea, |token| {
        Ok::<_, ()>(json!({"header": format!("token {}", String::from_utf8_lossy(token))}))
    });
    assert_eq!(echoed, Err(Refusal::CredentialLeak));
    let keyed = broker.use_credential("acme/dev", Service::Gitea, |token| {
        Ok::<_, ()>(json!({String::from_utf8_lossy(token): 1}))
    });
    assert_eq!(keyed, Err(Refusal::CredentialLeak), "keys are checked too");
    let failed = broker.use_credential("acme/dev", Service::Gitea, |token| {
        Err::<Value, _>(format!("HTTP 401 for {}", String::from_utf8_lossy(token)))
    });
    assert_eq!(failed, Err(Refusal::ServiceFailed));
    let unknown = broker.use_credential("acme/qa", Service::Gitea, |_| Ok::<_, ()>(json!(1)));
    assert_eq!(unknown, Err(Refusal::UnknownReference));

    // The trusted record_event refuses a token in the body before writing.
    let task = Subject::Task(TaskRef::parse("vikunja:3/41").expect("task ref"));
    let leaked = broker.record_event(
        &dev,
        "task.updated",
        &json!({"note": format!("used {GITEA}")}),
        Some(task.clone()),
    );
    assert_eq!(leaked, Err(Refusal::CredentialLeak));
    assert_eq!(
        broker.record_event(&dev, "task.updated", &json!({"note": "ok"}), Some(task)),
        Ok(())
    );

    let status = broker.credential_status();
    let states: Vec<(String, Service, CredentialState)> = status
        .iter()
        .map(|s| (s.key.clone(), s.service, s.state))
        .collect();
    assert_eq!(
        states,
        [
            (
                "acme/@sync".to_owned(),
                Service::Vikunja,
                CredentialState::Valid
            ),
            (
                "acme/dev".to_owned(),
                Service::Gitea,
                CredentialState::Valid
            ),
            (
                "acme/lead".to_owned(),
                Service::Vikunja,
                CredentialState::Valid
            ),
        ]
    );
    assert_no_token([("the status".to_owned(), format!("{status:?}").as_bytes())]);

    let live = store_bytes(root.path());
    broker.close().expect("close");
    let closed = store_bytes(root.path());
    assert_no_token(
        live.iter()
            .chain(closed.iter())
            .map(|(p, b)| (p.display().to_string(), b.as_slice())),
    );
}

#[test]
fn a_restart_picks_up_a_rotated_token() {
    let root = data_root();
    let secrets = Secrets::new();
    let gitea = secrets.file("gitea", GITEA, 0o600);
    let sync = secrets.file("sync", SYNC, 0o600);
    let vikunja = secrets.file("vikunja", VIKUNJA, 0o600);
    let mut config = credential_config(root.path(), &gitea, &sync);
    config["businesses"]["acme"]["roles"]["lead"]["credentials"] =
        json!({"vikunja": {"file": vikunja}});
    let token_of = |config: &Value| {
        let (broker, _) =
            start_broker(boot_from_value(config.clone()).expect("config")).expect("boot");
        let token = broker.use_credential("acme/dev", Service::Gitea, |token| {
            Ok::<_, ()>(json!(token.len()))
        });
        broker.close().expect("close");
        token
    };
    assert_eq!(token_of(&config), Ok(json!(GITEA.len())));
    let rotated = "gitea-rotated-0123456789";
    std::fs::remove_file(&gitea).expect("remove the old token");
    write_token(Path::new(&gitea), rotated, 0o600);
    assert_eq!(token_of(&config), Ok(json!(rotated.len())));
}

/// A shop whose `web` role may use every browser action, with the Gitea
/// token of `gitea_file`, serving browser control; `web-1` holds its role.
fn browser_shop(root: &Path, gitea_file: &str) -> Broker {
    let actions: Vec<String> = [
        "open", "snapshot", "click", "type", "scroll", "back", "forward", "inspect", "capture",
        "resize",
    ]
    .iter()
    .map(|a| format!("browser.{a}"))
    .collect();
    let business = json!({
        "id": "shop", "human": "alice",
        "arbiters": {"technical": "web", "delivery": "web"},
        "roles": {"web": {"authority": {"withinRole": actions, "crossRole": []},
                          "credentials": {"gitea": {"file": gitea_file}}}}
    });
    let mut config = config(root, &[business], &[launch("shop", "web", "web-1")], &[]);
    config["browser"] = json!({"listen": "127.0.0.1:0"});
    let broker = Broker::boot(root, &config);
    broker.agent("web-1").claim();
    broker
}

#[test]
fn a_token_never_reaches_a_pane_nor_a_stored_browser_result() {
    let root = data_root();
    let secrets = Secrets::new();
    let gitea = secrets.file("gitea", GITEA, 0o600);
    let broker = browser_shop(root.path(), &gitea);
    let ui = support::pane::Ui::of(&broker);
    let web = broker.agent("web-1");
    let mut pane = ui.listen("pane-1", true);

    // The token hidden in JSON escapes, in the parameters of every action
    // (where a parameter cannot hold text, under a key of its own): the
    // decoded arguments are checked, so nothing is delivered.
    let token = escaped(GITEA);
    let url = escaped(&format!("https://example.com/?t={GITEA}"));
    for (action, parameters) in [
        ("open", format!(r#"{{"url":{url}}}"#)),
        ("snapshot", format!(r#"{{"selector":{token}}}"#)),
        ("click", format!(r#"{{"text":{token}}}"#)),
        ("type", format!(r##"{{"selector":"#q","value":{token}}}"##)),
        ("scroll", format!(r#"{{"selector":{token}}}"#)),
        ("back", format!(r#"{{"note":{token}}}"#)),
        ("forward", format!(r#"{{{token}:1}}"#)),
        ("inspect", format!(r#"{{"selector":{token}}}"#)),
        ("capture", format!(r#"{{"label":{token}}}"#)),
        (
            "resize",
            format!(r#"{{"viewport":{{"width":800,"height":600,"why":{token}}}}}"#),
        ),
    ] {
        let line = format!(
            r#"{{"cap":"{}","verb":"browser.request","args":{{"action":"{action}","parameters":{parameters}}}}}"#,
            web.cap
        );
        assert!(!contains(line.as_bytes(), GITEA), "the line hides it");
        support::raw_refused(&broker.socket, line.as_bytes(), "credential-leak");
    }

    // The first request the pane hears of is the next clean one.
    let asked = {
        let web = web.clone();
        std::thread::spawn(move || {
            web.call(
                "browser.request",
                json!({"action": "snapshot", "parameters": {}, "timeoutMs": 10_000}),
            )
        })
    };
    let event = pane.next_request();
    assert_eq!(event["properties"]["action"], json!("snapshot"), "{event}");
    assert_no_token([("the event".to_owned(), event.to_string().as_bytes())]);
    let id = event["properties"]["requestId"].clone();
    let granted = ui.post(
        "/api/browser-control/claim",
        &json!({"requestId": id, "clientId": "pane-1"}),
    );
    // A result too large to answer inline, holding the token: refused, and
    // nothing stored.
    let padding = "x".repeat(1024 * 1024 + 100 * 1024);
    let result = json!({"requestId": id, "claimToken": granted["claimToken"], "ok": true,
                        "data": {"text": format!("{padding} {GITEA}")}});
    assert_eq!(
        ui.post("/api/browser-control/result", &result),
        json!({"matched": true})
    );
    assert_eq!(asked.join().expect("agent"), Err(Refusal::CredentialLeak));
    let stored = root.path().join("browser");
    let files = std::fs::read_dir(&stored).map_or(0, Iterator::count);
    assert_eq!(files, 0, "nothing stored under {}", stored.display());
    let log = broker.close();
    assert_no_token([("the broker's stderr".to_owned(), log.as_bytes())]);
}
