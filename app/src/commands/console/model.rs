//! The console's typed rows, decoded once from the broker's answers.
//!
//! Every string an agent could have chosen (a question, an option, a
//! body, a target, a role or run name, a note) is held as [`Shown`]:
//! text that went through the domain's one neutraliser
//! ([`mosaic_domain::text`]) when it was decoded, so nothing the console
//! draws or hands on can carry a control or format character. The few
//! strings sent back to the broker (a decision's id, an option's key) are
//! kept as the broker gave them, beside their shown form.

use std::fmt;

use mosaic_domain::evidence::EvidenceKind;
use mosaic_domain::text::{neutralise, neutralise_grant, neutralise_lines};
use serde_json::Value;

/// Untrusted text made drawable: each hidden character is a visible
/// token. The only way to make one is [`Shown::of`] (or
/// [`Shown::lines`]), so a `Shown` never holds a hidden character.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shown(String);

impl Shown {
    /// `text`, neutralised: one line, every hidden character (a newline
    /// too) a token.
    pub fn of(text: &str) -> Shown {
        Shown(neutralise(text).into_owned())
    }

    /// `text` as a grant names it (an action, a target, an option's key):
    /// printable ASCII only, every other character a token, so two
    /// different grants never draw alike.
    pub fn grant(text: &str) -> Shown {
        Shown(neutralise_grant(text).into_owned())
    }

    /// `text`'s lines, each neutralised: its own line breaks stay breaks.
    pub fn lines(text: &str) -> Vec<Shown> {
        neutralise_lines(text)
            .map(|line| Shown(line.into_owned()))
            .collect()
    }

    /// The field `key` of `value`, neutralised, or `None` when it is not
    /// a string.
    fn field(value: &Value, key: &str) -> Option<Shown> {
        value[key].as_str().map(Shown::of)
    }

    /// The drawable text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `role/run`, both shown.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Who {
    /// The role.
    pub role: Shown,
    /// The run, as the broker named it (to find its row in `agents`).
    pub run_raw: String,
    /// The run, shown.
    pub run: Shown,
}

impl Who {
    fn of(value: &Value) -> Who {
        let run_raw = value["run"].as_str().unwrap_or("?").to_owned();
        Who {
            role: Shown::field(value, "role").unwrap_or_else(|| Shown::of("?")),
            run: Shown::of(&run_raw),
            run_raw,
        }
    }
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.role, self.run)
    }
}

/// One option of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Its key, as sent back in `decision.resolve`.
    pub key_raw: String,
    /// Its key, shown.
    pub key: Shown,
    /// Its text, shown on one line.
    pub text: Shown,
}

/// What approving a decision authorizes, as the broker computed it; each
/// word the raiser chose is shown by the grant rule ([`Shown::grant`]),
/// wherever the console draws it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grant {
    /// The action.
    pub action: Shown,
    /// The target, if any.
    pub target: Option<Shown>,
    /// The choice that approves, as the broker names it.
    pub choice_raw: String,
    /// The choice that approves, shown.
    pub choice: Shown,
}

/// An open decision of the human's inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Its id, as the broker gave it.
    pub id: String,
    /// The raiser.
    pub raiser: Who,
    /// Who has it: `human` or the arbiter role.
    pub route: Shown,
    /// Its class (`gated`, `escalated`...).
    pub class: Shown,
    /// Whether it blocks a task.
    pub blocking: bool,
    /// The question's lines.
    pub question: Vec<Shown>,
    /// The options, in the raiser's order.
    pub options: Vec<Choice>,
    /// The raiser's recommendation, on one line.
    pub recommendation: Option<Shown>,
    /// What approving it authorizes.
    pub grant: Grant,
    /// The decision it replaces, if any.
    pub supersedes: Option<Shown>,
    /// When it was raised (ms since the epoch), once its trail was read.
    pub raised_ms: Option<i64>,
    /// Whether the inbox listed it short (no options, its texts cut),
    /// until its trail's raise fills it in ([`Decision::fill`]).
    pub cut: bool,
}

impl Decision {
    /// Decodes an `inbox` item or a `decision.raised` record.
    pub fn decode(value: &Value) -> Decision {
        let auth = &value["authorization"];
        let options = value["options"]
            .as_array()
            .map(|options| {
                options
                    .iter()
                    .map(|o| {
                        let key_raw = o["key"].as_str().unwrap_or_default().to_owned();
                        Choice {
                            key: Shown::of(&key_raw),
                            key_raw,
                            text: Shown::field(o, "text").unwrap_or_default(),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let choice_raw = auth["approvalChoice"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Decision {
            id: value["id"].as_str().unwrap_or_default().to_owned(),
            raiser: Who::of(&value["raisedBy"]),
            route: Shown::field(value, "route").unwrap_or_else(|| Shown::of("human")),
            class: Shown::field(value, "class").unwrap_or_else(|| Shown::of("-")),
            blocking: value["blocking"].as_bool().unwrap_or(false),
            question: Shown::lines(value["question"].as_str().unwrap_or_default()),
            options,
            recommendation: Shown::field(value, "recommendation"),
            grant: Grant {
                action: Shown::grant(auth["action"].as_str().unwrap_or("?")),
                target: auth["target"].as_str().map(Shown::grant),
                choice: Shown::grant(&choice_raw),
                choice_raw,
            },
            supersedes: Shown::field(value, "supersedes"),
            raised_ms: None,
            cut: value["cut"] == true,
        }
    }

    /// A short decision made whole from `trail`, its trail's answer, when
    /// that is the trail of decision `subject` and holds its raise.
    pub fn fill(&mut self, subject: &str, trail: &Value) {
        let raised = trail
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["kind"] == EvidenceKind::DecisionRaised.as_str() && r["id"] == subject);
        if let (true, true, Some(raised)) = (self.cut, self.id == subject, raised) {
            *self = Decision {
                raised_ms: self.raised_ms,
                ..Decision::decode(raised)
            };
        }
    }

    /// The question's first line.
    pub fn first_words(&self) -> &str {
        self.question.first().map_or("", Shown::as_str)
    }
}

/// An unread message to the human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its id, as the broker gave it.
    pub id: String,
    /// The sender: `role/run`, or `human`.
    pub from: Shown,
    /// Its class, if any.
    pub class: Option<Shown>,
    /// The body's lines.
    pub body: Vec<Shown>,
    /// Whether the inbox cut its body, until its trail fills it in
    /// ([`Message::fill`]).
    pub cut: bool,
}

impl Message {
    fn decode(value: &Value) -> Message {
        let from = match (value["from"].as_str(), value["from_run"].as_str()) {
            (Some(role), Some(run)) => Shown::of(&format!("{role}/{run}")),
            (Some(from), None) => Shown::of(from),
            (None, Some(_) | None) => Shown::of("?"),
        };
        Message {
            id: value["id"].as_str().unwrap_or_default().to_owned(),
            from,
            class: Shown::field(value, "class"),
            body: Shown::lines(value["body"].as_str().unwrap_or_default()),
            cut: value["cut"] == true,
        }
    }

    /// A cut message made whole from `trail`, its trail's answer, when that
    /// is the trail of message `subject` and holds its send.
    pub fn fill(&mut self, subject: &str, trail: &Value) {
        let sent = trail
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["kind"] == EvidenceKind::MessageSent.as_str() && r["id"] == subject);
        if let (true, true, Some(body)) = (
            self.cut,
            self.id == subject,
            sent.and_then(|r| r["body"].as_str()),
        ) {
            self.body = Shown::lines(body);
            self.cut = false;
        }
    }

    /// Its class, or `"a message"` when it has none.
    pub fn class_word(&self) -> &str {
        self.class.as_ref().map_or("a message", Shown::as_str)
    }

    /// The body's first line.
    pub fn first_words(&self) -> &str {
        self.body.first().map_or("", Shown::as_str)
    }
}

/// The human's inbox: open decisions, unread messages, and how many more
/// unread messages lie beyond those.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inbox {
    /// The decisions, blocking first, then oldest.
    pub decisions: Vec<Decision>,
    /// The messages, oldest first.
    pub messages: Vec<Message>,
    /// Unread messages beyond `messages` (the `more` item's `unread`).
    pub more: u64,
}

impl Inbox {
    /// Each decision and message cut in this inbox, but filled in `old`
    /// (the inbox read before), taken whole from there.
    pub fn keep_whole(&mut self, old: &Inbox) {
        for d in self.decisions.iter_mut().filter(|d| d.cut) {
            if let Some(whole) = old.decisions.iter().find(|o| o.id == d.id && !o.cut) {
                *d = whole.clone();
            }
        }
        for m in self.messages.iter_mut().filter(|m| m.cut) {
            if let Some(whole) = old.messages.iter().find(|o| o.id == m.id && !o.cut) {
                *m = whole.clone();
            }
        }
    }

    /// Each cut decision and message of `subject` filled from `trail`.
    pub fn fill(&mut self, subject: &str, trail: &Value) {
        self.decisions
            .iter_mut()
            .for_each(|d| d.fill(subject, trail));
        self.messages
            .iter_mut()
            .for_each(|m| m.fill(subject, trail));
    }

    /// Decodes an `inbox` answer; items of a type it does not know are
    /// left out, as the protocol asks of clients.
    pub fn decode(value: &Value) -> Inbox {
        let mut inbox = Inbox::default();
        for item in value.as_array().map_or(&[][..], Vec::as_slice) {
            match item["type"].as_str() {
                Some("decision") => inbox.decisions.push(Decision::decode(item)),
                Some("message") => inbox.messages.push(Message::decode(item)),
                Some("more") => inbox.more = item["unread"].as_u64().unwrap_or(0),
                Some(_) | None => {}
            }
        }
        inbox
    }
}

/// How a run's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, where known.
    pub status: Option<i64>,
    /// The signal that killed it, where known.
    pub signal: Option<i64>,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.status, self.signal) {
            (_, Some(signal)) => write!(f, "KILLED by signal {signal} (crashed)"),
            (Some(0), None) => f.write_str("EXITED with status 0"),
            (Some(status), None) => write!(f, "EXITED with status {status} (crashed)"),
            (None, None) => f.write_str("EXITED (its status is unknown)"),
        }
    }
}

/// An open decision a run raised and waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// Who has it: `human` or the arbiter role.
    pub route: Shown,
    /// Whether the route is the human.
    pub on_human: bool,
    /// Its action.
    pub action: Shown,
    /// Its target.
    pub target: Option<Shown>,
    /// Whether it blocks a task.
    pub blocking: bool,
}

/// One bound run, as `agents` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Its role and run.
    pub who: Who,
    /// Its harness.
    pub harness: Shown,
    /// Its pid, if known.
    pub pid: Option<u64>,
    /// Whether it holds its role.
    pub holding: bool,
    /// Whether its role was revoked.
    pub revoked: bool,
    /// The business's launch switch, as this row carries it.
    pub launching: Option<bool>,
    /// How its process ended, or `None` while it runs.
    pub exited: Option<Exit>,
    /// What it waits on.
    pub waits: Vec<Wait>,
}

impl Run {
    /// Decodes an `agents` answer.
    pub fn decode_all(value: &Value) -> Vec<Run> {
        value
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(|row| row["type"] != "more")
            .map(Run::decode)
            .collect()
    }

    fn decode(a: &Value) -> Run {
        let waits = a["waitsOn"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|w| Wait {
                route: Shown::field(w, "route").unwrap_or_else(|| Shown::of("?")),
                on_human: w["route"] == "human",
                action: Shown::field(w, "action").unwrap_or_else(|| Shown::of("?")),
                target: Shown::field(w, "target"),
                blocking: w["blocking"] == true,
            })
            .collect();
        let exited = a["exited"].is_object().then(|| Exit {
            status: a["exited"]["status"].as_i64(),
            signal: a["exited"]["signal"].as_i64(),
        });
        Run {
            who: Who::of(a),
            harness: Shown::field(a, "harness").unwrap_or_else(|| Shown::of("-")),
            pid: a["pid"].as_u64(),
            holding: a["holding"] == true,
            revoked: a["revoked"] == true,
            launching: a["launching"].as_bool(),
            exited,
            waits,
        }
    }
}

/// A kind of evidence: one of the domain's, or a name it does not know
/// (from a newer broker), shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A kind of the domain's table.
    Known(EvidenceKind),
    /// Another name.
    Other(Shown),
}

impl Kind {
    fn of(value: &Value) -> Kind {
        let text = value["kind"].as_str().unwrap_or("-");
        EvidenceKind::parse(text).map_or_else(|| Kind::Other(Shown::of(text)), Kind::Known)
    }

    /// Whether it is `kind`.
    pub fn is(&self, kind: EvidenceKind) -> bool {
        self == &Kind::Known(kind)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Known(kind) => kind.fmt(f),
            Kind::Other(name) => name.fmt(f),
        }
    }
}

/// One change of the human's feed: a pointer, never content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Its kind.
    pub kind: Kind,
    /// The decision it concerns, as the broker named it.
    pub decision: Option<String>,
    /// What it concerns, shown: `decision ID`, `role dev`...
    pub about: Vec<Shown>,
}

impl Change {
    /// Decodes a `changes` page's changes.
    pub fn decode_page(page: &Value) -> Vec<Change> {
        page["changes"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|c| Change {
                kind: Kind::of(c),
                decision: c["decision"].as_str().map(str::to_owned),
                about: ["decision", "message", "role", "task"]
                    .iter()
                    .filter_map(|k| c[*k].as_str().map(|v| Shown::of(&format!("{k} {v}"))))
                    .collect(),
            })
            .collect()
    }
}

/// One record of a trail, with the fields its sentence may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its kind.
    pub kind: Kind,
    /// When it was written, as the broker wrote it.
    pub at: Shown,
    /// When it was written (ms since the epoch), if readable.
    pub at_ms: Option<i64>,
    /// Who did it: `role/run`, `the human`, or `someone`.
    pub who: Shown,
    /// A raised decision's raiser.
    pub raiser: Option<Who>,
    /// Named fields: `question`, `action`, `target`, `choice`, `verb`,
    /// `code`, `from`, `to`, `class`, `note`, each shown on one line.
    fields: Vec<(&'static str, Shown)>,
}

impl Record {
    /// Decodes a `trail` answer; its last item may count the records one
    /// answer could not hold, which reads as a record of its own.
    pub fn decode_all(value: &Value) -> Vec<Record> {
        value
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|r| match r["records"].as_u64() {
                Some(left) if r["type"] == "more" => Record {
                    kind: Kind::Other(Shown::of(&format!(
                        "{left} more records, past what one answer holds,"
                    ))),
                    at: Shown::of("…"),
                    at_ms: None,
                    who: Shown::of("the broker"),
                    raiser: None,
                    fields: Vec::new(),
                },
                Some(_) | None => Record::decode(r),
            })
            .collect()
    }

    fn decode(r: &Value) -> Record {
        let who = match (r["role"].as_str(), r["run"].as_str()) {
            (Some(role), Some(run)) => format!("{role}/{run}"),
            (Some(_) | None, Some(_) | None) => match r["by"].as_str() {
                Some("human") => "the human".to_owned(),
                Some(by) => format!("{by}/{}", r["by_run"].as_str().unwrap_or("-")),
                None => "someone".to_owned(),
            },
        };
        let at = r["at"].as_str().unwrap_or("-");
        let fields = [
            "question", "action", "target", "choice", "verb", "code", "from", "to", "class", "note",
        ]
        .into_iter()
        .filter_map(|k| Shown::field(r, k).map(|v| (k, v)))
        .collect();
        Record {
            kind: Kind::of(r),
            at: Shown::of(at),
            at_ms: mosaic_domain::Timestamp::parse(at)
                .ok()
                .map(|t| t.unix_ms()),
            who: Shown::of(&who),
            raiser: r["raisedBy"].is_object().then(|| Who::of(&r["raisedBy"])),
            fields,
        }
    }

    /// The field `key`, or `-`.
    pub fn field(&self, key: &str) -> &str {
        self.fields
            .iter()
            .find(|(k, _)| *k == key)
            .map_or("-", |(_, v)| v.as_str())
    }

    /// Whether it has the field `key`.
    pub fn has(&self, key: &str) -> bool {
        self.fields.iter().any(|(k, _)| *k == key)
    }
}
