//! `mosaic-bus call VERB [ARGS_JSON]`: one request to the broker, for agents
//! and scripts.
//!
//! The capability is never an argument or an environment value (both are
//! readable by other processes of the user): it comes from the inherited
//! descriptor named by `MOSAIC_BUS_CAP_FD` or from `--cap-file PATH` (a
//! private 0600 file), or else from the file `MOSAIC_BUS_CAP_FILE` names,
//! read by `mosaic_client::cap`. The socket is
//! `--socket PATH` or `MOSAIC_BUS_SOCKET`.
//!
//! Prints the broker's JSON answer on stdout: exit 0 when `ok`, 1 on a
//! refusal (including `outcome-unknown`: inspect the trail, never resend
//! blindly), 2 on a usage error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use mosaic_adapters::wire::{self, parse_json};
use mosaic_client::cap::cap_from;
pub use mosaic_client::cap::{CAP_FD_ENV, SOCKET_ENV};
use mosaic_client::socket::Client;
use mosaic_domain::{CallerKind, Refusal};
use serde_json::{json, Value};

use super::args::{non_empty_path, verb_list};

pub(crate) const ABOUT: &str = "\
Send one request to the broker and print its JSON answer line on stdout, as \
the broker sent it: {\"ok\":true,\"result\":...} or {\"ok\":false,\"error\":CODE}.

The capability comes from the inherited descriptor named by \
MOSAIC_BUS_CAP_FD (how `up` hands it to an agent) or from a private file \
(--cap-file, or else MOSAIC_BUS_CAP_FILE; mode 0600), never from an \
argument or an environment value; a file that is not there is \
bad-capability. \
There is no retry: on outcome-unknown the request may have taken effect, so \
inspect the trail before doing anything again. Nothing is read from stdin.";

/// The help after `call`'s arguments: its verbs, from the verb table.
pub(crate) fn after() -> String {
    format!(
        "\
Verbs (agents):
{agent}

Verbs (readers):
{reader}

Environment:
  MOSAIC_BUS_CAP_FD      the descriptor holding the capability (without
                         --cap-file)
  MOSAIC_BUS_CAP_FILE    a private 0600 file holding it (without --cap-file
                         or MOSAIC_BUS_CAP_FD)
  MOSAIC_BUS_SOCKET      the socket (without --socket)

Exit codes:
  0  ok
  1  refused: the broker's code, or broker-unavailable, bad-capability,
     unsafe-path (the capability file), outcome-unknown
  2  a usage error: bad-request (missing or unknown arguments, ARGS_JSON
     not JSON)

Example:
  mosaic-bus call message.send '{{\"to\":\"dev\",\"body\":\"merged\"}}'

Reference: docs/protocol.md.",
        agent = verb_list(CallerKind::Agent),
        reader = verb_list(CallerKind::Reader),
    )
}

/// `call`.
#[derive(Debug, Clone, Args)]
pub struct CallArgs {
    /// The verb, e.g. inbox or message.send (listed below).
    #[arg(value_name = "VERB")]
    pub verb: String,
    /// The verb's arguments as one JSON object. Default: {}.
    #[arg(value_name = "ARGS_JSON")]
    pub args: Option<String>,
    /// The broker's socket, <dataRoot>/bus/bus.sock.
    #[arg(long, value_name = "PATH", env = "MOSAIC_BUS_SOCKET", value_parser = non_empty_path())]
    pub socket: PathBuf,
    /// Read the capability from this private file (mode 0600) instead of the
    /// descriptor named by MOSAIC_BUS_CAP_FD.
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub cap_file: Option<PathBuf>,
}

/// Runs `call` and prints its line.
pub fn main(args: CallArgs) -> ExitCode {
    let (line, code) = run(args);
    println!("{line}");
    ExitCode::from(code)
}

/// Runs `call`; returns the line to print and the exit code.
pub fn run(args: CallArgs) -> (String, u8) {
    let refused = wire::err;
    let value = match &args.args {
        Some(text) => match parse_json(text.as_bytes()) {
            Ok(value) => value,
            Err(refusal) => return (refused(refusal), 2),
        },
        None => json!({}),
    };
    let cap = cap_from(args.cap_file.as_deref());
    let answer = cap
        .and_then(|cap| Client::new(&args.socket, cap.expose()).call_verbatim(&args.verb, value));
    match answer {
        // The broker's line as it came: a refusal may carry more than its
        // code (browser.request adds its status class and a sentence).
        Ok(line) => {
            let text = String::from_utf8_lossy(&line).into_owned();
            match serde_json::from_slice::<Value>(&line) {
                Ok(value) if value.get("ok") == Some(&Value::Bool(true)) => (text, 0),
                Ok(value) if value.get("error").is_some_and(Value::is_string) => (text, 1),
                Ok(_) | Err(_) => (refused(Refusal::OutcomeUnknown), 1),
            }
        }
        Err(refusal) => (refused(refusal), 1),
    }
}
