//! `mosaic-bus demo`: one short exchange of the example business, played
//! in-process against a real data root and SQLite store, printed as JSON
//! lines, followed by the decision's trail. It shows the core and the store
//! at work without a broker; `mosaic-bus up` plays the same business with
//! real agent processes over the socket.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use mosaic_adapters::cause::logged;
use mosaic_adapters::fs::{DataRoot, WriterLock};
use mosaic_adapters::procfs::ProcFs;
use mosaic_adapters::system::{OsEntropy, SystemClock};
use mosaic_domain::authority::Grant;
use mosaic_domain::bus::{Caller, Command, Reply, SendInput};
use mosaic_domain::claims::ClaimReply;
use mosaic_domain::decisions::RaiseInput;
use mosaic_domain::evidence::{
    AgentRef, DecisionOption, Harness, LaunchRecord, OptionKey, RaiseFields, Recipient, Subject,
};
use mosaic_domain::{Action, Refusal, RoleInstance, RunId, Target};
use mosaic_ports::{Clock, Entropy, EvidenceStore};
use serde_json::json;

use super::args::{code_on_stderr, non_empty_path, LogArgs};
use super::logs;
use super::team::UpConfig;
use crate::runtime::{open_store, Driver};

/// The example configuration (`examples/business.json`), embedded at build
/// time: `{"business": {…}, "agents": […]}`, the team file
/// ([`UpConfig`]) that `mosaic-bus up` reads; the demo plays its `business`.
pub const EXAMPLE_BUSINESS: &str = include_str!("../../../examples/business.json");

pub(crate) const ABOUT: &str = "\
Play one exchange of the example business built into this binary (acme, with \
lead and dev) against a real data root and SQLite store: both claim their \
roles, dev asks lead to approve a merge, lead approves, dev spends the \
approval once (a second spend is refused), dev reports and lead \
acknowledges. Prints one JSON line per step on stdout, then the decision's \
trail. No broker and no socket are involved; `up` plays the same business \
with real processes.";

pub(crate) const AFTER: &str = "\
Environment:
{log_env}

Exit codes:
  0  the exchange was played
  2  it could not run: one static code on the last line of stderr
     (bad-request for a usage error, unsafe-path, lock-held, stale-lock,
     storage-unavailable, ...)

Example:
  mosaic-bus demo --data-root ~/mosaic-demo";

/// `demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// The data root (a private folder, mode 0700). Default: a new private
    /// folder under the temporary directory, kept afterwards.
    #[arg(long, value_name = "D", value_parser = non_empty_path())]
    pub data_root: Option<PathBuf>,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

/// Runs `demo`: its lines on stdout, or its code on stderr.
pub fn main(args: DemoArgs) -> ExitCode {
    logs::init(&args.log);
    let mut out = std::io::stdout().lock();
    match run(args.data_root, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(refusal) => code_on_stderr(refusal),
    }
}

/// Plays the exchange in `data_root` (a fresh private temporary folder when
/// `None`, kept so the store can be inspected) and writes JSON lines to `out`.
///
/// # Errors
/// A static refusal when the data root, the lock, the store or a step fails.
pub fn run(data_root: Option<PathBuf>, out: &mut impl Write) -> Result<(), Refusal> {
    let path = match data_root {
        Some(p) => p,
        None => mosaic_adapters::fs::create_private_temp_dir("mosaic-demo-")?,
    };
    let root = DataRoot::open(&path)?;
    let me = ProcFs::new().current().map_err(logged(
        Refusal::StorageUnavailable,
        "reading this process in /proc",
    ))?;
    let lock = WriterLock::acquire(&root, me.pid, me.start_time)?;
    let played = play(&root, me.pid, me.start_time, out);
    lock.release()?;
    played
}

fn play(root: &DataRoot, pid: u32, start_time: u64, out: &mut impl Write) -> Result<(), Refusal> {
    // The agents' commands are not run here, so no directory is needed.
    let business = UpConfig::parse(EXAMPLE_BUSINESS, std::path::Path::new("/"))?.business;
    let acme = business.id().clone();
    let store = open_store(root)?;
    let mut driver = Driver::open(vec![business], store)?;
    let (clock, mut entropy) = (SystemClock, OsEntropy);
    let mut print = |line: serde_json::Value| {
        writeln!(out, "{line}").map_err(logged(Refusal::StorageUnavailable, "writing a line"))
    };
    print(
        json!({"dataRoot": root.root().to_string_lossy(), "store": root.db_path().to_string_lossy()}),
    )?;

    let drawn = || logged(Refusal::StorageUnavailable, "drawing an id");
    let ids = |e: &mut OsEntropy| e.uuid_bytes().map_err(drawn());
    let suffix = hex(&ids(&mut entropy)?[..3]);
    let agent = |role: &str| -> Result<AgentRef, Refusal> {
        Ok(AgentRef {
            role: RoleInstance::parse(role)?,
            run: RunId::parse(&format!("{role}-{suffix}"))?,
        })
    };
    let (lead, dev) = (agent("lead")?, agent("dev")?);
    for a in [&lead, &dev] {
        let record = LaunchRecord {
            business: acme.clone(),
            role: a.role.clone(),
            run: a.run.clone(),
            harness: Harness::Pi,
            address: None,
            pid,
            start_time,
        };
        driver.bind(clock.now(), record)?;
        print(json!({"step": "bindLaunch", "run": a.run.as_str(), "role": a.role.as_str()}))?;
    }
    let as_caller = |a: &AgentRef| Caller::Agent {
        business: acme.clone(),
        agent: a.clone(),
    };
    let (lead_c, dev_c) = (as_caller(&lead), as_caller(&dev));

    let decision = entropy.decision_id().map_err(drawn())?;
    let yes_no = vec![
        DecisionOption {
            key: OptionKey::yes(),
            text: "Merge it".into(),
        },
        DecisionOption {
            key: OptionKey::parse("no")?,
            text: "Not yet".into(),
        },
    ];
    let raise = RaiseInput {
        fields: RaiseFields {
            action: Action::parse("repo.merge")?,
            target: Some(Target::parse("main")?),
            question: "May I merge the login fix into main?".into(),
            options: yes_no,
            recommendation: "yes: the tests pass".into(),
            blocking: false,
            technical: false,
            project: None,
            task_ref: None,
            requirement_ref: None,
            supersedes: None,
        },
        choice: None,
        approval_choice: None,
    };
    let message = entropy.message_id().map_err(drawn())?;
    let send = SendInput {
        to: Recipient::Role(lead.role.clone()),
        class: None,
        body: "Merged the login fix, as approved.".into(),
        in_reply_to: None,
        corrects: None,
        decision: Some(decision),
    };
    let spend = Command::Authorize {
        action: Action::parse("repo.merge")?,
        target: Some(Target::parse("main")?),
        decision: Some(decision),
    };
    let steps: Vec<(&str, &Caller, Command)> = vec![
        ("lead claims its role", &lead_c, Command::Claim),
        ("dev claims its role", &dev_c, Command::Claim),
        (
            "dev asks the arbiter to merge",
            &dev_c,
            Command::Raise {
                id: decision,
                input: Box::new(raise),
            },
        ),
        (
            "lead approves",
            &lead_c,
            Command::Resolve {
                id: decision,
                choice: OptionKey::yes(),
                note: None,
            },
        ),
        ("dev spends the approval", &dev_c, spend.clone()),
        ("dev tries to spend it again", &dev_c, spend),
        (
            "dev reports, citing the decision",
            &dev_c,
            Command::Send {
                id: message,
                input: Box::new(send),
                known: Vec::new(),
            },
        ),
        (
            "lead receives",
            &lead_c,
            Command::Receive { batch: Vec::new() },
        ),
        (
            "lead acknowledges",
            &lead_c,
            Command::Read {
                id: message,
                known: None,
            },
        ),
    ];
    for (step, caller, command) in steps {
        let verb = command.verb();
        let line = match driver.call(clock.now(), caller, command) {
            Ok(reply) => json!({"step": step, "verb": verb, "ok": true, "result": summary(&reply)}),
            Err(refusal) => {
                json!({"step": step, "verb": verb, "ok": false, "error": refusal.code()})
            }
        };
        print(line)?;
    }
    let trail = driver
        .store()
        .trail(&acme, &Subject::Decision(decision))
        .map_err(logged(Refusal::StorageUnavailable, "reading the trail"))?;
    for record in trail {
        print(
            json!({"trail": decision.to_string(), "at": record.at.to_string(), "fact": record.evidence.kind().as_str()}),
        )?;
    }
    Ok(())
}

/// A short, human-readable gist of a reply.
fn summary(reply: &Reply) -> serde_json::Value {
    match reply {
        Reply::Claimed(ClaimReply::Claimed) => json!("claimed"),
        Reply::Claimed(ClaimReply::AlreadyHeld) => json!("already held"),
        Reply::Done => json!("done"),
        Reply::Decision(d) => json!({
            "id": d.record.id.to_string(),
            "class": d.record.class.as_str(),
            "route": match &d.record.route {
                mosaic_domain::evidence::Route::Role(r) => r.as_str().to_owned(),
                mosaic_domain::evidence::Route::Human => "human".to_owned(),
            },
            "status": d.status.as_str(),
        }),
        Reply::Sent { id, request } => {
            json!({"id": id.to_string(), "request": request.map(|r| r.to_string())})
        }
        Reply::Received(messages) => json!(messages
            .iter()
            .map(|m| json!({"id": m.id.to_string(), "body": m.body}))
            .collect::<Vec<_>>()),
        Reply::Authorized(Grant::WithinRole) => json!({"grant": "within-role"}),
        Reply::Authorized(Grant::Approval(id)) => {
            json!({"grant": "approval", "decision": id.to_string()})
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
