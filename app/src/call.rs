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

use std::ffi::OsString;
use std::path::PathBuf;

use mosaic_adapters::cap::{cap_from_fd, cap_from_file};
pub use mosaic_adapters::cap::{CAP_FD_ENV, SOCKET_ENV};
use mosaic_adapters::socket::Client;
use mosaic_adapters::wire::{self, parse_json};
use mosaic_domain::Refusal;
use serde_json::{json, Value};

/// A parsed `call` command line.
#[derive(Debug)]
struct Args {
    verb: String,
    args: Value,
    socket: PathBuf,
    cap_file: Option<PathBuf>,
}

/// Runs `call`; returns the line to print and the exit code.
pub fn run(argv: &[OsString]) -> (String, u8) {
    let refused = wire::err;
    let args = match parse(argv) {
        Ok(args) => args,
        Err(refusal) => return (refused(refusal), 2),
    };
    let cap = match &args.cap_file {
        Some(path) => cap_from_file(path),
        None => cap_from_fd(),
    };
    let answer = cap.and_then(|cap| {
        Client::new(&args.socket, cap.expose()).call_verbatim(&args.verb, args.args)
    });
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

fn parse(argv: &[OsString]) -> Result<Args, Refusal> {
    let mut socket = std::env::var_os(SOCKET_ENV).map(PathBuf::from);
    let mut cap_file = None;
    let mut positional = Vec::new();
    let mut rest = argv.iter();
    while let Some(arg) = rest.next() {
        match arg.to_str() {
            Some("--socket") => {
                socket = Some(PathBuf::from(rest.next().ok_or(Refusal::BadRequest)?))
            }
            Some("--cap-file") => {
                cap_file = Some(PathBuf::from(rest.next().ok_or(Refusal::BadRequest)?))
            }
            Some(text) => positional.push(text.to_owned()),
            None => return Err(Refusal::BadRequest),
        }
    }
    let (verb, args) = match positional.as_slice() {
        [verb] => (verb.clone(), json!({})),
        [verb, args] => (verb.clone(), parse_json(args.as_bytes())?),
        _ => return Err(Refusal::BadRequest),
    };
    Ok(Args {
        verb,
        args,
        socket: socket.ok_or(Refusal::BadRequest)?,
        cap_file,
    })
}
