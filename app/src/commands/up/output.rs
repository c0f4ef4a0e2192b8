//! The agents' output, kept and relayed by `up`, so that nothing an agent
//! writes can pass for `up`'s own.
//!
//! Each agent's standard output and error are pipes that a thread of `up`
//! reads line by line. Every line goes to the run's own file, 0600 and
//! kept, which `up`'s first line names per agent (`"output"`):
//!
//! - an agent `up` runs as a command: `<dataRoot>/agents/runs/<run>.log`,
//!   each line of either pipe through `mosaic_domain::text::neutralise`,
//!   so an escape sequence (a title, the clipboard, a cleared screen) is
//!   kept as visible tokens such as `⟨ESC⟩`;
//! - a harness `up` starts: its transcript, where each line of its event
//!   stream (standard output) that is JSON is kept as JSON with every
//!   control or format character escaped (`\u001b`), and every other line
//!   (of either pipe) neutralised. `cat` of it can drive no terminal.
//!
//! Then, without `--console`, each line but a harness's events also goes
//! to `up`'s standard error: on a terminal, drawn dim after a mark
//! `ROLE │ ` and cut to the terminal's width (measured by the width rule of
//! `mosaic_domain::text`), so it never wraps into a row of its own that
//! could read as `up`'s own log line; elsewhere (a pipe, a file) as
//! `ROLE: LINE`, whole. With `--console` the console has the terminal, and
//! `up`'s log file holds `up`'s own lines only.
//!
//! When a harness run ends, after the last line of its pipes, `up`
//! appends the run's end to its transcript ([`TranscriptEnd`]).
//!
//! A line is cut at [`MAX_LINE`] bytes (an event at [`MAX_EVENT_LINE`]),
//! so an agent that never ends one cannot make `up` hold more; a last line
//! without its newline is written at the end of the pipe.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use std::os::unix::fs::OpenOptionsExt;

use mosaic_adapters::fs::{check_private_dir, create_private_dir, create_private_file};
use mosaic_domain::evidence::Ending;
use mosaic_domain::{text, Refusal, RoleInstance, RunId};

use super::harness::activity::Activities;
use super::harness::usage::Stream;
use super::harness::Prepared;

/// The most bytes of one line `up` holds; a longer line is written in
/// pieces of this size.
pub(super) const MAX_LINE: usize = 16 * 1024;

/// The most bytes of one line of a harness's event stream `up` holds, to
/// keep it as JSON; a longer one is kept neutralised, in pieces.
pub(super) const MAX_EVENT_LINE: usize = 8 * 1024 * 1024;

/// The columns assumed of a terminal that does not say its width.
const DEFAULT_COLUMNS: usize = 80;

/// Where the agents' lines go besides their own files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sink {
    /// `up`'s standard error, a terminal: each line dim, cut to the
    /// terminal's width after its mark.
    Terminal,
    /// `up`'s standard error, not a terminal: each line whole, `ROLE: LINE`.
    Stderr,
    /// Nowhere else: the console has the terminal.
    Files,
}

impl Sink {
    /// Writes one line with one call, so lines of several agents (and
    /// `up`'s own log lines) interleave only between lines.
    fn write_line(self, role: &str, shown: &str) -> io::Result<()> {
        match self {
            Sink::Terminal => {
                let columns = rustix::termios::tcgetwinsize(io::stderr())
                    .ok()
                    .map(|size| usize::from(size.ws_col))
                    .filter(|columns| *columns > 0)
                    .unwrap_or(DEFAULT_COLUMNS);
                io::stderr()
                    .lock()
                    .write_all(terminal_line(role, shown, columns).as_bytes())
            }
            Sink::Stderr => io::stderr()
                .lock()
                .write_all(format!("{role}: {shown}\n").as_bytes()),
            Sink::Files => Ok(()),
        }
    }
}

/// One agent line for a terminal of `columns` columns: `ROLE │ LINE`,
/// dim, cut with `…` so that it leaves the last column free (a terminal
/// may wrap a row that fills it), and so never takes a second row.
pub(super) fn terminal_line(role: &str, shown: &str, columns: usize) -> String {
    let line = format!("{} │ {shown}", text::neutralise(role));
    let room = columns.saturating_sub(1);
    let line = match text::cut(&line, room) {
        (whole, false) => whole.to_owned(),
        (_, true) => format!("{}…", text::cut(&line, room.saturating_sub(1)).0),
    };
    format!("\x1b[2m{line}\x1b[0m\n")
}

/// Makes the run's output file, `<dataRoot>/agents/runs/<run>.log`: new,
/// 0600, in private folders.
///
/// # Errors
/// `unsafe-path` when a folder is not a private one of ours;
/// `storage-unavailable` when the file cannot be made.
pub(super) fn output_file(data_root: &Path, run: &RunId) -> Result<PathBuf, Refusal> {
    let agents = private_dir(&data_root.join("agents"))?;
    let runs = private_dir(&agents.join("runs"))?;
    let path = runs.join(format!("{}.log", run.as_str()));
    drop(create_private_file(&path)?);
    Ok(path)
}

/// `path`, a private folder of ours, made when missing.
fn private_dir(path: &Path) -> Result<PathBuf, Refusal> {
    match create_private_dir(path, false) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            mosaic_adapters::cause::log(
                Refusal::StorageUnavailable,
                "making the agents' output folder",
                &e,
            );
            return Err(Refusal::StorageUnavailable);
        }
    }
    check_private_dir(path)?;
    Ok(path.to_path_buf())
}

/// Opens a run's file (made new before) to append to it, never through a
/// link.
fn append(path: &Path) -> io::Result<Arc<File>> {
    std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map(Arc::new)
}

/// Appends the run's end to its transcript, as its last line:
/// `{"type":"mosaic-bus.ended","cause","status"?,"signal"?}`, so a reader
/// of the file alone knows the stream is whole and how the run ended.
///
/// # Errors
/// The transcript that cannot be opened or written.
fn end_transcript(path: &Path, ending: &Ending) -> io::Result<()> {
    let record = EndRecord {
        kind: "mosaic-bus.ended",
        cause: ending.cause().as_str(),
        status: ending.status(),
        signal: ending.signal(),
    };
    let line = serde_json::to_string(&record)? + "\n";
    let file = append(path)?;
    (&*file).write_all(line.as_bytes())
}

/// The last line of a transcript, its keys in this order.
#[derive(serde::Serialize)]
struct EndRecord {
    #[serde(rename = "type")]
    kind: &'static str,
    cause: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<i32>,
}

/// The end of one harness run's transcript: written once, after the last
/// line of each of its pipes and once the run's end is known, whichever
/// comes last, so nothing the harness wrote follows it.
#[derive(Debug)]
pub(super) struct TranscriptEnd {
    path: PathBuf,
    state: Mutex<EndState>,
}

/// What a [`TranscriptEnd`] waits for.
#[derive(Debug)]
struct EndState {
    /// The pipes still being copied into the transcript.
    pipes: usize,
    ending: Option<Ending>,
    written: bool,
}

impl TranscriptEnd {
    fn new(path: &Path, pipes: usize) -> Arc<Self> {
        Arc::new(Self {
            path: path.to_path_buf(),
            state: Mutex::new(EndState {
                pipes,
                ending: None,
                written: false,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, EndState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One of its pipes was copied to its end.
    fn handle_pipe_closed(&self) {
        let mut state = self.state();
        state.pipes = state.pipes.saturating_sub(1);
        self.poll_write(&mut state);
    }

    /// The run ended with `ending` (the first end heard stands).
    pub(super) fn handle_ended(&self, ending: Ending) {
        let mut state = self.state();
        state.ending.get_or_insert(ending);
        self.poll_write(&mut state);
    }

    /// `up` closes: written now, even where a process the agent left
    /// behind still holds a pipe open.
    pub(super) fn handle_closing(&self, ending: Ending) {
        let mut state = self.state();
        state.ending.get_or_insert(ending);
        state.pipes = 0;
        self.poll_write(&mut state);
    }

    fn poll_write(&self, state: &mut EndState) {
        let Some(ending) = state.ending.filter(|_| state.pipes == 0 && !state.written) else {
            return;
        };
        state.written = true;
        if let Err(e) = end_transcript(&self.path, &ending) {
            tracing::warn!(
                path = &*mosaic_adapters::fs::neutral_path(&self.path),
                cause = e.to_string().as_str(),
                "the run's end could not be added to its transcript"
            );
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
    /// Relays for `up` with the console (each line to its run's file
    /// only), or without (also to `up`'s standard error).
    pub(super) fn to(console: bool) -> Self {
        let sink = if console {
            Sink::Files
        } else if io::stderr().is_terminal() {
            Sink::Terminal
        } else {
            Sink::Stderr
        };
        Self::new(sink)
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
    /// error into `output` (the run's file, made by [`output_file`]), its
    /// lines prefixed with `role` where they are relayed.
    ///
    /// # Errors
    /// The file that cannot be opened, or a thread that could not be
    /// started.
    pub(super) fn start(
        &mut self,
        role: &str,
        (output, cap): (&Path, u64),
        child: &mut Child,
    ) -> io::Result<()> {
        let file = append(output)?;
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
        self.relay_pipes(
            role,
            (&file, cap),
            pipes.into_iter().flatten().collect(),
            None,
        )
    }

    /// Starts a relay for each of `pipes` into `file`, its lines prefixed
    /// with `role` where they are relayed.
    fn relay_pipes(
        &mut self,
        role: &str,
        (file, cap): (&Arc<File>, u64),
        pipes: Vec<Box<dyn Read + Send>>,
        closed: Option<&Arc<TranscriptEnd>>,
    ) -> io::Result<()> {
        for pipe in pipes {
            let (sink, role, file) = (self.sink, role.to_owned(), Arc::clone(file));
            let alive = self.alive.clone();
            let closed = closed.cloned();
            std::thread::Builder::new()
                .name(format!("up-output-{role}"))
                .spawn(move || {
                    relay(pipe, &role, sink, (&file, cap));
                    if let Some(closed) = closed {
                        closed.handle_pipe_closed();
                    }
                    drop(alive);
                })?;
        }
        Ok(())
    }

    /// Starts the relays of a harness agent `up` started: its standard
    /// output (the harness's event stream) into its transcript
    /// ([`record`]), each complete line also handed to `activities`
    /// ([`Activities::observe`]); its standard error into its transcript
    /// too, and relayed as [`Relays::start`] does. Its [`TranscriptEnd`]
    /// writes the run's end after the last line of both.
    ///
    /// # Errors
    /// The transcript that cannot be opened, or a thread that could not
    /// be started.
    pub(super) fn start_harness(
        &mut self,
        role: &RoleInstance,
        run: &RunId,
        (prepared, cap): (&Prepared, u64),
        child: &mut Child,
        activities: &Activities,
    ) -> io::Result<Arc<TranscriptEnd>> {
        let transcript = append(&prepared.transcript)?;
        let pipes = usize::from(child.stdout.is_some()) + usize::from(child.stderr.is_some());
        let end = TranscriptEnd::new(&prepared.transcript, pipes);
        if let Some(stdout) = child.stdout.take() {
            let (run, stream) = (run.clone(), Stream::of(prepared.harness));
            let (alive, activities) = (self.alive.clone(), activities.clone());
            let transcript = Arc::clone(&transcript);
            let closed = Arc::clone(&end);
            std::thread::Builder::new()
                .name(format!("up-events-{}", role.as_str()))
                .spawn(move || {
                    record(stdout, (&transcript, cap), |line| {
                        // Both streams are JSON, so UTF-8: another line
                        // says nothing.
                        if let Ok(line) = std::str::from_utf8(line) {
                            activities.observe(run.as_str(), stream, line, Instant::now());
                        }
                    });
                    closed.handle_pipe_closed();
                    drop(alive);
                })?;
        }
        let stderr = child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>);
        self.relay_pipes(
            role.as_str(),
            (&transcript, cap),
            stderr.into_iter().collect(),
            Some(&end),
        )?;
        Ok(end)
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

/// How a piece of a pipe's bytes ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// At a newline: a whole line.
    Newline,
    /// At the most bytes a line may hold: more of it follows.
    Cut,
    /// At the end of the pipe, with no newline.
    Eof,
}

/// Reads `pipe` to its end (or its first error), handing `each` every line
/// without its newline; a line longer than `max` bytes comes in pieces of
/// `max`, and a newline right after a full piece ends nothing more.
fn split_lines(pipe: impl Read, max: usize, mut each: impl FnMut(&[u8], End)) {
    let mut reader = BufReader::with_capacity(MAX_LINE.max(64 * 1024), pipe);
    let mut line = Vec::with_capacity(256);
    // Whether the last piece handed on was cut: its newline then ends nothing.
    let mut cut = false;
    loop {
        let (used, newline) = match reader.fill_buf() {
            Ok([]) | Err(_) => {
                if !line.is_empty() {
                    each(&line, End::Eof);
                }
                return;
            }
            Ok(buf) => {
                let upto = buf.len().min(max - line.len());
                match buf[..upto].iter().position(|&b| b == b'\n') {
                    Some(at) => {
                        line.extend_from_slice(&buf[..at]);
                        (at + 1, true)
                    }
                    None => {
                        line.extend_from_slice(&buf[..upto]);
                        (upto, false)
                    }
                }
            }
        };
        reader.consume(used);
        if newline {
            if !(cut && line.is_empty()) {
                each(&line, End::Newline);
            }
            line.clear();
            cut = false;
        } else if line.len() == max {
            each(&line, End::Cut);
            line.clear();
            cut = true;
        } else if !line.is_empty() {
            cut = false;
        }
    }
}

/// A line's bytes as drawable text: read as UTF-8 (an invalid sequence
/// becomes U+FFFD), a carriage return before its end dropped, every
/// character that does not draw as itself a visible token.
fn shown(line: &[u8], end: End) -> String {
    let line = match end {
        End::Newline | End::Eof => line.strip_suffix(b"\r").unwrap_or(line),
        End::Cut => line,
    };
    text::neutralise(&String::from_utf8_lossy(line)).into_owned()
}

/// Copies `pipe` into `file` line by line until its end, each line cut at
/// [`MAX_LINE`] bytes and neutralised, and relays it to `sink` with its
/// `role`. A file or a sink that fails is no longer written, nor a file
/// past `cap` bytes ([`write_capped`]); the pipe is still drained, so the
/// agent never blocks on a full one.
pub(super) fn relay(pipe: impl Read, role: &str, sink: Sink, (file, cap): (&File, u64)) {
    let (mut to_file, mut to_sink) = (true, true);
    split_lines(pipe, MAX_LINE, |line, end| {
        let shown = shown(line, end);
        if to_file {
            to_file = write_capped(file, cap, format!("{shown}\n").as_bytes());
        }
        if to_sink {
            to_sink = sink.write_line(role, &shown).is_ok();
        }
    });
}

/// The longest event line handed to [`Activities::observe`]; the
/// transcript keeps longer ones too.
pub(super) const MAX_EVENT: usize = 1024 * 1024;

/// Copies `pipe` (a harness's event stream) into `transcript` line by line
/// ([`transcript_line`]), and hands each line that ended with a newline,
/// of at most [`MAX_EVENT`] bytes, to `observe`. A transcript that fails is
/// no longer written, nor one past `cap` bytes ([`write_capped`]), and the
/// pipe is still drained, so the agent never blocks on a full one.
pub(super) fn record(
    pipe: impl Read,
    (transcript, cap): (&File, u64),
    mut observe: impl FnMut(&[u8]),
) {
    let mut writing = true;
    split_lines(pipe, MAX_EVENT_LINE, |line, end| {
        if writing {
            writing = write_capped(transcript, cap, transcript_line(line, end).as_bytes());
        }
        if end == End::Newline && line.len() <= MAX_EVENT {
            observe(line);
        }
    });
}

/// The line that ends a run's output file cut at its cap.
pub(super) const CUT: &str = "⟨up cut this output here: the run reached its cap (stateMiB)⟩\n";

/// Appends `bytes` to `file` while it stays within `cap` bytes; the line
/// that would pass it is replaced by [`CUT`], once, and nothing more is
/// written: whether to go on writing.
fn write_capped(file: &File, cap: u64, bytes: &[u8]) -> bool {
    let Ok(meta) = file.metadata() else {
        return false;
    };
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if meta.len().saturating_add(len) <= cap {
        return (&*file).write_all(bytes).is_ok();
    }
    let _cut = (&*file).write_all(CUT.as_bytes());
    false
}

/// One line of an event stream as a transcript keeps it, with its
/// newline: a JSON text as itself, but with every control or format
/// character (which JSON allows raw inside a string, or as a tab or a
/// carriage return between tokens) escaped or made a space, so it is still
/// the same JSON; anything else neutralised ([`shown`]).
fn transcript_line(line: &[u8], end: End) -> String {
    let json = match end {
        End::Newline | End::Eof => std::str::from_utf8(line)
            .ok()
            .filter(|text| serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()),
        End::Cut => None,
    };
    let Some(json) = json else {
        return format!("{}\n", shown(line, end));
    };
    let mut out = String::with_capacity(json.len() + 1);
    for c in json.chars() {
        match c {
            // Outside a string, where JSON allows them raw as whitespace
            // (inside one it does not).
            '\t' | '\r' => out.push(' '),
            c if text::is_hidden(c) => {
                let mut units = [0_u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    // Writing into a String cannot fail.
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_transcript_s_end_is_written_once_after_its_pipes_and_its_end() {
        use mosaic_domain::evidence::EndCause;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("run.jsonl");
        std::fs::write(&path, "{\"type\":\"result\"}\n").expect("write");
        let read = || std::fs::read_to_string(&path).expect("read");
        let failed = Ending::of_exit(None, Some(9)).expect("an ending");
        // The end is known first: nothing until both pipes are done.
        let end = TranscriptEnd::new(&path, 2);
        end.handle_ended(failed);
        end.handle_pipe_closed();
        assert_eq!(read(), "{\"type\":\"result\"}\n");
        end.handle_pipe_closed();
        let once = "{\"type\":\"result\"}\n\
                    {\"type\":\"mosaic-bus.ended\",\"cause\":\"failed\",\"signal\":9}\n";
        assert_eq!(read(), once);
        // Heard again, or at the close: never a second line.
        end.handle_ended(Ending::of_cause(EndCause::Human));
        end.handle_closing(failed);
        assert_eq!(read(), once);
        // The pipes first, then the end; and the close writes past a pipe
        // still held open.
        std::fs::write(&path, "").expect("write");
        let end = TranscriptEnd::new(&path, 1);
        end.handle_pipe_closed();
        assert_eq!(read(), "");
        end.handle_ended(Ending::of_exit(Some(0), None).expect("an ending"));
        assert_eq!(
            read(),
            "{\"type\":\"mosaic-bus.ended\",\"cause\":\"exited\",\"status\":0}\n"
        );
        std::fs::write(&path, "").expect("write");
        let held = TranscriptEnd::new(&path, 2);
        held.handle_closing(Ending::of_cause(EndCause::Revoked));
        assert_eq!(
            read(),
            "{\"type\":\"mosaic-bus.ended\",\"cause\":\"revoked\"}\n"
        );
    }

    /// What `relay` writes into a run's file for `input`.
    fn relayed(input: &[u8]) -> String {
        let mut file = tempfile::tempfile().expect("a file");
        relay(input, "a", Sink::Files, (&file, u64::MAX));
        let mut out = String::new();
        std::io::Seek::rewind(&mut file).expect("rewind");
        file.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn a_line_is_kept_with_its_escapes_made_visible() {
        assert_eq!(
            relayed(b"\x1b]0;pwned\x07 done\r\na\xffb\n\xe3\x85\xa4tail"),
            "⟨ESC⟩]0;pwned⟨BEL⟩ done\na\u{fffd}b\n⟨U+3164⟩tail\n"
        );
    }

    #[test]
    fn a_terminal_line_is_dim_marked_and_never_wider_than_the_terminal() {
        assert_eq!(
            terminal_line("dev", "claimed role dev", 80),
            "\x1b[2mdev │ claimed role dev\x1b[0m\n"
        );
        let forged = format!(
            "{}INFO mosaic_app::runtime::broker: agent exited run=\"lead-1\" status=0",
            " ".repeat(74)
        );
        let line = terminal_line("dev", &forged, 80);
        let visible = line
            .strip_prefix("\x1b[2m")
            .and_then(|l| l.strip_suffix("\x1b[0m\n"))
            .expect("dim");
        assert_eq!(text::width(visible), 79, "{visible:?}");
        assert!(visible.starts_with("dev │ ") && visible.ends_with('…'));
        assert!(!visible.contains("INFO"));
    }

    proptest! {
        #[test]
        fn no_terminal_line_takes_a_second_row(
            line in any::<String>(),
            role in "[a-z]{1,12}",
            columns in 1usize..300,
        ) {
            let shown = text::neutralise(&line);
            let drawn = terminal_line(&role, &shown, columns);
            let visible = drawn
                .strip_prefix("\x1b[2m")
                .and_then(|l| l.strip_suffix("\x1b[0m\n"))
                .expect("dim");
            prop_assert!(text::width(visible) < columns.max(2), "{:?}", visible);
            let raw = visible.contains('\n') || visible.contains('\u{1b}');
            prop_assert!(!raw, "{:?}", visible);
        }
    }

    /// What `record` keeps of `input`, and the lines it observed.
    fn recorded(input: &[u8]) -> (String, Vec<String>) {
        let mut file = tempfile::tempfile().expect("a file");
        let mut seen = Vec::new();
        record(input, (&file, u64::MAX), |line| {
            seen.push(String::from_utf8_lossy(line).into_owned());
        });
        let mut kept = String::new();
        std::io::Seek::rewind(&mut file).expect("rewind");
        file.read_to_string(&mut kept).expect("read");
        (kept, seen)
    }

    #[test]
    fn an_event_stream_is_kept_as_json_and_its_lines_observed() {
        let mut input = b"{\"type\":\"system\"}\n".to_vec();
        input.extend(vec![b'x'; MAX_EVENT + 1]);
        input.extend_from_slice(b"\n{\"type\":\"result\"}\npartial");
        let (kept, seen) = recorded(&input);
        assert_eq!(seen, [r#"{"type":"system"}"#, r#"{"type":"result"}"#]);
        let mut expected = String::from_utf8(input).expect("UTF-8");
        expected.push('\n');
        assert_eq!(kept, expected);
    }

    #[test]
    fn a_transcript_holds_no_raw_control_byte_and_the_same_json() {
        // JSON allows C1 controls, bidi overrides and separators raw in a
        // string, and a tab or a carriage return between tokens.
        let event =
            "{\"type\":\"assistant\",\t\"text\":\"\u{9b}31m\u{202e}\u{2028}\u{e0041}ok\"}\r";
        let raw = "plain \x1b]52;c;ZWNobw==\x07 line";
        let (kept, _) = recorded(format!("{event}\n{raw}\n").as_bytes());
        assert!(
            !kept.chars().any(|c| c != '\n' && text::is_hidden(c)),
            "{kept:?}"
        );
        let lines: Vec<&str> = kept.lines().collect();
        let before: serde_json::Value = serde_json::from_str(event).expect("JSON");
        let after: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON");
        assert_eq!(before, after);
        assert_eq!(
            lines[0],
            r#"{"type":"assistant", "text":"\u009b31m\u202e\u2028\udb40\udc41ok"} "#
        );
        assert_eq!(lines[1], "plain ⟨ESC⟩]52;c;ZWNobw==⟨BEL⟩ line");
    }

    #[test]
    fn long_lines_are_cut_and_a_last_partial_line_is_written() {
        let mut input = vec![b'x'; MAX_LINE];
        input.extend_from_slice(b"\n");
        input.extend(vec![b'x'; MAX_LINE + 5]);
        input.extend_from_slice(b"\nend");
        let out = relayed(&input);
        let lines: Vec<&str> = out.lines().collect();
        let x = |n: usize| "x".repeat(n);
        assert_eq!(lines, [x(MAX_LINE), x(MAX_LINE), x(5), "end".to_owned()]);
    }
}
