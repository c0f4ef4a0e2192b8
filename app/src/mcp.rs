//! `mosaic-bus mcp`: an MCP server on stdio that exposes the broker's agent
//! verbs as tools, built on the official Rust SDK (`rmcp`).
//!
//! It is an adapter with no authority of its own: it holds one capability
//! (from the inherited descriptor named by `MOSAIC_BUS_CAP_FD`, or a private
//! `--cap-file`, exactly as `mosaic-bus call` reads it) and the socket path
//! (`--socket` or `MOSAIC_BUS_SOCKET`), and turns each tool call into one
//! socket request through [`Client`]. The broker decides everything.
//!
//! # Layout
//!
//! - `Tool`: one tool per agent verb (`launch.revoke` and
//!   `launch.restore` are the human's and are not exposed), its MCP name
//!   (no dots: `role.claim` is `role_claim`), its JSON schema and its
//!   description. A schema's `properties` are the tool's only keys.
//! - `Adapter`: the `rmcp` server handler. `tools/list` answers the
//!   table; `tools/call` checks the argument keys against the tool's schema
//!   (a stray key is `unknown-key` without contacting the broker), then
//!   runs the synchronous [`Client::call`] on tokio's blocking pool.
//! - `refusal_text` and `after_outcome_unknown`: every refusal becomes
//!   a tool error (`isError: true`) whose text is the static code and what
//!   it means and what to do; never driver or OS text.
//!
//! # The loop
//!
//! `run` reads the capability once, then serves MCP on stdin/stdout until
//! the client closes stdin. Logs and startup failures go to stderr (one
//! static code); stdout carries only MCP messages.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use mosaic_adapters::socket::{parse_response, Client, CLIENT_TIMEOUT};
use mosaic_adapters::wire::UuidRef;
use mosaic_domain::browser::{
    BrowserAction, DEFAULT_TIMEOUT, MAX_TIMEOUT, MIN_TIMEOUT, OPEN_TIMEOUT,
};
use mosaic_domain::evidence::MessageClass;
use mosaic_domain::{Refusal, TaskRef};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use crate::call::{cap_from_fd, cap_from_file, SOCKET_ENV};

/// What the server tells a client about itself when it connects.
const INSTRUCTIONS: &str = "Tools of the mosaic-bus coordination broker, acting \
with this agent run's capability. Claim your role first (role_claim). A refused \
call is a tool error whose text starts with a static code, then says what it \
means and what to do. On outcome-unknown the action may have happened: inspect \
the trail before doing anything, and never retry blindly.";

/// Runs `mcp [--socket PATH] [--cap-file PATH]`; returns the exit code: 0
/// when the client closed the session, 2 when it could not start (one static
/// code on stderr).
pub fn run(argv: &[OsString]) -> u8 {
    match serve(argv) {
        Ok(()) => 0,
        Err(refusal) => {
            eprintln!("{}", refusal.code());
            2
        }
    }
}

/// Reads the capability, then serves MCP on stdio until the client leaves.
fn serve(argv: &[OsString]) -> Result<(), Refusal> {
    let (socket, cap_file) = parse(argv)?;
    let cap = match &cap_file {
        Some(path) => cap_from_file(path)?,
        None => cap_from_fd()?,
    };
    let adapter = Adapter {
        client: Client::new(socket, cap.expose()),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|_| Refusal::BrokerUnavailable)?;
    let served = runtime.block_on(async {
        // A client that goes away before `initialize` completes is a
        // failed start; after it, the end of stdin is the normal end.
        let service = adapter
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|_| Refusal::BadRequest)?;
        service
            .waiting()
            .await
            .map(drop)
            .map_err(|_| Refusal::BadRequest)
    });
    // A call still waiting for the broker must not hold up the exit: its
    // client is gone, and the broker keeps whatever it recorded.
    runtime.shutdown_background();
    served
}

/// `--socket PATH` and `--cap-file PATH`, nothing else.
fn parse(argv: &[OsString]) -> Result<(PathBuf, Option<PathBuf>), Refusal> {
    let mut socket = std::env::var_os(SOCKET_ENV).map(PathBuf::from);
    let mut cap_file = None;
    let mut rest = argv.iter();
    while let Some(arg) = rest.next() {
        let value = match arg.to_str() {
            Some("--socket") => &mut socket,
            Some("--cap-file") => &mut cap_file,
            Some(_) | None => return Err(Refusal::BadRequest),
        };
        *value = Some(PathBuf::from(rest.next().ok_or(Refusal::BadRequest)?));
    }
    Ok((socket.ok_or(Refusal::BadRequest)?, cap_file))
}

/// Declares [`Tool`] with its MCP name and its broker verb in one list.
macro_rules! tools {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal, $verb:literal;)*) => {
        /// One MCP tool: one agent verb of the broker.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Tool {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Tool {
            /// Every tool, in the README's verb order.
            const ALL: &'static [Tool] = &[$(Tool::$variant,)*];

            /// The MCP tool name (no dots: some clients refuse them).
            fn name(self) -> &'static str {
                match self {
                    $(Tool::$variant => $name,)*
                }
            }

            /// The broker verb the tool calls.
            fn verb(self) -> &'static str {
                match self {
                    $(Tool::$variant => $verb,)*
                }
            }
        }
    };
}

tools! {
    /// `role.claim`.
    RoleClaim => "role_claim", "role.claim";
    /// `role.release`.
    RoleRelease => "role_release", "role.release";
    /// `role.revoke`.
    RoleRevoke => "role_revoke", "role.revoke";
    /// `decision.raise`.
    DecisionRaise => "decision_raise", "decision.raise";
    /// `decision.resolve`.
    DecisionResolve => "decision_resolve", "decision.resolve";
    /// `decision.seen`.
    DecisionSeen => "decision_seen", "decision.seen";
    /// `decision.withdraw`.
    DecisionWithdraw => "decision_withdraw", "decision.withdraw";
    /// `message.send`.
    MessageSend => "message_send", "message.send";
    /// `message.receive`.
    MessageReceive => "message_receive", "message.receive";
    /// `message.read`.
    MessageRead => "message_read", "message.read";
    /// `event.emit`.
    EventEmit => "event_emit", "event.emit";
    /// `inbox`.
    Inbox => "inbox", "inbox";
    /// `tasks`.
    Tasks => "tasks", "tasks";
    /// `agents`.
    Agents => "agents", "agents";
    /// `trail`.
    Trail => "trail", "trail";
    /// `browser.request`.
    BrowserRequest => "browser_request", "browser.request";
}

// What the schemas say about the broker's strict forms (the parsers in
// `mosaic_domain::ids` and `adapters::wire::request` are the authority).
const ROLE: &str = "A role instance name of this business: 1 to 64 characters, an ASCII \
letter or digit, then letters, digits, '.', '_' or '-'.";
const UUID_PATTERN: &str = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
const TASK_REF_PATTERN: &str = "^vikunja:[1-9][0-9]*/[1-9][0-9]*$";
const TASK_REF: &str = "A strict task ref: `vikunja:<project>/<task>`, both positive \
integers without sign or leading zeros, e.g. `vikunja:3/17`; anything else is bad-task-ref.";
const OPTION_KEY: &str = "An option key: 1 to 64 ASCII letters, digits, '.', '_' or '-'.";
const NOTE: &str = "An optional note, plain text, recorded with the act.";
const SUBJECT: &str = "A strict task ref `vikunja:<project>/<task>` (positive \
integers), a decision id or a message id (lowercase UUIDs), or a role instance name.";

/// A lowercase UUID naming a decision or a message.
fn uuid(description: &str) -> Value {
    json!({"type": "string", "pattern": UUID_PATTERN, "description": description})
}

/// Plain text.
fn text(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// An object schema that refuses unknown keys, as the broker does.
fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// A browser viewport: `{width, height}` in CSS pixels.
fn viewport(description: &str) -> Value {
    let side = |what: &str| {
        let mut side = json!({"type": "integer", "minimum": 1, "maximum": 10000});
        side["description"] = json!(what);
        side
    };
    let mut schema = object(
        json!({"width": side("Width in CSS pixels, 1 to 10000."),
               "height": side("Height in CSS pixels, 1 to 10000.")}),
        &["width", "height"],
    );
    schema["description"] = json!(description);
    schema
}

impl Tool {
    /// The tool with this MCP name.
    fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.iter().copied().find(|t| t.name() == name)
    }

    /// Whether the tool only reads (it changes nothing and records nothing).
    fn read_only(self) -> bool {
        match self {
            Tool::Inbox | Tool::Tasks | Tool::Agents | Tool::Trail => true,
            Tool::RoleClaim
            | Tool::RoleRelease
            | Tool::RoleRevoke
            | Tool::DecisionRaise
            | Tool::DecisionResolve
            | Tool::DecisionSeen
            | Tool::DecisionWithdraw
            | Tool::MessageSend
            | Tool::MessageReceive
            | Tool::MessageRead
            | Tool::EventEmit
            | Tool::BrowserRequest => false,
        }
    }

    /// What the tool does, for the model choosing it.
    fn description(self) -> &'static str {
        match self {
            Tool::RoleClaim => {
                "Claim your role for this run (verb role.claim). Answers {status: \"claimed\"}, or \
                 {status: \"held\"} when you already hold it. One run holds a role at a time; a \
                 revoked run never reclaims it. Claim before acting."
            }
            Tool::RoleRelease => "Release the role you hold (verb role.release). Answers {}.",
            Tool::RoleRevoke => {
                "Revoke the current holder of a role (verb role.revoke). Needs a gated decision \
                 approved by the human for exactly this role and the holder it recorded; the \
                 approval is spent. Answers {}."
            }
            Tool::DecisionRaise => {
                "Raise a decision (verb decision.raise). The business policy classes `action` for \
                 your role: a within-role decision closes at once with your `choice`; a cross-role \
                 one is routed to the delivery arbiter (or the technical one with domain \
                 \"technical\"); a gated one to the human. Routing is fixed at raise. Answers the \
                 decision with its id, class, route, status and authorization context {action, \
                 target, approvalChoice}: once resolved with approvalChoice, it authorizes exactly \
                 that action on that target, once."
            }
            Tool::DecisionResolve => {
                "Resolve a decision routed to you by choosing one of its option keys (verb \
                 decision.resolve). Answers the decision."
            }
            Tool::DecisionSeen => {
                "Acknowledge a decision routed to you without resolving it (verb decision.seen). \
                 Answers the decision."
            }
            Tool::DecisionWithdraw => {
                "Withdraw a decision you raised (verb decision.withdraw); the withdrawal is \
                 recorded, the decision is never rewritten. Answers the decision."
            }
            Tool::MessageSend => {
                "Send a message to a role or to the human (verb message.send). Answers {id, \
                 request}. When sending is within your role's authority, `decision` is only a \
                 citation; otherwise it must be a decision approving this send, and sending spends \
                 it."
            }
            Tool::MessageReceive => {
                "Receive up to 100 undelivered messages for your role (verb message.receive). \
                 Delivery is recorded when the broker hands them out and they are never handed out \
                 again, so act on what you get; unread ones stay listed in `inbox` until you call \
                 message_read."
            }
            Tool::MessageRead => {
                "Acknowledge a message delivered to your run, while you hold the role (verb \
                 message.read). Answers {}."
            }
            Tool::EventEmit => {
                "Record a routine observation (verb event.emit): an `action.allowed` event whose \
                 action is `routine`. Answers {}."
            }
            Tool::Inbox => {
                "Open decisions routed to you (each with its authorization context) and your \
                 unread messages, each with its `type` (verb inbox). Reads only."
            }
            Tool::Tasks => {
                "The newest state of each task of the business, tombstones included (verb tasks). \
                 Reads only."
            }
            Tool::Agents => {
                "The bound runs of the business: role, harness, pid, whether each holds its role \
                 and whether it was revoked (verb agents). Reads only."
            }
            Tool::Trail => {
                "Every record linked to a task, a decision or a message, in the broker's write \
                 order (verb trail). Use it to learn what happened, above all after \
                 outcome-unknown. Reads only."
            }
            Tool::BrowserRequest => {
                "Ask the in-app browser pane to perform one action and wait for its result (verb \
                 browser.request). Actions and their parameters: open {url, viewport?}, snapshot \
                 {selector?}, click {selector | text}, type {selector, value, submit?}, scroll \
                 {direction | selector}, back {}, forward {}, inspect {selector}, capture \
                 {label?}, resize {viewport}. No script evaluation; http and https URLs only. \
                 Authorized like any action (browser.<action>, on the URL's origin for open): \
                 pass an approving `decision` when your role's authority does not cover it."
            }
        }
    }

    /// The input schema. Its `properties` are the tool's only keys, and
    /// every object in it refuses other keys, as the broker does.
    fn schema(self) -> Value {
        match self {
            Tool::RoleClaim
            | Tool::RoleRelease
            | Tool::MessageReceive
            | Tool::Inbox
            | Tool::Tasks
            | Tool::Agents => object(json!({}), &[]),
            Tool::RoleRevoke => object(
                json!({
                    "role": text(&format!("The role whose holder is revoked. {ROLE}")),
                    "decision": uuid("The id of the gated decision, approved by the human, \
                        that authorizes this revoke (action role.revoke, target this role)."),
                }),
                &["role", "decision"],
            ),
            Tool::DecisionRaise => decision_raise_schema(),
            Tool::DecisionResolve => object(
                json!({
                    "id": uuid("The decision's id."),
                    "choice": text(&format!("The option key you choose. {OPTION_KEY}")),
                    "note": text(NOTE),
                }),
                &["id", "choice"],
            ),
            Tool::DecisionSeen | Tool::DecisionWithdraw => object(
                json!({"id": uuid("The decision's id."), "note": text(NOTE)}),
                &["id"],
            ),
            Tool::MessageSend => object(
                json!({
                    "to": text(&format!("The recipient: `human` (the business's human) \
                        or a role. {ROLE}")),
                    "body": text("The message, plain text."),
                    "class": {
                        "type": "string",
                        "enum": MessageClass::ALL.map(MessageClass::as_str),
                        "description": "What kind of message this is: REQUEST, ASSIGNMENT, \
                            REVIEW-REQUEST, REVIEW-RESULT, RESULT, INFO, DECISION or REACTION.",
                    },
                    "in_reply_to": uuid("The id of the message this answers."),
                    "corrects": uuid("The id of an earlier message this one corrects."),
                    "decision": uuid("A decision id. Within your role's authority it is a \
                        citation; otherwise it must approve this send and is spent by it."),
                }),
                &["to", "body"],
            ),
            Tool::MessageRead => object(
                json!({"id": uuid("The id of a message delivered to your run.")}),
                &["id"],
            ),
            Tool::EventEmit => {
                let mut body = object(
                    json!({
                        "action": {"type": "string", "const": "routine",
                                   "description": "Always `routine`."},
                        "target": text("What the observation is about: 1 to 512 characters \
                            without control characters."),
                    }),
                    &["action"],
                );
                body["description"] = json!("The observation: {action: \"routine\", target?}.");
                object(
                    json!({
                        "kind": {"type": "string", "const": "action.allowed",
                                 "description": "Always `action.allowed`."},
                        "body": body,
                        "subject": text(&format!("What it is filed under. {SUBJECT}")),
                    }),
                    &["kind", "body"],
                )
            }
            Tool::Trail => object(
                json!({"subject": text(&format!("Whose trail. {SUBJECT}"))}),
                &["subject"],
            ),
            Tool::BrowserRequest => browser_request_schema(),
        }
    }

    /// The tool's argument keys: its schema's properties.
    fn keys(self) -> Vec<String> {
        match self.schema().get_mut("properties").map(Value::take) {
            Some(Value::Object(properties)) => properties.into_iter().map(|(k, _)| k).collect(),
            Some(_) | None => Vec::new(),
        }
    }

    /// The tool as `tools/list` shows it.
    fn listing(self) -> rmcp::model::Tool {
        let schema = match self.schema() {
            Value::Object(schema) => schema,
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Array(_) => JsonObject::new(),
        };
        rmcp::model::Tool::new(self.name(), self.description(), schema)
            .with_annotations(ToolAnnotations::new().read_only(self.read_only()))
    }
}

fn decision_raise_schema() -> Value {
    object(
        json!({
            "action": {
                "type": "string",
                "maxLength": 64,
                "pattern": "^[a-z][a-z0-9-]*(\\.[a-z][a-z0-9-]*)*$",
                "description": "The action to decide on: dot-separated lowercase words, e.g. \
                    `repo.merge`. Its class for your role (within-role, cross-role, gated) \
                    decides the route.",
            },
            "question": text("The question to decide, plain text."),
            "options": {
                "type": "array",
                "minItems": 1,
                "description": "The choices offered.",
                "items": object(
                    json!({
                        "key": text(&format!("What a resolver picks. {OPTION_KEY}")),
                        "text": text("What the option means."),
                    }),
                    &["key", "text"],
                ),
            },
            "recommendation": text("Which option you recommend and why, plain text."),
            "blocking": {
                "type": "boolean",
                "description": "Whether work waits on this decision. A blocking decision \
                    needs `task_ref`.",
            },
            "domain": {
                "type": "string",
                "enum": ["delivery", "technical"],
                "description": "Which arbiter a cross-role decision goes to: `delivery` \
                    (the default) or `technical`.",
            },
            "target": text("What the action is aimed at (a role, a URL origin, a \
                repository, a branch): 1 to 512 characters without control characters. The \
                approval authorizes exactly this target."),
            "project": text("The project the decision belongs to, plain text."),
            "task_ref": {
                "type": "string",
                "pattern": TASK_REF_PATTERN,
                "description": format!("The task the decision is filed under. {TASK_REF}"),
            },
            "requirement_ref": text("A reference to the requirement concerned, plain text."),
            "supersedes": uuid("The id of an open decision this one replaces."),
            "choice": text(&format!("Required for a within-role decision, which closes at \
                raise: the option key chosen. {OPTION_KEY}")),
            "approvalChoice": text(&format!("The option key that counts as approval \
                (default `yes`, which must then be an option). {OPTION_KEY}")),
        }),
        &[
            "action",
            "question",
            "options",
            "recommendation",
            "blocking",
        ],
    )
}

fn browser_request_schema() -> Value {
    let selector = |what: &str| text(&format!("{what} A CSS selector, 1 to 1024 bytes."));
    object(
        json!({
            "action": {
                "type": "string",
                "enum": BrowserAction::NAMES,
                "description": "The browser action.",
            },
            "parameters": {
                "type": "object",
                "additionalProperties": false,
                "description": "The action's parameters (absent is {}), only those it \
                    takes: open {url, \
                    viewport?}, snapshot {selector?}, click {selector} or {text}, type \
                    {selector, value, submit?}, scroll {direction} or {selector}, back {}, \
                    forward {}, inspect {selector}, capture {label?}, resize {viewport}.",
                "properties": {
                    "url": text("open: an absolute http or https URL."),
                    "viewport": viewport("open (optional), resize: the view size."),
                    "selector": selector("snapshot (optional, the part to describe), click, \
                        type, scroll (the element to bring into view), inspect:"),
                    "text": text("click: the visible text of the element to click, 1 to \
                        1024 bytes."),
                    "value": text("type: the text to enter, at most 64 KiB."),
                    "submit": {"type": "boolean",
                               "description": "type: submit the element's form afterwards."},
                    "direction": {
                        "type": "string",
                        "enum": ["up", "down", "left", "right", "top", "bottom"],
                        "description": "scroll: one step up, down, left or right, or to the \
                            top or bottom of the page.",
                    },
                    "label": text("capture: a label for the image, 1 to 256 bytes."),
                },
            },
            "timeoutMs": {
                "type": "integer",
                "minimum": 1000,
                "maximum": 120000,
                "description": "How long to wait for the pane, in milliseconds (default \
                    45000 for open, 20000 otherwise; clamped to 1000 to 120000).",
            },
            "decision": uuid("When browser actions are not within your role's authority: \
                a decision approving `browser.<action>` (for open, on the URL's origin), spent \
                by this request."),
        }),
        &["action"],
    )
}

/// The MCP server handler: one socket client, one capability.
#[derive(Debug, Clone)]
struct Adapter {
    client: Client,
}

impl ServerHandler for Adapter {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mosaic-bus", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            Tool::ALL.iter().map(|t| t.listing()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = Tool::from_name(&request.name) else {
            return Ok(refused(Refusal::UnknownVerb, unknown_tool()).into());
        };
        let args = request.arguments.unwrap_or_default();
        let keys = tool.keys();
        if args.keys().any(|k| !keys.contains(k)) {
            let sentence = format!(
                "{} Nothing was sent to the broker. This tool takes only: {}.",
                refusal_text(Refusal::UnknownKey),
                if keys.is_empty() {
                    "no arguments".to_owned()
                } else {
                    keys.join(", ")
                }
            );
            return Ok(refused(Refusal::UnknownKey, sentence).into());
        }
        let client = self
            .client
            .clone()
            .with_timeout(client_timeout(tool, &args));
        let verb = tool.verb();
        let line = tokio::task::spawn_blocking({
            let args = Value::Object(args.clone());
            move || client.call_verbatim(verb, args)
        })
        .await
        // The blocking call cannot be seen to have finished: the same
        // uncertainty as a lost connection.
        .unwrap_or(Err(Refusal::OutcomeUnknown));
        let answer = match line {
            Ok(line) => parse_response(&line).map_err(|refusal| (refusal, broker_sentence(&line))),
            Err(refusal) => Err((refusal, None)),
        };
        Ok(match answer {
            Ok(result) => CallToolResult::success(vec![ContentBlock::text(result.to_string())]),
            Err((Refusal::OutcomeUnknown, _)) => {
                refused(Refusal::OutcomeUnknown, after_outcome_unknown(tool, &args))
            }
            Err((refusal, None)) => refused(refusal, refusal_text(refusal).to_owned()),
            Err((refusal, Some(sentence))) => {
                refused(refusal, format!("{} {sentence}", refusal_text(refusal)))
            }
        }
        .into())
    }
}

/// The sentence a refusal line of the broker carries beside its code, if
/// any: `browser.request` says which clients are connected when none can
/// serve the action.
fn broker_sentence(line: &[u8]) -> Option<String> {
    let response: Value = serde_json::from_slice(line).ok()?;
    response.get("message")?.as_str().map(str::to_owned)
}

/// A tool error: the static code, then what it means and what to do.
fn refused(refusal: Refusal, sentence: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {sentence}",
        refusal.code()
    ))])
}

/// The sentence for a tool name this server does not have.
fn unknown_tool() -> String {
    let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
    format!(
        "There is no such tool. The tools are: {}.",
        names.join(", ")
    )
}

/// How long one call may take: a browser action waits for the pane for its
/// own timeout (the broker's rule: the request's `timeoutMs` or the
/// action's default, clamped to 1 to 120 s), plus the usual margin.
fn client_timeout(tool: Tool, args: &JsonObject) -> Duration {
    if tool != Tool::BrowserRequest {
        return CLIENT_TIMEOUT;
    }
    let default = match args.get("action").and_then(Value::as_str) {
        Some("open") => OPEN_TIMEOUT,
        Some(_) | None => DEFAULT_TIMEOUT,
    };
    let wait = args
        .get("timeoutMs")
        .and_then(Value::as_u64)
        .map_or(default, Duration::from_millis)
        .clamp(MIN_TIMEOUT, MAX_TIMEOUT);
    wait + CLIENT_TIMEOUT
}

/// The `outcome-unknown` guidance for a call of `tool` with `args`: the
/// action may have happened, and where to look before doing anything.
fn after_outcome_unknown(tool: Tool, args: &JsonObject) -> String {
    const UNKNOWN: &str = "The connection to the broker ended before its answer. The action \
        may have happened; inspect the trail before doing anything; do not retry blindly.";
    // Only ids and task refs in their strict form are named back.
    let id = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .filter(|text| UuidRef::parse(text).is_ok() || TaskRef::parse(text).is_ok())
    };
    let look = |subject: &str| format!("{UNKNOWN} Call trail with subject \"{subject}\".");
    let involved = format!(
        "{UNKNOWN} Look at the trail of the task or decision involved (call trail with its \
         task ref or decision id)."
    );
    match tool {
        Tool::Inbox | Tool::Tasks | Tool::Agents | Tool::Trail => "The connection to the \
            broker ended before its answer. This tool only reads and changes nothing, so \
            calling it again is safe."
            .to_owned(),
        Tool::RoleClaim | Tool::RoleRelease => {
            format!("{UNKNOWN} Call agents to see whether your run holds its role now.")
        }
        Tool::MessageReceive => format!(
            "{UNKNOWN} Messages may have been delivered to you and are never handed out \
             again: call inbox, which lists your unread messages."
        ),
        Tool::BrowserRequest => {
            let page = "The page may have acted: take a browser_request snapshot to see it.";
            match id("decision") {
                Some(decision) => format!("{} {page}", look(decision)),
                None => format!("{UNKNOWN} {page}"),
            }
        }
        Tool::RoleRevoke => id("decision").map_or(involved, look),
        Tool::DecisionResolve | Tool::DecisionSeen | Tool::DecisionWithdraw | Tool::MessageRead => {
            id("id").map_or(involved, look)
        }
        Tool::DecisionRaise => id("supersedes")
            .or_else(|| id("task_ref"))
            .map_or(involved, look),
        Tool::MessageSend => id("decision")
            .or_else(|| id("in_reply_to"))
            .or_else(|| id("corrects"))
            .map_or(involved, look),
        Tool::EventEmit => id("subject").map_or(involved, look),
    }
}

/// What a refusal means and what to do, in one or two plain sentences.
fn refusal_text(refusal: Refusal) -> &'static str {
    match refusal {
        Refusal::BadRequest => {
            "The arguments do not have the shape or types the tool's schema gives (a required \
             argument missing, a wrong type, or a value the broker cannot read). Fix them from the \
             schema and call again."
        }
        Refusal::RequestTooLarge => {
            "The request is longer than 64 KiB. Send less (shorter text, or split it) and call \
             again."
        }
        Refusal::RequestTimeout => {
            "The request did not reach the broker within 5 s, so nothing was done. Call again."
        }
        Refusal::UnknownVerb => {
            "The broker does not know this verb. Use only the listed tools; if this one is listed, \
             the broker is older than this adapter: tell the human."
        }
        Refusal::UnknownKey => {
            "The arguments carry a key the tool does not define. Remove it and call again; the \
             schema lists every key."
        }
        Refusal::UnknownRole => {
            "That role is not one this business defines. Use a role instance name of your business \
             (agents lists the bound runs)."
        }
        Refusal::UnknownReference => {
            "That decision, message or other id does not exist in this business. Copy the id \
             exactly from inbox, message_receive or an earlier result."
        }
        Refusal::UnknownAction => {
            "The action name is malformed or not allowed here. Use dot-separated lowercase words \
             such as repo.merge; browser actions are the ones the browser_request schema lists."
        }
        Refusal::UnknownOption => {
            "That choice is not one of the decision's option keys. Pick a key from the decision's \
             options."
        }
        Refusal::BadTimestamp => {
            "A timestamp is not in the canonical YYYY-MM-DDTHH:mm:ss.sssZ form. Fix it and call \
             again."
        }
        Refusal::BadDate => "A date is not a real YYYY-MM-DD calendar day. Fix it and call again.",
        Refusal::BadId => {
            "An identifier has a bad form: decision and message ids are lowercase UUIDs, role \
             names 1 to 64 letters, digits, '.', '_' or '-'. Copy it exactly and call again."
        }
        Refusal::BadTaskRef => {
            "A task ref is not vikunja:<project>/<task> with positive integers and no leading \
             zeros (e.g. vikunja:3/17). Fix it and call again."
        }
        Refusal::BadParameters => {
            "The browser action's parameters fail validation (http or https URLs only, non-empty \
             selectors, viewport sides 1 to 10000). Fix them from the schema and call again."
        }
        Refusal::BadConfig => {
            "A business definition or boot configuration fails validation. This is the broker's \
             configuration, not your call: tell the human."
        }
        Refusal::GatedInAuthority => {
            "The business definition lists a gated-only action in an authority map. This is the \
             broker's configuration, not your call: tell the human."
        }
        Refusal::BadCapability => {
            "This adapter's capability is unknown, malformed or of the wrong kind (the broker may \
             have restarted, or the run was bound again). Nothing was done; calling again will not \
             help: tell the human."
        }
        Refusal::NotHolder => {
            "You do not hold your role, and this needs it. Call role_claim first (agents shows who \
             holds it)."
        }
        Refusal::RoleHeld => {
            "Another run holds this role. Do not try to take it over; wait for it to be released \
             or ask the human."
        }
        Refusal::RunRevoked => {
            "This run was revoked from this role and may never hold it again. Stop acting in this \
             role and tell the human."
        }
        Refusal::LaunchRevoked => {
            "The human has switched launching off for this business. Do not try to launch roles; \
             ask the human."
        }
        Refusal::LaunchMismatch => {
            "A rebinding differs from the recorded launch (role, harness, address or process). \
             This is the host's problem: tell the human."
        }
        Refusal::LaunchFailed => {
            "The host could not start an agent or hand it its capability. Tell the human."
        }
        Refusal::HolderChanged => {
            "The role's holder changed since the revoke decision was raised. Raise a new decision \
             for the current holder if it is still needed."
        }
        Refusal::HumanOnly => {
            "Only the human may do this. Raise a decision routed to the human, or send the human a \
             message, instead."
        }
        Refusal::HumanProofFailed => {
            "The human CLI's process proof failed. Agents must never act as the human: do not try \
             again."
        }
        Refusal::CrossBusiness => {
            "A reference points into another business. Use ids of your own business only."
        }
        Refusal::NotAuthorized => {
            "Neither your role's authority nor an approved, unspent decision allows this. Raise a \
             decision for this action and target (decision_raise), wait for its approval, then \
             pass its id."
        }
        Refusal::NotResolver => {
            "You are not this decision's resolver. Leave it to the role or the human it was routed \
             to."
        }
        Refusal::NotRaiser => {
            "You did not raise this decision, so you cannot withdraw it. Leave it, or ask the role \
             that raised it."
        }
        Refusal::DecisionOpen => {
            "The decision is still open, so it approves nothing yet. Wait for its resolution (see \
             its trail) before using it."
        }
        Refusal::DecisionClosed => {
            "The decision is already resolved, withdrawn or superseded. Read its trail for the \
             outcome; raise a new decision if one is still needed."
        }
        Refusal::DecisionConsumed => {
            "The decision's approval was already used, and every approval is single-use. Raise a \
             new decision for a new use."
        }
        Refusal::DecisionMismatch => {
            "The decision's recorded class no longer matches the business policy. Raise a new \
             decision under the current policy."
        }
        Refusal::TaskRefRequired => {
            "A blocking decision needs a strict task_ref (vikunja:<project>/<task>). Add it, or \
             raise the decision as non-blocking."
        }
        Refusal::ChoiceRequired => {
            "A within-role decision closes at raise and must carry its choice. Add choice (one of \
             the option keys) and call again."
        }
        Refusal::NotDelivered => {
            "That message was not delivered to your run, so you cannot mark it read. Acknowledge \
             only messages message_receive handed you."
        }
        Refusal::NoBrowserClient => {
            "No connected client can serve this browser action (no browser view is open). Ask the \
             human to open the in-app browser; do not loop on retries."
        }
        Refusal::BrowserTimeout => {
            "The browser request was not settled in time; the page may or may not have acted. Take \
             a snapshot to see the page before doing anything else."
        }
        Refusal::BrowserAborted => {
            "The browser request was aborted before it settled. Take a snapshot to see the page \
             before doing anything else."
        }
        Refusal::BrowserResultTooLarge => {
            "The pane's result was larger than the result limit. Ask for less, e.g. a snapshot of \
             one part with a selector."
        }
        Refusal::BrowserFailed => {
            "The browser pane reported that the action failed (for example, no element matched). \
             Take a snapshot and adjust the action."
        }
        Refusal::StorageUnavailable => {
            "The broker could not commit or read its evidence store, so nothing was recorded. Tell \
             the human; calling again will likely fail too."
        }
        Refusal::ResponseTooLarge => {
            "The broker's answer was larger than 4 MiB, so whether it acted cannot be read from \
             it: inspect the trail before doing anything, and ask for less."
        }
        Refusal::OutcomeUnknown => {
            "The connection to the broker ended before its answer. The action may have happened; \
             inspect the trail before doing anything; do not retry blindly."
        }
        Refusal::BrokerUnavailable => {
            "The broker could not be reached, and nothing was sent. Call again later; tell the \
             human if it persists."
        }
        Refusal::ServiceFailed => "A trusted service the broker relies on failed. Tell the human.",
        Refusal::CredentialExpired => {
            "A service token the broker would use has expired, so it was not used. Tell the human."
        }
        Refusal::CredentialLeak => {
            "The request or its result contains a service token, so it was refused before anything \
             was written or returned. Never put secrets in arguments or messages."
        }
        Refusal::LockHeld => {
            "Another broker holds the writer lock. This is for the operator: tell the human."
        }
        Refusal::StaleLock => {
            "A writer lock remains from a broker that did not close cleanly. This is for the \
             operator (mosaic-bus unlock): tell the human."
        }
        Refusal::NoLock => "There is no writer lock to recover. Nothing needs doing.",
        Refusal::UnsafePath => {
            "A path (such as the capability file) is a symlink or has an unsafe owner or \
             permissions. Tell the human."
        }
        Refusal::SchemaMismatch => {
            "The broker's database schema differs from the pinned one. Tell the human."
        }
        Refusal::IntegrityFailed => {
            "The broker's database failed an integrity check. Tell the human and do not go on \
             writing."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_adapters::wire::Verb;

    /// The broker verbs no agent may use, so no tool exposes them.
    const HUMAN_ONLY: &[&str] = &["launch.revoke", "launch.restore"];

    /// Each tool's keys are exactly its verb's keys in the broker's table,
    /// and every broker verb is a tool unless it is the human's.
    /// `browser.request` is checked as soon as the broker's table has it.
    #[test]
    fn tools_mirror_the_broker_verb_table() {
        for &tool in Tool::ALL {
            assert!(!tool.name().contains('.'), "{}", tool.name());
            match Verb::parse(tool.verb()) {
                Ok(verb) => {
                    let mut keys = tool.keys();
                    keys.sort();
                    let mut expected: Vec<&str> = verb.arg_keys().to_vec();
                    expected.sort_unstable();
                    assert_eq!(keys, expected, "{}", tool.name());
                }
                Err(refusal) => {
                    assert_eq!(
                        (tool, refusal),
                        (Tool::BrowserRequest, Refusal::UnknownVerb)
                    );
                    let mut keys = tool.keys();
                    keys.sort();
                    assert_eq!(keys, ["action", "decision", "parameters", "timeoutMs"]);
                }
            }
        }
        for verb in Verb::ALL {
            let exposed = Tool::ALL.iter().any(|t| t.verb() == verb.as_str());
            let human = HUMAN_ONLY.contains(&verb.as_str());
            assert!(
                exposed != human,
                "{verb}: exposed {exposed}, human-only {human}"
            );
        }
    }

    /// Every object in every schema refuses unknown keys.
    #[test]
    fn every_schema_object_is_closed() {
        fn walk(schema: &Value, at: &str) {
            if schema["type"] == "object" {
                assert_eq!(schema["additionalProperties"], json!(false), "{at}");
            }
            if let Some(properties) = schema["properties"].as_object() {
                for (key, inner) in properties {
                    walk(inner, &format!("{at}.{key}"));
                }
            }
            if schema["items"].is_object() {
                walk(&schema["items"], &format!("{at}[]"));
            }
        }
        for &tool in Tool::ALL {
            walk(&tool.schema(), tool.name());
        }
    }

    #[test]
    fn outcome_unknown_names_the_subject_to_inspect() {
        let args = |v: Value| v.as_object().cloned().unwrap_or_default();
        let id = "0b7f8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
        let text = after_outcome_unknown(
            Tool::DecisionResolve,
            &args(json!({"id": id, "choice": "yes"})),
        );
        assert!(text.contains("may have happened"), "{text}");
        assert!(text.contains(&format!("subject \"{id}\"")), "{text}");
        let text = after_outcome_unknown(
            Tool::DecisionRaise,
            &args(json!({"task_ref": "vikunja:3/17"})),
        );
        assert!(text.contains("subject \"vikunja:3/17\""), "{text}");
        // Anything but a strict id is never echoed.
        let text = after_outcome_unknown(Tool::MessageRead, &args(json!({"id": "x\ny"})));
        assert!(!text.contains("x\ny"), "{text}");
        assert!(text.contains("task or decision involved"), "{text}");
    }

    #[test]
    fn browser_calls_wait_for_the_pane() {
        let args = |v: Value| v.as_object().cloned().unwrap_or_default();
        let secs = Duration::from_secs;
        assert_eq!(client_timeout(Tool::Inbox, &args(json!({}))), secs(5));
        let open = args(json!({"action": "open"}));
        assert_eq!(client_timeout(Tool::BrowserRequest, &open), secs(50));
        let back = args(json!({"action": "back", "timeoutMs": 999_999}));
        assert_eq!(client_timeout(Tool::BrowserRequest, &back), secs(125));
    }
}
