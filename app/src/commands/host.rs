//! `mosaic-bus broker`: the trusted host's side channel (docs/host.md).
//!
//! Newline-delimited JSON on stdin (host → broker) and stdout (broker →
//! host); logs go to stderr and never carry a capability. Exactly one
//! `{"op":"boot","config":…}` first, then any number of
//! `{"op":"bindLaunch","record":…}` and `{"op":"endRun","run",…}`, then
//! `{"op":"close"}`. The loop waits
//! for three things at once: a host line, the end of stdin (the host is
//! gone: close, exit 2) and SIGTERM or SIGINT (close, exit 0); a broker
//! that closed itself because a part of it died ([`Broker::on_failure`])
//! ends the loop too (exit 2).

use std::io::{BufRead, Read, Write};
use std::process::ExitCode;
use std::sync::mpsc;

use clap::Args;

use mosaic_adapters::config::ConfigError;
use mosaic_adapters::wire::host::{
    bind_reply, boot_error, boot_reply, end_reply, host_error, parse_host_line, HostRequest,
};
use mosaic_domain::{text, Refusal, RunId};
use serde_json::Value;

use crate::runtime::{start_broker, BootFailure, Broker, Failure};

use super::args::LogArgs;
use super::{logs, signals};

pub(crate) const ABOUT: &str = "\
Run the broker for a trusted host, which speaks newline-delimited JSON to it: \
requests on stdin, one answer line each on stdout. Logs go to stderr and \
never hold a capability or a token.

The first line must be {\"op\":\"boot\",\"config\":{dataRoot, businesses, \
launches, readers, repoRoots, projectRoots?, sync?, browser?}}; it is \
answered {\"ok\":true,\"path\":SOCKET,\"launches\":[{business,run,cap}],\
\"readers\":[{business,cap}]}, and with \"browser\":{\"listen\":\"127.0.0.1:0\"} \
also \"browser\":{url,token}. Then any number of {\"op\":\"bindLaunch\",\
\"record\":{business,role,run,harness,address?,pid,startTime}}, each answered \
{\"ok\":true,\"launch\":{business,run,cap}} or {\"ok\":false,\"error\":CODE}; \
any number of {\"op\":\"endRun\",\"run\",\"status\"?,\"signal\"?} when a run's \
process (or sandbox) is gone, each answered {\"ok\":true} or \
{\"ok\":false,\"error\":CODE}: the run ends (exited for status 0, failed for a \
non-zero status or a signal) and frees its role; \
and {\"op\":\"close\"}. A launch record's startTime is field 22 of \
/proc/<pid>/stat. The agents reach the broker on the socket \
<dataRoot>/bus/bus.sock (mode 0600).";

pub(crate) const AFTER: &str = "\
Environment:
{log_env}

Exit codes:
  0  closed by {\"op\":\"close\"}, SIGTERM or SIGINT
  2  end of stdin (the host is gone: the broker closes); a part of the
     broker died (its writer thread or socket server: the broker closed
     itself, removing its socket and lock); a boot failure or a
     malformed host line ({\"ok\":false,\"error\":CODE} on stdout, with
     \"reference\" for a bad credential reference or \"run\" for a boot
     launch); a usage error (bad-request); a failed close

Example (a host's side of the channel):
  > {\"op\":\"boot\",\"config\":{\"dataRoot\":\"/srv/bus\",\"businesses\":{\"acme\":{...}},
     \"launches\":[],\"readers\":[\"acme\"],\"repoRoots\":[]}}
  < {\"ok\":true,\"path\":\"/srv/bus/bus/bus.sock\",\"launches\":[],
     \"readers\":[{\"business\":\"acme\",\"cap\":\"<64 hex>\"}]}
  > {\"op\":\"close\"}

Reference: docs/host.md.";

/// `broker`.
#[derive(Debug, Clone, Args)]
pub struct BrokerArgs {
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

/// Runs the host channel on stdin and stdout.
pub fn main(args: BrokerArgs) -> ExitCode {
    logs::init(&args.log);
    let code = run(
        std::io::BufReader::new(std::io::stdin()),
        &mut std::io::stdout().lock(),
    );
    ExitCode::from(code)
}

/// The longest host line accepted (a boot configuration with many businesses).
const MAX_HOST_LINE: usize = 16 * 1024 * 1024;

/// What the host loop waits for.
enum Event {
    Line(Result<Vec<u8>, Refusal>),
    HostGone,
    Signal,
    /// A part of the broker died, and the broker closed itself.
    Failed(Failure),
}

/// Runs the host protocol until close; returns the process exit code.
pub fn run(input: impl BufRead + Send + 'static, out: &mut impl Write) -> u8 {
    let (events, inbox) = mpsc::channel();
    spawn_reader(input, events.clone());
    let failures = events.clone();
    if signals::Signals::on_stop(move || drop(events.send(Event::Signal))).is_err() {
        return fail(out, Refusal::BrokerUnavailable.into());
    }
    let broker = match inbox.recv() {
        Ok(Event::Line(Ok(line))) => match boot(&line) {
            Ok((broker, reply)) => {
                if say(out, &reply).is_err() {
                    tracing::error!("the host's stdout is closed: closing");
                    return close(broker, 2);
                }
                broker.on_failure(move |part| drop(failures.send(Event::Failed(part))));
                broker
            }
            Err(failure) => return fail(out, failure),
        },
        Ok(Event::Line(Err(refusal))) => {
            refused_boot_line(refusal);
            return fail(out, refusal.into());
        }
        Ok(Event::HostGone | Event::Signal | Event::Failed(_)) | Err(_) => {
            tracing::error!(
                code = Refusal::BadRequest.code(),
                "stdin ended, or a signal came, before the boot line"
            );
            return fail(out, Refusal::BadRequest.into());
        }
    };
    loop {
        match inbox.recv() {
            Ok(Event::Line(Ok(line))) => match request(&broker, &line) {
                Ok(Some(reply)) => {
                    if say(out, &reply).is_err() {
                        tracing::error!("the host's stdout is closed: closing");
                        return close(broker, 2);
                    }
                }
                Ok(None) => {
                    tracing::info!("the host asked to close");
                    return close(broker, 0);
                }
                Err(refusal) => {
                    // Not a well-formed host request: a protocol failure.
                    protocol_failure(refusal);
                    let _ = say(out, &host_error(refusal));
                    return close(broker, 2);
                }
            },
            Ok(Event::Line(Err(refusal))) => {
                protocol_failure(refusal);
                let _ = say(out, &host_error(refusal));
                return close(broker, 2);
            }
            Ok(Event::Signal) => {
                tracing::info!("SIGTERM or SIGINT: closing");
                return close(broker, 0);
            }
            Ok(Event::Failed(part)) => {
                // The broker closed itself already; its close says so.
                tracing::error!(
                    part = part.as_str(),
                    "a part of the broker died: the broker is closed, exiting"
                );
                return close(broker, 2);
            }
            Ok(Event::HostGone) | Err(_) => {
                tracing::warn!("end of stdin: the host is gone; closing");
                return close(broker, 2);
            }
        }
    }
}

/// Logs a first line that is not a valid boot request (a refusal of the
/// boot itself is logged by the broker).
fn refused_boot_line(refusal: Refusal) -> Refusal {
    tracing::error!(
        code = refusal.code(),
        "the first host line is not a valid boot request"
    );
    refusal
}

/// As [`refused_boot_line`], for a boot line whose configuration names a
/// bad reference: the log and the failure line name it too.
fn refused_boot_config(error: ConfigError) -> BootFailure {
    tracing::error!(
        code = error.refusal.code(),
        reference = error.reference.as_deref().map(text::neutralise).as_deref(),
        "the first host line is not a valid boot request"
    );
    error.into()
}

fn protocol_failure(refusal: Refusal) {
    tracing::error!(
        code = refusal.code(),
        "a host line is not a host request: closing"
    );
}

/// Closes the broker (which logs how that went); `code`, or 2 when the
/// close failed.
fn close(broker: Broker, code: u8) -> u8 {
    match broker.close() {
        Ok(()) => code,
        Err(_) => 2,
    }
}

/// The one boot failure line; a bad credential or role reference is named.
fn fail(out: &mut impl Write, failure: BootFailure) -> u8 {
    let _ = say(
        out,
        &boot_error(
            failure.refusal,
            failure.reference.as_deref(),
            failure.run.as_ref().map(RunId::as_str),
        ),
    );
    2
}

fn say(out: &mut impl Write, value: &Value) -> std::io::Result<()> {
    writeln!(out, "{value}")?;
    out.flush()
}

fn boot(line: &[u8]) -> Result<(Broker, Value), BootFailure> {
    let HostRequest::Boot(config) = parse_host_line(line).map_err(refused_boot_config)? else {
        return Err(refused_boot_line(Refusal::BadRequest).into());
    };
    let (broker, booted) = start_broker(*config)?;
    let launches: Vec<_> = booted
        .launches
        .into_iter()
        .map(|l| (l.business, l.run, l.cap))
        .collect();
    let readers: Vec<_> = booted
        .readers
        .into_iter()
        .map(|r| (r.business, r.cap))
        .collect();
    let browser = booted.browser.as_ref().map(|b| (b.url.as_str(), &b.token));
    Ok((
        broker,
        boot_reply(&booted.socket, &launches, &readers, browser),
    ))
}

/// One host request after boot: `Some(reply)`, or `None` for close.
fn request(broker: &Broker, line: &[u8]) -> Result<Option<Value>, Refusal> {
    match parse_host_line(line).map_err(Refusal::from) {
        Ok(HostRequest::BindLaunch(record)) => {
            let issued = broker
                .bind_launch(record)
                .map(|l| (l.business, l.run, l.cap));
            Ok(Some(bind_reply(issued)))
        }
        // The broker logs an end and its refusal; only a line it never
        // sees is logged here.
        Ok(HostRequest::EndRun(end)) => {
            let ended = match end {
                Ok((run, ending)) => broker.end_run(&run, ending),
                Err(refusal) => {
                    tracing::warn!(
                        code = refusal.code(),
                        "endRun refused: its run, status or signal does not parse"
                    );
                    Err(refusal)
                }
            };
            Ok(Some(end_reply(ended)))
        }
        Ok(HostRequest::Close) => Ok(None),
        // A bad launch record is a refused binding, not a protocol failure.
        Err(refusal @ (Refusal::BadConfig | Refusal::BadDate | Refusal::UnknownRole)) => {
            tracing::warn!(
                code = refusal.code(),
                "bindLaunch refused: the launch record does not parse"
            );
            Ok(Some(host_error(refusal)))
        }
        Ok(HostRequest::Boot(_)) => Err(Refusal::BadRequest),
        Err(refusal) => Err(refusal),
    }
}

/// Reads host lines on their own thread, so the loop can also wait for signals.
fn spawn_reader(mut input: impl BufRead + Send + 'static, events: mpsc::Sender<Event>) {
    std::thread::spawn(move || loop {
        let mut line = Vec::new();
        let read = input
            .by_ref()
            .take(MAX_HOST_LINE as u64 + 1)
            .read_until(b'\n', &mut line);
        let event = match read {
            Ok(0) => Event::HostGone,
            Ok(_) if line.last() != Some(&b'\n') => {
                if line.len() > MAX_HOST_LINE {
                    Event::Line(Err(Refusal::RequestTooLarge))
                } else {
                    // The host closed stdin in the middle of a line.
                    Event::HostGone
                }
            }
            Ok(_) => {
                line.pop();
                Event::Line(Ok(line))
            }
            Err(_) => Event::HostGone,
        };
        let last = !matches!(event, Event::Line(Ok(_)));
        if events.send(event).is_err() || last {
            return;
        }
    });
}
