//! A scripted Anthropic Messages API on loopback, for the real harnesses
//! (Claude Code, pi) the tests run: a real HTTP/1.1 server on
//! `127.0.0.1`, one thread per connection, every answer closing its
//! connection.
//!
//! Each agent has a script, chosen by the API key its harness sends
//! (`x-api-key`, or `Authorization: Bearer`), and when agents share a key
//! (a team on one `ANTHROPIC_API_KEY`), by a tool the request advertises
//! (Claude Code's `mcp__mosaic-bus__role_claim`, pi's `role_claim`). The step a request gets is
//! the number of assistant turns already in its conversation, so a retry
//! gets the same step and a follow-up the next one. A step calls a tool
//! (its input may take values from the results of earlier calls, parsed
//! from the `tool_result` blocks the harness sends back, a reminder
//! Claude Code appends left out) or answers text
//! and ends the turn; past the script's end, every turn ends.
//!
//! `POST /v1/messages` with `"stream": true` answers in the order both
//! harnesses accept: `message_start`, `ping`; per block
//! `content_block_start`, one `content_block_delta`, `content_block_stop`;
//! `message_delta` with the stop reason; `message_stop`. Without it, the
//! same message as one JSON body. `/v1/messages/count_tokens` answers a
//! count; a `GET` or `HEAD` elsewhere answers `{}`. Every request is
//! recorded (method, path, headers without the key, body) for the tests.
// Each test binary uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// What a tool step's input is made from: the results of the tool calls
/// so far in the conversation, oldest first.
pub type Input = Box<dyn Fn(&[Value]) -> Value + Send + Sync>;

/// One step of a script.
pub enum Step {
    /// Call the tool `name` with the input made from earlier results.
    Tool { name: String, input: Input },
    /// Answer this text and end the turn.
    Text(String),
    /// End the turn, waiting to be woken by a follow-up (pi's extension)
    /// or a Stop hook's reason (Claude Code) that holds the text made from
    /// the results so far; woken by anything else, end the turn again at
    /// this same step.
    WaitFor(Input),
}

impl Step {
    /// Call `name` with a fixed `input`.
    pub fn tool(name: &str, input: Value) -> Step {
        Step::Tool {
            name: name.to_owned(),
            input: Box::new(move |_| input.clone()),
        }
    }

    /// Call `name` with an input made from the results so far.
    pub fn tool_with(
        name: &str,
        input: impl Fn(&[Value]) -> Value + Send + Sync + 'static,
    ) -> Step {
        Step::Tool {
            name: name.to_owned(),
            input: Box::new(input),
        }
    }

    /// End the turn with `text`.
    pub fn text(text: &str) -> Step {
        Step::Text(text.to_owned())
    }

    /// End the turn until the wake-up that holds `text` (see
    /// [`Step::WaitFor`]).
    pub fn wait_for(text: &str) -> Step {
        let text = Value::String(text.to_owned());
        Step::WaitFor(Box::new(move |_| text.clone()))
    }

    /// End the turn until the wake-up that holds the text made from the
    /// results so far (a string).
    pub fn wait_for_with(text: impl Fn(&[Value]) -> Value + Send + Sync + 'static) -> Step {
        Step::WaitFor(Box::new(text))
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Lowercase names; the key headers are left out.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`null` when empty or not JSON).
    pub body: Value,
    /// The agent whose key it carried, if any.
    pub agent: Option<String>,
    /// When its head and body had arrived.
    pub at: Instant,
}

impl Request {
    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The names of the tools the request advertises to the model.
    pub fn tools(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether it asks for a message (streamed or not).
    pub fn is_message(&self) -> bool {
        self.method == "POST" && self.path.split('?').next() == Some("/v1/messages")
    }
}

/// One agent's script and how its requests are told apart.
struct Script {
    name: String,
    key: String,
    /// A tool its requests advertise, when others share its key.
    tool: Option<String>,
    steps: Vec<Step>,
}

struct Scripted {
    scripts: Vec<Script>,
    requests: Mutex<Vec<Request>>,
    recorded: Condvar,
}

/// The server: it runs until the test binary exits.
pub struct Model {
    pub addr: SocketAddr,
    state: Arc<Scripted>,
}

impl Model {
    /// Starts a server with one script per agent: `(name, key, steps)`.
    pub fn start(agents: Vec<(&str, &str, Vec<Step>)>) -> Model {
        Model::serve(
            agents
                .into_iter()
                .map(|(name, key, steps)| Script {
                    name: name.to_owned(),
                    key: key.to_owned(),
                    tool: None,
                    steps,
                })
                .collect(),
        )
    }

    /// Starts a server whose agents share `key`, each told apart by a
    /// tool its requests advertise: `(name, tool, steps)`.
    pub fn start_shared(key: &str, agents: Vec<(&str, &str, Vec<Step>)>) -> Model {
        Model::serve(
            agents
                .into_iter()
                .map(|(name, tool, steps)| Script {
                    name: name.to_owned(),
                    key: key.to_owned(),
                    tool: Some(tool.to_owned()),
                    steps,
                })
                .collect(),
        )
    }

    fn serve(scripts: Vec<Script>) -> Model {
        let state = Arc::new(Scripted {
            scripts,
            requests: Mutex::new(Vec::new()),
            recorded: Condvar::new(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the model's port");
        let addr = listener.local_addr().expect("its address");
        let serving = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let state = Arc::clone(&serving);
                std::thread::spawn(move || {
                    // A harness that hangs up mid-answer is its own
                    // business: the request is recorded already.
                    let _ = serve(&state, stream);
                });
            }
        });
        Model { addr, state }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until `condition` holds for the requests so far, at most
    /// `within`; the requests then, or a failure naming `what`.
    #[track_caller]
    pub fn wait(
        &self,
        what: &str,
        within: Duration,
        condition: impl Fn(&[Request]) -> bool,
    ) -> Vec<Request> {
        let deadline = Instant::now() + within;
        let mut requests = self
            .state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while !condition(&requests) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "not within {within:?}: {what}");
            requests = self
                .state
                .recorded
                .wait_timeout(requests, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        requests.clone()
    }
}

/// Reads one request from `stream`, records it and answers it.
fn serve(state: &Scripted, stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let path = words.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    let mut key = None;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
        let Some((name, value)) = line.trim_end().split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
        match name.as_str() {
            "x-api-key" => key = Some(value),
            "authorization" => key = value.strip_prefix("Bearer ").map(str::to_owned),
            _ => headers.push((name, value)),
        }
    }
    let body = read_body(&mut reader, &headers)?;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut request = Request {
        method,
        path,
        headers,
        body,
        agent: None,
        at: Instant::now(),
    };
    let advertised = request.tools();
    let script = state.scripts.iter().find(|s| {
        key.as_deref() == Some(s.key.as_str())
            && s.tool.as_ref().is_none_or(|t| advertised.contains(t))
    });
    request.agent = script.map(|s| s.name.clone());
    // A trace of what the harnesses send, for finding out what they ask.
    if let Some(log) = std::env::var_os("MOSAIC_MODEL_TRACE") {
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
        {
            let _ = writeln!(file, "{} {} {}", request.method, request.path, request.body);
        }
    }
    state
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request.clone());
    state.recorded.notify_all();
    let mut out = stream;
    let path = request.path.split('?').next().unwrap_or_default();
    match (request.method.as_str(), path) {
        ("POST", "/v1/messages") => {
            let steps = script.map_or(&[][..], |s| s.steps.as_slice());
            let blocks = answer(steps, &request.body);
            if request.body["stream"] == true {
                let events = stream_events(&request.body, &blocks);
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                     cache-control: no-cache\r\nconnection: close\r\n\r\n{events}"
                )?;
            } else {
                respond(&mut out, "200 OK", &message(&request.body, &blocks))?;
            }
        }
        ("POST", "/v1/messages/count_tokens") => {
            respond(&mut out, "200 OK", &json!({"input_tokens": 100}))?;
        }
        ("GET" | "HEAD", _) => respond(&mut out, "200 OK", &json!({}))?,
        _ => respond(
            &mut out,
            "404 Not Found",
            &json!({"type": "error", "error": {"type": "not_found_error", "message": "no such route"}}),
        )?,
    }
    out.flush()
}

/// The body after the headers: by `content-length`, or chunked.
fn read_body(reader: &mut impl BufRead, headers: &[(String, String)]) -> std::io::Result<Vec<u8>> {
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let mut body = Vec::new();
    if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        let mut line = String::new();
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    Ok(body)
}

fn respond(out: &mut TcpStream, status: &str, body: &Value) -> std::io::Result<()> {
    let body = body.to_string();
    write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The content blocks that answer a conversation: its step's, or a final
/// text past the script's end. Each step answered one block (Claude Code
/// merges the assistant messages of one turn, so blocks are counted, not
/// messages), except a [`Step::WaitFor`] answered while the wake-up that
/// followed it did not hold its text: the same step comes again.
pub fn answer(steps: &[Step], request: &Value) -> Vec<Value> {
    let messages = request["messages"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let results = tool_results(messages);
    let mut step = 0;
    let mut blocks = 0;
    for (at, message) in messages.iter().enumerate() {
        if message["role"] != "assistant" {
            continue;
        }
        for _ in 0..message["content"].as_array().map_or(1, Vec::len) {
            blocks += 1;
            let woken = match steps.get(step) {
                Some(Step::WaitFor(text)) => {
                    let text = text(&results);
                    let text = text.as_str().unwrap_or_default();
                    messages[at + 1..]
                        .iter()
                        .find(|m| m["role"] == "user")
                        .is_some_and(|m| m["content"].to_string().contains(text))
                }
                Some(Step::Tool { .. } | Step::Text(_)) | None => true,
            };
            step += usize::from(woken);
        }
    }
    match steps.get(step) {
        Some(Step::Tool { name, input }) => vec![json!({
            "type": "tool_use",
            "id": format!("toolu_{blocks:04}"),
            "name": name,
            "input": input(&results),
        })],
        Some(Step::Text(text)) => vec![json!({"type": "text", "text": text})],
        Some(Step::WaitFor(text)) => {
            let text = text(&results);
            let text = text.as_str().unwrap_or_default();
            vec![json!({"type": "text", "text": format!("Waiting for {text}.")})]
        }
        None => vec![json!({"type": "text", "text": "Done."})],
    }
}

/// The results of the tool calls in `messages`, oldest first: each
/// `tool_result` block's text, parsed as JSON when it is.
pub fn tool_results(messages: &[Value]) -> Vec<Value> {
    let blocks = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result");
    blocks
        .map(|block| {
            let text = match &block["content"] {
                Value::String(text) => text.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<String>(),
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => String::new(),
            };
            // Claude Code appends reminders to a result for some models
            // (the tokens left, say): the result is what comes before.
            let result = text.split("\n<system-reminder>").next().unwrap_or_default();
            serde_json::from_str(result).unwrap_or(Value::String(text))
        })
        .collect()
}

fn stop_reason(blocks: &[Value]) -> &'static str {
    if blocks.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    }
}

/// A distinct id for each message answered: Claude Code takes messages
/// of the same id for parts of one.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The whole message, as a non-streaming request gets it.
fn message(request: &Value, blocks: &[Value]) -> Value {
    json!({
        "id": format!("msg_{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)),
        "type": "message", "role": "assistant",
        "model": request["model"], "content": blocks,
        "stop_reason": stop_reason(blocks), "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 10},
    })
}

/// The server-sent events of the message, in the order both harnesses
/// accept.
pub fn stream_events(request: &Value, blocks: &[Value]) -> String {
    let mut events = Vec::new();
    let mut start = message(request, &[]);
    start["stop_reason"] = Value::Null;
    events.push(json!({"type": "message_start", "message": start}));
    events.push(json!({"type": "ping"}));
    for (index, block) in blocks.iter().enumerate() {
        let (opening, delta) = if block["type"] == "tool_use" {
            let mut opening = block.clone();
            opening["input"] = json!({});
            let partial = block["input"].to_string();
            (
                opening,
                json!({"type": "input_json_delta", "partial_json": partial}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            )
        };
        events
            .push(json!({"type": "content_block_start", "index": index, "content_block": opening}));
        events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason(blocks), "stop_sequence": null},
        "usage": {"output_tokens": 10}}));
    events.push(json!({"type": "message_stop"}));
    events
        .iter()
        .map(|e| {
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The folder of the real `claude` and `pi`: the test fails, not skips,
/// when they are absent.
pub fn harness_bin() -> PathBuf {
    let dir = match std::env::var_os("MOSAIC_TEST_HARNESS_BIN") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/node_modules/.bin"),
    };
    for name in ["claude", "pi"] {
        assert!(
            dir.join(name).exists(),
            "{name} is not in {} (run .ci/harness-deps)",
            dir.display()
        );
    }
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script() -> Vec<Step> {
        vec![
            Step::tool("decision_raise", json!({"action": "repo.merge"})),
            Step::tool_with("decision_seen", |results| json!({"id": results[0]["id"]})),
            Step::text("All done."),
        ]
    }

    #[test]
    fn the_step_is_the_number_of_assistant_turns_and_inputs_take_earlier_results() {
        let steps = script();
        let first = answer(
            &steps,
            &json!({"messages": [{"role": "user", "content": "go"}]}),
        );
        assert_eq!(first[0]["name"], "decision_raise");
        assert_eq!(first[0]["input"], json!({"action": "repo.merge"}));
        let second = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [first[0].clone()]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0000",
                "content": [{"type": "text", "text": "{\"id\":\"d-1\",\"status\":\"open\"}"}]}]},
        ]});
        let answered = answer(&steps, &second);
        assert_eq!(answered[0]["name"], "decision_seen");
        assert_eq!(answered[0]["input"], json!({"id": "d-1"}));
        let mut third = second.clone();
        let messages = third["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": [answered[0].clone()]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_0001", "content": "not json"}]}));
        assert_eq!(
            tool_results(third["messages"].as_array().unwrap()),
            vec![json!({"id": "d-1", "status": "open"}), json!("not json")]
        );
        let reminded = json!([{"role": "user", "content": [{"type": "tool_result",
            "content": "{\"id\":\"d-2\"}\n<system-reminder>\n<total_tokens>9 left</total_tokens>\n</system-reminder>"}]}]);
        assert_eq!(
            tool_results(reminded.as_array().unwrap()),
            vec![json!({"id": "d-2"})]
        );
        assert_eq!(
            answer(&steps, &third)[0],
            json!({"type": "text", "text": "All done."})
        );
        messages_past_the_end(&steps, &third);
    }

    fn messages_past_the_end(steps: &[Step], at_third: &Value) {
        let mut later = at_third.clone();
        later["messages"]
            .as_array_mut()
            .unwrap()
            .push(json!({"role": "assistant", "content": "All done."}));
        assert_eq!(answer(steps, &later)[0]["type"], "text");
    }

    #[test]
    fn a_wait_ends_the_turn_again_until_the_wake_up_holds_its_text() {
        let steps = vec![
            Step::tool("decision_raise", json!({})),
            Step::wait_for_with(|results| {
                json!(format!(
                    "decision.resolved {}",
                    results[0]["id"].as_str().unwrap()
                ))
            }),
            Step::tool("message_send", json!({})),
        ];
        let mut conversation = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_0000",
                "name": "decision_raise", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0000",
                "content": "{\"id\":\"d-1\"}"}]},
        ]});
        let waiting = answer(&steps, &conversation);
        assert_eq!(waiting[0]["text"], "Waiting for decision.resolved d-1.");
        let messages = conversation["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": [waiting[0].clone()]}));
        messages.push(json!({"role": "user", "content": "work arrived: decision.seen d-1"}));
        assert_eq!(answer(&steps, &conversation)[0], waiting[0]);
        let messages = conversation["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": [waiting[0].clone()]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "text", "text": "work arrived: decision.resolved d-1"}]}));
        assert_eq!(answer(&steps, &conversation)[0]["name"], "message_send");
    }

    #[test]
    fn a_tool_call_streams_in_the_order_the_harnesses_accept() {
        let blocks = answer(&script(), &json!({"messages": []}));
        let events = stream_events(&json!({"model": "m"}), &blocks);
        let kinds: Vec<&str> = events
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let data: Vec<Value> = events
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        assert_eq!(data[2]["content_block"]["input"], json!({}));
        assert_eq!(
            data[3]["delta"]["partial_json"],
            json!({"action": "repo.merge"}).to_string()
        );
        assert_eq!(data[5]["delta"]["stop_reason"], "tool_use");
        let text = stream_events(
            &json!({"model": "m"}),
            &[json!({"type": "text", "text": "hi"})],
        );
        assert!(text.contains(r#""stop_reason":"end_turn""#), "{text}");
    }
}
