//! `mosaic-bus human <socket>`: the human's transport to the broker (S4's
//! shim, not another product CLI).
//!
//! It reads one `{business, verb, args?}` object from stdin and prints the
//! broker's JSON answer: exit 0 when ok, 1 on a refusal, 2 on a usage error.
//! On its first start it re-executes itself once with a fresh random nonce
//! in its own environment (`MOSAIC_HUMAN_NONCE`); the re-executed process
//! (same pid, same start time) sends the nonce with the request, and the
//! broker proves from `/proc` that the connection's peer is this binary,
//! carrying that nonce, with no agent in its ancestry
//! ([`crate::runtime::human_proof`]). No human name is ever sent: the broker binds
//! the business's configured human after the proof.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use mosaic_adapters::system::OsEntropy;
use mosaic_adapters::wire::{self, parse_json};
use mosaic_client::socket::{broker_wait, Client, CLIENT_TIMEOUT};
use mosaic_domain::{CallerKind, Refusal};
use serde_json::{json, Map, Value};

use crate::runtime::human_proof::{fresh_nonce, NONCE_ENV};

use super::args::{non_empty_path, verb_list};

pub(crate) const ABOUT: &str = "\
The human's transport: read one {\"business\", \"verb\", \"args\"?} object from \
stdin (at most 64 KiB) and print the broker's JSON answer line on stdout.

No capability and no name is sent. The command re-executes itself once with \
a fresh nonce in its environment; the broker then proves from /proc that the \
caller is this very binary, carrying that nonce, run by the broker's user, \
with no agent among its ancestors, and acts as the business's configured \
human (human-proof-failed otherwise).";

/// The help after `human`'s arguments: its verbs, from the verb table.
pub(crate) fn after() -> String {
    format!(
        "\
Verbs:
{human}

Exit codes:
  0  ok
  1  refused: the broker's code, or human-proof-failed, broker-unavailable,
     outcome-unknown
  2  a usage error: bad-request (arguments, or stdin not one object with a
     string business and verb), unknown-key, request-too-large

Example:
  echo '{{\"business\":\"acme\",\"verb\":\"inbox\"}}' | mosaic-bus human /srv/bus/bus/bus.sock

Reference: docs/protocol.md.",
        human = verb_list(CallerKind::Human),
    )
}

/// `human`.
#[derive(Debug, Clone, Args)]
pub struct HumanArgs {
    /// The broker's socket, <dataRoot>/bus/bus.sock.
    #[arg(value_name = "SOCKET", value_parser = non_empty_path())]
    pub socket: PathBuf,
}

/// Runs `human` and prints its line.
pub fn main(args: HumanArgs) -> ExitCode {
    let (line, code) = run(&args.socket, std::io::stdin());
    println!("{line}");
    ExitCode::from(code)
}

/// The largest request read from stdin.
const MAX_INPUT: u64 = 64 * 1024;

/// Runs `human` on `socket`; returns the line to print and the exit code.
/// Returns only after the re-execution (or when it failed). The binary
/// refuses a command line without exactly one socket (exit 2) before this.
pub fn run(socket: &Path, input: impl Read) -> (String, u8) {
    let nonce = match nonce(&[OsStr::new("human"), socket.as_os_str()]) {
        Ok(nonce) => nonce,
        Err(refusal) => return (wire::err(refusal), 1),
    };
    let request = match read_request(input) {
        Ok(Value::Object(request)) => request,
        Ok(_) => return (wire::err(Refusal::BadRequest), 2),
        Err(refusal) => return (wire::err(refusal), 2),
    };
    match send(socket, &nonce, request) {
        Ok(reply) => {
            let ok = reply.get("ok") == Some(&Value::Bool(true));
            (reply.to_string(), if ok { 0 } else { 1 })
        }
        Err(refusal) => (wire::err(refusal), 1),
    }
}

/// This process's nonce, for the proof. On the first start there is none:
/// the binary re-executes itself once with `args` and a fresh nonce in its
/// own environment (same pid, same start time), and this returns only if
/// that failed. `human` and `console` both take it from here.
///
/// # Errors
/// `human-proof-failed` when the re-execution failed, or the nonce is not
/// text.
pub(crate) fn nonce(args: &[&OsStr]) -> Result<String, Refusal> {
    let Some(nonce) = std::env::var_os(NONCE_ENV) else {
        // First start: put a fresh nonce into our own environment by
        // re-executing; `exec` only returns on failure.
        let nonce = fresh_nonce(&mut OsEntropy).map_err(|_| Refusal::HumanProofFailed)?;
        let exe = std::env::current_exe().map_err(|_| Refusal::HumanProofFailed)?;
        let _ = std::process::Command::new(exe)
            .args(args)
            .env(NONCE_ENV, nonce)
            .exec();
        return Err(Refusal::HumanProofFailed);
    };
    nonce.into_string().map_err(|_| Refusal::HumanProofFailed)
}

/// Sends one `{business, verb, args?}` request as the human carrying
/// `nonce`, over a new connection, and returns the broker's answer object
/// (`ok` or a refusal). A verb that waits at the broker (`changes`) gets
/// its wait on top of the usual timeout, as every client does.
///
/// # Errors
/// `broker-unavailable` (nothing was sent), `response-too-large`, and
/// `outcome-unknown` when no readable answer came back.
pub(crate) fn send(
    socket: &Path,
    nonce: &str,
    request: Map<String, Value>,
) -> Result<Value, Refusal> {
    let verb = request
        .get("verb")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let wait = match request.get("args") {
        Some(Value::Object(args)) => broker_wait(verb, args),
        Some(_) | None => broker_wait(verb, &Map::new()),
    };
    let mut client = Client::new(socket, String::new());
    if let Some(wait) = wait {
        client = client.with_timeout(wait + CLIENT_TIMEOUT);
    }
    let mut line = Map::new();
    line.insert("human".to_owned(), json!({"nonce": nonce}));
    line.extend(request);
    let answer = client.call_line(Value::Object(line).to_string().as_bytes())?;
    match parse_json(&answer) {
        Ok(reply @ Value::Object(_)) => Ok(reply),
        Ok(_) | Err(_) => Err(Refusal::OutcomeUnknown),
    }
}

/// `{business, verb, args?}` and nothing else.
fn read_request(input: impl Read) -> Result<Value, Refusal> {
    let mut bytes = Vec::new();
    input
        .take(MAX_INPUT + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| Refusal::BadRequest)?;
    if bytes.len() as u64 > MAX_INPUT {
        return Err(Refusal::RequestTooLarge);
    }
    let request = parse_json(bytes.trim_ascii())?;
    let object = request.as_object().ok_or(Refusal::BadRequest)?;
    if object
        .keys()
        .any(|k| !matches!(k.as_str(), "business" | "verb" | "args"))
    {
        return Err(Refusal::UnknownKey);
    }
    if !object.get("business").is_some_and(Value::is_string)
        || !object.get("verb").is_some_and(Value::is_string)
    {
        return Err(Refusal::BadRequest);
    }
    Ok(request)
}
