//! The last lines of a run's output, as the Run view shows them.
//!
//! `up --console` names each run's output file (its transcript, or the
//! file of its lines). The console reads only its end: it seeks to at
//! most [`TAIL_BYTES`] before the end, drops the first line when it
//! started inside one, and keeps the last [`TAIL_LINES`] lines. Every
//! line is the agent's text, so each is neutralised ([`Shown`]) and cut
//! to [`LINE_CHARS`] characters. A transcript is a stream of JSON
//! events: of an event the readable part is shown, its text (an
//! assistant's words, a tool's result), else its type; a line that is
//! no JSON is shown as it is.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use super::model::Shown;

/// The most bytes read from the end of an output file.
pub const TAIL_BYTES: u64 = 16 * 1024;

/// The most lines shown.
pub const TAIL_LINES: usize = 20;

/// The most characters of one line kept before it is neutralised.
pub const LINE_CHARS: usize = 400;

/// The last lines of the file at `path`, read bounded.
///
/// # Errors
/// Opening, seeking or reading the file.
pub fn read(path: &Path) -> io::Result<Vec<Shown>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.seek(SeekFrom::End(0))?;
    let from = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut bytes)?;
    Ok(lines(&bytes, from > 0))
}

/// The lines shown of `bytes`, the end of a file; `cut_in` when they may
/// start inside a line (whose start is not there, so it is dropped).
pub fn lines(bytes: &[u8], cut_in: bool) -> Vec<Shown> {
    let text = String::from_utf8_lossy(bytes);
    let mut all: Vec<&str> = text.split('\n').collect();
    if cut_in && all.len() > 1 {
        all.remove(0);
    }
    let shown: Vec<Shown> = all
        .into_iter()
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .filter(|line| !line.trim().is_empty())
        .map(readable)
        .collect();
    let skip = shown.len().saturating_sub(TAIL_LINES);
    shown.into_iter().skip(skip).collect()
}

/// One line as shown: a JSON event's text or type, else the line, cut and
/// neutralised.
fn readable(line: &str) -> Shown {
    let said = match serde_json::from_str::<Value>(line) {
        Ok(event @ Value::Object(_)) => {
            let mut texts = Vec::new();
            collect_texts(&event, &mut texts, 0);
            let kind = event.get("type").and_then(Value::as_str).unwrap_or("event");
            if texts.is_empty() {
                format!("[{kind}]")
            } else {
                format!("[{kind}] {}", texts.join(" "))
            }
        }
        Ok(_) | Err(_) => line.to_owned(),
    };
    let kept: String = said.chars().take(LINE_CHARS).collect();
    Shown::of(&kept)
}

/// How deep into an event its texts are looked for.
const DEPTH: usize = 6;

/// The strings under a `text` or `result` key in `value`, in order.
fn collect_texts<'a>(value: &'a Value, texts: &mut Vec<&'a str>, depth: usize) {
    if depth > DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("text" | "result", Value::String(text)) => texts.push(text),
                    (_, inner) => collect_texts(inner, texts, depth + 1),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                collect_texts(item, texts, depth + 1);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}
