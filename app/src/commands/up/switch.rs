//! Whether the business's launching is on, and hearing when the human
//! switches it (the console's `L`, the human CLI's `launch.revoke` and
//! `launch.restore`), read as the human's reader reads it: over the
//! socket with the business's reader capability, which `up` holds.
//!
//! [`launching`] asks once, before the first launch: the `agents` rows
//! carry the switch (`launching`); on a data root without any launch yet,
//! where no row says, a bound launch would be refused `launch-revoked`,
//! which the launch itself then answers. While launching is off (and only
//! then, so `up` holds no connection of the broker's for it otherwise),
//! [`watch`] waits on the reader's change feed from a cursor taken before
//! it asks again, so no switch between the two is missed, and tells the
//! supervising loop when launching is back on ([`Event::LaunchRestored`]).
//! A switch off while agents run is heard at the next launch, which the
//! broker refuses.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mosaic_client::socket::Client;
use mosaic_domain::Refusal;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::runs::Event;

/// How long one wait on the feed lasts before it is asked again.
const WAIT: Duration = Duration::from_secs(60);

/// The switch now, as the `agents` rows say it (`None`: no row says),
/// and the feed's cursor taken before the question.
///
/// # Errors
/// The reads' refusals.
pub(super) fn launching(socket: &Path, reader_cap: &str) -> Result<(Option<bool>, u64), Refusal> {
    let client = Client::new(socket, reader_cap);
    let cursor = client
        .call("changes", json!({}))?
        .get("cursor")
        .and_then(Value::as_u64)
        .ok_or(Refusal::BadRequest)?;
    let agents = client.call("agents", json!({}))?;
    // Every row carries the same switch; a last row may count those left
    // out, and carries none.
    let on = agents
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|row| row.get("launching").and_then(Value::as_bool));
    Ok((on, cursor))
}

/// Starts a thread that takes the reader's feed cursor, asks the switch
/// (so a restore before the cursor is not missed), then waits on the feed
/// from that cursor until launching is switched back on, sends
/// [`Event::LaunchRestored`] and ends; a refused wait ends it too (the
/// broker closes; the log says so).
///
/// # Errors
/// When the thread cannot start.
pub(super) fn watch(
    socket: PathBuf,
    reader_cap: String,
    events: UnboundedSender<Event>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("up-launching".into())
        .spawn(move || {
            let heard = |refusal: Refusal| {
                tracing::debug!(
                    code = refusal.code(),
                    "up no longer hears the launch switch"
                );
            };
            let mut since = match launching(&socket, &reader_cap) {
                Ok((Some(true), _)) => {
                    let _ = events.send(Event::LaunchRestored);
                    return;
                }
                Ok((Some(false) | None, cursor)) => cursor,
                Err(refusal) => return heard(refusal),
            };
            let client = Client::new(&socket, reader_cap);
            let timeout = u64::try_from(WAIT.as_millis()).unwrap_or(u64::MAX);
            loop {
                let page =
                    match client.call("changes", json!({"since": since, "timeoutMs": timeout})) {
                        Ok(page) => page,
                        Err(refusal) => return heard(refusal),
                    };
                let restored = page
                    .get("changes")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|c| c.get("kind").and_then(Value::as_str) == Some("launch.restored"));
                if restored {
                    let _ = events.send(Event::LaunchRestored);
                    return;
                }
                match page.get("cursor").and_then(Value::as_u64) {
                    Some(cursor) => since = cursor.max(since),
                    None => return,
                }
            }
        })
        .map(drop)
}
