//! A sleeping run's wait for work, and the order that wakes it.
//!
//! A harness run that may sleep (`"idle": "exit"`, sandboxed) keeps no
//! program while nothing concerns it: when its program exits 0, `up`
//! waits on the run's own change feed in a thread of its own ([`watch`]),
//! as the run (with the capability it issued), from the furthest cursor
//! the broker answered the run's `changes` with, so nothing handed to the
//! agent comes again and nothing after it is missed. The first page that
//! holds anything is the work ([`Work`]): the supervising loop starts the
//! program again in the run ([`order`]) with its conversation resumed, the
//! work as its prompt, and the cursor after it as `MOSAIC_BUS_SINCE`, from
//! which its hook waits next. A wait refused `not-holder` means the agent
//! released its role, and nothing can concern the run any more: the loop
//! hears [`Event::Released`], and the run ends. Any other refused wait (the
//! run ended, the broker closing) ends the thread; the log says why.

use std::path::PathBuf;
use std::time::Duration;

use mosaic_client::socket::Client;
use mosaic_domain::{Refusal, RunId};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::harness::Input;
use super::launch::SINCE_ENV;
use super::runs::{Event, Work};
use super::sandbox::control::{Order, Stdin};

/// How long one wait on the feed lasts before it is asked again.
const WAIT: Duration = Duration::from_secs(60);

/// Starts a thread that waits on run `run`'s feed from `since`, as the
/// run (`cap`), until a change concerning it arrives, and sends it as
/// [`Event::Work`]; a refused wait ends the thread.
///
/// # Errors
/// When the thread cannot start.
pub(super) fn watch(
    socket: PathBuf,
    cap: String,
    run: RunId,
    since: u64,
    events: UnboundedSender<Event>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("up-wake".into())
        .spawn(move || {
            let client = Client::new(&socket, cap);
            let timeout = u64::try_from(WAIT.as_millis()).unwrap_or(u64::MAX);
            let mut since = since;
            loop {
                let page =
                    match client.call("changes", json!({"since": since, "timeoutMs": timeout})) {
                        Ok(page) => page,
                        Err(Refusal::NotHolder) => {
                            let _ = events.send(Event::Released { run });
                            return;
                        }
                        Err(refusal) => return unheard(&run, refusal),
                    };
                let Some(cursor) = page.get("cursor").and_then(Value::as_u64) else {
                    return unheard(&run, Refusal::BadRequest);
                };
                since = cursor.max(since);
                let changes = page
                    .get("changes")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if !changes.is_empty() {
                    let work = Work {
                        cursor: since,
                        prompt: prompt(&run, &changes),
                    };
                    let _ = events.send(Event::Work { run, work });
                    return;
                }
            }
        })
        .map(drop)
}

/// The log's word on a sleeping run that no longer hears its feed.
fn unheard(run: &RunId, refusal: Refusal) {
    let expected = matches!(refusal, Refusal::RunEnded | Refusal::BrokerUnavailable);
    if expected {
        tracing::debug!(
            code = refusal.code(),
            run = run.as_str(),
            "a sleeping run no longer waits for work"
        );
    } else {
        tracing::warn!(
            code = refusal.code(),
            run = run.as_str(),
            "a sleeping run cannot wait for work, and stays asleep until it is ended"
        );
    }
}

/// The prompt for `changes`: each change's kind and the id it points at,
/// then which tools to call, as the Stop hook says it.
pub(super) fn prompt(run: &RunId, changes: &[Value]) -> String {
    let mut listed = Vec::new();
    let mut hints: Vec<&str> = Vec::new();
    for change in changes {
        let kind = change.get("kind").and_then(Value::as_str).unwrap_or("");
        let id = ["message", "decision", "role", "task"]
            .iter()
            .find_map(|key| change.get(*key).and_then(Value::as_str));
        listed.push(match id {
            Some(id) => format!("{kind} {id}"),
            None => kind.to_owned(),
        });
        let hint = hint(kind);
        if !hints.contains(&hint) {
            hints.push(hint);
        }
    }
    format!(
        "mosaic-bus: work arrived for run {} while you were idle: {}. Call the mosaic-bus \
         tools: {} then carry on. When you stop, the hook waits for more.",
        run.as_str(),
        listed.join("; "),
        hints.join(" ")
    )
}

/// The tool a change of `kind` points to.
fn hint(kind: &str) -> &'static str {
    match kind {
        "message.sent" => {
            "message_receive takes delivery of your new messages (then message_read each one);"
        }
        "decision.raised" | "decision.superseded" => {
            "inbox lists the open decisions routed to you;"
        }
        k if k.starts_with("decision.") => {
            "trail with the decision id as subject shows what happened to it;"
        }
        k if k.starts_with("role.") => "trail with your role as subject shows who holds it now;",
        _ => "inbox shows what is open for you;",
    }
}

/// The order that wakes a harness: `resume`'s arguments in place of its
/// configured ones, the prompt after `--` (Claude Code) or as its RPC
/// prompt, the pipe held open (pi), and the cursor after the work.
pub(super) fn order(resume: &[String], input: &Input, work: &Work) -> Order {
    let mut argv = resume.to_vec();
    let stdin = match input {
        Input::Null => {
            argv.push("--".to_owned());
            argv.push(work.prompt.clone());
            Stdin::Null
        }
        Input::Line(_) => Stdin::Text {
            text: format!("{}\n", json!({"type": "prompt", "message": work.prompt})),
            hold: true,
        },
    };
    Order::Start {
        args: Vec::new(),
        argv: Some(argv),
        env: vec![(SINCE_ENV.to_owned(), work.cursor.to_string())],
        stdin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_names_each_change_and_its_tool_once() {
        let run = RunId::parse("lead-1").unwrap();
        let changes = [
            json!({"seq": 4, "kind": "message.sent", "message": "m-1"}),
            json!({"seq": 5, "kind": "message.sent", "message": "m-2"}),
            json!({"seq": 6, "decision": "d-1", "kind": "decision.resolved"}),
        ];
        let text = prompt(&run, &changes);
        assert!(
            text.contains("run lead-1 while you were idle: message.sent m-1; message.sent m-2; decision.resolved d-1."),
            "{text}"
        );
        assert_eq!(text.matches("message_receive").count(), 1, "{text}");
        assert!(text.contains("what happened to it"), "{text}");
    }

    #[test]
    fn the_wake_order_resumes_with_the_work_as_prompt_and_its_cursor() {
        let work = Work {
            cursor: 42,
            prompt: "go on".to_owned(),
        };
        let resume = ["-p".to_owned(), "--continue".to_owned()];
        let claude = order(&resume, &Input::Null, &work);
        assert_eq!(
            claude,
            Order::Start {
                args: Vec::new(),
                argv: Some(vec![
                    "-p".to_owned(),
                    "--continue".to_owned(),
                    "--".to_owned(),
                    "go on".to_owned()
                ]),
                env: vec![("MOSAIC_BUS_SINCE".to_owned(), "42".to_owned())],
                stdin: Stdin::Null,
            }
        );
        let pi = order(&resume, &Input::Line("first".to_owned()), &work);
        let Order::Start { argv, stdin, .. } = pi else {
            panic!("a start: {pi:?}");
        };
        assert_eq!(argv.as_deref(), Some(&resume[..]));
        assert_eq!(
            stdin,
            Stdin::Text {
                text: format!("{}\n", json!({"type": "prompt", "message": "go on"})),
                hold: true
            }
        );
    }
}
