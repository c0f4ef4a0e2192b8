//! Each verb's argument type: one row of [`verb_args!`](verb_args) per
//! verb of the domain's table ([`Verb`]), next to the types themselves.
//!
//! A type here is the wire shape of a verb's `args` object and nothing
//! else. A client builds the ones it sends (those that derive
//! `Serialize`: the console's requests), so its keys are the parser's.
//! Two things are read off each, so they cannot drift apart:
//! - [`VerbArgs::arg_keys`], the parser's key allow-list (step 5 of
//!   `request.rs`'s order): the fields serde's derive declares, renames
//!   applied, in declaration order;
//! - [`VerbArgs::input_schema`], the JSON schema `schemars` derives (field
//!   docs are the descriptions; `deny_unknown_fields` closes every object
//!   as the parser does), which the MCP tools publish.
//!
//! Which keys are required and how each value is checked stays in the
//! strict hand-written parser (`request.rs`), whose refusal order is a
//! contract; `adapters/tests/wire.rs` checks the two agree.

use std::fmt;

use mosaic_domain::browser::{BrowserAction, ScrollDirection};
use mosaic_domain::evidence::MessageClass;
use mosaic_domain::Verb;
use schemars::generate::SchemaSettings;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// What a verb's arguments look like on the wire.
pub trait VerbArgs {
    /// Every argument key the verb defines, required or optional, as
    /// spelled on the wire; any other key is `unknown-key`.
    fn arg_keys(self) -> &'static [&'static str];

    /// The JSON schema of the verb's `args` object.
    fn input_schema(self) -> Schema;
}

/// Declares each verb's argument type once; the match names every verb,
/// so a new verb does not compile without its row.
macro_rules! verb_args {
    ($($verb:ident => $args:ty,)*) => {
        impl VerbArgs for Verb {
            fn arg_keys(self) -> &'static [&'static str] {
                match self {
                    $(Verb::$verb => fields::<$args>(),)*
                }
            }

            fn input_schema(self) -> Schema {
                match self {
                    $(Verb::$verb => schema::<$args>(),)*
                }
            }
        }
    };
}

verb_args! {
    RoleClaim => NoArgs,
    RoleRelease => NoArgs,
    RoleRevoke => RoleRevokeArgs,
    DecisionRaise => DecisionRaiseArgs,
    DecisionResolve => DecisionResolveArgs,
    DecisionSeen => DecisionNoteArgs,
    DecisionWithdraw => DecisionNoteArgs,
    MessageSend => MessageSendArgs,
    MessageReceive => NoArgs,
    MessageRead => MessageReadArgs,
    EventEmit => EventEmitArgs,
    LaunchRevoke => NoArgs,
    LaunchRestore => NoArgs,
    RunEnd => RunEndArgs,
    Inbox => InboxArgs,
    Tasks => NoArgs,
    Agents => NoArgs,
    Trail => TrailArgs,
    Head => NoArgs,
    History => HistoryArgs,
    Changes => ChangesArgs,
    BrowserRequest => BrowserRequestArgs,
}

// What the schemas say about the broker's strict forms (the parsers in
// `mosaic_domain::ids` and `request.rs` are the authority). Macros, so the
// field docs can splice them in.
macro_rules! role {
    () => {
        "A role instance name of this business: 1 to 64 characters, an ASCII letter or digit, \
         then letters, digits, '.', '_' or '-'."
    };
}
macro_rules! option_key {
    () => {
        "An option key: 1 to 64 ASCII letters, digits, '.', '_' or '-'."
    };
}
macro_rules! subject {
    () => {
        "A strict task ref `vikunja:<project>/<task>` (positive integers), a decision id or a \
         message id (lowercase UUIDs), or a role instance name."
    };
}
macro_rules! selector {
    () => {
        " A CSS selector, 1 to 1024 bytes."
    };
}

const UUID: &str = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
const TASK_REF: &str = "^vikunja:[1-9][0-9]*/[1-9][0-9]*$";
const ACTION: &str = "^[a-z][a-z0-9-]*(\\.[a-z][a-z0-9-]*)*$";

/// No arguments.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// `role.revoke`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleRevokeArgs {
    #[doc = concat!("The role whose holder is revoked. ", role!())]
    pub role: String,
    /// The id of the gated decision, approved by the human, that authorizes this revoke (action role.revoke, target this role).
    #[schemars(regex(pattern = UUID))]
    pub decision: String,
}

/// `decision.raise`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRaiseArgs {
    /// The action to decide on: dot-separated lowercase words, e.g. `repo.merge`. Its class for your role (within-role, cross-role, gated) decides the route.
    #[schemars(length(max = 64), regex(pattern = ACTION))]
    pub action: String,
    /// The question to decide, plain text.
    pub question: String,
    /// The choices offered.
    #[schemars(length(min = 1))]
    pub options: Vec<OptionArg>,
    /// Which option you recommend and why, plain text.
    pub recommendation: String,
    /// Whether work waits on this decision. A blocking decision needs `task_ref`.
    pub blocking: bool,
    /// Which arbiter a cross-role decision goes to: `delivery` (the default) or `technical`.
    pub domain: Option<Arbiter>,
    /// What the action is aimed at (a role, a URL origin, a repository, a branch): 1 to 512 characters without control characters. The approval authorizes exactly this target.
    pub target: Option<String>,
    /// The project the decision belongs to, plain text.
    pub project: Option<String>,
    /// The task the decision is filed under. A strict task ref: `vikunja:<project>/<task>`, both positive integers without sign or leading zeros, e.g. `vikunja:3/17`; anything else is bad-task-ref.
    #[schemars(regex(pattern = TASK_REF))]
    pub task_ref: Option<String>,
    /// A reference to the requirement concerned, plain text.
    pub requirement_ref: Option<String>,
    /// The id of an open decision this one replaces.
    #[schemars(regex(pattern = UUID))]
    pub supersedes: Option<String>,
    #[doc = concat!("Required for a within-role decision, which closes at raise: the option key chosen. ", option_key!())]
    pub choice: Option<String>,
    #[doc = concat!("The option key that counts as approval (default `yes`, which must then be an option). ", option_key!())]
    #[serde(rename = "approvalChoice")]
    pub approval_choice: Option<String>,
}

/// One option of `decision.raise`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptionArg {
    #[doc = concat!("What a resolver picks. ", option_key!())]
    pub key: String,
    /// What the option means.
    pub text: String,
}

/// `decision.raise`'s `domain`: which arbiter a cross-role decision goes to.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Arbiter {
    /// The delivery arbiter (the default).
    Delivery,
    /// The technical arbiter.
    Technical,
}

/// `decision.resolve`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionResolveArgs {
    /// The decision's id.
    #[schemars(regex(pattern = UUID))]
    pub id: String,
    #[doc = concat!("The option key you choose. ", option_key!())]
    pub choice: String,
    /// An optional note, plain text, recorded with the act.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `decision.seen` and `decision.withdraw`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionNoteArgs {
    /// The decision's id.
    #[schemars(regex(pattern = UUID))]
    pub id: String,
    /// An optional note, plain text, recorded with the act.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `message.send`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageSendArgs {
    #[doc = concat!("The recipient: `human` (the business's human) or a role. ", role!())]
    pub to: String,
    /// The message, plain text.
    pub body: String,
    /// What kind of message this is: REQUEST, ASSIGNMENT, REVIEW-REQUEST, REVIEW-RESULT, RESULT, INFO, DECISION or REACTION.
    #[serde(default)]
    #[schemars(schema_with = "message_class")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The id of the message this answers.
    #[schemars(regex(pattern = UUID))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// The id of an earlier message this one corrects.
    #[schemars(regex(pattern = UUID))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrects: Option<String>,
    /// A decision id. Within your role's authority it is a citation; otherwise it must approve this send and is spent by it.
    #[schemars(regex(pattern = UUID))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
}

/// `message.read`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageReadArgs {
    /// The id of a message delivered to your run.
    #[schemars(regex(pattern = UUID))]
    pub id: String,
}

/// `run.end` (the human's).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunEndArgs {
    /// The run to end, as `agents` names it: 1 to 128 characters, an ASCII letter or digit, then letters, digits, '.', '_' or '-'.
    pub run: String,
}

/// `event.emit`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventEmitArgs {
    /// Always `action.allowed`.
    #[schemars(extend("const" = "action.allowed"))]
    pub kind: String,
    /// The observation: {action: "routine", target?}.
    pub body: EventBody,
    #[doc = concat!("What it is filed under. ", subject!())]
    pub subject: Option<String>,
}

/// `event.emit`'s `body`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventBody {
    /// Always `routine`.
    #[schemars(extend("const" = "routine"))]
    pub action: String,
    /// What the observation is about: 1 to 512 characters without control characters.
    pub target: Option<String>,
}

/// `inbox`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxArgs {
    /// A decision listed in your last inbox: the decisions listed start after it, in the inbox's order (the next page, when the last item counted `decisions` left out). Leave it out for the first page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// `trail`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrailArgs {
    #[doc = concat!("Whose trail. ", subject!())]
    pub subject: String,
}

/// `history`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    /// The `seq` of the last row of the page before: list the closings older than it. Leave it out for the newest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
}

/// `changes`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangesArgs {
    /// The cursor of your last answer: wait for changes after it. Leave it out to get the current cursor at once, with no changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// How long to wait when nothing concerns you yet, in milliseconds (default 30000; clamped to 1000 to 120000).
    #[serde(rename = "timeoutMs")]
    #[schemars(range(min = 1000, max = 120000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `browser.request`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowserRequestArgs {
    /// The browser action.
    #[schemars(schema_with = "browser_action")]
    pub action: String,
    /// The action's parameters (absent is {}), only those it takes: open {url, viewport?}, snapshot {selector?}, click {selector} or {text}, type {selector, value, submit?}, scroll {direction} or {selector}, back {}, forward {}, inspect {selector}, capture {label?}, resize {viewport}.
    pub parameters: Option<BrowserParameters>,
    /// How long to wait for the pane, in milliseconds (default 45000 for open, 20000 otherwise; clamped to 1000 to 120000).
    #[serde(rename = "timeoutMs")]
    #[schemars(range(min = 1000, max = 120000))]
    pub timeout_ms: Option<u64>,
    /// When browser actions are not within your role's authority: a decision approving `browser.<action>` (for open, on the URL's origin), spent by this request.
    #[schemars(regex(pattern = UUID))]
    pub decision: Option<String>,
}

/// `browser.request`'s `parameters`: every key some action takes.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowserParameters {
    /// open: an absolute http or https URL.
    pub url: Option<String>,
    /// open (optional), resize: the view size.
    pub viewport: Option<Viewport>,
    #[doc = concat!("snapshot (optional, the part to describe), click, type, scroll (the element to bring into view), inspect:", selector!())]
    pub selector: Option<String>,
    /// click: the visible text of the element to click, 1 to 1024 bytes.
    pub text: Option<String>,
    /// type: the text to enter, at most 64 KiB.
    pub value: Option<String>,
    /// type: submit the element's form afterwards.
    pub submit: Option<bool>,
    /// scroll: one step up, down, left or right, or to the top or bottom of the page.
    #[serde(default)]
    #[schemars(schema_with = "scroll_direction")]
    pub direction: Option<String>,
    /// capture: a label for the image, 1 to 256 bytes.
    pub label: Option<String>,
}

/// A browser viewport in CSS pixels.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Viewport {
    /// Width in CSS pixels, 1 to 10000.
    #[schemars(range(min = 1, max = 10000))]
    pub width: u32,
    /// Height in CSS pixels, 1 to 10000.
    #[schemars(range(min = 1, max = 10000))]
    pub height: u32,
}

fn message_class(_: &mut SchemaGenerator) -> Schema {
    let names = MessageClass::ALL.map(MessageClass::as_str);
    json_schema!({"type": "string", "enum": names})
}

fn browser_action(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "enum": BrowserAction::NAMES})
}

fn scroll_direction(_: &mut SchemaGenerator) -> Schema {
    let names = ScrollDirection::ALL.map(ScrollDirection::as_str);
    json_schema!({"type": "string", "enum": names})
}

/// `T`'s schema with every subschema inlined (no `$ref`), without the
/// meta-schema and the Rust type name, and with `properties` even when
/// there are none. (`#[serde(default)]` beside a `schema_with` keeps an
/// `Option` field out of `required`.)
fn schema<T: JsonSchema>() -> Schema {
    let mut schema = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<T>();
    schema.remove("title");
    if schema.get("properties").is_none() {
        schema.insert("properties".to_owned(), serde_json::json!({}));
    }
    schema
}

/// The field names serde's derive gives `T`'s `deserialize_struct`, read
/// by a deserializer that records them and stops.
fn fields<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    let mut keys: &'static [&'static str] = &[];
    // The deserializer always stops with `Fields`'s error, after recording.
    let _ = T::deserialize(Fields(&mut keys));
    keys
}

/// A deserializer that records the fields of the struct asked for.
struct Fields<'a>(&'a mut &'static [&'static str]);

/// `Fields`' only answer: there is no data, by design.
#[derive(Debug)]
struct NoData;

impl fmt::Display for NoData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no data")
    }
}

impl std::error::Error for NoData {}

impl de::Error for NoData {
    fn custom<T: fmt::Display>(_: T) -> Self {
        NoData
    }
}

impl<'de> Deserializer<'de> for Fields<'_> {
    type Error = NoData;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, NoData> {
        *self.0 = fields;
        Err(NoData)
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, NoData> {
        Err(NoData)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}
