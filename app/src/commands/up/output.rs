//! The agents' output, relayed by `up`: each agent's standard output and
//! error are pipes that a thread of `up` reads, line by line, and writes
//! out as `ROLE: LINE` to `up`'s standard error, or with `--console` to
//! the log file. An agent's bytes never reach a terminal as they are: each
//! line goes through `mosaic_domain::text::neutralise`, so an escape
//! sequence (a title, the clipboard, a cleared screen) arrives as visible
//! tokens such as `⟨ESC⟩`. A line is cut at [`MAX_LINE`] bytes, so an agent
//! that never ends one cannot make `up` hold more; a last line without its
//! newline is written at the end of the pipe.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::Child;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use std::os::unix::fs::OpenOptionsExt;

use mosaic_adapters::cause::logged;
use mosaic_domain::{text, Refusal, RoleInstance, RunId};

use super::harness::activity::{Activities, Stream};
use super::harness::Prepared;

/// The most bytes of one line `up` holds; a longer line is written in
/// pieces of this size.
pub(super) const MAX_LINE: usize = 16 * 1024;

/// Where the agents' lines go.
#[derive(Debug, Clone)]
pub(super) enum Sink {
    /// `up`'s standard error.
    Stderr,
    /// The log file of `--console`.
    Log(Arc<File>),
}

impl Sink {
    /// Writes one whole line with one call, so lines of several agents
    /// (and `up`'s own log lines) interleave only between lines.
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        match self {
            Sink::Stderr => io::stderr().lock().write_all(line),
            Sink::Log(file) => (&**file).write_all(line),
        }
    }
}

/// The relay threads of every agent's pipes. Each holds a sender of
/// `done`; once all of them ended, `done` is disconnected.
#[derive(Debug)]
pub(super) struct Relays {
    sink: Sink,
    done: mpsc::Receiver<()>,
    alive: Option<mpsc::Sender<()>>,
}

impl Relays {
    /// Relays that write to `log` (`--console`'s log file), else to
    /// `up`'s standard error.
    ///
    /// # Errors
    /// `storage-unavailable` when the log file cannot be shared.
    pub(super) fn to(log: Option<&File>) -> Result<Self, Refusal> {
        let sink = match log {
            Some(file) => Sink::Log(Arc::new(
                file.try_clone()
                    .map_err(logged(Refusal::StorageUnavailable, "sharing up's log file"))?,
            )),
            None => Sink::Stderr,
        };
        Ok(Self::new(sink))
    }

    /// Relays that write to `sink`.
    pub(super) fn new(sink: Sink) -> Self {
        let (alive, done) = mpsc::channel();
        Self {
            sink,
            done,
            alive: Some(alive),
        }
    }

    /// Starts a relay for each of `child`'s piped standard output and
    /// error, its lines prefixed with `role`.
    ///
    /// # Errors
    /// A thread that could not be started.
    pub(super) fn start(&mut self, role: &str, child: &mut Child) -> io::Result<()> {
        let pipes: [Option<Box<dyn Read + Send>>; 2] = [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ];
        self.relay_pipes(role, pipes.into_iter().flatten().collect())
    }

    /// Starts a relay for each of `pipes`, its lines prefixed with `role`.
    fn relay_pipes(&mut self, role: &str, pipes: Vec<Box<dyn Read + Send>>) -> io::Result<()> {
        for pipe in pipes {
            let (sink, role) = (self.sink.clone(), role.to_owned());
            let alive = self.alive.clone();
            std::thread::Builder::new()
                .name(format!("up-output-{role}"))
                .spawn(move || {
                    relay(pipe, &role, &sink);
                    drop(alive);
                })?;
        }
        Ok(())
    }

    /// Starts the relays of a harness agent `up` started: its standard
    /// error as [`Relays::start`] does, its standard output (the harness's
    /// event stream) into its transcript, each complete line also handed
    /// to `activities` ([`Activities::observe`]).
    ///
    /// # Errors
    /// The transcript that cannot be opened, or a thread that could not
    /// be started.
    pub(super) fn start_harness(
        &mut self,
        role: &RoleInstance,
        run: &RunId,
        prepared: &Prepared,
        child: &mut Child,
        activities: &Activities,
    ) -> io::Result<()> {
        let transcript = std::fs::OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&prepared.transcript)?;
        if let Some(stdout) = child.stdout.take() {
            let (run, stream) = (run.clone(), Stream::of(prepared.harness));
            let (alive, activities) = (self.alive.clone(), activities.clone());
            std::thread::Builder::new()
                .name(format!("up-events-{}", role.as_str()))
                .spawn(move || {
                    record(stdout, transcript, |line| {
                        // Both streams are JSON, so UTF-8: another line
                        // says nothing.
                        if let Ok(line) = std::str::from_utf8(line) {
                            activities.observe(run.as_str(), stream, line, Instant::now());
                        }
                    });
                    drop(alive);
                })?;
        }
        let stderr = child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>);
        self.relay_pipes(role.as_str(), stderr.into_iter().collect())
    }

    /// Waits until every relay wrote its pipe's last line, or `within` has
    /// passed: a process the agent left behind may hold a pipe open, and
    /// `up` does not wait for it past that.
    pub(super) fn finish(&mut self, within: Duration) {
        drop(self.alive.take());
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.done.recv_timeout(left) {
                // No relay sends; a message would only mean "not yet".
                Ok(()) => {}
                Err(mpsc::RecvTimeoutError::Disconnected | mpsc::RecvTimeoutError::Timeout) => {
                    return
                }
            }
        }
    }
}

/// Copies `pipe` to `sink` line by line until its end, each line cut at
/// [`MAX_LINE`] bytes, prefixed and neutralised ([`format_line`]). A sink
/// that fails ends the relay, which then drains the pipe so the agent
/// never blocks on a full one.
pub(super) fn relay(pipe: impl Read, role: &str, sink: &Sink) {
    let mut reader = BufReader::with_capacity(MAX_LINE, pipe);
    let mut line = Vec::with_capacity(256);
    let mut writing = true;
    // Whether the last line written was cut: its newline then ends nothing.
    let mut cut = false;
    loop {
        let (used, ended, eof) = match reader.fill_buf() {
            Ok([]) => (0, false, true),
            Ok(buf) => {
                let room = MAX_LINE - line.len();
                let upto = buf.len().min(room);
                match buf[..upto].iter().position(|&b| b == b'\n') {
                    Some(at) => {
                        line.extend_from_slice(&buf[..at]);
                        (at + 1, true, false)
                    }
                    None => {
                        line.extend_from_slice(&buf[..upto]);
                        (upto, line.len() == MAX_LINE, false)
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => (0, false, true),
        };
        reader.consume(used);
        let newline_after_cut = cut && ended && used == 1 && line.is_empty();
        let flush = (ended || (eof && !line.is_empty())) && !newline_after_cut;
        if flush && writing {
            writing = sink.write_line(&format_line(role, &line)).is_ok();
        }
        if flush || newline_after_cut {
            cut = flush && line.len() == MAX_LINE;
            line.clear();
        }
        if eof {
            return;
        }
    }
}

/// The longest event line handed to [`Activities::observe`]; the
/// transcript keeps longer ones whole.
pub(super) const MAX_EVENT: usize = 1024 * 1024;

/// Copies `pipe` into `transcript` as it comes, and hands each complete
/// line of at most [`MAX_EVENT`] bytes, without its newline, to `observe`.
/// A transcript that fails is no longer written, and the pipe is still
/// drained, so the agent never blocks on a full one.
pub(super) fn record(pipe: impl Read, mut transcript: File, mut observe: impl FnMut(&[u8])) {
    let mut reader = BufReader::with_capacity(64 * 1024, pipe);
    let mut line = Vec::with_capacity(4096);
    let mut writing = true;
    // Whether the current line grew past MAX_EVENT: it is not observed.
    let mut long = false;
    loop {
        let (used, ended) = match reader.fill_buf() {
            Ok([]) => return,
            Ok(buf) => {
                let (chunk, ended) = match buf.iter().position(|&b| b == b'\n') {
                    Some(at) => (&buf[..=at], true),
                    None => (buf, false),
                };
                if writing {
                    writing = transcript.write_all(chunk).is_ok();
                }
                let body = chunk.strip_suffix(b"\n").unwrap_or(chunk);
                if !long && line.len() + body.len() <= MAX_EVENT {
                    line.extend_from_slice(body);
                } else {
                    long = true;
                    line.clear();
                }
                (chunk.len(), ended)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        reader.consume(used);
        if ended {
            if !long {
                observe(&line);
            }
            line.clear();
            long = false;
        }
    }
}

/// `ROLE: LINE` and a newline: the line's bytes read as UTF-8 (an invalid
/// sequence becomes U+FFFD), a carriage return before its end dropped, and
/// every control or format character made a visible token.
pub(super) fn format_line(role: &str, line: &[u8]) -> Vec<u8> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    format!("{role}: {}\n", text::neutralise(&text)).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_prefixed_and_its_escapes_are_made_visible() {
        let line = format_line("dev", b"\x1b]0;pwned\x07 done\r");
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "dev: ⟨ESC⟩]0;pwned⟨BEL⟩ done\n"
        );
        let invalid = format_line("dev", b"a\xffb");
        assert_eq!(String::from_utf8(invalid).unwrap(), "dev: a\u{fffd}b\n");
    }

    #[test]
    fn an_event_stream_is_kept_whole_and_its_lines_observed() {
        let mut file = tempfile::tempfile().expect("a file");
        let mut input = b"{\"type\":\"system\"}\n".to_vec();
        input.extend(vec![b'x'; MAX_EVENT + 1]);
        input.extend_from_slice(b"\n{\"type\":\"result\"}\npartial");
        let mut seen = Vec::new();
        record(&input[..], file.try_clone().expect("clone"), |line| {
            seen.push(String::from_utf8_lossy(line).into_owned());
        });
        assert_eq!(seen, [r#"{"type":"system"}"#, r#"{"type":"result"}"#]);
        let mut kept = Vec::new();
        std::io::Seek::rewind(&mut file).expect("rewind");
        file.read_to_end(&mut kept).expect("read");
        assert_eq!(kept, input);
    }

    #[test]
    fn long_lines_are_cut_and_a_last_partial_line_is_written() {
        let file = tempfile::tempfile().expect("a file");
        let sink = Sink::Log(Arc::new(file.try_clone().expect("clone")));
        let mut input = vec![b'x'; MAX_LINE];
        input.extend_from_slice(b"\n");
        input.extend(vec![b'x'; MAX_LINE + 5]);
        input.extend_from_slice(b"\nend");
        relay(&input[..], "a", &sink);
        let mut out = String::new();
        let mut file = file;
        std::io::Seek::rewind(&mut file).expect("rewind");
        file.read_to_string(&mut out).expect("read");
        let lines: Vec<&str> = out.lines().collect();
        let x = |n: usize| format!("a: {}", "x".repeat(n));
        assert_eq!(lines, [x(MAX_LINE), x(MAX_LINE), x(5), "a: end".to_owned()]);
    }
}
