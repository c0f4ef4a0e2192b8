//! The grant area: what resolving the open decision authorizes, in the
//! console's own words, from the `authorization` the broker returned; the
//! confirm prompt that names the grant; and the smallest terminal on which
//! both, and the options, are shown whole.
//!
//! The state ([`super::state`]) and the drawing ([`super::render`]) both
//! read [`need`], so "`y` resolves only when the whole prompt is on
//! screen" is one rule, not two that could drift apart; its height is
//! the layout's ([`super::layout::decision_height`]).

use super::layout;
use super::lines::width;
use super::model::{Decision, Exit, Run, Shown};

/// Whether the raiser's process still runs, as `agents` last said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Raiser {
    /// Its run is bound and its process runs.
    Alive {
        /// Its pid.
        pid: u32,
    },
    /// Its process ended.
    Exited(Exit),
    /// `agents` lists no such run (its role was released, or the list is
    /// not read yet).
    Unknown,
}

impl Raiser {
    /// The raiser of `decision` among `runs`.
    pub fn of(decision: &Decision, runs: &[Run]) -> Raiser {
        match runs
            .iter()
            .find(|r| r.who.run_raw == decision.raiser.run_raw)
        {
            Some(run) => match run.exited {
                Some(exit) => Raiser::Exited(exit),
                None => Raiser::Alive { pid: run.pid },
            },
            None => Raiser::Unknown,
        }
    }

    fn words(&self) -> String {
        match self {
            Raiser::Alive { pid } => format!("alive (pid {pid})"),
            Raiser::Exited(exit) => format!("GONE, {exit}"),
            Raiser::Unknown => "not among the bound runs".to_owned(),
        }
    }
}

/// `action on target`, or the action alone.
fn action_on(decision: &Decision) -> String {
    let grant = &decision.grant;
    match &grant.target {
        Some(target) => format!("{} on {target}", grant.action),
        None => format!("{} (no target)", grant.action),
    }
}

/// The grant area's lines, in the console's words only; every word the
/// raiser chose in them (the action, the target, an option's key) is
/// drawn by the grant rule, printable ASCII only, so two different grants
/// never draw alike.
pub fn lines(decision: &Decision, raiser: &Raiser, chosen: Option<usize>) -> Vec<String> {
    let blocks = if decision.blocking {
        "blocks a task"
    } else {
        "does not block"
    };
    let choice = match chosen.and_then(|i| decision.options.get(i).map(|c| (i, c))) {
        Some((i, c)) if c.key_raw == decision.grant.choice_raw => {
            format!(
                "Selected {} {}: resolving with it GRANTS the above.",
                i + 1,
                decision.grant.choice
            )
        }
        Some((i, c)) => format!(
            "Selected {} {}: resolving with it grants nothing.",
            i + 1,
            Shown::grant(c.key_raw.as_str())
        ),
        None => "Nothing selected: a digit selects an option; nothing is sent.".to_owned(),
    };
    vec![
        format!(
            "Approving ({}) grants {} {}, once.",
            decision.grant.choice,
            decision.raiser,
            action_on(decision)
        ),
        format!("Raiser {}: {}.", decision.raiser, raiser.words()),
        format!("Route {} · {} · {blocks}.", decision.route, decision.class),
        decision.supersedes.as_ref().map_or_else(
            || "Supersedes nothing.".to_owned(),
            |old| format!("Supersedes decision {old}."),
        ),
        choice,
    ]
}

/// The confirm prompt for resolving with option `index`: it names the
/// grant (or says there is none), never the question, each word the
/// raiser chose drawn by the grant rule. Its length is the decision's
/// alone; [`prompt_with`] adds what the human needs to see before `y`.
pub fn prompt(decision: &Decision, index: usize) -> String {
    let Some(choice) = decision.options.get(index) else {
        return String::new();
    };
    if choice.key_raw == decision.grant.choice_raw {
        format!(
            "Grant {} to {} (choice {})? y/n",
            action_on(decision),
            decision.raiser,
            decision.grant.choice
        )
    } else {
        format!(
            "Resolve with {}, granting nothing to {}? y/n",
            Shown::grant(choice.key_raw.as_str()),
            decision.raiser
        )
    }
}

/// The confirm prompt as drawn on a bottom line of `columns` columns: it
/// warns first when the raiser is gone, and shows the note the human
/// typed (`e`) before `y/n`, cut to the columns left. The warning counts
/// in [`need`], so the grant and `y/n` always fit; the note is the only
/// part cut, and then ends in `…` (or is left out where no character of
/// it fits).
pub fn prompt_with(
    decision: &Decision,
    index: usize,
    raiser: &Raiser,
    note: &str,
    columns: usize,
) -> String {
    let asked = format!("{}{}", warning(raiser), prompt(decision, index));
    let Some(grant) = asked.strip_suffix(" y/n") else {
        return asked;
    };
    if note.is_empty() {
        return asked;
    }
    let note = Shown::of(note);
    let whole = format!("{grant} Note: \"{note}\". y/n");
    if width(&whole) <= columns {
        return whole;
    }
    // The note cut from its end until the prompt fits.
    let mut kept = note.to_string();
    while !kept.is_empty() {
        kept.pop();
        let cut = format!("{grant} Note: \"{kept}…\". y/n");
        if width(&cut) <= columns {
            return cut;
        }
    }
    asked
}

/// The warning said before the grant when the raiser is gone: short, so
/// that the prompt still fits an 80-column terminal (the grant area says
/// how it went).
fn warning(raiser: &Raiser) -> &'static str {
    match raiser {
        Raiser::Exited(_) => "Raiser GONE: ",
        Raiser::Alive { .. } | Raiser::Unknown => "",
    }
}

/// The terminal a decision needs to be resolvable: every grant line and
/// every option's line in its frame, a question pane of at least one line,
/// and the longest prompt it could ask on the bottom line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

impl Need {
    /// Whether a `width`×`height` terminal is enough.
    pub fn fits(self, width: u16, height: u16) -> bool {
        width >= self.width && height >= self.height
    }
}

/// What `decision` needs, with a banner line above it or not.
pub fn need(decision: &Decision, raiser: &Raiser, banner: bool) -> Need {
    let grant = lines(decision, raiser, None)
        .iter()
        .chain(
            (0..decision.options.len())
                .flat_map(|i| lines(decision, raiser, Some(i)).pop())
                .collect::<Vec<_>>()
                .iter(),
        )
        .map(|line| layout::framed_width(width(line)))
        .max()
        .unwrap_or(0);
    let prompt = (0..decision.options.len())
        .map(|i| width(&prompt_with(decision, i, raiser, "", 0)))
        .max()
        .unwrap_or(0);
    Need {
        width: u16::try_from(grant.max(prompt).max(20)).unwrap_or(u16::MAX),
        height: layout::decision_height(decision.options.len(), banner),
    }
}

/// The raiser's words pane, before wrapping: the question, then every
/// option whole (the options pane above cuts each to one line), then the
/// recommendation. The console's own words here are only the two rules
/// between the parts, each alone on its line.
pub fn raisers_words(decision: &Decision) -> Vec<String> {
    let mut lines: Vec<String> = decision.question.iter().map(Shown::to_string).collect();
    lines.push(String::new());
    lines.push("── the options, whole ──".to_owned());
    lines.extend(
        decision
            .options
            .iter()
            .enumerate()
            .map(|(i, c)| option_line(i, &c.key, &c.text, false)),
    );
    if let Some(recommendation) = &decision.recommendation {
        lines.push(String::new());
        lines.push("── the raiser's recommendation (theirs, not selected) ──".to_owned());
        lines.push(recommendation.to_string());
    }
    lines
}

/// An option's line in the options pane: the digit is the console's, the
/// key and text the raiser's.
pub fn option_line(index: usize, key: &Shown, text: &Shown, chosen: bool) -> String {
    let mark = if chosen { "[x]" } else { "[ ]" };
    format!("{mark} {} {key}: {text}", index + 1)
}
