//! Drawing the console: reads the [`State`] and changes nothing. Times are
//! ages from `now_ms`, which the loop reads from its clock at each draw.
//!
//! Every agent string reaches this module as a [`super::model::Shown`],
//! already neutralised. Text is wrapped by [`super::lines::wrap`], never by
//! the widget, so each pane knows how many lines it draws: a list's selection
//! stays on screen, and a pane clips what does not fit instead of pushing
//! the console's own lines away.

use ratatui::backend::{Backend, ClearType};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::{Frame, Terminal};

use super::act::Act;
use super::doing::Life;
use super::grant::{self, Raiser};
use super::layout::{self, inner};
use super::lines::wrap;
use super::model::{Run, Shown};
use super::rows::{
    agent_row, change_row, decision_row, message_row, past_row, run_words, wait_line,
};
use super::sentence::sentence;
use super::state::{DecisionState, Prompt, Shows, State, View, KEYS};

/// Draws a frame of `state` on `terminal`. When what the screen shows
/// changed since `last` (another view, selection, scroll or open
/// subject), the whole screen is cleared first: ratatui writes only the
/// cells it thinks changed, and a terminal that drew a character wider or
/// narrower than ratatui counted may hold cells of the earlier view that
/// ratatui believes blank.
///
/// # Errors
/// The backend's.
pub fn redraw<B: Backend>(
    terminal: &mut Terminal<B>,
    state: &State,
    last: &mut Option<Shows>,
    now_ms: i64,
) -> Result<(), B::Error> {
    let shows = state.shows();
    if last.as_ref() != Some(&shows) {
        // `Terminal::clear` would ask the terminal where its cursor is (a
        // round trip through the key reader's input); erasing the screen
        // and forgetting the last frame draws every cell just the same.
        terminal.backend_mut().clear_region(ClearType::All)?;
        terminal.swap_buffers();
        *last = Some(shows);
    }
    terminal.draw(|frame| draw(frame, state, now_ms))?;
    Ok(())
}

/// Draws the whole console.
pub fn draw(frame: &mut Frame<'_>, state: &State, now_ms: i64) {
    let area = frame.area();
    let layout::Screen {
        tabs,
        banner,
        body,
        bottom,
    } = layout::screen(area.width, area.height, state.offline());
    frame.render_widget(Paragraph::new(tab_line(state, tabs.width)), tabs);
    if state.offline() {
        frame.render_widget(
            Paragraph::new(reversed(&format!(
                "BROKER UNREACHABLE at {}: read-only, reconnecting…",
                Shown::of(state.socket())
            ))),
            banner,
        );
    }
    match state.view() {
        View::Inbox => inbox(frame, state, now_ms, body),
        View::Decision => decision(frame, state, now_ms, body),
        View::Message => message(frame, state, body),
        View::Agents => list(
            frame,
            &filtered(
                state,
                " Agents: Enter opens a run, x ends it, S starts an ended one again ",
            ),
            &agents(state, now_ms),
            body,
        ),
        View::Run => {
            let rows = wrapped(run(state, now_ms), inner(body).width);
            list(frame, " Run ", &rows, body);
        }
        View::Trail | View::Activity if state.detail().is_some() => detail(frame, state, body),
        View::Trail => list(
            frame,
            &filtered(state, " Trail: Enter opens a record whole "),
            &trail(state),
            body,
        ),
        View::Activity => list(
            frame,
            &filtered(state, " Activity: Enter opens a change whole "),
            &activity(state),
            body,
        ),
        View::History => list(
            frame,
            &filtered(state, " History: Enter opens a decision's trail "),
            &history(state, now_ms),
            body,
        ),
    }
    frame.render_widget(
        Paragraph::new(bottom_line(state, usize::from(bottom.width))),
        bottom,
    );
    if state.help() {
        help(frame, area);
    }
}

/// The business, every tab `Tab` visits (the current one reversed), how
/// many decisions wait and where the help is, within `columns`: past them,
/// the other tabs are named by their first three letters, then the
/// business is cut, so no tab and never `? help` falls off the edge.
fn tab_line(state: &State, columns: u16) -> Line<'static> {
    let waiting = state.inbox().decisions.len() as u64 + state.inbox().left;
    let tail = format!(" · {waiting} waiting · ? help");
    let business = Shown::of(state.business()).to_string();
    let line = |short: bool, business: &str| {
        let mut spans = vec![Span::raw(format!("{business} ·"))];
        for view in state.tabs() {
            let current = view == state.view();
            let name: String = if short && !current {
                view.name().chars().take(3).collect()
            } else {
                view.name().to_owned()
            };
            let style = if current {
                Style::default().add_modifier(Modifier::REVERSED)
            } else {
                Style::default()
            };
            spans.push(Span::styled(format!(" {name} "), style));
        }
        spans.push(Span::raw(tail.clone()));
        Line::from(spans)
    };
    let columns = usize::from(columns);
    let full = line(false, &business);
    if full.width() <= columns {
        return full;
    }
    let short = line(true, &business);
    let over = short.width().saturating_sub(columns);
    if over == 0 {
        return short;
    }
    let keep = business.chars().count().saturating_sub(over + 1).max(1);
    let cut: String = business.chars().take(keep).chain(['…']).collect();
    line(true, &cut)
}

fn bottom_line(state: &State, columns: usize) -> Line<'static> {
    let small = state.view() == View::Decision
        && state
            .open()
            .as_ref()
            .is_some_and(|o| o.state == DecisionState::Waiting)
        && !state.resolvable_on_screen();
    let text = match state.prompt() {
        Prompt::None | Prompt::Confirm(_) if small => {
            "Terminal too small to resolve: enlarge it.".to_owned()
        }
        Prompt::None => state.status().to_owned(),
        Prompt::Confirm(Act::Resolve {
            decision,
            index,
            note,
        }) => grant::prompt_with(
            decision,
            *index,
            &Raiser::of(decision, state.agents()),
            note,
            columns,
        ),
        Prompt::Confirm(act) => act.question(),
        Prompt::Note(_, note) => format!("Note (Enter ends): {note}_"),
        Prompt::Role(role) => format!("Message to role (Enter ends): {role}_"),
        Prompt::Body(to, body) => format!("Message to {to} (Enter ends): {body}_"),
        Prompt::Subject(subject) => format!("Trail of (task, decision or message id): {subject}_"),
        Prompt::Filter(text) => format!("Filter (Enter keeps, Esc clears): {}_", Shown::of(text)),
    };
    bold(&text)
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

fn marked(selected: bool, text: &str) -> Line<'static> {
    if selected {
        reversed(&format!("> {text}"))
    } else {
        Line::from(format!("  {text}"))
    }
}

fn bold(text: &str) -> Line<'static> {
    Line::from(Span::styled(
        text.to_owned(),
        Style::default().add_modifier(Modifier::BOLD),
    ))
}

fn reversed(text: &str) -> Line<'static> {
    Line::from(Span::styled(
        text.to_owned(),
        Style::default().add_modifier(Modifier::REVERSED),
    ))
}

fn framed(title: &str) -> Block<'static> {
    Block::default()
        .borders(Borders::ALL)
        .title(title.to_owned())
}

/// Draws `lines` in a frame, from `scroll` (held so that the last line
/// stays at the bottom), clipped to it.
fn pane(frame: &mut Frame<'_>, title: &str, lines: Vec<String>, scroll: usize, area: Rect) {
    let height = usize::from(inner(area).height);
    let scroll = scroll.min(lines.len().saturating_sub(height));
    let shown: Vec<Line<'static>> = lines
        .into_iter()
        .skip(scroll)
        .take(height)
        .map(Line::from)
        .collect();
    frame.render_widget(Paragraph::new(shown).block(framed(title)), area);
}

/// Draws a list, one line per entry, scrolled so the selected line (an
/// entry may take several lines) stays on screen.
fn list(frame: &mut Frame<'_>, title: &str, rows: &Rows, area: Rect) {
    let height = usize::from(inner(area).height).max(1);
    let at = rows.selected_line.unwrap_or(0);
    let scroll = at.saturating_sub(height - 1);
    let lines: Vec<Line<'static>> = rows
        .lines
        .iter()
        .skip(scroll)
        .take(height)
        .cloned()
        .collect();
    frame.render_widget(Paragraph::new(lines).block(framed(title)), area);
}

/// A list's frame title, after the filter and how many rows it keeps
/// when one narrows the list: a shortened list never passes for the whole.
fn filtered(state: &State, title: &str) -> String {
    match (state.filter(), state.kept()) {
        (Some(filter), Some((kept, all))) => format!(
            " filter: {} ({} of {all}) ·{title}",
            Shown::of(filter),
            kept.len()
        ),
        (Some(_) | None, _) => title.to_owned(),
    }
}

/// Which rows of the current list are drawn, by index: all, or those its
/// filter keeps.
fn shown(state: &State) -> impl Fn(usize) -> bool {
    let kept = state.kept().map(|(kept, _)| kept);
    move |row| kept.as_ref().is_none_or(|kept| kept.contains(&row))
}

/// `rows` with each line wrapped to `columns`, in its style: the Run
/// view shows every field of its run whole.
fn wrapped(rows: Rows, columns: u16) -> Rows {
    let mut out = Rows::new();
    for (at, line) in rows.lines.into_iter().enumerate() {
        if rows.selected_line == Some(at) {
            out.selected_line = Some(out.lines.len());
        }
        let style = line
            .spans
            .first()
            .map_or(line.style, |span| line.style.patch(span.style));
        let text: String = line
            .spans
            .iter()
            .map(|span| span.content.as_ref())
            .collect();
        for piece in wrap([text.as_str()], columns) {
            out.lines.push(Line::from(Span::styled(piece, style)));
        }
    }
    out
}

/// The Trail's or the Activity view's row opened whole, wrapped and
/// scrolled.
fn detail(frame: &mut Frame<'_>, state: &State, area: Rect) {
    let Some(detail) = state.detail() else {
        return;
    };
    let title = match detail.opens() {
        Some(_) => " Whole: Enter opens what it names, j/k PgUp/PgDn scroll, Esc back ",
        None => " Whole: j/k PgUp/PgDn scroll, Esc back to the list ",
    };
    let lines = detail.lines();
    let text = wrap(lines.iter().map(String::as_str), inner(area).width);
    pane(frame, title, text, state.scroll(), area);
}

/// A list's lines and which one holds the selection.
struct Rows {
    lines: Vec<Line<'static>>,
    selected_line: Option<usize>,
}

impl Rows {
    fn new() -> Rows {
        Rows {
            lines: Vec::new(),
            selected_line: None,
        }
    }

    fn push(&mut self, line: Line<'static>) {
        self.lines.push(line);
    }

    fn row(&mut self, selected: bool, text: &str) {
        if selected {
            self.selected_line = Some(self.lines.len());
        }
        self.lines.push(marked(selected, text));
    }
}

fn inbox(frame: &mut Frame<'_>, state: &State, now_ms: i64, area: Rect) {
    let mut rows = Rows::new();
    if !state.is_loaded() {
        rows.push(Line::from("Reading the inbox…"));
    } else if state.inbox().decisions.is_empty() && state.inbox().messages.is_empty() {
        rows.push(Line::from("Nothing is waiting on you."));
    }
    let shown = shown(state);
    for (i, d) in state.inbox().decisions.iter().enumerate() {
        if !shown(i) {
            continue;
        }
        rows.row(
            state.selected() == i,
            &decision_row(d, &age(now_ms, d.raised_ms)),
        );
        // A blocking decision stands out: yellow, or bold without colour.
        if d.blocking {
            if let Some(last) = rows.lines.pop() {
                let style = if state.colour() {
                    Style::default().fg(Color::Yellow)
                } else {
                    Style::default().add_modifier(Modifier::BOLD)
                };
                rows.lines.push(last.patch_style(style));
            }
        }
    }
    for (j, m) in state.inbox().messages.iter().enumerate() {
        let i = state.inbox().decisions.len() + j;
        if !shown(i) {
            continue;
        }
        rows.row(state.selected() == i, &message_row(m));
    }
    if state.inbox().more > 0 {
        rows.push(bold(&format!(
            "  … {} more unread: r marks one read, and the next shows",
            state.inbox().more
        )));
    }
    if state.inbox().left > 0 {
        rows.push(bold(&format!(
            "  … {} more waiting decisions beyond these: ] reaches each in turn",
            state.inbox().left
        )));
    }
    let [top, bottom] = layout::inbox(area);
    // The counts stay in the frame's title, on screen wherever the
    // selection is.
    let mut title = " Inbox ".to_owned();
    if state.inbox().left > 0 {
        title.push_str(&format!(
            "· {} more decisions beyond these ",
            state.inbox().left
        ));
    }
    if state.inbox().more > 0 {
        title.push_str(&format!(
            "· {} more unread messages beyond these ",
            state.inbox().more
        ));
    }
    list(frame, &filtered(state, &title), &rows, top);
    let width = inner(bottom).width;
    let decisions = state.inbox().decisions.len();
    if let Some(d) = state.inbox().decisions.get(state.selected()) {
        let mut text: Vec<&str> = d.question.iter().map(Shown::as_str).collect();
        text.push("");
        let options: Vec<String> = d
            .options
            .iter()
            .enumerate()
            .map(|(i, c)| grant::option_line(i, &c.key, &c.text, false))
            .collect();
        text.extend(options.iter().map(String::as_str));
        let title = format!(
            " The raiser's question and options (Enter opens; grant: {} on {}) ",
            d.grant.action,
            d.grant.target.as_ref().map_or("-", Shown::as_str)
        );
        pane(frame, &title, wrap(text, width), state.scroll(), bottom);
    } else if let Some(m) = state
        .selected()
        .checked_sub(decisions)
        .and_then(|i| state.inbox().messages.get(i))
    {
        let title = format!(
            " Message from {} ({}): Enter opens, r marks it read ",
            m.from,
            m.class_word()
        );
        let body = wrap(m.body.iter().map(Shown::as_str), width);
        pane(frame, &title, body, state.scroll(), bottom);
    } else {
        pane(frame, " Detail ", Vec::new(), 0, bottom);
    }
}

fn message(frame: &mut Frame<'_>, state: &State, area: Rect) {
    let Some(m) = state.message() else {
        pane(
            frame,
            " Message ",
            vec!["No message is open.".to_owned()],
            0,
            area,
        );
        return;
    };
    let cites = if m.cites.is_some() {
        "Enter opens the decision it cites, "
    } else {
        ""
    };
    let title = format!(
        " Message from {} ({}): {cites}r marks it read, j/k scroll, Esc back ",
        m.from,
        m.class_word()
    );
    let body = wrap(m.body.iter().map(Shown::as_str), inner(area).width);
    pane(frame, &title, body, state.scroll(), area);
}

/// The decision view: the grant area, fixed and framed, in the console's
/// words; then the raiser's words in their own clipped panes: the options,
/// one line each, and the question with the options whole and the
/// recommendation, which alone scrolls.
fn decision(frame: &mut Frame<'_>, state: &State, now_ms: i64, area: Rect) {
    let (Some(open), Some(raiser)) = (state.open(), state.raiser()) else {
        pane(
            frame,
            " Decision ",
            vec!["No decision is open: Enter on one in the inbox, or ].".to_owned()],
            0,
            area,
        );
        return;
    };
    let d = &open.decision;
    let live = open.state == DecisionState::Waiting;
    let size = frame.area();
    if live
        && !state
            .need()
            .is_some_and(|n| n.fits(size.width, size.height))
    {
        let need = state.need().map_or((0, 0), |n| (n.width, n.height));
        let words = format!(
            "The terminal is {}x{}: too small to show this decision's grant, its options and \
             the question that confirms it, each whole. Make it at least {}x{}. Until then \
             nothing here resolves it.",
            size.width, size.height, need.0, need.1
        );
        pane(
            frame,
            " Decision ",
            wrap([words.as_str()], inner(area).width),
            0,
            area,
        );
        return;
    }
    let [grant_area, options_area, question_area] = layout::decision(area, d.options.len());
    let mut grant_lines = grant::lines(d, &raiser, open.chosen);
    match open.state {
        DecisionState::Waiting => {}
        DecisionState::Gone => {
            grant_lines[4] = match state.what_happened() {
                Some(what) => format!("NO LONGER WAITING: {what}. Its keys are off."),
                None => "NO LONGER WAITING: resolved, withdrawn or superseded. Its keys are off."
                    .to_owned(),
            };
        }
        DecisionState::Unknown => {
            grant_lines[4] =
                "OUTCOME UNKNOWN: the act may have happened. See its trail; nothing is resent."
                    .to_owned();
        }
    }
    let title = format!(
        " Grant: what resolving authorizes (the broker's, raised {} ago) ",
        age(now_ms, d.raised_ms)
    );
    // The raiser's line says GONE when its process is: red, like a
    // failed run.
    let grant_lines: Vec<Line<'static>> = grant_lines
        .iter()
        .map(|l| {
            if l.starts_with("Raiser ") && l.contains(": GONE") {
                alarm(state, bold(l))
            } else {
                bold(l)
            }
        })
        .collect();
    frame.render_widget(
        Paragraph::new(grant_lines).block(framed(&title)),
        grant_area,
    );
    let option_lines: Vec<Line<'static>> = d
        .options
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let chosen = open.chosen == Some(i);
            let line = grant::option_line(i, &c.key, &c.text, chosen);
            if chosen {
                reversed(&line)
            } else {
                Line::from(line)
            }
        })
        .collect();
    frame.render_widget(
        Paragraph::new(option_lines).block(framed(" Options: the raiser's words ")),
        options_area,
    );
    let words = grant::raisers_words(d);
    let question = wrap(words.iter().map(String::as_str), inner(question_area).width);
    pane(
        frame,
        " The raiser's words: question, options, recommendation (j/k scroll) ",
        question,
        state.scroll(),
        question_area,
    );
}

/// Whether a run's row is drawn as a failure: it failed, or its process
/// crashed.
fn alarming(state: &State, a: &Run) -> bool {
    state.run_failed(a)
        || a.exited
            .is_some_and(|e| e.signal.is_some() || e.status.is_some_and(|s| s != 0))
}

/// `line` drawn as an alarm: red, or bold where colour is off.
fn alarm(state: &State, line: Line<'static>) -> Line<'static> {
    let style = if state.colour() {
        Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
    } else {
        Style::default().add_modifier(Modifier::BOLD)
    };
    line.patch_style(style)
}

/// What the broker itself saw of a run: its last request and whether a
/// wait of it is open.
fn broker_record(a: &Run, now_ms: i64) -> String {
    let last = match &a.last {
        Some((verb, at)) => format!("last call {verb}, {} ago", age(now_ms, *at)),
        None => "no call yet".to_owned(),
    };
    let waiting = if a.waiting {
        "waiting on its feed"
    } else {
        "not waiting on its feed"
    };
    format!("the broker saw: {last} · {waiting}")
}

fn agents(state: &State, now_ms: i64) -> Rows {
    let switch = match state.launching() {
        Some(true) => "on",
        Some(false) => "OFF (L switches it back on)",
        None => "unknown until a run is bound or the switch moves",
    };
    let mut rows = Rows::new();
    rows.push(Line::from(format!("Launching: {switch}")));
    if let Some(head) = state.head() {
        rows.push(Line::from(format!(
            "Evidence: {} records, head {} (mosaic-bus head prints the note to keep)",
            head.size, head.head
        )));
    }
    let shown = shown(state);
    for (i, a) in state.agents().iter().enumerate() {
        if !shown(i) {
            continue;
        }
        let life = state.life_of(a.who.run_raw.as_str());
        let doing = state.doing_of(a.who.run_raw.as_str());
        rows.row(state.selected() == i, &agent_row(a, life, doing));
        if alarming(state, a) {
            if let Some(last) = rows.lines.pop() {
                rows.lines.push(alarm(state, last));
            }
        }
        rows.push(Line::from(format!("      {}", broker_record(a, now_ms))));
        if let Some(doing) = doing {
            let ago = |ms| age(now_ms, Some(ms));
            rows.push(Line::from(super::doing::detail(doing, ago)));
        }
        for w in &a.waits {
            rows.push(Line::from(wait_line(w)));
        }
    }
    rows
}

/// The run view: one run whole, its decisions selectable.
fn run(state: &State, now_ms: i64) -> Rows {
    let mut rows = Rows::new();
    let Some(a) = state.run_open() else {
        rows.push(Line::from(
            "No run is open: Enter on one in the Agents view.",
        ));
        return rows;
    };
    let life = state.life_of(a.who.run_raw.as_str());
    let title = format!("Run {} · {} · pid {}", a.who, a.harness, a.pid);
    rows.push(bold(&title));
    let words = Line::from(format!(
        "State: {}",
        run_words(a, life, state.doing_of(a.who.run_raw.as_str()))
    ));
    rows.push(if alarming(state, a) {
        alarm(state, words)
    } else {
        words
    });
    if let Some(error) = life.and_then(|l| l.error.as_ref()) {
        rows.push(alarm(
            state,
            Line::from(format!("The harness's error line: {error}")),
        ));
    }
    rows.push(Line::from(broker_record(a, now_ms)));
    if let Some(doing) = state.doing_of(a.who.run_raw.as_str()) {
        let ago = |ms| age(now_ms, Some(ms));
        rows.push(Line::from(super::doing::detail(doing, ago)));
    }
    let restarts = life.map_or(a.restarts, |l| l.restarts.max(a.restarts));
    rows.push(Line::from(format!("Restarts inside the run: {restarts}")));
    let usage = a
        .usage
        .clone()
        .or_else(|| life.and_then(|l| l.usage.clone()));
    rows.push(Line::from(match usage {
        Some(spent) => format!("Used: {spent}"),
        None => "Used: not reported (its harness says nothing of it)".to_owned(),
    }));
    output(state, a, life, &mut rows);
    if a.waits.is_empty() {
        rows.push(Line::from("It waits on no decision."));
    } else {
        rows.push(Line::from("The decisions it waits on (Enter opens one):"));
    }
    for (i, w) in a.waits.iter().enumerate() {
        let blocks = if w.blocking { " · BLOCKS a task" } else { "" };
        rows.row(
            state.selected() == i,
            &format!(
                "{} on {} · routed to {}{blocks}",
                w.action,
                w.target.as_ref().map_or("-", Shown::as_str),
                w.route
            ),
        );
    }
    rows.push(Line::from(
        "x ends this run · S starts an ended one again (up --console) · Esc back",
    ));
    rows
}

/// The Run view's lines of the run's output: its last lines, read from
/// the file `up` named, or where the output is.
fn output(state: &State, a: &Run, life: Option<&Life>, rows: &mut Rows) {
    let Some(path) = life.and_then(|l| l.output.as_ref()) else {
        rows.push(Line::from(
            "Its output: in the file up's first line names for this run",
        ));
        return;
    };
    let path = Shown::of(&path.to_string_lossy());
    match state.output_of(a.who.run_raw.as_str()) {
        None => rows.push(Line::from(format!("Its output: {path} (not readable now)"))),
        Some([]) => rows.push(Line::from(format!("Its output: {path} (nothing yet)"))),
        Some(lines) => {
            rows.push(Line::from(format!("Its output, the last lines of {path}:")));
            for line in lines {
                rows.push(Line::from(format!("  {line}")));
            }
        }
    }
}

fn trail(state: &State) -> Rows {
    let mut rows = Rows::new();
    let Some((subject, records)) = state.trail() else {
        rows.push(Line::from("No trail yet: t asks for a subject."));
        return rows;
    };
    rows.push(Line::from(format!(
        "Trail of {}, in write order:",
        Shown::of(subject)
    )));
    let shown = shown(state);
    for (i, r) in records.iter().enumerate().filter(|(i, _)| shown(*i)) {
        rows.row(state.selected() == i, &sentence(r));
    }
    rows
}

fn activity(state: &State) -> Rows {
    let mut rows = Rows::new();
    if state.activity().is_empty() {
        rows.push(Line::from("No change since the console started."));
    }
    // Newest first: the row the selection's index names counts from the
    // newest.
    let shown = shown(state);
    for (i, c) in state.activity().iter().rev().enumerate() {
        if !shown(i) {
            continue;
        }
        rows.row(state.selected() == i, &change_row(c));
    }
    rows
}

/// The closed decisions, newest closing first: when, how and by whom,
/// the raiser, the action and its target; then how many older ones the
/// next page holds.
fn history(state: &State, now_ms: i64) -> Rows {
    let mut rows = Rows::new();
    let Some(history) = state.history() else {
        return rows;
    };
    if history.rows.is_empty() {
        rows.push(Line::from("No decision has closed yet."));
    }
    let shown = shown(state);
    for (i, p) in history.rows.iter().enumerate().filter(|(i, _)| shown(*i)) {
        rows.row(
            state.selected() == i,
            &past_row(p, &age(now_ms, Some(p.at_ms))),
        );
    }
    if history.more > 0 {
        rows.push(Line::from(format!(
            "{} older: the selection at the last row reads them",
            history.more
        )));
    }
    rows
}

/// The help, over the whole screen so that every key fits at 80x24.
fn help(frame: &mut Frame<'_>, area: Rect) {
    let lines: Vec<Line<'static>> = KEYS
        .iter()
        .map(|(key, what)| Line::from(format!("{key:>9}  {what}")))
        .collect();
    let popup = layout::help(area, lines.len());
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(framed(" Keys: any key closes this help ")),
        popup,
    );
}
