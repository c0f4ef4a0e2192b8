//! `human_under_siege`: how long the human CLI waits for its `inbox` while
//! hostile peers flood the broker, beside its quiet time in the same run:
//! the human cannot be locked out.
//!
//! The broker is a child process ([`rss::Host`]: `mosaic-bus broker` when
//! that binary sits next to the bench, else the bench itself), with its
//! browser-control port on, one business (`bench`, human `alice`) and no
//! launch, so the bench's children are no agent's. The human is the real
//! CLI, the broker's own binary run as `<binary> human <socket>` with
//! `{"business":"bench","verb":"inbox"}` on its stdin (the bench answers
//! `human` as `mosaic-bus` does when it is the broker), timed from spawn
//! to exit, as a person at a shell waits for it. It runs detached
//! (`setsid -f`, with an empty environment), so it passes the proof
//! wherever the bench is started.
//!
//! Phases, in turn, each timing [`Sizes::siege_human_calls`] calls once
//! its flood is in full swing:
//! - `quiet`: nothing else;
//! - `junk_socket`: [`Sizes::siege_junk`] socket connections held open,
//!   each sending the line `x` at once and again every 2.5 s; one the
//!   broker answers or closes is replaced at once;
//! - `partial_http`: [`Sizes::siege_partial`] connections to the HTTP port
//!   that send `GET / HTTP/1.1\r\n` and nothing more, each one closed
//!   replaced at once (the bench's open-file limit is raised for them);
//! - `proof_amplification`: a chain of [`Sizes::siege_chain_depth`] shells,
//!   each with [`Sizes::siege_chain_env_kib`] KiB of environment, under a
//!   process carrying a run marker (`MOSAIC_RUN_ID`) above the chain; the
//!   deepest runs [`Sizes::siege_chain_senders`] loops of forged human
//!   lines (the real CLI, whose proof must walk the chain);
//! - `refusal_flood`: forged human lines without a capability over 16
//!   connections, as fast as the broker answers, for at least
//!   [`Sizes::siege_refusal_window`]; the store's growth (its pages) over
//!   that time is reported per minute.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::live;
use crate::output::{round1, round3, Failure, Fields};
use crate::procs;
use crate::rss;
use crate::stats::percentile_us;
use crate::Ctx;

/// The target: the human's p99 under every flood.
const TARGET_P99: Duration = Duration::from_secs(1);

/// How often a junk connection sends its line again.
const JUNK_EVERY: Duration = Duration::from_millis(2500);

/// Connections of the refusal flood.
const REFUSAL_CONNECTIONS: usize = 16;

/// The longest any flood may take to get going, and any human call.
const WAIT: Duration = Duration::from_secs(60);

/// The argument that makes the bench binary act as `mosaic-bus human`.
pub const HUMAN_ARG: &str = "human";

/// Runs `human <socket>` as `mosaic-bus human` does (stdin to the answer
/// line on stdout); its exit code. It re-executes this binary once, as
/// the real CLI re-executes itself.
pub fn human_main(socket: &Path) -> u8 {
    let (line, code) = mosaic_app::commands::human::run(socket, std::io::stdin());
    println!("{line}");
    code
}

/// A flood on its own thread: stopped when told, or dropped.
struct Flood {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<usize, Failure>>>,
}

impl Flood {
    /// Starts `flood` and waits until it says it is in full swing.
    fn start(
        flood: impl FnOnce(&AtomicBool, mpsc::Sender<()>) -> Result<usize, Failure> + Send + 'static,
    ) -> Result<Flood, Failure> {
        let stop = Arc::new(AtomicBool::new(false));
        let (full, in_full_swing) = mpsc::channel();
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || flood(&flag, full));
        let mut flood = Flood {
            stop,
            thread: Some(thread),
        };
        if in_full_swing.recv_timeout(WAIT).is_err() {
            flood.stop()?;
            return Err(Failure::new("a flood never got going"));
        }
        Ok(flood)
    }

    /// Stops the flood; what it counted.
    fn stop(&mut self) -> Result<usize, Failure> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().map_or(Ok(0), |t| {
            t.join().unwrap_or(Err(Failure::new("a flood panicked")))
        })
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The human's `inbox` calls of one phase.
struct Calls {
    took: Vec<Duration>,
    ok: usize,
    codes: std::collections::BTreeMap<String, usize>,
}

/// Times `n` human `inbox` calls, one after another.
fn human_calls(program: &Path, socket: &Path, n: usize) -> Result<Calls, Failure> {
    let mut calls = Calls {
        took: Vec::with_capacity(n),
        ok: 0,
        codes: std::collections::BTreeMap::new(),
    };
    for _ in 0..n {
        let started = Instant::now();
        // Detached (`setsid -f`, an empty environment): once `setsid` has
        // exited, the CLI's parent is pid 1 or the nearest subreaper, so no
        // run marker of the bench's own ancestry is in the proof's way.
        let mut setsid = Command::new("setsid")
            .arg("-f")
            .arg(program)
            .arg(HUMAN_ARG)
            .arg(socket)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|_| Failure::new("cannot start the human CLI"))?;
        // Taken first: `wait` closes stdin.
        let (stdin, stdout) = (setsid.stdin.take(), setsid.stdout.take());
        setsid
            .wait()
            .map_err(|_| Failure::new("setsid did not finish"))?;
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(br#"{"business":"bench","verb":"inbox"}"#);
        }
        let mut out = Vec::new();
        stdout
            .ok_or(Failure::new("the human CLI has no stdout"))?
            .read_to_end(&mut out)
            .map_err(|_| Failure::new("the human CLI did not finish"))?;
        calls.took.push(started.elapsed());
        let answer: Value = serde_json::from_slice(&out)
            .map_err(|_| Failure::new("the human CLI's answer is not JSON"))?;
        if answer["ok"] == true {
            calls.ok += 1;
        } else {
            let code = answer["error"].as_str().unwrap_or("none").to_owned();
            *calls.codes.entry(code).or_default() += 1;
        }
    }
    Ok(calls)
}

/// What a phase reports, and whether it met the target.
fn phase_fields(name: &str, calls: &Calls) -> (Value, bool) {
    let p99 = percentile_us(&calls.took, 99.0);
    let met = calls.ok == calls.took.len() && p99 <= TARGET_P99.as_secs_f64() * 1e6;
    let fields = json!({
        "phase": name,
        "p50_ms": round3(percentile_us(&calls.took, 50.0) / 1e3),
        "p99_ms": round3(p99 / 1e3),
        "max_ms": round3(calls.took.iter().max().map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)),
        "calls": calls.took.len(),
        "ok": calls.ok,
        "refused": calls.codes,
    });
    (fields, met)
}

/// Junk socket connections: `count` held open, each sending `x` at once
/// and every [`JUNK_EVERY`]; replaced once answered or closed. In full
/// swing once `count` are open. Returns how many were opened.
fn junk_socket(
    socket: PathBuf,
    count: usize,
) -> impl FnOnce(&AtomicBool, mpsc::Sender<()>) -> Result<usize, Failure> {
    move |stop, full| {
        let started = Instant::now();
        let mut opened = 0usize;
        let open = |opened: &mut usize| -> Result<(UnixStream, Instant), Failure> {
            loop {
                if started.elapsed() > WAIT * 10 || (stop.load(Ordering::SeqCst) && *opened > 0) {
                    return Err(Failure::new("the junk socket flood could not connect"));
                }
                if let Ok(mut stream) = UnixStream::connect(&socket) {
                    let _ = stream.write_all(b"x\n");
                    let _ = stream.set_nonblocking(true);
                    *opened += 1;
                    return Ok((stream, Instant::now()));
                }
            }
        };
        let mut held = Vec::with_capacity(count);
        for _ in 0..count {
            held.push(open(&mut opened)?);
        }
        let _ = full.send(());
        while !stop.load(Ordering::SeqCst) {
            for (stream, sent) in &mut held {
                let mut answer = [0u8; 128];
                match (&*stream).read(&mut answer) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if sent.elapsed() >= JUNK_EVERY {
                            let _ = stream.write_all(b"x\n");
                            *sent = Instant::now();
                        }
                        continue;
                    }
                    Ok(_) | Err(_) => {}
                }
                match open(&mut opened) {
                    Ok(next) => (*stream, *sent) = next,
                    Err(_) if stop.load(Ordering::SeqCst) => break,
                    Err(failure) => return Err(failure),
                }
            }
        }
        Ok(opened)
    }
}

/// Partial HTTP requests: `count` connections that sent
/// `GET / HTTP/1.1\r\n` only, each one answered or closed replaced at
/// once. In full swing once `count` were opened. Returns how many were.
fn partial_http(
    address: String,
    count: usize,
) -> impl FnOnce(&AtomicBool, mpsc::Sender<()>) -> Result<usize, Failure> {
    move |stop, full| {
        let started = Instant::now();
        let mut opened = 0usize;
        let open = |opened: &mut usize| -> Result<TcpStream, Failure> {
            loop {
                if started.elapsed() > WAIT * 10 || (stop.load(Ordering::SeqCst) && *opened > 0) {
                    return Err(Failure::new("the partial HTTP flood could not connect"));
                }
                if let Ok(mut stream) = TcpStream::connect(&address) {
                    let _ = stream.write_all(b"GET / HTTP/1.1\r\n");
                    let _ = stream.set_nonblocking(true);
                    *opened += 1;
                    return Ok(stream);
                }
            }
        };
        let mut held = Vec::with_capacity(count);
        for _ in 0..count {
            held.push(open(&mut opened)?);
        }
        let _ = full.send(());
        while !stop.load(Ordering::SeqCst) {
            for stream in &mut held {
                let mut answer = [0u8; 256];
                match (&*stream).read(&mut answer) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Ok(_) | Err(_) => {}
                }
                match open(&mut opened) {
                    Ok(next) => *stream = next,
                    Err(_) if stop.load(Ordering::SeqCst) => break,
                    Err(failure) => return Err(failure),
                }
            }
        }
        Ok(opened)
    }
}

/// A forged human line: no capability, a nonce no process carries.
fn forged_human_line() -> String {
    let line = json!({
        "human": {"nonce": "0".repeat(64)},
        "business": "bench",
        "verb": "inbox",
        "args": {},
    });
    format!("{line}\n")
}

/// Forged human lines over [`REFUSAL_CONNECTIONS`] connections, in runs of
/// 64 before their answers are read, until stopped. In full swing once the
/// first run is answered. Returns how many were answered.
fn refusal_flood(
    socket: PathBuf,
) -> impl FnOnce(&AtomicBool, mpsc::Sender<()>) -> Result<usize, Failure> {
    move |stop, full| {
        const RUN: usize = 64;
        let run = forged_human_line().repeat(RUN);
        let answered = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..REFUSAL_CONNECTIONS)
                .map(|n| {
                    let (socket, run, full, answered) = (&socket, &run, full.clone(), &answered);
                    scope.spawn(move || -> Result<(), Failure> {
                        let mut stream = UnixStream::connect(socket)
                            .map_err(|_| Failure::new("the refusal flood could not connect"))?;
                        stream
                            .set_read_timeout(Some(WAIT))
                            .map_err(|_| Failure::new("cannot set a read timeout"))?;
                        let mut lines = std::io::BufReader::new(
                            stream
                                .try_clone()
                                .map_err(|_| Failure::new("cannot clone a socket"))?,
                        );
                        let mut first = true;
                        while !stop.load(Ordering::SeqCst) {
                            stream
                                .write_all(run.as_bytes())
                                .map_err(|_| Failure::new("the refusal flood could not write"))?;
                            for _ in 0..RUN {
                                let mut answer = String::new();
                                std::io::BufRead::read_line(&mut lines, &mut answer)
                                    .map_err(|_| Failure::new("a forged line went unanswered"))?;
                                if !answer.contains("human-proof-failed") {
                                    return Err(Failure::new(
                                        "a forged human line was not refused human-proof-failed",
                                    ));
                                }
                            }
                            answered.fetch_add(RUN, Ordering::SeqCst);
                            if n == 0 && std::mem::take(&mut first) {
                                let _ = full.send(());
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            for thread in threads {
                thread
                    .join()
                    .unwrap_or(Err(Failure::new("a refusal flood connection panicked")))?;
            }
            Ok(answered.load(Ordering::SeqCst))
        })
    }
}

/// The store's size, `page_count` × `page_size` (the write-ahead log's
/// committed pages included), and its ledger's rows, read-only beside the
/// broker.
fn store_size(root: &Path) -> Result<(u64, u64), Failure> {
    let db = rusqlite::Connection::open_with_flags(
        root.join("bus").join("bus.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .map_err(|_| Failure::new("cannot open the store read-only"))?;
    let read = |sql: &str| -> Result<u64, Failure> {
        db.query_row(sql, [], |r| r.get::<_, i64>(0))
            .ok()
            .and_then(|n| u64::try_from(n).ok())
            .ok_or(Failure::new("cannot read the store's size"))
    };
    let bytes = read("PRAGMA page_count")? * read("PRAGMA page_size")?;
    Ok((bytes, read("SELECT count(*) FROM ledger")?))
}

/// Raises this process's hard limit on open files to `wanted` when it is
/// lower and the process may (root); nothing otherwise.
fn raise_hard_nofile(wanted: u64) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.maximum.is_some_and(|max| max < wanted) {
        limit.maximum = Some(wanted);
        let _ = setrlimit(Resource::Nofile, limit);
    }
}

/// The refused human proofs the store holds (rows and counts).
fn refused_proofs(root: &Path) -> Result<i64, Failure> {
    let db = rusqlite::Connection::open_with_flags(
        root.join("bus").join("bus.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .map_err(|_| Failure::new("cannot open the store read-only"))?;
    db.query_row(
        "SELECT coalesce(sum(count), 0) FROM refusal_tally WHERE code = 'human-proof-failed'",
        [],
        |r| r.get(0),
    )
    .map_err(|_| Failure::new("cannot read the refusal tally"))
}

/// Waits, at most [`WAIT`], until `done` says so.
fn wait_for(mut done: impl FnMut() -> Result<bool, Failure>) -> Result<(), Failure> {
    let deadline = Instant::now() + WAIT;
    while !done()? {
        if Instant::now() > deadline {
            return Err(Failure::new("a flood never got going"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The chain of the proof amplification: `depth` shells, each the parent
/// of the next and each with `env_kib` KiB of environment, below a shell
/// carrying the run marker `MOSAIC_RUN_ID` (which its children do not
/// inherit); the deepest runs `senders` loops of the human CLI, each with
/// a clean environment of its own, until `stop_file` exists.
fn proof_chain(
    program: &Path,
    socket: &Path,
    stop_file: &Path,
    sizes: &crate::Sizes,
) -> Result<std::process::Child, Failure> {
    // `exit $?` keeps each shell from exec-ing its last command, so every
    // level stays a process of the chain.
    let script = r#"
        depth=$1
        if [ "$depth" -gt 0 ]; then sh -c "$0" "$0" "$((depth - 1))" "$2" "$3" "$4" "$5"; exit $?; fi
        n=0
        while [ "$n" -lt "$5" ]; do
            ( while [ ! -e "$4" ]; do
                echo '{"business":"bench","verb":"inbox","args":{}}' | env -i "$2" human "$3" >/dev/null
              done ) &
            n=$((n + 1))
        done
        wait
        exit 0
    "#;
    let top = r#"env -u MOSAIC_RUN_ID sh -c "$1" "$@"; exit $?"#;
    let mut chain = Command::new("sh");
    chain
        .arg("-c")
        .arg(top)
        .arg("top")
        .arg(script)
        .arg(sizes.siege_chain_depth.to_string())
        .arg(program)
        .arg(socket)
        .arg(stop_file)
        .arg(sizes.siege_chain_senders.to_string())
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("MOSAIC_RUN_ID", "siege-marker");
    // In variables of at most 64 KiB: the kernel takes none past 128 KiB.
    let mut left = sizes.siege_chain_env_kib;
    let mut i = 0;
    while left > 0 {
        let kib = left.min(64);
        chain.env(format!("BIG{i}"), "y".repeat(kib * 1024));
        left -= kib;
        i += 1;
    }
    chain
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|_| Failure::new("cannot start the proof chain"))
}

/// `human_under_siege`: the human CLI's `inbox` quiet and under each flood.
///
/// # Errors
/// When the broker child cannot be started or booted, a flood cannot get
/// going, or the human CLI cannot be run.
pub fn human_under_siege(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let (program, arg, binary) = rss::program(ctx.quick)?;
    let root = live::data_root(ctx, "siege")?;
    let config = live::boot_config(&root, &[], true);
    let mut host = rss::Host::spawn(&program, arg)?;
    let pid = host.pid()?;
    let dir = procs::proc_dir(Some(pid));
    // The broker keeps the limit it was started with; only the flooding
    // side (this process) is raised, past its hard limit where it may.
    raise_hard_nofile(sizes.siege_partial as u64 + sizes.siege_junk as u64 + 1024);
    let nofile = procs::raise_nofile();
    let (reply, socket) = host.boot(&config)?;
    let address = reply["browser"]["url"]
        .as_str()
        .and_then(|url| url.strip_prefix("http://"))
        .ok_or(Failure::new("the boot reply has no browser url"))?
        .to_owned();
    // The partial HTTP flood holds at most what this process may open.
    let partial = sizes.siege_partial.min(
        usize::try_from(nofile.unwrap_or(1024))
            .unwrap_or(1024)
            .saturating_sub(512),
    );

    let mut phases = Vec::new();
    let mut met = true;
    let mut run_phase = |name: &str, phases: &mut Vec<Value>| -> Result<(), Failure> {
        let calls = human_calls(&program, &socket, sizes.siege_human_calls)?;
        let (fields, phase_met) = phase_fields(name, &calls);
        eprintln!("[bench]   {fields}");
        met &= phase_met;
        phases.push(fields);
        Ok(())
    };

    run_phase("quiet", &mut phases)?;

    let mut flood = Flood::start(junk_socket(socket.clone(), sizes.siege_junk))?;
    run_phase("junk_socket", &mut phases)?;
    let junk_opened = flood.stop()?;

    let mut flood = Flood::start(partial_http(address, partial))?;
    run_phase("partial_http", &mut phases)?;
    let partial_opened = flood.stop()?;

    let stop_file = ctx.dir.join("siege-chain-stop");
    let proofs_before = refused_proofs(&root)?;
    let mut chain = proof_chain(&program, &socket, &stop_file, &sizes)?;
    let chain_started = Instant::now();
    // In full swing once the broker has refused a proof of the chain.
    let ran = wait_for(|| Ok(refused_proofs(&root)? > proofs_before))
        .and_then(|()| run_phase("proof_amplification", &mut phases));
    std::fs::write(&stop_file, b"")
        .map_err(|_| Failure::new("cannot write the chain's stop file"))?;
    let chain_done = chain.wait();
    let chain_s = chain_started.elapsed().as_secs_f64();
    ran?;
    chain_done.map_err(|_| Failure::new("the proof chain did not finish"))?;

    let (before, rows_before) = store_size(&root)?;
    let flood_started = Instant::now();
    let mut flood = Flood::start(refusal_flood(socket.clone()))?;
    run_phase("refusal_flood", &mut phases)?;
    while flood_started.elapsed() < sizes.siege_refusal_window {
        std::thread::sleep(Duration::from_millis(50));
    }
    let refused = flood.stop()?;
    let flooded = flood_started.elapsed();
    let (after, rows_after) = store_size(&root)?;
    let grown = after.saturating_sub(before);
    let per_minute = grown as f64 * 60.0 / flooded.as_secs_f64();
    let rows = rows_after.saturating_sub(rows_before);

    let broker_nofile = procs::nofile_soft(&dir);
    let memory = rss::memory(pid)?;
    host.close()?;

    Ok(vec![
        (
            "quiet_p99_ms",
            phases[0]["p99_ms"].clone(),
        ),
        (
            "worst_p99_ms",
            round3(
                phases
                    .iter()
                    .filter_map(|p| p["p99_ms"].as_f64())
                    .fold(0.0, f64::max),
            ),
        ),
        ("phases", Value::from(phases)),
        (
            "target",
            Value::from("p99 <= 1000 ms and every answer ok, quiet and under each flood"),
        ),
        ("met", Value::from(met)),
        ("store_growth_bytes_per_min", round1(per_minute)),
        ("store_growth_bytes", Value::from(grown)),
        ("ledger_rows_written", Value::from(rows)),
        (
            "ledger_rows_per_min",
            round1(rows as f64 * 60.0 / flooded.as_secs_f64()),
        ),
        ("refusal_flood_lines", Value::from(refused)),
        (
            "refusal_flood_lines_per_s",
            round1(refused as f64 / flooded.as_secs_f64()),
        ),
        ("refusal_flood_s", round3(flooded.as_secs_f64())),
        ("junk_connections", Value::from(sizes.siege_junk)),
        ("junk_opened", Value::from(junk_opened)),
        ("partial_http_connections", Value::from(partial)),
        ("partial_http_opened", Value::from(partial_opened)),
        ("chain_depth", Value::from(sizes.siege_chain_depth)),
        ("chain_env_kib", Value::from(sizes.siege_chain_env_kib)),
        ("chain_senders", Value::from(sizes.siege_chain_senders)),
        ("chain_s", round3(chain_s)),
        ("vm_hwm_mib", rss::mib(memory.hwm_kib)),
        ("threads", Value::from(memory.threads)),
        (
            "broker_nofile_soft",
            broker_nofile.map_or(Value::Null, Value::from),
        ),
        ("bench_nofile_soft", nofile.map_or(Value::Null, Value::from)),
        ("binary", Value::from(binary)),
        (
            "note",
            Value::from("each phase: the human CLI's inbox (<binary> human <socket>, spawn to exit) timed one call after another once its flood was in full swing; ok: answered ok (the CLI runs detached, setsid -f, with an empty environment); junk: connections sending x at once and every 2.5 s; partial_http: GET / HTTP/1.1 and no more, capped by the bench's open files; proof_amplification: forged lines of the real CLI under a chain of shells with large environments below a run marker; store growth: page_count x page_size over the refusal flood"),
        ),
    ])
}
