//! The socket figures: `message.send` and `inbox` through the real broker
//! (started in this process, see [`crate::live`]) and the real clients, each
//! beside raw commits measured in alternating rounds on the same disk.
//! `message_send_1_client_socket` goes through
//! [`Client`](mosaic_client::socket::Client), one connection
//! per request, as a one-shot caller (`mosaic-bus call`, a hook) does; its
//! `_persistent` twin and the figures of long-lived callers (16 agents, a
//! reader's `inbox`) through [`Session`], one connection kept open, as the
//! MCP server and `views` do.

use mosaic_client::socket::Session;
use mosaic_domain::Verb;
use std::time::{Duration, Instant};

use mosaic_domain::messages::INBOX_LIMIT;
use mosaic_domain::Refusal;
use serde_json::{json, Value};

use crate::live::{self, Caller, Grants, Live};
use crate::output::{round1, round3, Failure, Fields};
use crate::stats::{percentile_us, Round, Series};
use crate::Ctx;

/// The target: one client through the socket reaches 0.5 × the
/// single-commit rate.
const SOCKET_TARGET: f64 = 0.5;
/// The target: 16 concurrent clients reach 2.5 × the single-commit rate,
/// and the moonshot is 4 ×.
const CLIENTS_TARGET: f64 = 2.5;
const CLIENTS_MOONSHOT: f64 = 4.0;
/// The target: `inbox` with 10 k messages, p50 under 300 µs.
const INBOX_TARGET_US: f64 = 300.0;

/// Roles `c00`, `c01`, … that may send within role.
fn senders(n: usize) -> Vec<(String, Grants)> {
    (0..n).map(|i| (format!("c{i:02}"), Grants::Send)).collect()
}

/// The raw reference fields every socket figure adds.
fn raw_fields(raws: &Series) -> Fields {
    vec![
        ("raw_commits_per_s", round1(raws.rate())),
        ("raw_p50_us", round1(raws.percentile_us(50.0))),
        ("raw_p99_us", round1(raws.percentile_us(99.0))),
        (
            "reference",
            Value::from("raw single-row commits in rounds alternating with these, same directory"),
        ),
    ]
}

/// `message_send_1_client_socket`: one client's `message.send` through
/// the socket and the real broker, requests/s beside raw commits/s, with
/// the [`Client`](mosaic_client::socket::Client), one connection per
/// request.
///
/// # Errors
/// When the broker cannot start, or a request or commit fails.
pub fn message_send_1_client_socket(ctx: &mut Ctx) -> Result<Fields, Failure> {
    one_client(
        ctx,
        "socket-1",
        |live| live.clients[0].clone(),
        "mosaic_client::socket::Client -> bus.sock -> in-process broker -> SQLite; one connection per request",
    )
}

/// `message_send_1_client_socket_persistent`: the same through a
/// [`Session`], every request on the one connection it keeps open.
///
/// # Errors
/// When the broker cannot start, or a request or commit fails.
pub fn message_send_1_client_socket_persistent(ctx: &mut Ctx) -> Result<Fields, Failure> {
    one_client(
        ctx,
        "socket-1-persistent",
        |live| Session::new(live.clients[0].clone()),
        "mosaic_client::socket::Session -> bus.sock -> in-process broker -> SQLite; one connection for every request",
    )
}

/// One client's `message.send` rounds, alternating with raw rounds, on a
/// fresh broker on the data root `name`, through the caller `make` gives.
fn one_client<C: Caller>(
    ctx: &mut Ctx,
    name: &str,
    make: impl FnOnce(&Live) -> C,
    path: &'static str,
) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let live = Live::start(ctx, name, &senders(1), false)?;
    let client = make(&live);
    live::warm_up(&client, sizes.socket_warmup)?;
    let mut sent = 0;
    let mut split = CpuSplit::new();
    let (sends, raws) =
        crate::raw::alternate(ctx, sizes.socket_rounds, sizes.socket_per_round, || {
            let (before, client_before) = (BrokerCpu::now(), crate::stats::thread_cpu_time());
            let round = Round::run(sizes.socket_per_round, || {
                sent += 1;
                live::send(&client, sent)
            })?;
            let client_cpu = crate::stats::thread_cpu_time().saturating_sub(client_before);
            split.add(client_cpu, before, BrokerCpu::now());
            Ok(round)
        })?;
    drop(client);
    live.close()?;
    let ratio = sends.rate() / raws.rate();
    let mut fields = sends.fields("requests_per_s");
    fields.extend(split.fields(&sends, raws.rate()));
    fields.extend([
        ("ratio_to_raw", round3(ratio)),
        (
            "target",
            Value::from(format!("ratio_to_raw >= {SOCKET_TARGET}")),
        ),
        ("met", Value::from(ratio >= SOCKET_TARGET)),
        ("clients", Value::from(1)),
        ("path", Value::from(path)),
    ]);
    fields.extend(raw_fields(&raws));
    Ok(fields)
}

/// `message_send_16_clients`: 16 clients (each its own run and role, on its
/// own thread) sending at once through the socket; requests/s of the whole
/// round beside raw commits/s.
///
/// # Errors
/// When the broker cannot start, or a request or commit fails.
pub fn message_send_16_clients(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let live = Live::start(ctx, "socket-16", &senders(sizes.clients), false)?;
    let clients = live.sessions();
    // The store's WAL wraps once, spread over every client.
    let per_client_warmup = sizes.socket_warmup.div_ceil(clients.len().max(1));
    live::concurrent_round(&clients, per_client_warmup)?;
    let per_round = sizes.clients * sizes.client_per_round;
    let mut split = CpuSplit::new();
    let (sends, raws) =
        crate::raw::alternate(ctx, sizes.socket_rounds, sizes.socket_per_round, || {
            let before = BrokerCpu::now();
            let (round, client_cpu) = live::concurrent_round(&clients, sizes.client_per_round)?;
            split.add(client_cpu, before, BrokerCpu::now());
            Ok(round)
        })?;
    drop(clients);
    live.close()?;
    let ratio = sends.rate() / raws.rate();
    let mut fields = sends.fields("requests_per_s");
    fields.extend(split.fields(&sends, raws.rate()));
    fields.extend([
        ("ratio_to_raw", round3(ratio)),
        ("target", Value::from(format!("ratio_to_raw >= {CLIENTS_TARGET}"))),
        ("met", Value::from(ratio >= CLIENTS_TARGET)),
        (
            "moonshot",
            Value::from(format!("ratio_to_raw >= {CLIENTS_MOONSHOT}")),
        ),
        ("moonshot_met", Value::from(ratio >= CLIENTS_MOONSHOT)),
        ("clients", Value::from(sizes.clients)),
        ("requests_per_round", Value::from(per_round)),
        (
            "note",
            Value::from(
                "group commit: requests queued while a commit syncs share the next transaction; each client a mosaic_client::socket::Session, its requests on one connection",
            ),
        ),
    ]);
    fields.extend(raw_fields(&raws));
    Ok(fields)
}

/// The CPU time of the in-process broker's threads, by kind.
#[derive(Debug, Clone, Copy)]
struct BrokerCpu {
    writer: Option<Duration>,
    workers: Option<Duration>,
}

impl BrokerCpu {
    fn now() -> Self {
        Self {
            writer: crate::stats::named_threads_cpu_time(mosaic_app::runtime::WRITER_THREAD),
            // tokio's own name for the workers of a runtime that sets none.
            workers: crate::stats::named_threads_cpu_time("tokio-rt-worker"),
        }
    }
}

/// Where the 16-client figure's CPU time goes: the client threads, the
/// broker's writer thread (SQLite and the domain) and its tokio workers
/// (accept, parse, answer). A broker share is `None` once any round could
/// not read it.
#[derive(Debug)]
struct CpuSplit {
    clients: Duration,
    writer: Option<Duration>,
    workers: Option<Duration>,
}

impl CpuSplit {
    fn new() -> Self {
        Self {
            clients: Duration::ZERO,
            writer: Some(Duration::ZERO),
            workers: Some(Duration::ZERO),
        }
    }

    fn add(&mut self, clients: Duration, before: BrokerCpu, after: BrokerCpu) {
        let grew = |total: Option<Duration>, b: Option<Duration>, a: Option<Duration>| {
            Some(total? + a?.checked_sub(b?)?)
        };
        self.clients += clients;
        self.writer = grew(self.writer, before.writer, after.writer);
        self.workers = grew(self.workers, before.workers, after.workers);
    }

    /// The split per request, how busy the CPUs were, and the ratios to
    /// raw this run's CPU cost per request allows with every CPU busy.
    fn fields(&self, sends: &Series, raw_rate: f64) -> Fields {
        let n = sends.count() as f64;
        let per_op =
            |cpu: Option<Duration>| round1(cpu.map_or(f64::NAN, |c| c.as_secs_f64() * 1e6 / n));
        let cpu: Duration = sends.rounds.iter().map(|r| r.cpu).sum();
        let wall: Duration = sends.rounds.iter().map(|r| r.elapsed).sum();
        let cpus = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        // Requests/s with every CPU busy at this cost, as a ratio to raw.
        let bound = |cpu: Duration| cpus * n / cpu.as_secs_f64() / raw_rate;
        vec![
            ("client_cpu_us_per_op", per_op(Some(self.clients))),
            ("writer_cpu_us_per_op", per_op(self.writer)),
            ("workers_cpu_us_per_op", per_op(self.workers)),
            ("busy_cpus", round3(cpu.as_secs_f64() / wall.as_secs_f64())),
            ("cpu_bound_ratio_to_raw", round3(bound(cpu))),
            (
                "broker_cpu_bound_ratio_to_raw",
                round3(bound(cpu.saturating_sub(self.clients))),
            ),
            (
                "writer_bound_ratio_to_raw",
                round3(self.writer.map_or(f64::NAN, |w| n / w.as_secs_f64() / raw_rate)),
            ),
            (
                "cpu_note",
                Value::from("cpu_bound_ratio_to_raw: the ratio to raw this run would reach with every CPU busy at its cpu_us_per_op; broker_cpu_bound_ratio_to_raw: the same if the clients cost no CPU; writer_bound_ratio_to_raw: the same for SQLite's one writer, if its thread never waited; writer = the broker's writer thread (SQLite, domain), workers = its tokio workers (accept, parse, answer)"),
            ),
        ]
    }
}

/// The ceilings of a figure whose every request runs on one thread, the
/// runtime loop and SQLite in the caller's own (`message_send_1_client`):
/// how busy the CPUs were, and the ratios to raw its CPU cost per request
/// allows with every CPU busy, and on its one thread if it never waited
/// (for the disk, above all).
pub fn one_thread_ceilings(sends: &Series, raw_rate: f64) -> Fields {
    let n = sends.count() as f64;
    let cpu: Duration = sends.rounds.iter().map(|r| r.cpu).sum();
    let wall: Duration = sends.rounds.iter().map(|r| r.elapsed).sum();
    let cpus = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    vec![
        ("busy_cpus", round3(cpu.as_secs_f64() / wall.as_secs_f64())),
        (
            "cpu_bound_ratio_to_raw",
            round3(cpus * n / cpu.as_secs_f64() / raw_rate),
        ),
        (
            "writer_bound_ratio_to_raw",
            round3(n / cpu.as_secs_f64() / raw_rate),
        ),
        (
            "cpu_note",
            Value::from("cpu_bound_ratio_to_raw: the ratio to raw this run would reach with every CPU busy at its cpu_us_per_op; writer_bound_ratio_to_raw: the same for the one thread that runs each request (the caller, the runtime loop and SQLite), if it never waited; the clients cost nothing apart here"),
        ),
    ]
}

/// Times `n` `inbox` calls of `client`; also returns the last answer's size
/// in bytes and its number of entries.
fn inbox_calls(client: &Session, n: usize) -> Result<(Vec<Duration>, usize, usize), Failure> {
    let mut samples = Vec::with_capacity(n);
    let (mut bytes, mut entries) = (0, 0);
    for _ in 0..n {
        let t = Instant::now();
        let line = client
            .call_verbatim(Verb::Inbox.as_str(), json!({}))
            .map_err(|r| Failure::refused("inbox refused", r))?;
        samples.push(t.elapsed());
        let answer: Value = serde_json::from_slice(&line)
            .map_err(|_| Failure::new("the inbox answer is not JSON"))?;
        if answer["ok"] != true {
            return Err(
                match answer["error"].as_str().and_then(Refusal::from_code) {
                    Some(refusal) => Failure::refused("inbox refused", refusal),
                    None => Failure::new("inbox refused with an unknown code"),
                },
            );
        }
        let Some(list) = answer["result"].as_array() else {
            return Err(Failure::new("the inbox answer is not a list"));
        };
        bytes = line.len();
        entries = list.len();
    }
    Ok((samples, bytes, entries))
}

/// `inbox_10k`: `inbox` through the socket for a role that was sent 10 k
/// messages (by another role, through the same broker) and has read all but
/// the newest few: the steady state, where the target applies. Beside it,
/// the same call while all 10 k were still unread (the backlog: it lists
/// the oldest [`INBOX_LIMIT`]) and on the empty inbox before the fill (the
/// socket's own floor).
///
/// # Errors
/// When the broker cannot start, the fill or the reading fails, or an
/// `inbox` is refused or lists what it should not.
pub fn inbox_10k(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let roles = vec![
        ("reader".to_owned(), Grants::Send),
        ("writer".to_owned(), Grants::Send),
    ];
    let live = Live::start(ctx, Verb::Inbox.as_str(), &roles, false)?;
    let mut sessions = live.sessions().into_iter();
    let (Some(reader), Some(writer)) = (sessions.next(), sessions.next()) else {
        return Err(Failure::new(
            "the broker issued fewer capabilities than roles",
        ));
    };
    let (empty, _, empty_entries) = inbox_calls(&reader, sizes.inbox_calls)?;
    if empty_entries != 0 {
        return Err(Failure::new("a fresh role's inbox is not empty"));
    }
    let started = Instant::now();
    for n in 0..sizes.inbox_messages {
        writer
            .call(
                Verb::MessageSend.as_str(),
                json!({"to": "reader", "class": "INFO", "body": live::body(n)}),
            )
            .map_err(|r| Failure::refused("message.send refused during the fill", r))?;
    }
    let fill = started.elapsed();
    let (backlog, backlog_bytes, backlog_entries) = inbox_calls(&reader, sizes.inbox_calls)?;
    if backlog_entries != sizes.inbox_messages.min(INBOX_LIMIT) {
        return Err(Failure::new(
            "the inbox does not list its page of the unread messages the bench sent",
        ));
    }
    let keep = sizes.inbox_unread.min(sizes.inbox_messages);
    read_all_but(&reader, sizes.inbox_messages - keep)?;
    let (steady, bytes, entries) = inbox_calls(&reader, sizes.inbox_calls)?;
    drop((reader, writer));
    live.close()?;
    if entries != keep {
        return Err(Failure::new(
            "the inbox does not list exactly the messages left unread",
        ));
    }
    let p50 = percentile_us(&steady, 50.0);
    Ok(vec![
        ("messages", Value::from(sizes.inbox_messages)),
        ("unread", Value::from(keep)),
        ("p50_us", round1(p50)),
        ("p99_us", round1(percentile_us(&steady, 99.0))),
        ("mean_us", round1(crate::stats::mean_us(&steady))),
        ("n", Value::from(steady.len())),
        ("answer_bytes", Value::from(bytes)),
        ("target", Value::from("p50_us < 300")),
        ("met", Value::from(p50 < INBOX_TARGET_US)),
        ("backlog_listed", Value::from(backlog_entries)),
        ("backlog_p50_us", round1(percentile_us(&backlog, 50.0))),
        ("backlog_p99_us", round1(percentile_us(&backlog, 99.0))),
        ("backlog_answer_bytes", Value::from(backlog_bytes)),
        ("empty_inbox_p50_us", round1(percentile_us(&empty, 50.0))),
        ("empty_inbox_p99_us", round1(percentile_us(&empty, 99.0))),
        (
            "note",
            Value::from("p50/p99: the role was sent `messages` and read all but `unread`; backlog_: the same call while all were unread (it lists the oldest 100); empty_inbox: before the fill, the socket's own floor. Reads run on reader connections beside the writer; the caller is a mosaic_client::socket::Session, its calls on one connection"),
        ),
        ("fill_s", round3(fill.as_secs_f64())),
    ])
}

/// Takes every message waiting for `client`'s role and acknowledges the
/// oldest `n` of them, as a working agent does.
///
/// # Errors
/// A refused `message.receive` or `message.read`, or fewer than `n`
/// messages waiting.
fn read_all_but(client: &impl Caller, n: usize) -> Result<(), Failure> {
    let mut ids = Vec::new();
    loop {
        let batch = client
            .call(Verb::MessageReceive.as_str(), json!({}))
            .map_err(|r| Failure::refused("message.receive refused", r))?;
        let Some(messages) = batch.as_array().filter(|m| !m.is_empty()) else {
            break;
        };
        ids.extend(
            messages
                .iter()
                .filter_map(|m| m["id"].as_str().map(str::to_owned)),
        );
    }
    if ids.len() < n {
        return Err(Failure::new("fewer messages arrived than the bench sent"));
    }
    for id in &ids[..n] {
        client
            .call(Verb::MessageRead.as_str(), json!({"id": id}))
            .map_err(|r| Failure::refused("message.read refused", r))?;
    }
    Ok(())
}
