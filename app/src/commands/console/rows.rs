//! Each list row's words, as the console draws them: the drawing draws
//! them, and the filter (`/`) matches them, so a row is kept exactly when
//! the text the human reads in it holds what was typed. A row's age is
//! drawn beside its words (it changes with the clock, which the state
//! never reads), so no filter matches an age.

use super::doing::{self, Doing, Life};
use super::history::Past;
use super::model::{Change, Decision, Message, Run, Shown, Wait};

/// An inbox row for a decision: kind, who, the grant, `age`, the first
/// words.
pub fn decision_row(d: &Decision, age: &str) -> String {
    let blocks = if d.blocking { "BLOCKS" } else { "-" };
    let target = d.grant.target.as_ref().map_or("-", Shown::as_str);
    format!(
        "decision · {} · {} on {target} · {blocks} · {age} · {}",
        d.raiser,
        d.grant.action,
        d.first_words()
    )
}

/// An inbox row for a message: who, its class, the first words.
pub fn message_row(m: &Message) -> String {
    format!(
        "message  · {} · {} · {}",
        m.from,
        m.class_word(),
        m.first_words()
    )
}

/// Whom a wait waits on: `you`, or the role its decision was routed to.
fn waits_on(w: &Wait) -> String {
    if w.on_human {
        "you".to_owned()
    } else {
        w.route.to_string()
    }
}

/// A run's state in words: how it ended (the broker's end, with `up`'s
/// cause where it told one), or what it waits on or does.
pub fn run_words(a: &Run, life: Option<&Life>, doing: Option<&Doing>) -> String {
    // An ended run waits on nothing any more: say how it ended instead.
    // An open decision says more than what its harness is doing (its loop
    // waits on the feed for the answer).
    if let Some(life) = life.filter(|l| l.ended) {
        life.words.clone()
    } else if let Some(ended) = a.ended {
        ended.to_string()
    } else if let Some(life) = life.filter(|l| l.sleeping) {
        // Its program exited with nothing to do: the broker's record of
        // that exit is no end of the run, and a decision it raised still
        // waits.
        match a.waits.iter().find(|w| w.on_human).or(a.waits.first()) {
            Some(w) if w.on_human => format!("{}, WAITING ON YOU", life.words),
            Some(w) => format!("{}, waiting on {}", life.words, waits_on(w)),
            None => life.words.clone(),
        }
    } else if let Some(exit) = a.exited {
        exit.to_string()
    } else if a.waits.iter().any(|w| w.on_human) {
        "WAITING ON YOU".to_owned()
    } else if let Some(w) = a.waits.first() {
        format!("waiting on {}", waits_on(w))
    } else if let Some(life) = life.filter(|l| !l.running) {
        life.words.clone()
    } else if let Some(doing) = doing {
        doing::word(doing)
    } else if a.holding || life.is_some() {
        "running".to_owned()
    } else {
        "idle".to_owned()
    }
}

/// An Agents row: what the run is doing first, so a narrow screen still
/// shows it, then its harness, its process and whether it holds its role.
pub fn agent_row(a: &Run, life: Option<&Life>, doing: Option<&Doing>) -> String {
    let holding = if a.revoked {
        "revoked"
    } else if a.holding {
        "holding"
    } else {
        "not holding"
    };
    let life_ended = life.is_some_and(|l| l.ended);
    let pid = match (a.exited, a.ended) {
        (None, None) if !life_ended => format!("pid {}", a.pid),
        (None, None) | (Some(_), _) | (_, Some(_)) => format!("was pid {}", a.pid),
    };
    format!(
        "{} · run {} · {} · {} · {pid} · {holding}",
        a.who.role,
        a.who.run,
        run_words(a, life, doing),
        a.harness
    )
}

/// A line under an Agents row: a decision the run waits on.
pub fn wait_line(w: &Wait) -> String {
    let blocks = if w.blocking { " · BLOCKS a task" } else { "" };
    format!(
        "      waits on {}: {} on {}{blocks}",
        waits_on(w),
        w.action,
        w.target.as_ref().map_or("-", Shown::as_str)
    )
}

/// An Activity row: the change's kind in words, and what it concerns.
pub fn change_row(c: &Change) -> String {
    let about: Vec<&str> = c.about.iter().map(Shown::as_str).collect();
    let kind = c.kind.to_string().replace(['.', '_'], " ");
    format!("{kind}: {}", about.join(", "))
}

/// A History row: `age` ago, how it closed and by whom, the raiser, the
/// action on its target, and whether it blocked a task.
pub fn past_row(p: &Past, age: &str) -> String {
    let blocks = if p.blocking { " · BLOCKED" } else { "" };
    let target = p.target.as_ref().map_or("-", Shown::as_str);
    format!(
        "{age} ago · {} · {} · {} on {target}{blocks}",
        p.how_words(),
        p.raiser,
        p.action,
    )
}
