//! The host channel's JSON (`mosaic-bus broker`, docs/host.md): the host
//! requests and the broker's answers. Newline framing and the loop are the
//! app's; this is only the shapes.

use mosaic_domain::evidence::{Ending, LaunchRecord};
use mosaic_domain::{BusinessId, Capability, Refusal, RunId};
use serde_json::{json, Value};

use super::parse_json;
use crate::config::{boot_from_value, launch_from_value, BootConfig, ConfigError};

/// One line from the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRequest {
    /// `{"op":"boot","config":{…}}`, validated.
    Boot(Box<BootConfig>),
    /// `{"op":"bindLaunch","record":{…}}`, validated.
    BindLaunch(LaunchRecord),
    /// `{"op":"endRun","run","status"?,"signal"?}`: the host reaped the
    /// run's process (or sandbox), which ended so (`exited` for status 0
    /// or neither given, `failed` for a non-zero status or a signal). Its
    /// arguments, or why they do not parse (`bad-id` for the run,
    /// `bad-request` for a status or signal that is not a whole number in
    /// range, 0 to 255 and 1 to 64, or both given): a refused end, not a
    /// broken channel.
    EndRun(Result<(RunId, Ending), Refusal>),
    /// `{"op":"close"}`.
    Close,
}

/// Parses one host line: an object with `op` and exactly the key that op
/// takes.
///
/// # Errors
/// `bad-request` for anything but such an object or for an unknown op,
/// `unknown-key` for a key the op does not take, and the config and launch
/// codes (`bad-config`, `bad-date`, `unknown-role`, …) for their contents,
/// with the reference at fault where the config names one. The contents
/// of an `endRun` are its request's to refuse ([`HostRequest::EndRun`]).
pub fn parse_host_line(line: &[u8]) -> Result<HostRequest, ConfigError> {
    let message = parse_json(line)?;
    let object = message.as_object().ok_or(Refusal::BadRequest)?;
    let op = object
        .get("op")
        .and_then(Value::as_str)
        .ok_or(Refusal::BadRequest)?;
    let takes: &[&str] = match op {
        "boot" => &["config"],
        "bindLaunch" => &["record"],
        "endRun" => &["run", "status", "signal"],
        "close" => &[],
        _ => return Err(Refusal::BadRequest.into()),
    };
    if object
        .keys()
        .any(|k| k != "op" && !takes.contains(&k.as_str()))
    {
        return Err(Refusal::UnknownKey.into());
    }
    let argument = |key: &str| object.get(key).cloned().ok_or(Refusal::BadRequest);
    Ok(match op {
        "boot" => HostRequest::Boot(Box::new(boot_from_value(argument("config")?)?)),
        "bindLaunch" => HostRequest::BindLaunch(launch_from_value(argument("record")?)?),
        "endRun" => HostRequest::EndRun(end_run(object)),
        "close" => HostRequest::Close,
        // Refused above already; no unknown op falls into a real request.
        _ => return Err(Refusal::BadRequest.into()),
    })
}

/// The run and the ending of an `endRun` request's object.
fn end_run(object: &serde_json::Map<String, Value>) -> Result<(RunId, Ending), Refusal> {
    let run = object
        .get("run")
        .and_then(Value::as_str)
        .ok_or(Refusal::BadRequest)?;
    let run = RunId::parse(run)?;
    let number = |key: &str| match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or(Refusal::BadRequest),
    };
    let ending = Ending::of_exit(number("status")?, number("signal")?)?;
    Ok((run, ending))
}

/// The `endRun` answer: `{"ok":true}` or `{"ok":false,"error":CODE}`.
pub fn end_reply(result: Result<(), Refusal>) -> Value {
    match result {
        Ok(()) => json!({"ok": true}),
        Err(refusal) => host_error(refusal),
    }
}

/// A capability handed to one launch: `{business, run, cap}`.
pub fn launch_json(business: &BusinessId, run: &RunId, cap: &Capability) -> Value {
    json!({"business": business.as_str(), "run": run.as_str(), "cap": cap.expose()})
}

/// The boot answer: `{"ok":true,"path","launches":[{business,run,cap}],
/// "readers":[{business,cap}]}`, plus `"browser":{url,token}` when browser
/// control is served.
pub fn boot_reply(
    socket: &std::path::Path,
    launches: &[(BusinessId, RunId, Capability)],
    readers: &[(BusinessId, Capability)],
    browser: Option<(&str, &Capability)>,
) -> Value {
    let mut reply = json!({
        "ok": true,
        "path": socket.to_string_lossy(),
        "launches": launches.iter().map(|(b, r, c)| launch_json(b, r, c)).collect::<Vec<_>>(),
        "readers": readers.iter().map(|(b, c)| json!({"business": b.as_str(), "cap": c.expose()})).collect::<Vec<_>>(),
    });
    if let Some((url, token)) = browser {
        reply["browser"] = json!({"url": url, "token": token.expose()});
    }
    reply
}

/// The `bindLaunch` answer: `{"ok":true,"launch":{business,run,cap}}` or
/// `{"ok":false,"error":CODE}`.
pub fn bind_reply(result: Result<(BusinessId, RunId, Capability), Refusal>) -> Value {
    match result {
        Ok((business, run, cap)) => {
            json!({"ok": true, "launch": launch_json(&business, &run, &cap)})
        }
        Err(refusal) => host_error(refusal),
    }
}

/// A refused boot: `{"ok":false,"error":CODE}`, plus `"reference"` naming
/// a bad credential reference (`"acme/dev gitea"`, never its content) or a
/// bad role reference of a business (`"acme launch.by ops"`), or `"run"`
/// naming the boot launch that was refused.
pub fn boot_error(refusal: Refusal, reference: Option<&str>, run: Option<&str>) -> Value {
    let mut value = host_error(refusal);
    if let Some(reference) = reference {
        value["reference"] = reference.into();
    }
    if let Some(run) = run {
        value["run"] = run.into();
    }
    value
}

/// A refusal on the host channel: `{"ok":false,"error":CODE}`.
pub fn host_error(refusal: Refusal) -> Value {
    json!({"ok": false, "error": refusal.code()})
}
