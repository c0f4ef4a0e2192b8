//! `mosaic-bus call VERB [ARGS_JSON]`: one request to the broker, for agents
//! and scripts.
//!
//! The capability is never an argument or an environment value (both are
//! readable by other processes of the user): it comes from the inherited
//! descriptor named by `MOSAIC_BUS_CAP_FD` (read through
//! `/proc/self/fd/N`, so every process sharing the descriptor reads it from
//! the start) or from `--cap-file PATH` (a private 0600 file). The socket is
//! `--socket PATH` or `MOSAIC_BUS_SOCKET`.
//!
//! Prints the broker's JSON answer on stdout: exit 0 when `ok`, 1 on a
//! refusal (including `outcome-unknown`: inspect the trail, never resend
//! blindly), 2 on a usage error.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;

use mosaic_adapters::socket::Client;
use mosaic_adapters::wire::{self, parse_json};
use mosaic_domain::{Capability, Refusal};
use serde_json::{json, Value};

/// The environment variable naming the capability descriptor.
pub const CAP_FD_ENV: &str = "MOSAIC_BUS_CAP_FD";
/// The environment variable naming the socket.
pub const SOCKET_ENV: &str = "MOSAIC_BUS_SOCKET";

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

pub(crate) fn cap_from_fd() -> Result<Capability, Refusal> {
    let fd: u32 = std::env::var(CAP_FD_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or(Refusal::BadCapability)?;
    read_cap(
        std::fs::File::open(format!("/proc/self/fd/{fd}")).map_err(|_| Refusal::BadCapability)?,
    )
}

pub(crate) fn cap_from_file(path: &std::path::Path) -> Result<Capability, Refusal> {
    mosaic_adapters::fs::check_private_file(path)?;
    read_cap(std::fs::File::open(path).map_err(|_| Refusal::BadCapability)?)
}

fn read_cap(file: std::fs::File) -> Result<Capability, Refusal> {
    let mut text = String::new();
    file.take(130)
        .read_to_string(&mut text)
        .map_err(|_| Refusal::BadCapability)?;
    Capability::parse(text.trim_end_matches('\n'))
}
