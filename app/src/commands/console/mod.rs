//! `mosaic-bus console --socket PATH --business ID [--notify CMD]`: the
//! human's terminal UI.
//!
//! Every request it sends is the human CLI's ([`super::human`]): this
//! binary, carrying the nonce of its one re-execution, proven by the broker
//! from `/proc` with no agent in its ancestry. It holds no capability.
//!
//! The console's state is a sans-IO machine ([`state`]) over typed rows
//! ([`model`], and a trail's records, [`trail`]), fed each answer decoded once,
//! here at the link, with the client crate's wire shapes ([`request`]);
//! drawing reads it ([`render`], with the grant area of [`grant`]), in
//! the panes [`layout`] places for both; this module is the loop. Nothing on the loop's thread
//! waits on the broker: one thread waits on the human's `changes` (and
//! tells the loop when the broker is lost and found again), one sends the
//! state's requests in order and hands each answer back as an input, one
//! reads the terminal's events, and under `up --console` one reads what
//! the harness agents are doing ([`doing`]); the loop redraws only when
//! one of them wakes it, or each second while the Agents view shows those
//! agents' ages.
//!
//! Beside the machine: `act.rs`, its inputs and outputs (the keys and the
//! key map the help is generated from, the views, the effects, the acts
//! confirmed with `y`, the prompts); `history.rs`, the History view's
//! rows and the pages they come in; `lines.rs`, text's width and
//! wrapping, which the drawing and the state's scroll limit both count
//! with; `sentence.rs`, a trail record in one sentence; `rows.rs`, each
//! list row's words, which the drawing draws and the filter (`/`)
//! matches; `detail.rs`, a trail record or a change opened whole
//! (`Enter`), wrapped and scrolled; `tail.rs`, the
//! last lines of a run's output, read bounded. Its tests:
//! `tests.rs` (the machine's exact effects, the link mocked, snapshots),
//! `tests_screen.rs` (what reaches a real terminal backend),
//! `tests_doing.rs` (the Agents view at injected times), `tests_history.rs`
//! (the History view: its pages, its changes, its rows), `tests_agents.rs`
//! (its acts: a run opened, ended, started again; a failure's alarm),
//! `tests_day.rs` (a working day's details: the prompt, `m`, `R`,
//! Activity), `tests_output.rs` (the Run view's output, a sleeping
//! run), `tests_prompt.rs` (a resolve's prompt: the note, a gone
//! raiser), `tests_select.rs`
//! (the selection by id, and `]`), `tests_filter.rs` (`/`: the rows
//! kept, the selection, the screen's word of it), `tests_detail.rs` (a
//! row opened whole, scrolled, and left), `tests_redraw.rs` (the whole screen
//! drawn again on a change of view or selection) and
//! `tests_request.rs` (each request's arguments, and every answer key the
//! broker always writes required).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use clap::Args;
use mosaic_adapters::system::SystemClock;
use mosaic_domain::{Refusal, Verb};
use mosaic_ports::Clock;
use serde_json::{json, Map, Value};

use super::args::non_empty_path;
use super::human;
use super::signals::Signals;

mod act;
pub mod detail;
pub mod doing;
pub mod grant;
pub mod history;
pub mod layout;
pub mod lines;
pub mod model;
pub mod render;
pub mod request;
pub mod rows;
mod sentence;
pub mod state;
pub mod tail;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_agents;
#[cfg(test)]
mod tests_day;
#[cfg(test)]
mod tests_detail;
#[cfg(test)]
mod tests_doing;
#[cfg(test)]
mod tests_filter;
#[cfg(test)]
mod tests_history;
#[cfg(test)]
mod tests_output;
#[cfg(test)]
mod tests_prompt;
#[cfg(test)]
mod tests_redraw;
#[cfg(test)]
mod tests_request;
#[cfg(test)]
mod tests_screen;
#[cfg(test)]
mod tests_select;
mod trail;

use request::Request;
use state::{Effect, Key, Notice, State, KEYS};

use crate::runtime::human_proof::RUN_MARKERS;

pub(crate) const ABOUT: &str = "\
The human's console: a terminal UI over one business. It shows the \
decisions waiting on you (blocking ones first) and your unread messages, \
each decision with a fixed grant area (what approving it authorizes, \
from the broker, and whether its raiser is alive) above the raiser's own \
words, the agents and what they wait on or how they exited, any \
subject's trail, the business's changes as they arrive, and the \
decisions that closed (History: how, by whom and when, each opening its \
trail). Under `up \
--console`, the Agents view also shows what each harness agent is doing \
(working, waiting on the feed, exited), its last tool and how long ago.

Every request is proven exactly as `mosaic-bus human`'s: this binary, \
re-executed once with a fresh nonce, with no agent among its ancestors. \
Started from inside an agent's ancestry it does not open: it prints \
human-proof-failed and a sentence, and exits 1. It holds no capability.

It waits on the human's `changes` and redraws only when something \
arrives (a change, an answer, a key or a resize); its requests never hold \
the screen. After 10 s without a change it reads the agents again, since \
a process's exit is no change. A new decision routed to you rings the terminal bell.";

/// The help after `console`'s arguments: the key map, from [`KEYS`].
pub(crate) fn after() -> String {
    let keys: String = KEYS
        .iter()
        .map(|(key, what)| format!("  {key:<9} {what}\n"))
        .collect();
    format!(
        "\
Keys:
{keys}
Resolving is possible only from a decision's view: a digit selects an
option, Enter asks \"Grant <action> on <target> to <role>/<run> (choice
<key>)? y/n\" (the grant, never the question; e adds a note), and y sends
it once. Nothing resolves from a list, no key means \"always\", and nothing
resolves while the terminal is too small to show the grant area, the
options and that prompt whole. Everything an agent wrote is drawn with
each control or format character as a visible token, such as ⟨ESC⟩.

--notify CMD runs `sh -c CMD` once per new decision, with
MOSAIC_DECISION_ID, MOSAIC_ACTION, MOSAIC_TARGET and MOSAIC_RAISER in its
environment (never a capability or a token; each neutralised).

When the broker cannot be reached, a banner says so, the screen stays
read-only, and the console keeps trying, finding the broker again when it
restarts on the same socket.

Exit codes:
  0  quit (q, or SIGTERM/SIGINT, which restore the terminal too)
  1  before opening: human-proof-failed, the broker could not be reached,
     or an unknown business (each with a sentence that says what to do);
     or no terminal
  2  a usage error

Example:
  mosaic-bus console --socket /srv/bus/bus/bus.sock --business acme

Reference: docs/human.md."
    )
}

/// `console`.
#[derive(Debug, Clone, Args)]
pub struct ConsoleArgs {
    /// The broker's socket, <dataRoot>/bus/bus.sock.
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub socket: PathBuf,
    /// The business to watch and act for.
    #[arg(long, value_name = "ID")]
    pub business: String,
    /// A shell command run once per new decision routed to you.
    #[arg(long, value_name = "CMD")]
    pub notify: Option<String>,
    /// The pid of the `up` that started this console: the console ends
    /// (restoring the terminal) when that process does.
    #[arg(long, value_name = "PID", hide = true)]
    pub parent: Option<i32>,
    /// The FIFO on which `up --console` writes what its harness agents
    /// are doing ([`doing`]).
    #[arg(long, value_name = "PATH", hide = true)]
    pub activity: Option<PathBuf>,
}

/// How the console reaches the broker: one request, one answer. The real
/// one is [`Proven`]; tests mock it.
#[cfg_attr(test, mockall::automock)]
pub trait Link {
    /// Sends `verb` with `args` for the console's business; the result of
    /// an ok answer, or the refusal.
    ///
    /// # Errors
    /// The broker's refusal, or the transport's (`broker-unavailable`,
    /// `outcome-unknown`).
    fn call(&self, verb: Verb, args: &Value) -> Result<Value, Refusal>;
}

/// The human CLI's proven path, for one business.
#[derive(Debug, Clone)]
pub struct Proven {
    socket: PathBuf,
    nonce: String,
    business: String,
}

impl Link for Proven {
    fn call(&self, verb: Verb, args: &Value) -> Result<Value, Refusal> {
        let mut request = Map::new();
        request.insert("business".to_owned(), json!(self.business));
        request.insert("verb".to_owned(), json!(verb.as_str()));
        request.insert("args".to_owned(), args.clone());
        let reply = human::send(&self.socket, &self.nonce, request)?;
        mosaic_client::socket::parse_response(reply.to_string().as_bytes())
    }
}

/// Sends `request` through `link` and decodes the broker's answer with
/// its verb's wire shape.
fn ask(link: &dyn Link, request: &Request) -> Result<state::Reply, Refusal> {
    link.call(request.verb(), &request.args())
        .and_then(|result| request.decode(result))
}

/// Runs every effect `state` asks for, synchronously: each `Send` through
/// `link`, its answer back into the state (which may ask for more), the
/// others to `other`. Never resends: each `Send` goes out once. The tests
/// drive the state with it; the loop sends off its thread instead.
#[cfg(test)]
pub(crate) fn pump(state: &mut State, link: &dyn Link, other: &mut dyn FnMut(Effect)) {
    while let Some(effect) = state.poll_effect() {
        match effect {
            Effect::Send(request) => {
                let reply = ask(link, &request);
                state.handle_reply(&request, reply);
            }
            Effect::Bell | Effect::Notify(_) | Effect::Order(_) | Effect::Quit => other(effect),
        }
    }
}

/// Runs `console`.
pub fn main(args: ConsoleArgs) -> ExitCode {
    let mut argv: Vec<OsString> = vec!["console".into(), "--socket".into()];
    argv.push(args.socket.clone().into());
    argv.extend(["--business".into(), args.business.clone().into()]);
    if let Some(notify) = &args.notify {
        argv.extend(["--notify".into(), notify.into()]);
    }
    if let Some(parent) = args.parent {
        argv.extend(["--parent".into(), parent.to_string().into()]);
    }
    if let Some(activity) = &args.activity {
        argv.extend(["--activity".into(), activity.clone().into()]);
    }
    let argv: Vec<&std::ffi::OsStr> = argv.iter().map(OsString::as_os_str).collect();
    let link = match human::nonce(&argv) {
        Ok(nonce) => Proven {
            socket: args.socket.clone(),
            nonce,
            business: args.business.clone(),
        },
        Err(refusal) => return not_opened(refusal, &args),
    };
    if let Some(parent) = args.parent {
        if !dies_with(parent) {
            return ExitCode::from(1);
        }
    }
    // The first wait tells whether we are the human, before the screen
    // is touched.
    let cursor = match link.call(Verb::Changes, &request::changes_args(None, None)) {
        Ok(page) => match request::changes(page) {
            Ok((cursor, _)) => cursor,
            Err(refusal) => return not_opened(refusal, &args),
        },
        Err(refusal) => return not_opened(refusal, &args),
    };
    match run(&link, &args, cursor) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("console: the terminal failed: {e}");
            ExitCode::from(1)
        }
    }
}

/// Asks the kernel for SIGTERM when `parent` (the `up` that started us)
/// ends; SIGTERM quits as `q` does, restoring the terminal. `false` when
/// `parent` is already gone.
fn dies_with(parent: i32) -> bool {
    let asked =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM));
    // Asked after `parent` ended, the signal never comes: then we are
    // already some other process's child.
    let ours = rustix::process::getppid().map(rustix::process::Pid::as_raw_nonzero);
    asked.is_ok() && ours.is_some_and(|p| p.get() == parent)
}

/// Says why the console did not open, in a sentence that says what to do;
/// exit 1.
fn not_opened(refusal: Refusal, args: &ConsoleArgs) -> ExitCode {
    println!(
        "{}",
        not_opened_words(refusal, args, |name| std::env::var_os(name).is_some())
    );
    ExitCode::from(1)
}

/// The sentence for `refusal`; `has` says whether a variable is in the
/// console's environment (a run marker explains a refused proof).
pub fn not_opened_words(
    refusal: Refusal,
    args: &ConsoleArgs,
    has: impl Fn(&str) -> bool,
) -> String {
    let why = if refusal == Refusal::HumanProofFailed {
        match RUN_MARKERS.iter().find(|marker| has(marker)) {
            Some(marker) => format!(
                "this console carries the run marker {marker} in its environment, so it was \
                 started from inside an agent (or a shell that inherited an agent's \
                 environment); start it from your own terminal, outside every agent"
            ),
            None => "the broker could not prove that this console is the human: start this \
                     binary from your own terminal, as the broker's user and outside every \
                     agent's process tree (the broker's log names the cause)"
                .to_owned(),
        }
    } else if refusal == Refusal::BrokerUnavailable {
        format!(
            "no broker answers at {}: start it (mosaic-bus up or serve), or give --socket the \
             socket it runs on (<dataRoot>/bus/bus.sock)",
            args.socket.display()
        )
    } else if refusal == Refusal::BadRequest {
        format!(
            "the broker has no business {:?}: give --business one of the businesses in its \
             configuration",
            model::Shown::of(&args.business).as_str()
        )
    } else {
        refusal.meaning().to_owned()
    };
    format!("{}: {why}", refusal.code())
}

/// What wakes the loop.
enum Event {
    Key(Key),
    Resize(u16, u16),
    Changes(Result<Vec<model::Change>, Refusal>),
    Reply(Request, Result<state::Reply, Refusal>),
    Link(bool),
    Doing(String),
    Quiet,
    Quit,
}

/// The terminal's loop, until `q`.
fn run(link: &Proven, args: &ConsoleArgs, cursor: u64) -> std::io::Result<()> {
    let (events, woken) = mpsc::channel();
    watch_changes(link.clone(), cursor, events.clone());
    let requests = send_requests(link.clone(), events.clone());
    // SIGTERM (`up --console` stopping, or ending) quits as `q` does, so
    // the terminal is restored.
    let stop = events.clone();
    Signals::on_stop(move || {
        let _ = stop.send(Event::Quit);
    })?;
    // The orders' FIFO is opened before the activity's: `up` removes
    // their folder once the activity's is open. `up` holds it open for
    // reading, so this open never waits.
    let mut orders = args
        .activity
        .as_ref()
        .and_then(|path| path.parent())
        .and_then(|folder| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(folder.join(mosaic_client::wire::life::ORDERS_FIFO))
                .ok()
        });
    if let Some(path) = &args.activity {
        read_activity(path.clone(), events.clone());
    }
    read_terminal(events);
    // No terminal (or one that cannot be put in raw mode): exit 1.
    let mut terminal = ratatui::try_init().inspect_err(|_| {
        let _ = crossterm::terminal::disable_raw_mode();
    })?;
    let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut state = State::new(&args.business)
        .with_socket(&args.socket.display().to_string())
        .with_colour(colour);
    if orders.is_some() {
        state = state.with_orders();
    }
    let mut last = None;
    let result = (|| -> std::io::Result<()> {
        loop {
            let mut quit = false;
            while let Some(effect) = state.poll_effect() {
                match effect {
                    Effect::Send(request) => {
                        let _ = requests.send(request);
                    }
                    Effect::Bell => {
                        let mut out = std::io::stdout();
                        let _ = out.write_all(b"\x07").and_then(|()| out.flush());
                    }
                    Effect::Notify(notice) => notify(args.notify.as_deref(), &notice),
                    Effect::Order(run) => {
                        let order = mosaic_client::wire::life::Order::Start {
                            run: run.to_string(),
                        };
                        let sent = orders.as_mut().is_some_and(|fifo| {
                            serde_json::to_string(&order).is_ok_and(|mut line| {
                                line.push('\n');
                                fifo.write_all(line.as_bytes()).is_ok()
                            })
                        });
                        if !sent {
                            state.handle_order_lost();
                        }
                    }
                    Effect::Quit => quit = true,
                }
            }
            if quit {
                return Ok(());
            }
            let size = terminal.size()?;
            state.handle_resize(size.width, size.height);
            // The open run's output is read again before each draw, its
            // end only.
            if let Some((run, path)) = state.output_to_read() {
                state.handle_output(run, tail::read(&path).ok());
            }
            let now = SystemClock.now().unix_ms();
            render::redraw(&mut terminal, &state, &mut last, now)?;
            // The Agents view says how long ago each agent did what it
            // did: with `up`'s activity on it, it is drawn again each
            // second even when nothing wakes the loop.
            // The Run view's output is read again each second the same way.
            let ages = state.tells_doing()
                && matches!(state.view(), state::View::Agents | state::View::Run);
            let next = if ages {
                match woken.recv_timeout(AGES) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => Err(mpsc::RecvError),
                    Ok(event) => Ok(event),
                }
            } else {
                woken.recv()
            };
            match next {
                Ok(Event::Key(key)) => state.handle_key(key),
                Ok(Event::Doing(line)) => {
                    // A line that is not an activity line is dropped.
                    if let Some(rows) = doing::decode(&line, SystemClock.now().unix_ms()) {
                        state.handle_doing(rows);
                    }
                    if let Some(lives) = doing::lives(&line) {
                        state.handle_lives(lives);
                    }
                }
                Ok(Event::Changes(changes)) => state.handle_change(changes),
                Ok(Event::Reply(request, reply)) => state.handle_reply(&request, reply),
                Ok(Event::Link(up)) => state.handle_link(up),
                Ok(Event::Quiet) => state.handle_quiet(),
                Ok(Event::Resize(width, height)) => state.handle_resize(width, height),
                Ok(Event::Quit) | Err(_) => return Ok(()),
            }
        }
    })();
    ratatui::restore();
    result
}

/// A thread that sends the state's requests, one at a time in the order
/// asked, and hands each answer to the loop.
fn send_requests(link: Proven, events: mpsc::Sender<Event>) -> mpsc::Sender<Request> {
    let (requests, asked) = mpsc::channel::<Request>();
    std::thread::spawn(move || {
        for request in asked {
            let reply = ask(&link, &request);
            if events.send(Event::Reply(request, reply)).is_err() {
                return;
            }
        }
    });
    requests
}

/// How long a wait on `changes` lasts when nothing changes; each quiet
/// one reads the runs again (an exit is no change of the feed).
const QUIET_MS: u64 = 10_000;

/// How often the Agents view's ages are drawn again.
const AGES: Duration = Duration::from_secs(1);

/// The longest line read from `up`'s activity feed: a line per run, each
/// a run id, a short tool name and a few numbers.
const ACTIVITY_LINE_MAX: u64 = 1 << 20;

/// A thread that opens the FIFO of `up`'s activity feed (waiting for `up`
/// to open its end) and hands each line to the loop, until `up` closes
/// it. A line over [`ACTIVITY_LINE_MAX`] ends the reading: `up` never
/// writes one.
fn read_activity(path: PathBuf, events: mpsc::Sender<Event>) {
    use std::io::{BufRead, Read};
    std::thread::spawn(move || {
        let Ok(file) = std::fs::File::open(&path) else {
            return;
        };
        let mut reader = std::io::BufReader::new(file);
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = (&mut reader)
                .take(ACTIVITY_LINE_MAX)
                .read_until(b'\n', &mut line);
            if !matches!(read, Ok(n) if n > 0) || !line.ends_with(b"\n") {
                return;
            }
            let text = String::from_utf8_lossy(&line).into_owned();
            if events.send(Event::Doing(text)).is_err() {
                return;
            }
        }
    });
}

/// The longest pause between two tries to reach a lost broker.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// A thread that waits on the human's `changes` and hands each page with
/// changes to the loop. When the broker cannot be reached it tells the
/// loop at once, then tries again after a pause that doubles up to
/// [`MAX_BACKOFF`]; each answer tells the loop the broker is there.
fn watch_changes(link: Proven, mut cursor: u64, events: mpsc::Sender<Event>) {
    std::thread::spawn(move || {
        let mut backoff: Option<Duration> = None;
        loop {
            let args = request::changes_args(Some(cursor), Some(QUIET_MS));
            let sent = match link.call(Verb::Changes, &args).and_then(request::changes) {
                Ok((next, changes)) => {
                    cursor = next;
                    // Every answer says the broker is there: it also clears a
                    // banner that a failed request raised while this wait
                    // held.
                    backoff = None;
                    let back = events.send(Event::Link(true)).is_ok();
                    let next = if changes.is_empty() {
                        Event::Quiet
                    } else {
                        Event::Changes(Ok(changes))
                    };
                    back && events.send(next).is_ok()
                }
                Err(refusal) => {
                    let lost =
                        refusal == Refusal::BrokerUnavailable || refusal == Refusal::OutcomeUnknown;
                    // A page that is not one is said on the status line;
                    // the cursor stays, and the wait is asked again after
                    // the pause.
                    let told = if refusal == Refusal::BadResponse {
                        events.send(Event::Changes(Err(refusal))).is_ok()
                    } else {
                        !lost || backoff.is_some() || events.send(Event::Link(false)).is_ok()
                    };
                    let pause =
                        backoff.map_or(Duration::from_millis(100), |b| (b * 2).min(MAX_BACKOFF));
                    backoff = Some(pause);
                    // A retry's pause, so a lost broker costs no busy loop.
                    std::thread::sleep(pause);
                    told
                }
            };
            if !sent {
                return;
            }
        }
    });
}

/// A thread that reads the terminal's keys and resizes; every other
/// key and event is ignored.
#[allow(clippy::wildcard_enum_match_arm)]
fn read_terminal(events: mpsc::Sender<Event>) {
    use crossterm::event::{self, Event as Term, KeyCode, KeyEventKind, KeyModifiers};
    std::thread::spawn(move || loop {
        let event = match event::read() {
            Ok(Term::Key(k)) if k.kind != KeyEventKind::Release => {
                if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
                    Event::Quit
                } else {
                    match k.code {
                        KeyCode::Char(c) => Event::Key(Key::Char(c)),
                        KeyCode::Enter => Event::Key(Key::Enter),
                        KeyCode::Esc => Event::Key(Key::Esc),
                        KeyCode::Tab => Event::Key(Key::Tab),
                        KeyCode::Up => Event::Key(Key::Up),
                        KeyCode::Down => Event::Key(Key::Down),
                        KeyCode::PageUp => Event::Key(Key::PageUp),
                        KeyCode::PageDown => Event::Key(Key::PageDown),
                        KeyCode::Backspace => Event::Key(Key::Backspace),
                        _ => continue,
                    }
                }
            }
            Ok(Term::Resize(width, height)) => Event::Resize(width, height),
            Ok(_) => continue,
            Err(_) => Event::Quit,
        };
        if events.send(event).is_err() {
            return;
        }
    });
}

/// Runs `sh -c CMD` for a new decision, with its four variables (each
/// agent-chosen word already neutralised in the [`Notice`]) and without
/// the proof's nonce or any other `MOSAIC_` variable. Not waited for: a
/// thread reaps it.
fn notify(command: Option<&str>, notice: &Notice) {
    let Some(command) = command else {
        return;
    };
    let mut child = std::process::Command::new("sh");
    child.arg("-c").arg(command);
    for (name, _) in std::env::vars_os() {
        // `MOSAIC_HUMAN_NONCE` among them.
        if name.to_string_lossy().starts_with("MOSAIC_") {
            child.env_remove(name);
        }
    }
    child
        .env("MOSAIC_DECISION_ID", &notice.decision)
        .env("MOSAIC_ACTION", &notice.action)
        .env("MOSAIC_TARGET", &notice.target)
        .env("MOSAIC_RAISER", &notice.raiser)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Ok(mut child) = child.spawn() {
        std::thread::spawn(move || child.wait());
    }
}
