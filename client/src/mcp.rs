//! `mosaic-bus mcp`: an MCP server on stdio that exposes the broker's agent
//! verbs as tools, built on the official Rust SDK (`rmcp`).
//!
//! It is an adapter with no authority of its own: it holds one capability
//! (from the inherited descriptor named by `MOSAIC_BUS_CAP_FD`, or a private
//! `--cap-file`, exactly as `mosaic-bus call` reads it) and the socket path
//! (`--socket` or `MOSAIC_BUS_SOCKET`), and turns each tool call into one
//! socket request through one [`Session`], so the calls of an MCP session
//! share one connection (a new one when the broker closed it idle, and
//! one more for a call made while another is waiting). The broker decides
//! everything.
//!
//! # Layout
//!
//! - `Tool`: one tool per verb of the domain's table that agents may call
//!   (`launch.revoke` and `launch.restore` are the human's and are not
//!   exposed): its MCP name (no dots: `role.claim` is `role_claim`), its
//!   description (the verb's meaning) and its input schema (the verb's
//!   argument type, [`VerbArgs`]). A schema's `properties` are the tool's
//!   only keys.
//! - `Adapter`: the `rmcp` server handler. `tools/list` answers the
//!   table; `tools/call` checks the argument keys against the tool's schema
//!   (a stray key is `unknown-key` without contacting the broker), then
//!   runs the synchronous [`Session::call_verbatim`] on tokio's blocking
//!   pool. A request sent whole is never sent again: a connection lost
//!   after it is `outcome-unknown`, with what to inspect.
//! - `refusal_text` and `after_outcome_unknown`: every refusal becomes
//!   a tool error (`isError: true`) whose text is the static code, what it
//!   means ([`Refusal::meaning`]) and what to do (`HINTS`, the one
//!   table of hints); never driver or OS text.
//!
//! # The loop
//!
//! `run` reads the capability once, then serves MCP on stdin/stdout until
//! the client closes stdin. Logs and startup failures go to stderr (one
//! static code); stdout carries only MCP messages.

use std::path::PathBuf;
use std::sync::Arc;

use mosaic_domain::{text, CallerKind, DecisionId, Refusal, TaskRef, Verb};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::cap::cap_from;
use crate::socket::{parse_response, Client, Session};
use crate::wire::args::VerbArgs;

/// What the server tells a client about itself when it connects.
const INSTRUCTIONS: &str = "Tools of the mosaic-bus coordination broker, acting \
with this agent run's capability. Claim your role first (role_claim). A refused \
call is a tool error whose text starts with a static code, then says what it \
means and what to do. On outcome-unknown the action may have happened: inspect \
the trail before doing anything, and never retry blindly.";

/// Runs `mcp` against `socket`: reads the capability once (from
/// `cap_file`, or the descriptor named by `MOSAIC_BUS_CAP_FD`, or the file
/// named by `MOSAIC_BUS_CAP_FILE`: [`cap_from`]), then serves
/// MCP on stdio until the client closes stdin.
///
/// # Errors
/// The static code of a failed start (`bad-capability`, `unsafe-path`,
/// `bad-request` when the client left before the session began, and
/// `broker-unavailable`); the binary prints it on stderr and exits 2.
pub fn run(socket: PathBuf, cap_file: Option<PathBuf>) -> Result<(), Refusal> {
    let cap = cap_from(cap_file.as_deref())?;
    let adapter = Adapter {
        session: Arc::new(Session::new(Client::new(socket, cap.expose()))),
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
            .map_err(|e| failed("starting the MCP session", &e))?;
        service
            .waiting()
            .await
            .map(drop)
            .map_err(|e| failed("the MCP session", &e))
    });
    // A call still waiting for the broker must not hold up the exit: its
    // client is gone, and the broker keeps whatever it recorded.
    runtime.shutdown_background();
    served
}

/// `bad-request`, the static code of a session that failed (the client
/// left, or spoke no MCP), logging what failed and why, neutralised: the
/// cause may quote what the client sent.
fn failed(what: &'static str, error: &dyn std::error::Error) -> Refusal {
    let code = Refusal::BadRequest;
    tracing::error!(
        code = code.code(),
        what,
        cause = &*text::neutralise(&error.to_string()),
        "{what} failed"
    );
    code
}

/// The `tools/list` array the server answers, as JSON: one entry per
/// agent verb with its name, description, input schema and annotations.
/// `mosaic-bus mcp --tools` prints it, so a harness that is no MCP client
/// (the pi extension) registers the same tools from the same source.
#[must_use]
pub fn tools_json() -> Value {
    let tools: Vec<rmcp::model::Tool> = Tool::all().map(Tool::listing).collect();
    // A list of plain structs always serialises.
    serde_json::to_value(tools).unwrap_or(Value::Null)
}

/// One MCP tool: one verb of the table that agents may call
/// ([`CallerKind::Agent`]); the human's verbs have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tool(Verb);

impl Tool {
    /// Every tool, in the verb table's order.
    fn all() -> impl Iterator<Item = Tool> {
        Verb::ALL
            .iter()
            .copied()
            .filter(|verb| verb.serves(CallerKind::Agent))
            .map(Tool)
    }

    /// The tool with this MCP name.
    fn from_name(name: &str) -> Option<Tool> {
        Tool::all().find(|t| t.name() == name)
    }

    /// The MCP tool name: the verb's with underscores for dots, which some
    /// clients refuse (`role.claim` is `role_claim`).
    fn name(self) -> String {
        self.0.as_str().replace('.', "_")
    }

    /// What the tool does, for the model choosing it: the verb's meaning,
    /// and for `changes` how to use it.
    fn description(self) -> String {
        let reads = if self.0.is_read() { " Reads only." } else { "" };
        let usage = if self.0 == Verb::Changes {
            CHANGES_USAGE
        } else {
            ""
        };
        format!("{} (verb {}){reads}{usage}", self.0.meaning(), self.0)
    }

    /// The tool's argument keys: its verb's.
    fn keys(self) -> &'static [&'static str] {
        self.0.arg_keys()
    }

    /// The tool as `tools/list` shows it: the input schema is the verb's
    /// argument type's.
    fn listing(self) -> rmcp::model::Tool {
        let schema = self.0.input_schema().as_object().cloned();
        rmcp::model::Tool::new(self.name(), self.description(), schema.unwrap_or_default())
            .with_annotations(ToolAnnotations::new().read_only(self.0.is_read()))
    }
}

/// The MCP server handler: one socket session, one capability.
#[derive(Debug, Clone)]
struct Adapter {
    session: Arc<Session>,
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
            Tool::all().map(Tool::listing).collect(),
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
        if args.keys().any(|k| !keys.contains(&k.as_str())) {
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
        // The session waits the verb's own time at the broker (a browser
        // action, `changes`) plus the usual margin.
        let session = Arc::clone(&self.session);
        let verb = tool.0.as_str();
        let line = tokio::task::spawn_blocking({
            let args = Value::Object(args.clone());
            move || session.call_verbatim(verb, args)
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
            Err((refusal, None)) => refused(refusal, refusal_text(refusal)),
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

/// How a model waits for work with `changes` instead of polling.
const CHANGES_USAGE: &str = " Use it to wait for work instead of polling: first call it without \
    `since` to get the current cursor, then call inbox (and message_receive) to handle what is \
    already there, then call changes with `since` set to that cursor; it answers as soon as \
    something concerning you happens after it (or with an empty list after `timeoutMs`). Act \
    on the changes it lists (inbox, message_receive, trail), then call it again with the \
    `cursor` of its answer. Changes are pointers (kind and id), never content.";

/// The sentence for a tool name this server does not have.
fn unknown_tool() -> String {
    let names: Vec<String> = Tool::all().map(Tool::name).collect();
    format!(
        "There is no such tool. The tools are: {}.",
        names.join(", ")
    )
}

/// The `outcome-unknown` guidance for a call of `tool` with `args`: the
/// action may have happened, and where to look before doing anything.
fn after_outcome_unknown(tool: Tool, args: &JsonObject) -> String {
    if tool.0.is_read() {
        return "The connection to the broker ended before its answer. This tool only reads \
            and changes nothing, so calling it again is safe."
            .to_owned();
    }
    let unknown = refusal_text(Refusal::OutcomeUnknown);
    // Only ids and task refs in their strict form are named back (a
    // decision's id and a message's are both lowercase UUIDs).
    let id = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .filter(|text| DecisionId::parse(text).is_ok() || TaskRef::parse(text).is_ok())
    };
    let look = |subject: &str| format!("{unknown} Call trail with subject \"{subject}\".");
    let involved = format!(
        "{unknown} Look at the trail of the task or decision involved (call trail with its \
         task ref or decision id)."
    );
    match Look::of(tool.0) {
        Look::Agents => {
            format!("{unknown} Call agents to see whether your run holds its role now.")
        }
        Look::Inbox => format!(
            "{unknown} Messages may have been delivered to you and are never handed out \
             again: call inbox, which lists your unread messages."
        ),
        Look::Page => {
            let page = "The page may have acted: take a browser_request snapshot to see it.";
            match id("decision") {
                Some(decision) => format!("{} {page}", look(decision)),
                None => format!("{unknown} {page}"),
            }
        }
        Look::Trail(keys) => keys.iter().find_map(|key| id(key)).map_or(involved, look),
    }
}

/// Where an agent looks after an `outcome-unknown` write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// At `agents`: whether the run holds its role now.
    Agents,
    /// At `inbox`: the messages handed out are never handed out again.
    Inbox,
    /// At the trail of the decision named, then at the page.
    Page,
    /// At the trail of the first of these arguments that holds a strict id
    /// or task ref, else at the trail of what is involved.
    Trail(&'static [&'static str]),
}

/// The writes whose guidance names where to look. A table, not a match
/// over every verb, so a new verb needs no line here: without a row it is
/// told to look at the trail of what it involved, which is always true.
const LOOKS: &[(Verb, Look)] = &[
    (Verb::RoleClaim, Look::Agents),
    (Verb::RoleRelease, Look::Agents),
    (Verb::MessageReceive, Look::Inbox),
    (Verb::BrowserRequest, Look::Page),
    (Verb::RoleRevoke, Look::Trail(&["decision"])),
    (Verb::DecisionResolve, Look::Trail(&["id"])),
    (Verb::DecisionSeen, Look::Trail(&["id"])),
    (Verb::DecisionWithdraw, Look::Trail(&["id"])),
    (Verb::MessageRead, Look::Trail(&["id"])),
    (
        Verb::DecisionRaise,
        Look::Trail(&["supersedes", "task_ref"]),
    ),
    (
        Verb::MessageSend,
        Look::Trail(&["decision", "in_reply_to", "corrects"]),
    ),
    (Verb::EventEmit, Look::Trail(&["subject"])),
];

impl Look {
    /// The row of `verb`, or the trail of what it involved.
    fn of(verb: Verb) -> Look {
        LOOKS
            .iter()
            .find(|(row, _)| *row == verb)
            .map_or(Look::Trail(&[]), |&(_, look)| look)
    }
}

/// A refusal's text: what it means (the refusal table's meaning), then
/// what to do.
fn refusal_text(refusal: Refusal) -> String {
    format!("{} {}", refusal.meaning(), what_to_do(refusal))
}

/// What an agent should do after a refusal: the one table of hints, a
/// row per hint with the refusals it answers (each refusal in exactly one
/// row: a test checks it, so a new refusal needs its row here).
const HINTS: &[(&[Refusal], &str)] = &[
    (
        &[Refusal::BadRequest],
        "A required argument is missing, has a wrong type, or holds a value the broker \
         cannot read. Fix the arguments from the tool's schema and call again.",
    ),
    (
        &[Refusal::RequestTooLarge],
        "Send less (shorter text, or split it) and call again.",
    ),
    (&[Refusal::RequestTimeout], "Nothing was done. Call again."),
    (
        &[Refusal::UnknownVerb],
        "Use only the listed tools; if this one is listed, the broker is older than this \
         adapter: tell the human.",
    ),
    (
        &[Refusal::UnknownKey],
        "Remove it and call again; the schema lists every key.",
    ),
    (
        &[Refusal::UnknownRole],
        "Use a role instance name of your business (agents lists the bound runs).",
    ),
    (
        &[Refusal::UnknownReference],
        "Copy the id exactly from inbox, message_receive or an earlier result.",
    ),
    (
        &[Refusal::UnknownAction],
        "Use dot-separated lowercase words such as repo.merge; browser actions are the ones \
         the browser_request schema lists.",
    ),
    (
        &[Refusal::UnknownOption],
        "Pick a key from the decision's options.",
    ),
    (
        &[Refusal::BadTimestamp, Refusal::BadDate],
        "Fix it and call again.",
    ),
    (
        &[Refusal::BadId],
        "Decision and message ids are lowercase UUIDs, role names 1 to 64 letters, digits, \
         '.', '_' or '-'. Copy it exactly and call again.",
    ),
    (
        &[Refusal::BadTaskRef],
        "Both numbers are positive integers without leading zeros (e.g. vikunja:3/17). Fix \
         it and call again.",
    ),
    (
        &[Refusal::BadParameters],
        "http or https URLs only, non-empty selectors, viewport sides 1 to 10000. Fix them \
         from the schema and call again.",
    ),
    (
        &[Refusal::BadConfig, Refusal::GatedInAuthority],
        "This is the broker's configuration, not your call: tell the human.",
    ),
    (
        &[Refusal::BadCapability],
        "The broker may have restarted, or the run was bound again. Nothing was done; \
         calling again will not help: tell the human.",
    ),
    (
        &[Refusal::NotHolder],
        "Call role_claim first (agents shows who holds it).",
    ),
    (
        &[Refusal::RoleHeld],
        "Do not try to take it over; wait for it to be released or ask the human.",
    ),
    (
        &[Refusal::RunRevoked],
        "Stop acting in this role and tell the human.",
    ),
    (
        &[Refusal::RunEnded],
        "This run is over: stop working and exit.",
    ),
    (
        &[Refusal::LaunchRevoked],
        "Do not try to launch roles; ask the human.",
    ),
    (
        &[
            Refusal::LaunchMismatch,
            Refusal::LaunchNotRunning,
            Refusal::LaunchStartMismatch,
            Refusal::LaunchForeignUser,
        ],
        "This is the host's problem: tell the human.",
    ),
    (
        &[
            Refusal::LaunchFailed,
            Refusal::SandboxUnavailable,
            Refusal::ServiceFailed,
            Refusal::CredentialExpired,
            Refusal::UnsafePath,
            Refusal::SchemaMismatch,
        ],
        "Tell the human.",
    ),
    (
        &[Refusal::HolderChanged],
        "Raise a new decision for the current holder if it is still needed.",
    ),
    (
        &[Refusal::HumanOnly],
        "Raise a decision routed to the human, or send the human a message, instead.",
    ),
    (
        &[Refusal::HumanProofFailed],
        "Agents must never act as the human: do not try again.",
    ),
    (
        &[Refusal::CrossBusiness],
        "Use ids of your own business only.",
    ),
    (
        &[Refusal::NotAuthorized],
        "Raise a decision for this action and target (decision_raise), wait for its \
         approval, then pass its id.",
    ),
    (
        &[Refusal::NotResolver],
        "Leave it to the role or the human it was routed to.",
    ),
    (
        &[Refusal::NotRaiser],
        "Leave it, or ask the role that raised it.",
    ),
    (
        &[Refusal::DecisionOpen],
        "It approves nothing yet. Wait for its resolution (see its trail) before using it.",
    ),
    (
        &[Refusal::DecisionClosed],
        "Read its trail for the outcome; raise a new decision if one is still needed.",
    ),
    (
        &[Refusal::DecisionConsumed],
        "Every approval is single-use. Raise a new decision for a new use.",
    ),
    (
        &[Refusal::DecisionMismatch],
        "Raise a new decision under the current policy.",
    ),
    (
        &[Refusal::TaskRefRequired],
        "Add task_ref (vikunja:<project>/<task>), or raise the decision as non-blocking.",
    ),
    (
        &[Refusal::ChoiceRequired],
        "Add choice (one of the option keys) and call again.",
    ),
    (
        &[Refusal::NotDelivered],
        "Acknowledge only messages message_receive handed you.",
    ),
    (
        &[Refusal::NoBrowserClient],
        "No browser view is open. Ask the human to open the in-app browser; do not loop on \
         retries.",
    ),
    (
        &[Refusal::BrowserTimeout],
        "The page may or may not have acted. Take a snapshot to see the page before doing \
         anything else.",
    ),
    (
        &[Refusal::BrowserAborted],
        "Take a snapshot to see the page before doing anything else.",
    ),
    (
        &[Refusal::BrowserResultTooLarge],
        "Ask for less, e.g. a snapshot of one part with a selector.",
    ),
    (
        &[Refusal::BrowserFailed],
        "For example, no element matched. Take a snapshot and adjust the action.",
    ),
    (
        &[Refusal::BrowserAddressRefused],
        "The human's browser goes no further than your own network: not to loopback, \
         private or link-local addresses, nor `localhost`. Ask the human to name the \
         address in the broker's browser configuration if the work needs it.",
    ),
    (
        &[Refusal::StorageUnavailable],
        "Nothing was recorded. Tell the human; calling again will likely fail too.",
    ),
    (
        &[Refusal::ResponseTooLarge],
        "Whether the broker acted cannot be read from it: inspect the trail before doing \
         anything, and ask for less.",
    ),
    (
        &[Refusal::OutcomeUnknown],
        "The action may have happened; inspect the trail before doing anything; do not \
         retry blindly.",
    ),
    (
        &[Refusal::BrokerUnavailable],
        "Call again later; tell the human if it persists.",
    ),
    (
        &[Refusal::BadResponse],
        "The broker answered, so the action may have happened: inspect the trail before \
         doing anything, and tell the human that this adapter and the broker differ in \
         version.",
    ),
    (
        &[Refusal::CredentialLeak],
        "Never put secrets in arguments or messages.",
    ),
    (
        &[Refusal::LockHeld],
        "This is for the operator: tell the human.",
    ),
    (
        &[Refusal::StaleLock],
        "This is for the operator (mosaic-bus unlock): tell the human.",
    ),
    (&[Refusal::NoLock], "Nothing needs doing."),
    (
        &[Refusal::IntegrityFailed],
        "Tell the human and do not go on writing.",
    ),
];

/// The hint of `refusal`'s row in [`HINTS`].
fn what_to_do(refusal: Refusal) -> &'static str {
    HINTS
        .iter()
        .find(|(refusals, _)| refusals.contains(&refusal))
        .map_or("Tell the human.", |&(_, hint)| hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    /// The tools are exactly the verbs agents may call, each under a name
    /// without dots that finds it again.
    #[test]
    fn tools_are_the_agent_verbs() {
        let tools: Vec<Verb> = Tool::all().map(|t| t.0).collect();
        let agents: Vec<Verb> = Verb::ALL
            .iter()
            .copied()
            .filter(|v| v.callers().contains(&CallerKind::Agent))
            .collect();
        assert_eq!(tools, agents);
        assert!(!tools.contains(&Verb::LaunchRevoke) && !tools.contains(&Verb::LaunchRestore));
        assert!(!tools.contains(&Verb::Head) && !tools.contains(&Verb::History));
        for tool in Tool::all() {
            assert!(!tool.name().contains('.'), "{}", tool.name());
            assert_eq!(Tool::from_name(&tool.name()), Some(tool));
            assert!(tool.description().starts_with(tool.0.meaning()));
        }
    }

    /// `tools_json` is the listing `tools/list` answers: every agent verb's
    /// tool, in order, with its schema.
    #[test]
    fn the_printed_tools_are_the_listing() {
        let printed = tools_json();
        let printed = printed.as_array().expect("an array");
        assert_eq!(printed.len(), Tool::all().count());
        for (entry, tool) in printed.iter().zip(Tool::all()) {
            assert_eq!(entry["name"], tool.name().as_str());
            assert_eq!(entry["description"], tool.description().as_str());
            assert_eq!(
                entry["inputSchema"],
                serde_json::to_value(tool.0.input_schema()).expect("a schema")
            );
        }
    }

    /// Each tool's published input schema is its verb's argument type: the
    /// same property names (the parser's allow-list) and the same required
    /// set.
    #[test]
    fn each_tool_schema_is_its_verbs_argument_type() {
        let names = |schema: &Value, key: &str| -> BTreeSet<String> {
            match &schema[key] {
                Value::Object(map) => map.keys().cloned().collect(),
                Value::Array(items) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                other @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_)) => {
                    panic!("{key}: {other}")
                }
            }
        };
        for tool in Tool::all() {
            let listed = Value::Object((*tool.listing().input_schema).clone());
            let argument_type = tool.0.input_schema().to_value();
            let keys: BTreeSet<String> = tool.keys().iter().map(|k| (*k).to_owned()).collect();
            assert_eq!(names(&listed, "properties"), keys, "{}", tool.0);
            assert_eq!(names(&argument_type, "properties"), keys, "{}", tool.0);
            let required = |schema: &Value| {
                if schema.get("required").is_some() {
                    names(schema, "required")
                } else {
                    BTreeSet::new()
                }
            };
            assert_eq!(required(&listed), required(&argument_type), "{}", tool.0);
            assert!(required(&listed).is_subset(&keys), "{}", tool.0);
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
            for alternatives in ["anyOf", "oneOf"] {
                for inner in schema[alternatives].as_array().into_iter().flatten() {
                    walk(inner, &format!("{at}|"));
                }
            }
        }
        for tool in Tool::all() {
            walk(
                &Value::Object((*tool.listing().input_schema).clone()),
                &tool.name(),
            );
        }
    }

    /// The hint table names every refusal in exactly one row, and no row
    /// is empty.
    #[test]
    fn every_refusal_has_exactly_one_hint() {
        for &refusal in Refusal::ALL {
            let rows = HINTS
                .iter()
                .filter(|(refusals, _)| refusals.contains(&refusal))
                .count();
            assert_eq!(rows, 1, "{}", refusal.code());
        }
        for (refusals, hint) in HINTS {
            assert!(!refusals.is_empty() && !hint.is_empty(), "{hint}");
        }
    }

    /// A refusal's text starts with its meaning, and every refusal has a
    /// hint.
    #[test]
    fn refusal_texts_start_with_the_meaning() {
        for &refusal in Refusal::ALL {
            let text = refusal_text(refusal);
            assert!(text.starts_with(refusal.meaning()), "{text}");
            assert!(
                text.len() > refusal.meaning().len() + 1,
                "{}",
                refusal.code()
            );
        }
    }

    #[test]
    fn outcome_unknown_names_the_subject_to_inspect() {
        let args = |v: Value| v.as_object().cloned().unwrap_or_default();
        let id = "0b7f8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
        let text = after_outcome_unknown(
            Tool(Verb::DecisionResolve),
            &args(json!({"id": id, "choice": "yes"})),
        );
        assert!(text.contains("may have happened"), "{text}");
        assert!(text.contains(&format!("subject \"{id}\"")), "{text}");
        let text = after_outcome_unknown(
            Tool(Verb::DecisionRaise),
            &args(json!({"task_ref": "vikunja:3/17"})),
        );
        assert!(text.contains("subject \"vikunja:3/17\""), "{text}");
        // Anything but a strict id is never echoed.
        let text = after_outcome_unknown(Tool(Verb::MessageRead), &args(json!({"id": "x\ny"})));
        assert!(!text.contains("x\ny"), "{text}");
        assert!(text.contains("task or decision involved"), "{text}");
        let text = after_outcome_unknown(Tool(Verb::Trail), &args(json!({})));
        assert!(text.contains("calling it again is safe"), "{text}");
    }

    #[test]
    fn each_guidance_row_is_an_agent_write_once_and_names_only_its_own_arguments() {
        for (i, &(verb, look)) in LOOKS.iter().enumerate() {
            assert!(!verb.is_read() && verb.serves(CallerKind::Agent), "{verb}");
            assert!(LOOKS[..i].iter().all(|(v, _)| *v != verb), "{verb} twice");
            let keys = match look {
                Look::Trail(keys) => keys,
                Look::Page => &["decision"][..],
                Look::Agents | Look::Inbox => &[][..],
            };
            for key in keys {
                assert!(verb.arg_keys().contains(key), "{verb} has no {key}");
            }
        }
    }
}
