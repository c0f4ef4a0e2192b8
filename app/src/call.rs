//! `mosaic-bus call VERB [ARGS_JSON]`: one request to the broker, for agents
//! and scripts.
//!
//! The capability is never an argument or an environment value (both are
//! readable by other processes of the user): it comes from the inherited
//! descriptor named by `MOSAIC_BUS_CAP_FD` or from `--cap-file PATH` (a
//! private 0600 file), read by `mosaic_adapters::cap`. The socket is
//! `--socket PATH` or `MOSAIC_BUS_SOCKET`.
//!
//! Prints the broker's JSON answer on stdout: exit 0 when `ok`, 1 on a
//! refusal (including `outcome-unknown`: inspect the trail, never resend
//! blindly), 2 on a usage error.

use std::path::PathBuf;

use mosaic_adapters::cap::{cap_from_fd, cap_from_file};
pub use mosaic_adapters::cap::{CAP_FD_ENV, SOCKET_ENV};
use mosaic_adapters::socket::Client;
use mosaic_adapters::wire::{self, parse_json};
use mosaic_domain::Refusal;
use serde_json::{json, Value};

/// A `call` command line, as parsed by the binary.
#[derive(Debug, Clone)]
pub struct Args {
    /// The verb, sent as given (the broker refuses an unknown one).
    pub verb: String,
    /// The verb's arguments as JSON text; `None` is `{}`.
    pub args: Option<String>,
    /// The broker's socket.
    pub socket: PathBuf,
    /// A private file holding the capability, instead of the descriptor
    /// named by `MOSAIC_BUS_CAP_FD`.
    pub cap_file: Option<PathBuf>,
}

/// Runs `call`; returns the line to print and the exit code.
pub fn run(args: Args) -> (String, u8) {
    let refused = wire::err;
    let value = match &args.args {
        Some(text) => match parse_json(text.as_bytes()) {
            Ok(value) => value,
            Err(refusal) => return (refused(refusal), 2),
        },
        None => json!({}),
    };
    let cap = match &args.cap_file {
        Some(path) => cap_from_file(path),
        None => cap_from_fd(),
    };
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
