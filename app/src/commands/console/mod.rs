//! `mosaic-bus console --socket PATH --business ID [--notify CMD]`: the
//! human's terminal UI.
//!
//! Every request it sends is the human CLI's ([`super::human`]): this
//! binary, carrying the nonce of its one re-execution, proven by the broker
//! from `/proc` with no agent in its ancestry. It holds no capability.
//!
//! The console's state is a sans-IO machine ([`state`]); drawing reads it
//! ([`render`]); this module is the loop: one thread waits on the human's
//! `changes`, one reads the terminal's events, and the loop redraws only
//! on a change, a key or a resize.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;

use clap::Args;
use mosaic_adapters::system::SystemClock;
use mosaic_domain::{Refusal, Verb};
use mosaic_ports::Clock;
use serde_json::{json, Map, Value};

use super::args::non_empty_path;
use super::human;
use super::signals::Signals;

pub mod render;
pub mod state;
#[cfg(test)]
mod tests;

use state::{Effect, Key, Notice, State, KEYS};

pub(crate) const ABOUT: &str = "\
The human's console: a terminal UI over one business. It shows the \
decisions waiting on you (blocking ones first), each decision with its \
options and what approving it authorizes, the agents and what they wait \
on, any subject's trail, and the business's changes as they arrive.

Every request is proven exactly as `mosaic-bus human`'s: this binary, \
re-executed once with a fresh nonce, with no agent among its ancestors. \
Started from inside an agent's ancestry it does not open: it prints \
human-proof-failed and a sentence, and exits 1. It holds no capability.

It waits on the human's `changes` and redraws only on a change, a key or \
a resize. A new decision routed to you rings the terminal bell.";

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
option, Enter asks \"Resolve <question> with <key>? y/n, e adds a note\",
and y sends it once. Nothing resolves from a list, and no key means
\"always\".

--notify CMD runs `sh -c CMD` once per new decision, with
MOSAIC_DECISION_ID, MOSAIC_ACTION, MOSAIC_TARGET and MOSAIC_RAISER in its
environment (never a capability or a token).

Exit codes:
  0  quit (q, or SIGTERM/SIGINT, which restore the terminal too)
  1  human-proof-failed (or the broker could not be reached) before opening,
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
        mosaic_adapters::socket::parse_response(reply.to_string().as_bytes())
    }
}

/// Runs every effect `state` asks for: each `Send` through `link`, its
/// answer back into the state (which may ask for more), the others to
/// `other`. Never resends: each `Send` goes out once.
pub fn pump(state: &mut State, link: &dyn Link, other: &mut dyn FnMut(Effect)) {
    while let Some(effect) = state.poll_effect() {
        match effect {
            Effect::Send(verb, args) => {
                let reply = link.call(verb, &args);
                state.handle_reply(verb, &args, reply);
            }
            Effect::Bell | Effect::Notify(_) | Effect::Quit => other(effect),
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
    let argv: Vec<&std::ffi::OsStr> = argv.iter().map(OsString::as_os_str).collect();
    let link = match human::nonce(&argv) {
        Ok(nonce) => Proven {
            socket: args.socket.clone(),
            nonce,
            business: args.business.clone(),
        },
        Err(refusal) => return not_opened(refusal),
    };
    // The first wait tells whether we are the human, before the screen
    // is touched.
    let cursor = match link.call(Verb::Changes, &json!({})) {
        Ok(page) => page["cursor"].as_u64().unwrap_or(0),
        Err(refusal) => return not_opened(refusal),
    };
    match run(&link, &args, cursor) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("console: the terminal failed: {e}");
            ExitCode::from(1)
        }
    }
}

/// Says why the console did not open; exit 1.
fn not_opened(refusal: Refusal) -> ExitCode {
    let why = if refusal == Refusal::HumanProofFailed {
        "the broker could not prove that this console is the human: it must be this \
         binary, started outside every agent's process tree, by the broker's user"
    } else {
        refusal.meaning()
    };
    println!("{}: {why}", refusal.code());
    ExitCode::from(1)
}

/// What wakes the loop.
enum Event {
    Key(Key),
    Resize,
    Changes(Value),
    Quit,
}

/// The terminal's loop, until `q`.
fn run(link: &Proven, args: &ConsoleArgs, cursor: u64) -> std::io::Result<()> {
    let (events, woken) = mpsc::channel();
    watch_changes(link.clone(), cursor, events.clone());
    // SIGTERM (`up --console` stopping) quits as `q` does, so the terminal
    // is restored.
    let stop = events.clone();
    Signals::on_stop(move || {
        let _ = stop.send(Event::Quit);
    })?;
    read_terminal(events);
    // No terminal (or one that cannot be put in raw mode): exit 1.
    let mut terminal = ratatui::try_init().inspect_err(|_| {
        let _ = crossterm::terminal::disable_raw_mode();
    })?;
    let mut state = State::new(&args.business);
    let result = (|| -> std::io::Result<()> {
        loop {
            let mut quit = false;
            pump(&mut state, link, &mut |effect| match effect {
                Effect::Bell => {
                    let mut out = std::io::stdout();
                    let _ = out.write_all(b"\x07").and_then(|()| out.flush());
                }
                Effect::Notify(notice) => notify(args.notify.as_deref(), &notice),
                Effect::Quit => quit = true,
                Effect::Send(..) => {}
            });
            if quit {
                return Ok(());
            }
            let now = SystemClock.now().unix_ms();
            terminal.draw(|frame| render::draw(frame, &state, now))?;
            match woken.recv() {
                Ok(Event::Key(key)) => state.handle_key(key),
                Ok(Event::Changes(page)) => state.handle_change(&page),
                Ok(Event::Resize) => {}
                Ok(Event::Quit) | Err(_) => return Ok(()),
            }
        }
    })();
    ratatui::restore();
    result
}

/// A thread that waits on the human's `changes` and hands each page with
/// changes to the loop. A refusal (the broker gone) waits a second before
/// asking again, so a stopped broker costs no busy loop.
fn watch_changes(link: Proven, mut cursor: u64, events: mpsc::Sender<Event>) {
    std::thread::spawn(move || loop {
        let args = json!({"since": cursor, "timeoutMs": 60_000});
        match link.call(Verb::Changes, &args) {
            Ok(page) => {
                cursor = page["cursor"].as_u64().unwrap_or(cursor);
                let any = page["changes"].as_array().is_some_and(|c| !c.is_empty());
                if any && events.send(Event::Changes(page)).is_err() {
                    return;
                }
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_secs(1)),
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
                        KeyCode::Backspace => Event::Key(Key::Backspace),
                        _ => continue,
                    }
                }
            }
            Ok(Term::Resize(..)) => Event::Resize,
            Ok(_) => continue,
            Err(_) => Event::Quit,
        };
        if events.send(event).is_err() {
            return;
        }
    });
}

/// Runs `sh -c CMD` for a new decision, with its four variables and
/// without the proof's nonce or any other `MOSAIC_` variable. Not waited
/// for: a thread reaps it.
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
