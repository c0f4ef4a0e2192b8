//! Drawing the console: reads the [`State`] and changes nothing. Times are
//! ages from `now_ms`, which the loop reads from its clock at each draw.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;
use serde_json::Value;

use super::state::{Decision, Prompt, Standing, State, View, KEYS};

/// Draws the whole console.
pub fn draw(frame: &mut Frame<'_>, state: &State, now_ms: i64) {
    let [tabs, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(tab_line(state)), tabs);
    let lines = match state.view {
        View::Inbox => inbox(state, now_ms),
        View::Decision => decision(state, now_ms),
        View::Agents => agents(state),
        View::Trail => trail(state),
        View::Activity => activity(state),
    };
    let title = format!(" {} ", state.view.name());
    let block = Block::default().borders(Borders::ALL).title(title);
    // Keep the selected row on screen.
    let height = usize::from(body.height.saturating_sub(2)).max(1);
    let scroll = selected_line(state).saturating_sub(height - 1);
    let scroll = u16::try_from(scroll).unwrap_or(u16::MAX);
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        body,
    );
    frame.render_widget(Paragraph::new(bottom_line(state)), bottom);
    if state.help {
        help(frame, body);
    }
}

/// The line of the selected row: a run of the Agents view takes a line
/// more per decision it waits on, below the switch and the head.
fn selected_line(state: &State) -> usize {
    if state.view != View::Agents {
        return state.selected;
    }
    let above: usize = state
        .agents
        .iter()
        .take(state.selected)
        .map(|a| 1 + a["waitsOn"].as_array().map_or(0, Vec::len))
        .sum();
    1 + usize::from(state.head.is_some()) + above
}

fn tab_line(state: &State) -> Line<'static> {
    let mut spans = vec![Span::raw(format!("{} ·", state.business))];
    for view in View::ALL {
        let style = if view == state.view {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        };
        spans.push(Span::styled(format!(" {} ", view.name()), style));
    }
    spans.push(Span::raw(format!(
        " · {} waiting on you · ? help",
        state.decisions.len()
    )));
    Line::from(spans)
}

fn bottom_line(state: &State) -> Line<'static> {
    let text = match &state.prompt {
        Prompt::None => state.status.clone(),
        Prompt::Confirm(act) => act.question(),
        Prompt::Note(_, note) => format!("Note (Enter ends): {note}_"),
        Prompt::Role(role) => format!("Message to role (Enter ends): {role}_"),
        Prompt::Body(to, body) => format!("Message to {to} (Enter ends): {body}_"),
        Prompt::Subject(subject) => format!("Trail of (task, decision or message id): {subject}_"),
    };
    Line::from(Span::styled(
        text,
        Style::default().add_modifier(Modifier::BOLD),
    ))
}

/// `"3m"`, `"2h"`: how long ago `ms` was.
fn age(now_ms: i64, ms: Option<i64>) -> String {
    let Some(ms) = ms else {
        return "-".to_owned();
    };
    let s = (now_ms - ms).max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or("-")
}

/// A message's class, or `"a message"` when it has none.
fn class_of(message: &Value) -> &str {
    message["class"].as_str().unwrap_or("a message")
}

fn marked(selected: bool, text: String) -> Line<'static> {
    if selected {
        Line::from(Span::styled(
            format!("> {text}"),
            Style::default().add_modifier(Modifier::REVERSED),
        ))
    } else {
        Line::from(format!("  {text}"))
    }
}

fn inbox(state: &State, now_ms: i64) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if state.decisions.is_empty() && state.messages.is_empty() {
        lines.push(Line::from("Nothing is waiting on you."));
    }
    for (i, d) in state.decisions.iter().enumerate() {
        let blocks = if d.blocking() {
            "BLOCKS a task"
        } else {
            "does not block"
        };
        lines.push(marked(
            state.selected == i,
            format!(
                "{} asks {} on {} · {} · {} · {}",
                d.raiser(),
                str_of(&d.json, "action"),
                str_of(&d.json, "target"),
                str_of(&d.json, "class"),
                age(now_ms, d.raised_ms),
                blocks
            ),
        ));
    }
    for (j, m) in state.messages.iter().enumerate() {
        let i = state.decisions.len() + j;
        lines.push(marked(
            state.selected == i,
            format!(
                "message from {} ({}): {}",
                str_of(m, "from"),
                class_of(m),
                str_of(m, "body")
            ),
        ));
    }
    lines
}

fn decision(state: &State, now_ms: i64) -> Vec<Line<'static>> {
    let Some(open) = &state.open else {
        return vec![Line::from(
            "No decision is open: Enter on one in the inbox, or ].",
        )];
    };
    let d: &Decision = &open.decision;
    let mut lines = Vec::new();
    match open.standing {
        Standing::Waiting => {}
        Standing::Gone => lines.push(bold(
            "NO LONGER WAITING: resolved, withdrawn or superseded. Its keys are disabled.",
        )),
        Standing::Unknown => lines.push(bold(
            "OUTCOME UNKNOWN: the act may have happened. See its trail; nothing is resent.",
        )),
    }
    lines.push(bold(&format!("Question: {}", d.question())));
    lines.push(Line::from(format!(
        "Raised by {} · {} · {} · {}",
        d.raiser(),
        str_of(&d.json, "class"),
        age(now_ms, d.raised_ms),
        if d.blocking() {
            "blocks a task"
        } else {
            "does not block"
        }
    )));
    lines.push(Line::from(""));
    for (i, (key, text)) in d.options().into_iter().enumerate() {
        let chosen = open.chosen == Some(i);
        let mark = if chosen { "[x]" } else { "[ ]" };
        lines.push(marked(chosen, format!("{mark} {} {key}: {text}", i + 1)));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(format!(
        "The raiser's recommendation (theirs, not selected): {}",
        str_of(&d.json, "recommendation")
    )));
    let auth = &d.json["authorization"];
    lines.push(Line::from(format!(
        "Resolving with {} grants one use of {} on {} to {}.",
        str_of(auth, "approvalChoice"),
        str_of(auth, "action"),
        str_of(auth, "target"),
        d.raiser()
    )));
    if let Some(old) = d.json["supersedes"].as_str() {
        lines.push(Line::from(format!("It supersedes decision {old}.")));
    }
    lines.push(Line::from(""));
    lines.push(bold("Trail:"));
    if let Some((subject, records)) = &state.trail {
        if subject == d.id() {
            lines.extend(
                records
                    .iter()
                    .map(|r| Line::from(format!("  {}", sentence(r)))),
            );
        }
    }
    lines
}

fn bold(text: &str) -> Line<'static> {
    Line::from(Span::styled(
        text.to_owned(),
        Style::default().add_modifier(Modifier::BOLD),
    ))
}

fn agents(state: &State) -> Vec<Line<'static>> {
    let switch = match state.launching {
        Some(true) => "on",
        Some(false) => "OFF (L switches it back on)",
        None => "unknown until a run is bound or the switch moves",
    };
    let mut lines = vec![Line::from(format!("Launching: {switch}"))];
    if let Some(head) = &state.head {
        lines.push(Line::from(format!(
            "Evidence: {} records, head {} (mosaic-bus head prints the note to keep)",
            head["size"],
            str_of(head, "head")
        )));
    }
    for (i, a) in state.agents.iter().enumerate() {
        let holding = if a["revoked"] == true {
            "revoked"
        } else if a["holding"] == true {
            "holding"
        } else {
            "not holding"
        };
        // What the run waits on: the open decisions it raised, and who has
        // each one (the human, or the arbiter role it was routed to).
        let waits = a["waitsOn"].as_array().cloned().unwrap_or_default();
        let with = |w: &Value| match str_of(w, "route") {
            "human" => "you".to_owned(),
            role => role.to_owned(),
        };
        let state_word = if waits.iter().any(|w| w["route"] == "human") {
            "WAITING ON YOU".to_owned()
        } else if let Some(w) = waits.first() {
            format!("waiting on {}", with(w))
        } else if a["holding"] == true {
            "running".to_owned()
        } else {
            "idle".to_owned()
        };
        lines.push(marked(
            state.selected == i,
            format!(
                "{} · run {} · {} · pid {} · {holding} · {state_word}",
                str_of(a, "role"),
                str_of(a, "run"),
                str_of(a, "harness"),
                a["pid"]
            ),
        ));
        for w in &waits {
            let blocks = if w["blocking"] == true {
                " · BLOCKS a task"
            } else {
                ""
            };
            lines.push(Line::from(format!(
                "      waits on {}: {} on {}{blocks}",
                with(w),
                str_of(w, "action"),
                str_of(w, "target")
            )));
        }
    }
    lines
}

fn trail(state: &State) -> Vec<Line<'static>> {
    let Some((subject, records)) = &state.trail else {
        return vec![Line::from("No trail yet: t asks for a subject.")];
    };
    let mut lines = vec![Line::from(format!("Trail of {subject}, in write order:"))];
    for (i, r) in records.iter().enumerate() {
        lines.push(marked(state.selected == i, sentence(r)));
    }
    lines
}

fn activity(state: &State) -> Vec<Line<'static>> {
    if state.activity.is_empty() {
        return vec![Line::from("No change since the console started.")];
    }
    state
        .activity
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let about = ["decision", "message", "role", "task"]
                .iter()
                .filter_map(|k| c[*k].as_str().map(|v| format!("{k} {v}")))
                .collect::<Vec<_>>()
                .join(", ");
            marked(
                state.selected == i,
                format!("{} {about}", str_of(c, "kind")),
            )
        })
        .collect()
}

/// One trail record in one sentence.
pub fn sentence(r: &Value) -> String {
    let at = str_of(r, "at");
    let who = match (r["role"].as_str(), r["run"].as_str()) {
        (Some(role), Some(run)) => format!("{role}/{run}"),
        _ => match r["by"].as_str() {
            Some("human") => "the human".to_owned(),
            Some(by) => format!("{by}/{}", str_of(r, "by_run")),
            None => "someone".to_owned(),
        },
    };
    let text = match str_of(r, "kind") {
        "decision.raised" => format!(
            "{} raised \"{}\" ({} on {})",
            {
                let by = &r["raisedBy"];
                format!("{}/{}", str_of(by, "role"), str_of(by, "run"))
            },
            str_of(r, "question"),
            str_of(r, "action"),
            str_of(r, "target")
        ),
        "decision.resolved" => format!("{who} resolved it with {}", str_of(r, "choice")),
        "decision.seen" => format!("{who} marked it seen"),
        "decision.withdrawn" => format!("{who} withdrew it"),
        "decision.superseded" => "it was superseded".to_owned(),
        "human.input" => format!("the human asked {}", str_of(r, "verb")),
        "message.sent" => format!(
            "{} sent {} to {}",
            str_of(r, "from"),
            class_of(r),
            str_of(r, "to")
        ),
        "approval.consumed" => "the approval was spent".to_owned(),
        "action.allowed" => format!("{who} was allowed {}", str_of(r, "action")),
        "action.refused" => format!(
            "{who} was refused {}: {}",
            str_of(r, "verb"),
            str_of(r, "code")
        ),
        kind => format!("{kind} by {who}"),
    };
    let note = r["note"]
        .as_str()
        .map(|n| format!(" (note: {n})"))
        .unwrap_or_default();
    format!("{at} {text}{note}.")
}

fn help(frame: &mut Frame<'_>, area: Rect) {
    let mut lines = vec![bold("Keys (any key closes this help)"), Line::from("")];
    lines.extend(
        KEYS.iter()
            .map(|(key, what)| Line::from(format!("{key:>9}  {what}"))),
    );
    // Inside the view's border.
    let inner = Rect {
        x: area.x + 1,
        y: area.y + 1,
        width: area.width.saturating_sub(2),
        height: area.height.saturating_sub(2),
    };
    let height = u16::try_from(lines.len() + 2)
        .unwrap_or(u16::MAX)
        .min(inner.height);
    let width = inner.width.min(78);
    let popup = Rect {
        x: inner.x + (inner.width - width) / 2,
        y: inner.y,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines)
            .block(Block::default().borders(Borders::ALL).title(" Help "))
            .wrap(Wrap { trim: false }),
        popup,
    );
}
