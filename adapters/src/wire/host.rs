//! The host channel's JSON (`mosaic-bus broker`, DESIGN.md §4): the three
//! host requests and the broker's answers. Newline framing and the loop are
//! the app's; this is only the shapes.

use mosaic_domain::evidence::LaunchRecord;
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
/// with the reference at fault where the config names one.
pub fn parse_host_line(line: &[u8]) -> Result<HostRequest, ConfigError> {
    let message = parse_json(line)?;
    let object = message.as_object().ok_or(Refusal::BadRequest)?;
    let op = object
        .get("op")
        .and_then(Value::as_str)
        .ok_or(Refusal::BadRequest)?;
    let takes = match op {
        "boot" => Some("config"),
        "bindLaunch" => Some("record"),
        "close" => None,
        _ => return Err(Refusal::BadRequest.into()),
    };
    if object
        .keys()
        .any(|k| k != "op" && Some(k.as_str()) != takes)
    {
        return Err(Refusal::UnknownKey.into());
    }
    let argument = |key: &str| object.get(key).cloned().ok_or(Refusal::BadRequest);
    Ok(match op {
        "boot" => HostRequest::Boot(Box::new(boot_from_value(argument("config")?)?)),
        "bindLaunch" => HostRequest::BindLaunch(launch_from_value(argument("record")?)?),
        "close" => HostRequest::Close,
        // Refused above already; no unknown op falls into a real request.
        _ => return Err(Refusal::BadRequest.into()),
    })
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
