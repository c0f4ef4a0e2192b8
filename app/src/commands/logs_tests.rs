//! The log's sink: a line that cannot be written is counted and dropped,
//! never a panic, and the next line written says how many were.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Sink, DROPPED_MESSAGE};
use crate::commands::args::LogFormat;

/// A writer into a shared buffer that fails, while `failing` is set, with
/// `error` (ENOSPC, EPIPE) as a full disk or a closed pipe does.
#[derive(Clone)]
struct Flaky {
    written: Arc<Mutex<Vec<u8>>>,
    failing: Arc<AtomicBool>,
    error: i32,
}

impl Flaky {
    fn new(error: i32) -> Self {
        Self {
            written: Arc::default(),
            failing: Arc::new(AtomicBool::new(false)),
            error,
        }
    }

    fn text(&self) -> String {
        let written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8(written.clone()).expect("UTF-8 lines")
    }
}

impl Write for Flaky {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.failing.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(self.error));
        }
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Logs `events` events at warn through a subscriber writing to `sink`.
fn log_through<F, W>(sink: &Arc<Sink<F>>, format: LogFormat, events: usize)
where
    F: Fn() -> W + Send + Sync + 'static,
    W: Write + 'static,
{
    struct Shared<F>(Arc<Sink<F>>);
    impl<'a, F, W> tracing_subscriber::fmt::MakeWriter<'a> for Shared<F>
    where
        F: Fn() -> W + 'a,
        W: Write,
    {
        type Writer = super::Line<'a, F>;
        fn make_writer(&'a self) -> Self::Writer {
            super::Line(&self.0)
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_writer(Shared(Arc::clone(sink)))
        .log_internal_errors(false);
    let run = || {
        for n in 0..events {
            tracing::warn!(n, "an event");
        }
    };
    match format {
        LogFormat::Text => tracing::subscriber::with_default(builder.finish(), run),
        LogFormat::Json => {
            tracing::subscriber::with_default(builder.json().flatten_event(true).finish(), run);
        }
    }
}

#[test]
fn lines_that_cannot_be_written_are_counted_and_the_next_line_says_so() {
    for error in [libc::ENOSPC, libc::EPIPE, libc::EBADF] {
        let out = Flaky::new(error);
        let opened = out.clone();
        let sink = Arc::new(Sink::new(move || opened.clone(), LogFormat::Text));
        log_through(&sink, LogFormat::Text, 2);
        assert_eq!(sink.dropped(), 0);
        assert_eq!(out.text().lines().count(), 2, "{}", out.text());

        out.failing.store(true, Ordering::Relaxed);
        log_through(&sink, LogFormat::Text, 5);
        assert_eq!(sink.dropped(), 5, "error {error}");
        assert_eq!(out.text().lines().count(), 2, "nothing more was written");

        out.failing.store(false, Ordering::Relaxed);
        log_through(&sink, LogFormat::Text, 1);
        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[2].contains(DROPPED_MESSAGE) && lines[2].ends_with("dropped=5"),
            "{text}"
        );
        assert!(lines[2].contains(" WARN "), "{text}");
        assert!(lines[3].contains("an event"), "{text}");
        // Said once: the next line comes alone.
        log_through(&sink, LogFormat::Text, 1);
        assert_eq!(out.text().lines().count(), 5);
        assert_eq!(out.text().matches(DROPPED_MESSAGE).count(), 1);
        assert_eq!(sink.dropped(), 5, "the total stays");
    }
}

#[test]
fn the_summary_of_a_json_log_is_a_json_line_of_its_shape() {
    let out = Flaky::new(libc::ENOSPC);
    let opened = out.clone();
    let sink = Arc::new(Sink::new(move || opened.clone(), LogFormat::Json));
    out.failing.store(true, Ordering::Relaxed);
    log_through(&sink, LogFormat::Json, 3);
    out.failing.store(false, Ordering::Relaxed);
    log_through(&sink, LogFormat::Json, 1);
    let text = out.text();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["message"], DROPPED_MESSAGE);
    assert_eq!(lines[0]["dropped"], 3);
    assert_eq!(lines[0]["level"], "WARN");
    assert!(lines[0]["timestamp"].is_string());
    // An event's own line has the same keys where they overlap.
    assert_eq!(lines[1]["level"], "WARN");
    assert!(lines[1]["timestamp"].is_string());
    assert_eq!(lines[1]["message"], "an event");
}

#[test]
fn a_line_dropped_after_its_summary_is_summarised_again() {
    // A writer that takes the summary but then fails the line: the line
    // is dropped and counted, and the summary says so next time.
    struct HalfWay {
        writes: usize,
        log: Arc<Mutex<Vec<String>>>,
    }
    impl Write for HalfWay {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.writes += 1;
            if self.writes == 2 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.log
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(String::from_utf8_lossy(buf).into_owned());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let out = Flaky::new(libc::ENOSPC);
    let log = Arc::new(Mutex::new(Vec::new()));
    let half = Arc::new(AtomicBool::new(false));
    let opened = (out.clone(), Arc::clone(&log), Arc::clone(&half));
    let sink = Sink::new(
        move || -> Box<dyn Write> {
            if opened.2.load(Ordering::Relaxed) {
                Box::new(HalfWay {
                    writes: 0,
                    log: Arc::clone(&opened.1),
                })
            } else {
                Box::new(opened.0.clone())
            }
        },
        LogFormat::Text,
    );
    out.failing.store(true, Ordering::Relaxed);
    sink.put(b"first\n");
    assert_eq!(sink.dropped(), 1);
    half.store(true, Ordering::Relaxed);
    sink.put(b"second\n");
    assert_eq!(sink.dropped(), 2, "the line after the summary was dropped");
    let log = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(log[0].ends_with("dropped=1\n"), "{log:?}");
    half.store(false, Ordering::Relaxed);
    out.failing.store(false, Ordering::Relaxed);
    sink.put(b"third\n");
    let text = out.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].ends_with("dropped=1"),
        "only the line after: {text}"
    );
    assert_eq!(lines[1], "third");
}
