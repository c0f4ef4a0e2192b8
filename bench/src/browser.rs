//! The browser round trip: an agent's `browser.request {action:"snapshot"}`
//! through the socket → the broker authorizes it (one commit,
//! `action.allowed`) → a `browser-control-request` event on each capable
//! pane's SSE stream → the panes claim, the first wins → the winner posts
//! its result → the broker records `browser.completed` (a second commit) →
//! the agent has its answer.
//!
//! A pane is a thread holding an event stream and a keep-alive connection
//! for its posts ([`crate::http`]); clients that are not browser-capable
//! only hold a stream. After each request the bench waits, untimed, until
//! every capable pane has handled it, so each measured request sees the
//! whole race for itself and nothing left over from the one before.
//!
//! Agent and panes are threads of one process, so the bench also splits
//! each trip into its legs ([`Legs`]) on one clock.

use mosaic_domain::Verb;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mosaic_client::socket::Client;
use serde_json::{json, Value};

use crate::http::{Closer, Conn, Events};
use crate::live::{self, Endpoint, Grants, Live};
use crate::output::{round1, round3, Failure, Fields};
use crate::stats::{percentile_us, Round, Series};
use crate::Ctx;

/// What every pane answers: a small snapshot.
fn snapshot() -> Value {
    json!({"title": "bench", "url": "http://127.0.0.1/bench", "text": "a small page"})
}

/// The longest the bench waits for the panes to report on one request.
const REPORT_WAIT: Duration = Duration::from_secs(20);

/// What a pane did with one request.
struct Report {
    /// Whether its claim was granted (and it then posted the result).
    granted: bool,
    /// When the event arrived.
    arrived: Instant,
    /// When the claim was answered.
    claimed: Instant,
    /// When its last post was answered (`claimed` if it lost).
    posted: Instant,
}

/// One trip, leg by leg.
#[derive(Debug, Clone, Copy)]
struct Legs {
    /// From the agent's call to the event's arrival at the winning pane:
    /// the socket, the authorization staged, the SSE event.
    to_pane: Duration,
    /// The winner's claim post (it waits for `action.allowed` to be durable).
    claim: Duration,
    /// The winner's result post.
    result: Duration,
    /// From the result post's answer to the agent's answer: mostly the
    /// `browser.completed` commit, which began when the result arrived.
    to_agent: Duration,
}

impl Legs {
    /// The winner's two posts.
    fn pane_http(&self) -> Duration {
        self.claim + self.result
    }
}

/// Handles `browser-control-request` events until the stream ends.
fn pane(
    mut events: Events,
    mut conn: Conn,
    id: String,
    reports: mpsc::Sender<Result<Report, Failure>>,
) {
    loop {
        let event = match events.next() {
            Ok(Some(event)) => event,
            Ok(None) => return,
            Err(failure) => {
                let _ = reports.send(Err(failure));
                return;
            }
        };
        if event["type"] != "browser-control-request" {
            continue;
        }
        let arrived = Instant::now();
        let report =
            handle(&mut conn, &id, &event["properties"]).map(|(granted, claimed)| Report {
                granted,
                arrived,
                claimed,
                posted: Instant::now(),
            });
        if reports.send(report).is_err() {
            return;
        }
    }
}

/// Claims the request and, if granted, posts the snapshot; whether it
/// was, and when the claim was answered.
fn handle(conn: &mut Conn, id: &str, request: &Value) -> Result<(bool, Instant), Failure> {
    let request_id = request["requestId"]
        .as_str()
        .ok_or(Failure::new("a browser request event has no requestId"))?;
    let claim = conn.post(
        "/api/browser-control/claim",
        &json!({"requestId": request_id, "clientId": id}),
    )?;
    let claimed = Instant::now();
    if claim["granted"] != true {
        return Ok((false, claimed));
    }
    let token = claim["claimToken"]
        .as_str()
        .ok_or(Failure::new("a granted claim has no claimToken"))?;
    let result = conn.post(
        "/api/browser-control/result",
        &json!({"requestId": request_id, "claimToken": token, "ok": true, "data": snapshot()}),
    )?;
    if result["matched"] != true {
        return Err(Failure::new(
            "the claimant's result did not match its request",
        ));
    }
    Ok((true, claimed))
}

/// Connected UI clients: `capable` pane threads and `idle` streams of
/// clients that are not browser-capable (heartbeats only, never read).
pub struct Panes {
    capable: usize,
    closers: Vec<Closer>,
    threads: Vec<JoinHandle<()>>,
    reports: Option<mpsc::Receiver<Result<Report, Failure>>>,
    idle: Vec<Events>,
}

impl Panes {
    /// Connects every client; returns once the broker registered all of them.
    ///
    /// # Errors
    /// When a stream or connection cannot be opened.
    pub fn connect(endpoint: &Endpoint, capable: usize, idle: usize) -> Result<Self, Failure> {
        let (send, reports) = mpsc::channel();
        let mut panes = Self {
            capable,
            closers: Vec::new(),
            threads: Vec::new(),
            reports: Some(reports),
            idle: Vec::new(),
        };
        for i in 0..capable {
            let id = format!("pane-{i}");
            let events = Events::open(endpoint, &id, true)?;
            panes.closers.push(events.closer()?);
            let conn = Conn::connect(endpoint)?;
            let send = send.clone();
            let thread = std::thread::Builder::new()
                .name(id.clone())
                .spawn(move || pane(events, conn, id, send))
                .map_err(|_| Failure::new("cannot start a pane thread"))?;
            panes.threads.push(thread);
        }
        for i in 0..idle {
            let events = Events::open(endpoint, &format!("ui-{i}"), false)?;
            panes.closers.push(events.closer()?);
            panes.idle.push(events);
        }
        Ok(panes)
    }

    /// Waits until every capable pane handled one request; checks that
    /// exactly one was granted and returns the winner's report.
    fn settled(&self) -> Result<Report, Failure> {
        let reports = self
            .reports
            .as_ref()
            .ok_or(Failure::new("the panes were stopped"))?;
        let mut winner = None;
        for _ in 0..self.capable {
            let report = reports
                .recv_timeout(REPORT_WAIT)
                .map_err(|_| Failure::new("a pane did not handle a browser request in time"))??;
            match (report.granted, &winner) {
                (true, None) => winner = Some(report),
                (true, Some(_)) => return Err(Failure::new("two panes won the same claim")),
                (false, _) => {}
            }
        }
        winner.ok_or(Failure::new("no pane won the claim"))
    }
}

impl Drop for Panes {
    fn drop(&mut self) {
        // Nobody listens any more; then every stream ends, so every pane
        // thread returns.
        drop(self.reports.take());
        for closer in &self.closers {
            closer.close();
        }
        self.idle.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One timed `browser.request` and the untimed wait for every pane.
fn trip(agent: &Client, panes: &Panes) -> Result<(Duration, Legs), Failure> {
    let started = Instant::now();
    let answer = agent
        .call(
            Verb::BrowserRequest.as_str(),
            json!({"action": "snapshot", "parameters": {}, "timeoutMs": 10_000}),
        )
        .map_err(|r| Failure::refused("browser.request refused", r))?;
    let answered = Instant::now();
    if answer != snapshot() {
        return Err(Failure::new("the agent did not get the pane's snapshot"));
    }
    let winner = panes.settled()?;
    let legs = Legs {
        to_pane: winner.arrived.saturating_duration_since(started),
        claim: winner.claimed.saturating_duration_since(winner.arrived),
        result: winner.posted.saturating_duration_since(winner.claimed),
        to_agent: answered.saturating_duration_since(winner.posted),
    };
    Ok((answered - started, legs))
}

/// A round of `n` trips: the agent's latencies; each trip's legs go to `legs`.
fn round(agent: &Client, panes: &Panes, n: usize, legs: &mut Vec<Legs>) -> Result<Round, Failure> {
    let started = Instant::now();
    let cpu_before = crate::stats::cpu_time();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let (rtt, trip_legs) = trip(agent, panes)?;
        samples.push(rtt);
        legs.push(trip_legs);
    }
    Ok(Round {
        samples,
        elapsed: started.elapsed(),
        written: None,
        cpu: crate::stats::cpu_time().saturating_sub(cpu_before),
    })
}

/// Rows of the broker's ledger, read through a connection of its own
/// while the broker runs (WAL: readers never block the writer).
fn ledger_rows(live: &Live) -> Result<i64, Failure> {
    crate::store::count_rows(&live.root.join("bus").join("bus.sqlite"), "ledger")
}

/// Measures round trips with `capable` panes and `idle` other clients,
/// in rounds alternating with raw commits.
fn rtt(
    ctx: &mut Ctx,
    name: &str,
    capable: usize,
    idle: usize,
    target_us: f64,
) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let live = Live::start(
        ctx,
        name,
        &[("web".to_owned(), Grants::SendAndSnapshot)],
        true,
    )?;
    let agent = live.clients[0].clone();
    let endpoint = live
        .browser
        .clone()
        .ok_or(Failure::new("the broker did not enable browser control"))?;
    live::warm_up(&agent, sizes.socket_warmup)?;
    let panes = Panes::connect(&endpoint, capable, idle)?;
    let mut legs = Vec::new();
    round(&agent, &panes, sizes.browser_warmup, &mut legs)?;
    legs.clear();
    let rows_before = ledger_rows(&live)?;
    let mut trips = 0;
    let (rtts, raws) =
        crate::raw::alternate(ctx, sizes.browser_rounds, sizes.browser_per_round, || {
            trips += sizes.browser_per_round;
            round(&agent, &panes, sizes.browser_per_round, &mut legs)
        })?;
    let rows = ledger_rows(&live)? - rows_before;
    drop(panes);
    live.close()?;
    let p50 = rtts.percentile_us(50.0);
    let raw_p50 = raws.percentile_us(50.0);
    let leg_p50 = |leg: fn(&Legs) -> Duration| {
        round1(percentile_us(
            &legs.iter().map(leg).collect::<Vec<_>>(),
            50.0,
        ))
    };
    let http: Vec<Duration> = legs.iter().map(Legs::pane_http).collect();
    Ok(vec![
        ("p50_us", round1(p50)),
        ("p99_us", round1(rtts.percentile_us(99.0))),
        ("mean_us", round1(rtts.mean_us())),
        ("n", Value::from(rtts.count())),
        ("target", Value::from(format!("p50_us <= {target_us}"))),
        ("met", Value::from(p50 <= target_us)),
        ("clients", Value::from(capable + idle)),
        ("capable", Value::from(capable)),
        ("commits_per_request", Value::from(2)),
        ("records_per_request", round3(rows as f64 / trips as f64)),
        ("raw_p50_us", round1(raw_p50)),
        ("raw_p99_us", round1(raws.percentile_us(99.0))),
        ("commit_floor_us", round1(2.0 * raw_p50)),
        ("pane_http_p50_us", round1(percentile_us(&http, 50.0))),
        ("pane_http_p99_us", round1(percentile_us(&http, 99.0))),
        ("to_pane_p50_us", leg_p50(|l| l.to_pane)),
        ("claim_p50_us", leg_p50(|l| l.claim)),
        ("result_p50_us", leg_p50(|l| l.result)),
        ("to_agent_p50_us", leg_p50(|l| l.to_agent)),
        (
            "note",
            Value::from("one round trip commits action.allowed before any claim is granted (the event goes out while it syncs) and browser.completed before the answer: two FULL-sync commits (commit_floor_us = 2 x raw_p50_us); pane_http is the winner's claim (which waits for the first commit) + result posts on a keep-alive connection; the legs of a trip: to_pane (agent call -> event at the winner), claim, result (its posts), to_agent (result answered -> agent answered, mostly the second commit)"),
        ),
    ])
}

/// `browser_rtt_1_pane`: one capable pane.
///
/// # Errors
/// When the broker, a pane or a request fails.
pub fn rtt_1_pane(ctx: &mut Ctx) -> Result<Fields, Failure> {
    rtt(ctx, "browser-1", 1, 0, 500.0)
}

/// `browser_rtt_100_clients_1_capable`: one capable pane among 100 clients.
///
/// # Errors
/// When the broker, a pane or a request fails.
pub fn rtt_100_clients_1_capable(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let idle = ctx.sizes.browser_clients.saturating_sub(1);
    rtt(ctx, "browser-100-1", 1, idle, 1000.0)
}

/// `browser_rtt_100_racing`: 100 capable panes, all claiming every request.
///
/// # Errors
/// When the broker, a pane or a request fails.
pub fn rtt_100_racing(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let capable = ctx.sizes.browser_clients;
    rtt(ctx, "browser-100-racing", capable, 0, 4000.0)
}

/// Panes and trips for a broker running elsewhere (the RSS figure's child).
pub struct Remote {
    panes: Panes,
}

impl Remote {
    /// Connects `capable` panes to `endpoint`.
    ///
    /// # Errors
    /// When a pane cannot connect.
    pub fn connect(endpoint: &Endpoint, capable: usize) -> Result<Self, Failure> {
        Ok(Self {
            panes: Panes::connect(endpoint, capable, 0)?,
        })
    }

    /// `n` round trips of `agent`.
    ///
    /// # Errors
    /// When a request or a pane fails.
    pub fn trips(&self, agent: &Client, n: usize) -> Result<Series, Failure> {
        let mut legs = Vec::new();
        Ok(Series {
            rounds: vec![round(agent, &self.panes, n, &mut legs)?],
        })
    }
}
