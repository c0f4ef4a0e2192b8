//! `load`: many concurrent agents against one broker, for a while.
//!
//! ```text
//! cargo run --release -p mosaic-bench --bin load [-- --clients 64 --seconds 60 --data-root DIR]
//! ```
//!
//! Starts a broker in this process ([`start_broker`], the library form of
//! `mosaic-bus broker`) on a fresh data root under `--data-root` (default:
//! the system temporary directory), then runs `--clients` client threads
//! (default 64) for `--seconds` (default 60). Each client is its own bound
//! run holding its own role and speaks to the broker's socket through a
//! real [`Session`] of a [`Client`], its requests on the one connection it
//! keeps open, as an agent's MCP server does.
//!
//! The clients work in businesses of eight roles (`a0` is the technical
//! arbiter, `a1` the delivery one). Each picks its next verb at random:
//! `message.send` to another role of its business, `message.receive`,
//! `message.read` of a message it received, `decision.raise` (cross-role,
//! routed to an arbiter), `decision.resolve` (the arbiters, from the
//! decisions routed to them), `decision.withdraw` (the raiser, of its own),
//! `inbox`, `trail` (of its last message or decision), `tasks` and
//! `agents`.
//!
//! Expected refusals: `decision-closed` only, when a raiser withdraws a
//! decision while its arbiter resolves it (both race on purpose). Any other
//! refusal, `outcome-unknown` or `broker-unavailable` is an error.
//!
//! Prints one JSON line: requests per second overall and per verb, p50 and
//! p99 latency per verb (client side, connect to answer), refusals by code,
//! and the peak resident set (`VmHWM` of `/proc/self/status`: the broker
//! and all its client threads share this process, so this is an upper
//! bound on the broker's own). Exits 1 when an unexpected refusal occurred,
//! 2 on a usage or setup error.

use mosaic_domain::Verb;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mosaic_adapters::config::boot_from_value;
use mosaic_app::runtime::start_broker;
use mosaic_client::socket::{Client, Session};
use mosaic_domain::Refusal;
use serde_json::{json, Map, Value};

/// Roles per business.
const ROLES: usize = 8;

/// The refusals this mix produces by design.
const EXPECTED: &[Refusal] = &[Refusal::DecisionClosed];

const USAGE: &str = "usage: load [--clients N] [--seconds S] [--data-root DIR]";

struct Options {
    clients: usize,
    seconds: u64,
    data_root: Option<PathBuf>,
}

fn parse_args() -> Result<Options, &'static str> {
    let mut opts = Options {
        clients: 64,
        seconds: 60,
        data_root: None,
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .and_then(|v| v.into_string().ok())
                .ok_or("a flag needs a value")
        };
        match arg.to_str() {
            Some("--clients") => {
                opts.clients = value()?.parse().map_err(|_| "--clients needs a number")?;
            }
            Some("--seconds") => {
                opts.seconds = value()?.parse().map_err(|_| "--seconds needs a number")?;
            }
            Some("--data-root") => opts.data_root = Some(PathBuf::from(value()?)),
            Some("--help" | "-h") => return Err(USAGE),
            Some(_) | None => return Err("unknown argument"),
        }
    }
    if opts.clients == 0 || opts.seconds == 0 {
        return Err("--clients and --seconds must be positive");
    }
    Ok(opts)
}

/// A tiny xorshift64 generator: each client's choices, reproducibly.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x % n.max(1) as u64) as usize
    }
}

/// Client `i`'s business, role and run.
fn identity(i: usize) -> (String, String, String) {
    let (b, r) = (i / ROLES, i % ROLES);
    (format!("load{b}"), format!("a{r}"), format!("b{b}-a{r}"))
}

/// A business of eight roles that send within role and merge cross-role.
fn business(id: &str) -> Value {
    let roles: Map<String, Value> = (0..ROLES)
        .map(|r| {
            (
                format!("a{r}"),
                json!({"authority": {"withinRole": [Verb::MessageSend.as_str()], "crossRole": ["repo.merge"]}}),
            )
        })
        .collect();
    json!({
        "id": id,
        "human": "operator",
        "arbiters": {"technical": "a0", "delivery": "a1"},
        "roles": roles,
    })
}

/// What one client measured.
#[derive(Default)]
struct Tally {
    /// Latencies per verb.
    latencies: BTreeMap<&'static str, Vec<Duration>>,
    /// Refusals per code.
    refusals: BTreeMap<&'static str, u64>,
    /// Refusals outside [`EXPECTED`].
    unexpected: u64,
}

/// A client's next request (a resolve is chosen before these).
#[derive(Debug, Clone, Copy)]
enum Op {
    Send,
    Receive,
    Read,
    Raise,
    Withdraw,
    Inbox,
    Trail,
    Tasks,
    Agents,
}

/// Open decisions per business an arbiter may resolve: (id, arbiter role index).
type Routed = Vec<Mutex<Vec<(String, usize)>>>;

/// One client: claims its role, then picks verbs at random until `stop`.
fn client(i: usize, cap: String, socket: PathBuf, routed: &Routed, stop: &AtomicBool) -> Tally {
    let (_, role, _) = identity(i);
    let (b, r) = (i / ROLES, i % ROLES);
    let client = Session::new(Client::new(socket, cap));
    let mut rng = Rng::new(i as u64 + 1);
    let mut tally = Tally::default();
    let mut received: Vec<String> = Vec::new();
    let mut raised: Vec<String> = Vec::new();
    let mut last_subject: Option<String> = None;
    let call = |tally: &mut Tally, verb: &'static str, args: Value| {
        let started = Instant::now();
        let answer = client.call(verb, args);
        tally
            .latencies
            .entry(verb)
            .or_default()
            .push(started.elapsed());
        match answer {
            Ok(result) => Some(result),
            Err(refusal) => {
                *tally.refusals.entry(refusal.code()).or_default() += 1;
                if !EXPECTED.contains(&refusal) {
                    tally.unexpected += 1;
                }
                None
            }
        }
    };
    if call(&mut tally, Verb::RoleClaim.as_str(), json!({})).is_none() {
        return tally;
    }
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let roll = rng.below(100);
        let arbiter = r < 2;
        if arbiter && roll < 20 {
            let pick = {
                let mut open = routed[b].lock().unwrap_or_else(PoisonError::into_inner);
                let mine: Vec<usize> = (0..open.len()).filter(|&k| open[k].1 == r).collect();
                (!mine.is_empty()).then(|| open.swap_remove(mine[rng.below(mine.len())]).0)
            };
            if let Some(id) = pick {
                let choice = if rng.below(2) == 0 { "yes" } else { "no" };
                call(
                    &mut tally,
                    Verb::DecisionResolve.as_str(),
                    json!({"id": id, "choice": choice}),
                );
                continue;
            }
        }
        let op = match roll {
            25..=32 => Op::Receive,
            33..=57 if !received.is_empty() => Op::Read,
            58..=63 => Op::Raise,
            64..=65 if !raised.is_empty() => Op::Withdraw,
            66..=77 => Op::Inbox,
            78..=87 => Op::Trail,
            88..=93 => Op::Tasks,
            94..=99 => Op::Agents,
            // 0..=24, and a read or withdrawal with nothing to act on.
            _ => Op::Send,
        };
        match op {
            Op::Send => {
                let to = format!("a{}", (r + 1 + rng.below(ROLES - 1)) % ROLES);
                let body =
                    format!("{role} to {to}: load message {n}, please review and report back");
                if let Some(sent) = call(
                    &mut tally,
                    Verb::MessageSend.as_str(),
                    json!({"to": to, "body": body, "class": "INFO"}),
                ) {
                    last_subject = sent["id"].as_str().map(str::to_owned);
                }
            }
            Op::Receive => {
                if let Some(batch) = call(&mut tally, Verb::MessageReceive.as_str(), json!({})) {
                    received.extend(
                        batch
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|m| m["id"].as_str().map(str::to_owned)),
                    );
                }
            }
            Op::Read => {
                let id = received.swap_remove(rng.below(received.len()));
                call(&mut tally, Verb::MessageRead.as_str(), json!({"id": id}));
            }
            Op::Raise => {
                // An arbiter raises in the other arbiter's domain, so every
                // decision routes to a role, never to the human.
                let technical = match r {
                    0 => false,
                    1 => true,
                    _ => rng.below(2) == 0,
                };
                let args = json!({
                    "action": "repo.merge",
                    "question": format!("{role}: merge change {n} into main?"),
                    "options": [{"key": "yes", "text": "Merge"}, {"key": "no", "text": "Hold"}],
                    "recommendation": "yes",
                    "blocking": false,
                    "domain": if technical { "technical" } else { "delivery" },
                });
                if let Some(d) = call(&mut tally, Verb::DecisionRaise.as_str(), args) {
                    if let Some(id) = d["id"].as_str() {
                        let arbiter = usize::from(!technical);
                        routed[b]
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push((id.to_owned(), arbiter));
                        raised.push(id.to_owned());
                        last_subject = Some(id.to_owned());
                    }
                }
            }
            Op::Withdraw => {
                // Left in the arbiter's pool on purpose: the two race.
                let id = raised.swap_remove(rng.below(raised.len()));
                call(
                    &mut tally,
                    Verb::DecisionWithdraw.as_str(),
                    json!({"id": id}),
                );
            }
            Op::Inbox => {
                call(&mut tally, Verb::Inbox.as_str(), json!({}));
            }
            Op::Trail => {
                let subject = last_subject.clone().unwrap_or_else(|| role.clone());
                call(
                    &mut tally,
                    Verb::Trail.as_str(),
                    json!({"subject": subject}),
                );
            }
            Op::Tasks => {
                call(&mut tally, Verb::Tasks.as_str(), json!({}));
            }
            Op::Agents => {
                call(&mut tally, Verb::Agents.as_str(), json!({}));
            }
        }
    }
    tally
}

fn percentile_us(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    let us = sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1e6;
    (us * 10.0).round() / 10.0
}

/// `VmHWM` of this process in KiB, when `/proc` has it.
fn peak_rss_kib() -> Option<u64> {
    procfs::process::Process::myself()
        .ok()?
        .status()
        .ok()?
        .vmhwm
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(opts) => opts,
        Err(message) => {
            eprintln!("load: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(what) => {
            println!("{}", json!({"figure": "load", "error": what}));
            ExitCode::from(2)
        }
    }
}

/// Runs the load; `Ok(false)` when an unexpected refusal occurred.
fn run(opts: &Options) -> Result<bool, &'static str> {
    let base = opts.data_root.clone().unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::Builder::new()
        .prefix("mosaic-load-")
        .tempdir_in(&base)
        .map_err(|_| "cannot create a fresh data root")?;
    // A data root must not be group- or other-writable.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .map_err(|_| "cannot chmod the data root")?;
    let count = opts.clients.div_ceil(ROLES);
    let businesses: Map<String, Value> = (0..count)
        .map(|b| {
            let id = format!("load{b}");
            (id.clone(), business(&id))
        })
        .collect();
    let launches: Vec<Value> = (0..opts.clients)
        .map(|i| {
            let (business, role, run) = identity(i);
            json!({"business": business, "role": role, "run": run, "harness": "pi",
                   "pid": std::process::id(),
                   "startTime": mosaic_adapters::procfs::ProcFs::new().current().map_or(0, |me| me.start_time)})
        })
        .collect();
    let config = boot_from_value(json!({
        "dataRoot": dir.path(),
        "businesses": businesses,
        "launches": launches,
        "readers": [],
        "repoRoots": [],
    }))
    .map_err(|_| "the load configuration does not validate")?;
    let (broker, booted) = start_broker(config).map_err(|_| "the broker did not start")?;
    let caps: BTreeMap<String, String> = booted
        .launches
        .iter()
        .map(|l| (l.run.to_string(), l.cap.expose()))
        .collect();
    let routed: Arc<Routed> = Arc::new((0..count).map(|_| Mutex::new(Vec::new())).collect());
    let stop = Arc::new(AtomicBool::new(false));
    eprintln!(
        "[load] {} clients for {} s on {}",
        opts.clients,
        opts.seconds,
        dir.path().display()
    );
    let started = Instant::now();
    let mut threads = Vec::new();
    for i in 0..opts.clients {
        let cap = caps
            .get(&identity(i).2)
            .cloned()
            .ok_or("a launch without its capability")?;
        let (socket, routed, stop) = (
            booted.socket.clone(),
            Arc::clone(&routed),
            Arc::clone(&stop),
        );
        threads.push(std::thread::spawn(move || {
            client(i, cap, socket, &routed, &stop)
        }));
    }
    // The run's length is the measurement's, not a synchronisation.
    std::thread::sleep(Duration::from_secs(opts.seconds));
    stop.store(true, Ordering::Relaxed);
    let mut total = Tally::default();
    for thread in threads {
        let tally = thread.join().map_err(|_| "a client thread panicked")?;
        for (verb, samples) in tally.latencies {
            total.latencies.entry(verb).or_default().extend(samples);
        }
        for (code, n) in tally.refusals {
            *total.refusals.entry(code).or_default() += n;
        }
        total.unexpected += tally.unexpected;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let peak = peak_rss_kib();
    broker
        .close()
        .map_err(|_| "the broker did not close cleanly")?;
    let db_bytes = std::fs::metadata(dir.path().join("bus").join("bus.sqlite"))
        .map(|m| m.len())
        .ok();
    drop(dir);

    let requests: usize = total.latencies.values().map(Vec::len).sum();
    let verbs: Map<String, Value> = total
        .latencies
        .iter_mut()
        .map(|(verb, samples)| {
            samples.sort_unstable();
            let rate = samples.len() as f64 / elapsed;
            (
                (*verb).to_owned(),
                json!({
                    "count": samples.len(),
                    "per_s": (rate * 10.0).round() / 10.0,
                    "p50_us": percentile_us(samples, 50.0),
                    "p99_us": percentile_us(samples, 99.0),
                }),
            )
        })
        .collect();
    let expected: Vec<&str> = EXPECTED.iter().map(|r| r.code()).collect();
    println!(
        "{}",
        json!({
            "figure": "load",
            "clients": opts.clients,
            "seconds": (elapsed * 10.0).round() / 10.0,
            "requests": requests,
            "requests_per_s": ((requests as f64 / elapsed) * 10.0).round() / 10.0,
            "verbs": verbs,
            "refusals": total.refusals,
            "expected_refusals": expected,
            "unexpected_refusals": total.unexpected,
            "peak_rss_kib": peak,
            "peak_rss_note": "VmHWM of the load process: the in-process broker plus its client threads",
            "db_bytes": db_bytes,
            "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        })
    );
    Ok(total.unexpected == 0)
}
