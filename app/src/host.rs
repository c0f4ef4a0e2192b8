//! `mosaic-bus broker`: the trusted host's side channel (DESIGN.md §4).
//!
//! Newline-delimited JSON on stdin (host → broker) and stdout (broker →
//! host); logs go to stderr and never carry a capability. Exactly one
//! `{"op":"boot","config":…}` first, then any number of
//! `{"op":"bindLaunch","record":…}`, then `{"op":"close"}`. The loop waits
//! for three things at once: a host line, the end of stdin (the host is
//! gone: close, exit 2) and SIGTERM or SIGINT (close, exit 0).

use std::io::{BufRead, Read, Write};
use std::sync::mpsc;

use mosaic_adapters::config::{boot_from_value, launch_from_value};
use mosaic_adapters::wire::parse_json;
use mosaic_domain::Refusal;
use serde_json::{json, Value};

use crate::broker::{start_broker, Broker, IssuedLaunch};

/// The longest host line accepted (a boot configuration with many businesses).
const MAX_HOST_LINE: usize = 16 * 1024 * 1024;

/// What the host loop waits for.
enum Event {
    Line(Result<Vec<u8>, Refusal>),
    HostGone,
    Signal,
}

/// Runs the host protocol until close; returns the process exit code.
pub fn run(input: impl BufRead + Send + 'static, out: &mut impl Write) -> u8 {
    let (events, inbox) = mpsc::channel();
    spawn_reader(input, events.clone());
    if spawn_signals(events).is_err() {
        return fail(out, Refusal::BrokerUnavailable);
    }
    let broker = match inbox.recv() {
        Ok(Event::Line(Ok(line))) => match boot(&line) {
            Ok((broker, reply)) => {
                if say(out, &reply).is_err() {
                    return close(broker, 2);
                }
                eprintln!("mosaic-bus broker: serving {}", broker.socket().display());
                broker
            }
            Err(refusal) => return fail(out, refusal),
        },
        Ok(Event::Line(Err(refusal))) => return fail(out, refusal),
        Ok(Event::HostGone | Event::Signal) | Err(_) => return fail(out, Refusal::BadRequest),
    };
    loop {
        match inbox.recv() {
            Ok(Event::Line(Ok(line))) => match request(&broker, &line) {
                Ok(Some(reply)) => {
                    if say(out, &reply).is_err() {
                        return close(broker, 2);
                    }
                }
                Ok(None) => return close(broker, 0),
                Err(refusal) => {
                    // Not a well-formed host request: a protocol failure.
                    let _ = say(out, &json!({"ok": false, "error": refusal.code()}));
                    return close(broker, 2);
                }
            },
            Ok(Event::Line(Err(refusal))) => {
                let _ = say(out, &json!({"ok": false, "error": refusal.code()}));
                return close(broker, 2);
            }
            Ok(Event::Signal) => return close(broker, 0),
            Ok(Event::HostGone) | Err(_) => return close(broker, 2),
        }
    }
}

fn close(broker: Broker, code: u8) -> u8 {
    match broker.close() {
        Ok(()) => code,
        Err(refusal) => {
            eprintln!("mosaic-bus broker: close: {}", refusal.code());
            2
        }
    }
}

fn fail(out: &mut impl Write, refusal: Refusal) -> u8 {
    let _ = say(out, &json!({"ok": false, "error": refusal.code()}));
    2
}

fn say(out: &mut impl Write, value: &Value) -> std::io::Result<()> {
    writeln!(out, "{value}")?;
    out.flush()
}

/// The whole object `{"op": op, key: value}` with exactly these keys.
fn op<'a>(message: &'a Value, expected: &[&str]) -> Result<&'a str, Refusal> {
    let object = message.as_object().ok_or(Refusal::BadRequest)?;
    let op = object
        .get("op")
        .and_then(Value::as_str)
        .ok_or(Refusal::BadRequest)?;
    if object
        .keys()
        .any(|k| k != "op" && !expected.contains(&k.as_str()))
    {
        return Err(Refusal::UnknownKey);
    }
    Ok(op)
}

fn boot(line: &[u8]) -> Result<(Broker, Value), Refusal> {
    let message = parse_json(line)?;
    if op(&message, &["config"])? != "boot" {
        return Err(Refusal::BadRequest);
    }
    let config = boot_from_value(message.get("config").cloned().ok_or(Refusal::BadRequest)?)?;
    let (broker, booted) = start_broker(config)?;
    let reply = json!({
        "ok": true,
        "path": booted.socket.to_string_lossy(),
        "launches": booted.launches.iter().map(launch_json).collect::<Vec<_>>(),
        "readers": booted.readers.iter().map(|r| json!({"business": r.business.as_str(), "cap": r.cap.expose()})).collect::<Vec<_>>(),
    });
    Ok((broker, reply))
}

fn launch_json(l: &IssuedLaunch) -> Value {
    json!({"business": l.business.as_str(), "run": l.run.as_str(), "cap": l.cap.expose()})
}

/// One host request after boot: `Some(reply)`, or `None` for close.
fn request(broker: &Broker, line: &[u8]) -> Result<Option<Value>, Refusal> {
    let message = parse_json(line)?;
    match op(&message, &["record"])? {
        "bindLaunch" => {
            let record = message.get("record").cloned().ok_or(Refusal::BadRequest)?;
            let reply = match launch_from_value(record).and_then(|r| broker.bind_launch(r)) {
                Ok(issued) => json!({"ok": true, "launch": launch_json(&issued)}),
                Err(refusal) => json!({"ok": false, "error": refusal.code()}),
            };
            Ok(Some(reply))
        }
        "close" if message.get("record").is_none() => Ok(None),
        _ => Err(Refusal::BadRequest),
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

/// Turns SIGTERM and SIGINT into events, on a small runtime of their own.
fn spawn_signals(events: mpsc::Sender<Event>) -> Result<(), Refusal> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|_| Refusal::BrokerUnavailable)?;
    // Registered before this returns, so a signal sent right after boot is
    // never missed.
    let (mut term, mut int) = runtime
        .block_on(async {
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            ))
        })
        .map_err(|_| Refusal::BrokerUnavailable)?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        });
        let _ = events.send(Event::Signal);
    });
    Ok(())
}
