//! The change-feed figures: how fast a waiting agent hears of a
//! message, and what a thousand idle waiters cost the broker.
//!
//! `changes_wake`: an agent waits on `changes {since: cursor}` through the
//! real [`Client`] of the real broker (started in this process, see
//! [`crate::live`]); once it is parked, another agent's `message.send`
//! to its role is answered, and the figure is the time from that answer
//! arriving at the sender to the waiter's answer arriving at the waiter,
//! both on this process's one clock. "Parked" is a condition, not a pause:
//! the waiter's thread sleeps in its socket read and every other thread
//! of the process (the broker's) is quiet ([`crate::procs::wait_quiet`]),
//! so the broker has taken the wait before the send begins. Beside it, in
//! alternating rounds with the same protocol, the physical limit of one
//! such hop: a thread asleep in a Unix socket read woken by a byte written
//! to its peer, from the write's return to the read's; and the same
//! `changes` answered at once (no `since`), the socket's own round trip
//! for this verb.
//!
//! `changes_idle`: a broker in a child process (as `broker_rss` runs it),
//! one agent per role, each holding its role and with one `changes` wait
//! open (`timeoutMs` 120000, asked again when answered), then the broker's
//! CPU time over a window (`utime + stime` of `/proc/<pid>/stat`, in % of
//! one core) and its memory (`VmRSS`, `VmHWM`). Beside it, the same
//! broker over a window of the same length before any wait was opened:
//! what it costs with nothing to do. The waiters are threads of this
//! process, each on a plain Unix socket with the wire's request line (the
//! [`Client`] blocks a thread until its answer and cannot be interrupted,
//! and the figure needs to close every wait at the end); this process's
//! soft limit on open files is raised to its hard limit first.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mosaic_client::socket::Client;
use mosaic_domain::{Refusal, Verb};
use serde_json::{json, Value};

use crate::live::{self, Grants, Live};
use crate::output::{round1, round3, Failure, Fields};
use crate::procs::{self, Task};
use crate::rss;
use crate::Ctx;

/// The target: a waiting agent hears of a change within 1 ms (p50).
const WAKE_TARGET_US: f64 = 1000.0;
/// The target: 1000 idle waiters cost under 1 % of one core …
const IDLE_CPU_TARGET_PCT: f64 = 1.0;
/// … and the broker stays under 40 MiB.
const IDLE_RSS_TARGET_MIB: f64 = 40.0;

/// The longest wait a waiter asks for (the verb clamps to it).
const WAIT_MS: u64 = 120_000;

/// The longest the bench waits for one condition (a parked waiter, a quiet
/// broker, an answer) before the figure fails.
const WAIT: Duration = Duration::from_secs(30);

/// The longest it waits for a thousand waiters to be parked.
const OPEN_WAIT: Duration = Duration::from_secs(120);

/// The stack of each idle waiter thread: it only reads and parses a line.
const WAITER_STACK: usize = 128 * 1024;

/// The name of the `changes_wake` waiter's thread.
const WAKE_THREAD: &str = "changes-waiter";
/// The name of the one-hop reference's reader thread.
const HOP_THREAD: &str = "socket-hop";
/// The name of every `changes_idle` waiter thread.
const IDLE_THREAD: &str = "changes-idle";

/// Signed µs from `from` to `to` (negative when `to` came first).
fn signed_us(from: Instant, to: Instant) -> f64 {
    match to.checked_duration_since(from) {
        Some(d) => d.as_secs_f64() * 1e6,
        None => -(from.duration_since(to).as_secs_f64() * 1e6),
    }
}

/// Nearest-rank percentile `p` of signed samples (NaN for none).
fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mean(samples: &[f64]) -> f64 {
    samples.iter().sum::<f64>() / samples.len() as f64
}

/// Whether `task` is one of the threads a quiet check of this process
/// looks at: all but the calling (main) thread, which does the checking,
/// and the `--awake` threads, which never sleep.
fn others(task: &Task) -> bool {
    task.tid != std::process::id() && task.comm != "awake"
}

/// The id of this process's thread named `name`.
fn thread_id(name: &str) -> Result<u32, Failure> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(task) = procs::tasks(&procs::proc_dir(None))?
            .into_iter()
            .find(|t| t.comm == name)
        {
            return Ok(task.tid);
        }
        if Instant::now() > deadline {
            return Err(Failure::new("a bench thread did not start"));
        }
        std::thread::yield_now();
    }
}

/// Waits until the thread `tid` of this process sleeps in a Unix socket
/// read, after it has said it is about to (`issued`), and every other
/// thread is quiet: whatever it wrote has been taken and handled.
fn wait_parked(tid: u32, issued: &AtomicBool) -> Result<(), Failure> {
    let dir = procs::proc_dir(None);
    let deadline = Instant::now() + WAIT;
    loop {
        procs::wait_quiet(&dir, others, WAIT, "the broker did not go quiet")?;
        // Where the kernel does not name the wait, the flag and the quiet
        // threads are all there is to go by.
        let reading = procs::wchan(&dir, tid).is_none_or(|w| w == procs::UNIX_READ);
        if issued.load(Ordering::SeqCst) && reading {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Failure::new("the waiter never parked in its read"));
        }
    }
}

/// What the `changes_wake` waiter thread reports for one wait.
type Woken = Result<(Instant, Value), Refusal>;

/// The waiter of `changes_wake`: waits on `changes {since}` for every
/// cursor it is given, and reports each answer with the moment it arrived.
fn spawn_waiter(
    client: Client,
    issued: Arc<AtomicBool>,
) -> Result<(mpsc::Sender<u64>, mpsc::Receiver<Woken>), Failure> {
    let (go, cursors) = mpsc::channel::<u64>();
    let (report, woken) = mpsc::channel::<Woken>();
    std::thread::Builder::new()
        .name(WAKE_THREAD.into())
        .spawn(move || {
            for since in cursors {
                issued.store(true, Ordering::SeqCst);
                let answer = client.call(
                    Verb::Changes.as_str(),
                    json!({"since": since, "timeoutMs": WAIT_MS}),
                );
                let at = Instant::now();
                if report.send(answer.map(|a| (at, a))).is_err() {
                    return;
                }
            }
        })
        .map_err(|_| Failure::new("cannot start the waiter thread"))?;
    Ok((go, woken))
}

/// The reader of the one-hop reference: reads one byte at a time and
/// reports when each arrived, until its socket closes.
fn spawn_hop(
    mut socket: UnixStream,
    issued: Arc<AtomicBool>,
) -> Result<mpsc::Receiver<Instant>, Failure> {
    use std::io::Read as _;
    let (report, arrived) = mpsc::channel();
    std::thread::Builder::new()
        .name(HOP_THREAD.into())
        .spawn(move || {
            let mut byte = [0u8; 1];
            loop {
                issued.store(true, Ordering::SeqCst);
                match socket.read(&mut byte) {
                    Ok(1) => {
                        if report.send(Instant::now()).is_err() {
                            return;
                        }
                    }
                    Ok(_) | Err(_) => return,
                }
            }
        })
        .map_err(|_| Failure::new("cannot start the socket reference thread"))?;
    Ok(arrived)
}

/// The cursor of a `changes` answer.
fn cursor_of(answer: &Value) -> Result<u64, Failure> {
    answer["cursor"]
        .as_u64()
        .ok_or(Failure::new("a changes answer without a cursor"))
}

/// `changes_wake`: from a `message.send`'s answer at the sender to the
/// parked waiter's answer, beside one Unix-socket hop and the immediate
/// `changes` round trip.
///
/// # Errors
/// When the broker cannot start, a request is refused, the waiter hears of
/// anything but the one message sent to it, or a thread never parks.
pub fn changes_wake(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let roles = vec![
        ("sender".to_owned(), Grants::Send),
        ("waiter".to_owned(), Grants::Send),
    ];
    let live = Live::start(ctx, "changes-wake", &roles, false)?;
    let (sender, waiter) = (live.clients[0].clone(), live.clients[1].clone());
    live::warm_up(&sender, sizes.socket_warmup)?;

    // The socket's own round trip for this verb: answered at once.
    let mut immediate = Vec::with_capacity(sizes.wake_rounds);
    let mut cursor = 0;
    for _ in 0..sizes.wake_rounds.max(1) {
        let t = Instant::now();
        let answer = waiter
            .call(Verb::Changes.as_str(), json!({}))
            .map_err(|r| Failure::refused("changes without since refused", r))?;
        immediate.push(t.elapsed());
        cursor = cursor_of(&answer)?;
        if answer["changes"] != json!([]) {
            return Err(Failure::new("changes without since listed changes"));
        }
    }

    let issued = Arc::new(AtomicBool::new(false));
    let (go, woken) = spawn_waiter(waiter.clone(), Arc::clone(&issued))?;
    let waiter_tid = thread_id(WAKE_THREAD)?;
    let hop_issued = Arc::new(AtomicBool::new(false));
    let (mut hop_writer, hop_reader) = UnixStream::pair()
        .map_err(|_| Failure::new("cannot make a socket pair for the reference"))?;
    let hops = spawn_hop(hop_reader, Arc::clone(&hop_issued))?;
    let hop_tid = thread_id(HOP_THREAD)?;

    let warm = sizes.wake_warmup;
    let mut wakes = Vec::with_capacity(sizes.wake_rounds);
    let mut hop_samples = Vec::with_capacity(sizes.wake_rounds);
    let mut from_request = Vec::with_capacity(sizes.wake_rounds);
    let mut send_trips = Vec::with_capacity(sizes.wake_rounds);
    let started = Instant::now();
    for round in 0..warm + sizes.wake_rounds {
        // The broker: park the waiter, then send to its role.
        issued.store(false, Ordering::SeqCst);
        go.send(cursor)
            .map_err(|_| Failure::new("the waiter thread ended"))?;
        if let Err(failure) = wait_parked(waiter_tid, &issued) {
            return Err(match woken.try_recv() {
                Ok(Ok((_, answer))) => {
                    eprintln!("[bench] changes_wake: answered early: {answer} (since {cursor})");
                    Failure::new("the waiter was answered before anything was sent to it")
                }
                Ok(Err(refusal)) => Failure::refused("the waiting changes was refused", refusal),
                Err(_) => failure,
            });
        }
        let asked_at = Instant::now();
        let sent = sender
            .call(
                Verb::MessageSend.as_str(),
                json!({"to": "waiter", "class": "INFO", "body": live::body(round)}),
            )
            .map_err(|r| Failure::refused("message.send refused", r))?;
        let sent_at = Instant::now();
        let (woke_at, answer) = woken
            .recv_timeout(WAIT)
            .map_err(|_| Failure::new("the waiter was not answered"))?
            .map_err(|r| Failure::refused("the waiting changes was refused", r))?;
        let changes = answer["changes"]
            .as_array()
            .ok_or(Failure::new("a changes answer without its list"))?;
        let next = cursor_of(&answer)?;
        match changes.as_slice() {
            [change]
                if change["kind"] == "message.sent"
                    && change["message"] == sent["id"]
                    && change["seq"].as_u64() == Some(next)
                    && next > cursor => {}
            _ => {
                return Err(Failure::new(
                    "the waiter heard of something other than the one message sent to it",
                ))
            }
        }
        cursor = next;

        // The reference: one hop through a Unix socket, same protocol.
        wait_parked(hop_tid, &hop_issued)?;
        // The reader says so again right before its next read.
        hop_issued.store(false, Ordering::SeqCst);
        let write_at = Instant::now();
        hop_writer
            .write_all(&[1])
            .map_err(|_| Failure::new("cannot write to the reference socket"))?;
        let read_at = hops
            .recv_timeout(WAIT)
            .map_err(|_| Failure::new("the reference reader did not read"))?;

        if round >= warm {
            wakes.push(signed_us(sent_at, woke_at));
            from_request.push(signed_us(asked_at, woke_at));
            send_trips.push(signed_us(asked_at, sent_at));
            hop_samples.push(signed_us(write_at, read_at));
        }
    }
    let wall = started.elapsed();
    drop(go);
    drop(hop_writer);
    live.close()?;

    let p50 = percentile(&wakes, 50.0);
    let hop_p50 = percentile(&hop_samples, 50.0);
    let immediate_p50 = crate::stats::percentile_us(&immediate, 50.0);
    Ok(vec![
        ("p50_us", round1(p50)),
        ("p99_us", round1(percentile(&wakes, 99.0))),
        ("mean_us", round1(mean(&wakes))),
        ("min_us", round1(percentile(&wakes, 0.0))),
        ("n", Value::from(wakes.len())),
        (
            "waiter_first",
            Value::from(wakes.iter().filter(|&&w| w < 0.0).count()),
        ),
        ("target", Value::from("p50_us <= 1000")),
        ("met", Value::from(p50 <= WAKE_TARGET_US)),
        (
            "from_request_p50_us",
            round1(percentile(&from_request, 50.0)),
        ),
        (
            "from_request_p99_us",
            round1(percentile(&from_request, 99.0)),
        ),
        ("send_p50_us", round1(percentile(&send_trips, 50.0))),
        ("send_p99_us", round1(percentile(&send_trips, 99.0))),
        ("hop_p50_us", round1(hop_p50)),
        ("hop_p99_us", round1(percentile(&hop_samples, 99.0))),
        ("immediate_p50_us", round1(immediate_p50)),
        (
            "immediate_p99_us",
            round1(crate::stats::percentile_us(&immediate, 99.0)),
        ),
        ("rounds_s", round3(wall.as_secs_f64())),
        (
            "note",
            Value::from("from message.send's answer at the sender to the parked waiter's changes answer, one clock (negative: the waiter's came first, counted in waiter_first); each round waits until the waiter sleeps in its socket read and the broker is quiet; from_request_: from the sender's call (before its connect) to the waiter's answer, the send's commit included; send_: the sender's own message.send round trip; hop_: a thread asleep in a Unix socket read woken by one byte, from the call to write to the read's return, in alternating rounds with the same protocol: the physical limit of one wake-up; immediate_: changes without since, answered at once (connect, request, answer)"),
        ),
        (
            "path",
            Value::from("mosaic_client::socket::Client -> bus.sock -> in-process broker; one connection per request"),
        ),
    ])
}

/// One idle waiter: its thread keeps one `changes` wait open on its own
/// connection, and asks again when answered.
struct Waiter {
    /// The open connection, for closing it from outside.
    stream: Mutex<Option<UnixStream>>,
}

/// What all idle waiters share.
struct Waiters {
    socket: PathBuf,
    stop: AtomicBool,
    /// Waits answered with changes or a timeout (and asked again).
    answered: AtomicUsize,
    /// Refusal codes, one per waiter that was refused (and stopped).
    refused: Mutex<Vec<String>>,
    /// Waiters whose thread ended for another reason.
    broken: AtomicUsize,
    each: Vec<Waiter>,
}

impl Waiters {
    /// Waiter `i`'s loop with capability `cap`, from `since`.
    fn run(&self, i: usize, cap: &str, mut since: u64) {
        loop {
            let Ok(stream) = UnixStream::connect(&self.socket) else {
                self.refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Refusal::BrokerUnavailable.code().to_owned());
                return;
            };
            {
                let mut slot = self.each[i]
                    .stream
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if self.stop.load(Ordering::SeqCst) {
                    return;
                }
                match stream.try_clone() {
                    Ok(clone) => *slot = Some(clone),
                    Err(_) => {
                        self.broken.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                }
            }
            let request = json!({
                "cap": cap,
                "verb": Verb::Changes.as_str(),
                "args": {"since": since, "timeoutMs": WAIT_MS},
            });
            let mut line = request.to_string().into_bytes();
            line.push(b'\n');
            let mut reader = BufReader::new(stream);
            let mut answer = Vec::new();
            let read = reader
                .get_mut()
                .write_all(&line)
                .and_then(|()| reader.read_until(b'\n', &mut answer));
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let parsed: Option<Value> = match read {
                Ok(n) if n > 0 => serde_json::from_slice(&answer).ok(),
                Ok(_) | Err(_) => None,
            };
            let Some(parsed) = parsed else {
                self.broken.fetch_add(1, Ordering::SeqCst);
                return;
            };
            if parsed["ok"] != true {
                let code = parsed["error"].as_str().unwrap_or("unknown").to_owned();
                self.refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(code);
                return;
            }
            match parsed["result"]["cursor"].as_u64() {
                Some(cursor) => since = cursor,
                None => {
                    self.broken.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
            self.answered.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Ends every wait: no waiter asks again, and every open connection is
    /// shut down, which wakes its thread.
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for waiter in &self.each {
            let slot = waiter.stream.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(stream) = slot.as_ref() {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    fn refused(&self) -> Vec<String> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The broker's CPU time over one window.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// From `/proc/<pid>/stat`, in % of one core.
    stat_pct: f64,
    /// From its threads' `schedstat`, in % of one core.
    sched_pct: f64,
    /// The same, in µs of CPU over the whole window.
    sched_us: f64,
}

/// A window of `length` over the broker at `dir`: its CPU time from
/// `/proc/<pid>/stat` and from its threads' `schedstat`.
fn cpu_window(dir: &Path, length: Duration) -> Result<Window, Failure> {
    let (ticks, ns, t) = (procs::cpu_ticks(dir)?, procs::run_ns(dir)?, Instant::now());
    // A measurement interval, not a synchronisation: the broker is left
    // alone for exactly this long.
    std::thread::sleep(length);
    let (ticks_after, ns_after) = (procs::cpu_ticks(dir)?, procs::run_ns(dir)?);
    let wall = t.elapsed().as_secs_f64();
    let sched_ns = ns_after.saturating_sub(ns) as f64;
    Ok(Window {
        stat_pct: ticks_after.saturating_sub(ticks) as f64 / procs::TICKS_PER_S / wall * 100.0,
        sched_pct: sched_ns / 1e9 / wall * 100.0,
        sched_us: sched_ns / 1e3,
    })
}

/// `changes_idle`: a broker child with one open `changes` wait per agent.
///
/// # Errors
/// When the child cannot be started or booted, a claim or a cursor is
/// refused, `/proc` cannot be read, or the waiters do not settle.
pub fn changes_idle(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let agents = sizes.idle_agents;
    let (program, arg, binary) = rss::program(ctx.quick)?;
    let root = live::data_root(ctx, "changes-idle")?;
    let roles: Vec<(String, Grants)> = (0..agents)
        .map(|i| (format!("i{i:04}"), Grants::Send))
        .collect();
    let config = live::boot_config(&root, &roles, false);
    let mut host = rss::Host::spawn(&program, arg)?;
    let pid = host.pid()?;
    let dir = procs::proc_dir(Some(pid));
    // The broker keeps the limit it was started with; only the clients'
    // side (this process) is raised.
    let nofile = procs::raise_nofile();
    let (reply, socket) = host.boot(&config)?;
    let caps: Vec<String> = (0..agents)
        .map(|i| {
            reply["launches"][i]["cap"]
                .as_str()
                .map(str::to_owned)
                .ok_or(Failure::new("the boot reply has no capability"))
        })
        .collect::<Result<_, _>>()?;
    let claim_started = Instant::now();
    let cursors = claim_all(&socket, &caps)?;
    let claim_s = claim_started.elapsed().as_secs_f64();

    procs::wait_quiet(&dir, |_| true, WAIT, "the booted broker did not go quiet")?;
    let booted = rss::memory(pid)?;
    let fds_idle = procs::fd_count(&dir)?;
    let baseline = cpu_window(&dir, sizes.idle_window)?;

    let waiters = Arc::new(Waiters {
        socket,
        stop: AtomicBool::new(false),
        answered: AtomicUsize::new(0),
        refused: Mutex::new(Vec::new()),
        broken: AtomicUsize::new(0),
        each: (0..agents)
            .map(|_| Waiter {
                stream: Mutex::new(None),
            })
            .collect(),
    });
    let open_started = Instant::now();
    let mut threads = Vec::with_capacity(agents);
    for (i, (cap, since)) in caps.into_iter().zip(cursors).enumerate() {
        let shared = Arc::clone(&waiters);
        let thread = std::thread::Builder::new()
            .name(IDLE_THREAD.into())
            .stack_size(WAITER_STACK)
            .spawn(move || shared.run(i, &cap, since));
        match thread {
            Ok(thread) => threads.push(thread),
            Err(_) => {
                waiters.stop();
                return Err(Failure::new("cannot start a waiter thread"));
            }
        }
    }
    let settled = settle(&waiters, threads.len(), &dir);
    let open_s = open_started.elapsed().as_secs_f64();
    let measured = settled.and_then(|parked| {
        let fds_waiting = procs::fd_count(&dir)?;
        let answered_before = waiters.answered.load(Ordering::SeqCst);
        let window = cpu_window(&dir, sizes.idle_window)?;
        let answered = waiters.answered.load(Ordering::SeqCst) - answered_before;
        let memory = rss::memory(pid)?;
        Ok((parked, fds_waiting, window, answered, memory))
    });
    waiters.stop();
    for thread in threads {
        let _ = thread.join();
    }
    let (parked, fds_waiting, window, answered, waiting) = measured?;
    let pct = window.stat_pct;
    // A client that disconnects ends its wait: the broker closes its side.
    let released = wait_fds(&dir, fds_idle);
    let refused = waiters.refused();
    let broken = waiters.broken.load(Ordering::SeqCst);
    let broker_nofile = procs::nofile_soft(&dir);
    // Its whole life's CPU time, boot and claims included: the readings
    // above come from files that do count.
    let life_ms = procs::run_ns(&dir)? as f64 / 1e6;
    let life_ticks = procs::cpu_ticks(&dir)?;
    host.close()?;

    let hwm_mib = waiting.hwm_kib as f64 / 1024.0;
    let all_waiting = parked == agents;
    let met = all_waiting && pct < IDLE_CPU_TARGET_PCT && hwm_mib < IDLE_RSS_TARGET_MIB;
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    for code in refused {
        *codes.entry(code).or_default() += 1;
    }
    Ok(vec![
        ("cpu_pct", round3(pct)),
        ("vm_rss_mib", rss::mib(waiting.rss_kib)),
        ("vm_hwm_mib", rss::mib(waiting.hwm_kib)),
        (
            "target",
            Value::from("cpu_pct < 1 and vm_hwm_mib < 40 with every agent's wait open"),
        ),
        ("met", Value::from(met)),
        ("agents", Value::from(agents)),
        ("waiting", Value::from(parked)),
        ("refused", Value::from(codes.values().sum::<usize>())),
        ("refused_codes", json!(codes)),
        ("broken", Value::from(broken)),
        ("answered_in_window", Value::from(answered)),
        ("window_s", round3(sizes.idle_window.as_secs_f64())),
        ("cpu_pct_schedstat", round3(window.sched_pct)),
        ("cpu_us_schedstat", round1(window.sched_us)),
        ("baseline_cpu_pct", round3(baseline.stat_pct)),
        ("baseline_cpu_pct_schedstat", round3(baseline.sched_pct)),
        ("baseline_cpu_us_schedstat", round1(baseline.sched_us)),
        ("lifetime_cpu_ms_schedstat", round1(life_ms)),
        ("lifetime_cpu_ticks", Value::from(life_ticks)),
        ("vm_rss_booted_mib", rss::mib(booted.rss_kib)),
        ("vm_hwm_booted_mib", rss::mib(booted.hwm_kib)),
        ("threads", Value::from(waiting.threads)),
        ("broker_fds_idle", Value::from(fds_idle)),
        ("broker_fds_waiting", Value::from(fds_waiting)),
        ("broker_fds_released", Value::from(released)),
        (
            "broker_nofile_soft",
            broker_nofile.map_or(Value::Null, Value::from),
        ),
        ("bench_nofile_soft", nofile.map_or(Value::Null, Value::from)),
        ("claim_s", round3(claim_s)),
        ("open_s", round3(open_s)),
        ("binary", Value::from(binary)),
        (
            "note",
            Value::from("cpu_pct: utime+stime of /proc/<pid>/stat over the window, % of one core (10 ms ticks); _schedstat: the same from its threads' schedstat (ns; cpu_us_: the whole window's, in µs); baseline_: the same broker over a window of the same length before any wait was opened; waiting: agents whose wait was open (their thread asleep in its socket read, the broker quiet) when the window began; vm_*: /proc/<pid>/status at the window's end (vm_hwm: peak over its life); broker_fds_released: its open files fell back to their idle count once the clients closed"),
        ),
    ])
}

/// Claims every agent's role (a few threads at once, so claims share
/// group commits) and takes each one's cursor (`changes` without `since`).
fn claim_all(socket: &Path, caps: &[String]) -> Result<Vec<u64>, Failure> {
    const CLAIMERS: usize = 4;
    let chunk = caps.len().div_ceil(CLAIMERS).max(1);
    let results: Vec<Result<Vec<u64>, Failure>> = std::thread::scope(|scope| {
        let handles: Vec<_> = caps
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|cap| {
                            let client = Client::new(socket, cap.as_str());
                            client
                                .call(Verb::RoleClaim.as_str(), json!({}))
                                .map_err(|r| Failure::refused("role.claim refused", r))?;
                            let answer = client
                                .call(Verb::Changes.as_str(), json!({}))
                                .map_err(|r| Failure::refused("changes refused", r))?;
                            cursor_of(&answer)
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or(Err(Failure::new("a claiming thread panicked")))
            })
            .collect()
    });
    Ok(results.into_iter().collect::<Result<Vec<_>, _>>()?.concat())
}

/// Waits until each of `n` waiter threads sleeps in its socket read or has
/// ended (refused), and the broker is quiet; returns how many are parked
/// in their read.
fn settle(waiters: &Waiters, n: usize, broker: &Path) -> Result<usize, Failure> {
    let me = procs::proc_dir(None);
    let deadline = Instant::now() + OPEN_WAIT;
    loop {
        let ended = waiters.refused().len() + waiters.broken.load(Ordering::SeqCst);
        let mine: Vec<Task> = procs::tasks(&me)?
            .into_iter()
            .filter(|t| t.comm == IDLE_THREAD)
            .collect();
        let parked = mine
            .iter()
            .filter(|t| {
                t.state == 'S' && procs::wchan(&me, t.tid).is_none_or(|w| w == procs::UNIX_READ)
            })
            .count();
        if parked + ended >= n {
            procs::wait_quiet(broker, |_| true, WAIT, "the broker did not go quiet")?;
            // Quiet, and nobody was answered meanwhile: every wait is open.
            let again = procs::tasks(&me)?
                .into_iter()
                .filter(|t| t.comm == IDLE_THREAD && t.state == 'S')
                .count();
            if again == parked {
                return Ok(parked);
            }
        }
        if Instant::now() > deadline {
            return Err(Failure::new("the waiters did not all park in time"));
        }
        std::thread::yield_now();
    }
}

/// Waits until the broker has at most `fds` files open again; whether it
/// did within [`WAIT`].
fn wait_fds(broker: &Path, fds: usize) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        match procs::fd_count(broker) {
            Ok(n) if n <= fds => return true,
            Ok(_) if Instant::now() <= deadline => std::thread::yield_now(),
            Ok(_) | Err(_) => return false,
        }
    }
}
