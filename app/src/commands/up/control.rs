//! `up`'s end of a sandboxed run's control channel
//! ([`super::sandbox::control`] is the protocol): the socket pair made
//! before the spawn ([`pair`]), orders written from the supervising
//! thread ([`Control::order`]), and a thread per run that reads the
//! supervisor's reports and hands them to the supervising loop
//! ([`Control::listen`]).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;

use super::sandbox::control::{line, Order, Report, MAX_CONTROL_LINE};
use mosaic_domain::RunId;

/// `up`'s end of one run's control channel.
#[derive(Debug)]
pub(super) struct Control {
    stream: UnixStream,
}

/// A connected pair: `up`'s end, and the supervisor's, which the spawn
/// passes on (both are close-on-exec until then).
///
/// # Errors
/// The kernel's, when it cannot make one.
pub(super) fn pair() -> io::Result<(Control, UnixStream)> {
    let (ours, theirs) = UnixStream::pair()?;
    Ok((Control { stream: ours }, theirs))
}

impl Control {
    /// Writes one order. A supervisor that is gone cannot take it: its
    /// channel's end says so to the listener, and the caller logs it.
    ///
    /// # Errors
    /// The write's.
    pub(super) fn order(&mut self, order: &Order) -> io::Result<()> {
        self.stream.write_all(line(order).as_bytes())
    }

    /// Starts a thread that reads `run`'s reports and hands each to
    /// `hand`, then `None` when the channel ends (or says what is no
    /// report); it stops early when `hand` answers `false` (the loop is
    /// gone).
    ///
    /// # Errors
    /// When the stream cannot be shared with the thread, or the thread
    /// cannot start.
    pub(super) fn listen(
        &self,
        run: &RunId,
        hand: impl Fn(Option<Report>) -> bool + Send + 'static,
    ) -> io::Result<()> {
        let stream = self.stream.try_clone()?;
        let run = run.clone();
        std::thread::Builder::new()
            .name(format!("up-control-{}", run.as_str()))
            .spawn(move || {
                let mut lines = BufReader::new(stream);
                let mut text = Vec::new();
                let limit = u64::try_from(MAX_CONTROL_LINE).unwrap_or(u64::MAX);
                loop {
                    text.clear();
                    match (&mut lines).take(limit).read_until(b'\n', &mut text) {
                        Ok(0) | Err(_) => break,
                        Ok(_) if !text.ends_with(b"\n") => break,
                        Ok(_) => {}
                    }
                    let Ok(report) = serde_json::from_slice::<Report>(&text) else {
                        tracing::warn!(
                            run = run.as_str(),
                            "a sandbox's supervisor sent what is no report; its channel is closed"
                        );
                        break;
                    };
                    if !hand(Some(report)) {
                        return;
                    }
                }
                hand(None);
            })
            .map(drop)
    }
}
