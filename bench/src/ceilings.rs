//! `socket_ceilings`: what the socket figures could reach on this machine
//! with no broker at all. The raw reference commit is served over a Unix
//! socket, in the broker's shape and in a shorter one, each in rounds
//! alternating with raw commits on the same disk:
//!
//! - `relay`: the broker's shape. A tokio runtime with the broker's worker
//!   count accepts each connection and reads its lines; each line goes over
//!   a channel to a committer thread, which commits every line queued (one
//!   raw row each, in one transaction) and writes the answers to the
//!   sockets itself, as the broker's writer does. A request crosses three
//!   threads: the client, a worker, the committer.
//! - `direct`: one thread accepts, reads the line, commits and answers. A
//!   request crosses two threads.
//!
//! `relay_1` and `direct_1` are one client with a connection per request,
//! as `message_send_1_client_socket`; `relay_16` is the 16 clients of
//! `message_send_16_clients`, each on its own connection. The clients are
//! [`Caller`]s, so each request is a `message.send` line as the broker
//! figures' are (the servers read it and nothing more). So
//! a socket figure's ratio over its `relay` twin's is what the broker's own
//! work (admission, the domain, the store's rows) leaves of the transport's
//! ceiling, and `direct_1` over `relay_1` is what one thread fewer would
//! give.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use mosaic_domain::Refusal;
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use crate::live::{self, Caller};
use crate::output::{round1, round3, Failure, Fields};
use crate::raw::Raw;
use crate::stats::{named_threads_cpu_time, Round, Series};
use crate::Ctx;

/// The most lines one commit takes, as the broker's writer.
const MAX_BATCH: usize = 256;

/// The relay's committer thread (its `comm`, at most 15 bytes).
const COMMITTER: &str = "ceiling-writer";

/// `socket_ceilings`: `relay_1`, `direct_1` and `relay_16`, each beside raw
/// commits in alternating rounds.
///
/// # Errors
/// When a server cannot start, or a request or commit fails.
pub fn figure(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let relay = Relay::start(ctx, "relay-1")?;
    let mut fields = one_client(ctx, &relay.path, RELAY_1)?;
    relay.stop()?;
    let direct = Direct::start(ctx, "direct-1")?;
    fields.extend(one_client(ctx, &direct.path, DIRECT_1)?);
    direct.stop()?;
    fields.extend(relay_16(ctx)?);
    fields.extend([
        ("clients", Value::from(ctx.sizes.clients)),
        (
            "note",
            Value::from("the raw reference commit (one row per request) behind a Unix socket, no broker: relay = client -> tokio worker (the broker's count) -> committer thread, which commits every queued line in one transaction and writes the answers itself; direct = one thread accepts, reads, commits, answers; _1 = one client, a connection per request (as message_send_1_client_socket); _16 = the clients of message_send_16_clients, a connection each"),
        ),
    ]);
    Ok(fields)
}

/// The names of a shape's requests/s, p50, ratio to raw and the p50 of
/// the raw rounds beside it.
type Names = [&'static str; 4];
const RELAY_1: Names = [
    "relay_1_requests_per_s",
    "relay_1_p50_us",
    "relay_1_ratio_to_raw",
    "relay_1_raw_p50_us",
];
const DIRECT_1: Names = [
    "direct_1_requests_per_s",
    "direct_1_p50_us",
    "direct_1_ratio_to_raw",
    "direct_1_raw_p50_us",
];
const RELAY_16: Names = [
    "relay_16_requests_per_s",
    "relay_16_p50_us",
    "relay_16_ratio_to_raw",
    "relay_16_raw_p50_us",
];

/// One client, a connection per request, to the server at `path`, in
/// rounds alternating with raw rounds.
fn one_client(ctx: &mut Ctx, path: &Path, names: Names) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let client = Skeleton::connecting(path.to_owned());
    live::warm_up(&client, sizes.socket_warmup)?;
    let mut sent = 0;
    let (requests, raws) =
        crate::raw::alternate(ctx, sizes.socket_rounds, sizes.socket_per_round, || {
            Round::run(sizes.socket_per_round, || {
                sent += 1;
                live::send(&client, sent)
            })
        })?;
    Ok(shape_fields(names, &requests, &raws))
}

/// The 16 clients, a connection each, to a relay, in rounds alternating
/// with raw rounds; also the requests a commit took and the committer's
/// CPU a request.
fn relay_16(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let relay = Relay::start(ctx, "relay-16")?;
    let clients = (0..sizes.clients)
        .map(|_| Skeleton::kept(&relay.path))
        .collect::<Result<Vec<_>, _>>()?;
    let per_client_warmup = sizes.socket_warmup.div_ceil(clients.len().max(1));
    live::concurrent_round(&clients, per_client_warmup)?;
    let mut committer_cpu = Some(Duration::ZERO);
    let (requests, raws) =
        crate::raw::alternate(ctx, sizes.socket_rounds, sizes.socket_per_round, || {
            let before = named_threads_cpu_time(COMMITTER);
            let round = live::concurrent_round(&clients, sizes.client_per_round)?.0;
            let used = named_threads_cpu_time(COMMITTER)
                .zip(before)
                .map(|(after, before)| after.saturating_sub(before));
            committer_cpu = committer_cpu.zip(used).map(|(total, used)| total + used);
            Ok(round)
        })?;
    drop(clients);
    let (answered, commits) = relay.stop()?;
    let per_request = |cpu: Duration| cpu.as_secs_f64() * 1e6 / requests.count() as f64;
    let mut fields = shape_fields(RELAY_16, &requests, &raws);
    fields.extend([
        ("relay_16_requests_per_commit", round1(answered / commits)),
        (
            "relay_16_committer_cpu_us_per_op",
            round1(committer_cpu.map_or(f64::NAN, per_request)),
        ),
    ]);
    Ok(fields)
}

/// A shape's fields, under `names`.
fn shape_fields(names: Names, requests: &Series, raws: &Series) -> Fields {
    let [rate, p50, ratio, raw_p50] = names;
    vec![
        (rate, round1(requests.rate())),
        (p50, round1(requests.percentile_us(50.0))),
        (ratio, round3(requests.rate() / raws.rate())),
        (raw_p50, round1(raws.percentile_us(50.0))),
    ]
}

/// A fresh raw database for a server, in the run's directory, warmed up
/// as the raw reference is.
fn server_db(ctx: &Ctx, name: &str) -> Result<Raw, Failure> {
    let mut raw = Raw::create(&ctx.dir.join(format!("{name}.sqlite")), 1)?;
    raw.warm_up(ctx.sizes.raw_warmup)?;
    Ok(raw)
}

/// The relay server: a tokio runtime reading lines, a committer thread
/// committing and answering them.
struct Relay {
    path: PathBuf,
    runtime: tokio::runtime::Runtime,
    committer: JoinHandle<Result<(), Failure>>,
    requests: Arc<AtomicUsize>,
    commits: Arc<AtomicUsize>,
}

impl Relay {
    fn start(ctx: &Ctx, name: &str) -> Result<Self, Failure> {
        let mut raw = server_db(ctx, name)?;
        let path = ctx.dir.join(format!("{name}.sock"));
        let (jobs, queue) = mpsc::channel::<Arc<UnixStream>>();
        let (requests, commits) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let counts = (Arc::clone(&requests), Arc::clone(&commits));
        let committer = std::thread::Builder::new()
            .name(COMMITTER.into())
            .spawn(move || {
                while let Ok(first) = queue.recv() {
                    let mut batch = vec![first];
                    batch.extend(queue.try_iter().take(MAX_BATCH - 1));
                    raw.commit_rows(batch.len())?;
                    counts.0.fetch_add(batch.len(), Ordering::Relaxed);
                    counts.1.fetch_add(1, Ordering::Relaxed);
                    for socket in batch {
                        // A few bytes into an empty socket buffer: never
                        // short, even on a non-blocking descriptor.
                        (&*socket)
                            .write_all(b"{\"ok\":true}\n")
                            .map_err(|_| Failure::new("the relay's answer failed"))?;
                    }
                }
                Ok(())
            })
            .map_err(|_| Failure::new("cannot start the relay's committer"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(mosaic_app::runtime::socket_workers())
            .enable_io()
            .build()
            .map_err(|_| Failure::new("cannot start the relay's runtime"))?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::UnixListener::bind(&path)
                .map_err(|_| Failure::new("cannot bind the relay's socket"))?
        };
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(relay_lines(stream, jobs.clone()));
                tokio::task::yield_now().await;
            }
        });
        Ok(Self {
            path,
            runtime,
            committer,
            requests,
            commits,
        })
    }

    /// Stops the server; returns the requests it answered and the commits
    /// it made.
    fn stop(self) -> Result<(f64, f64), Failure> {
        // Dropping the runtime drops every task, so every job sender.
        self.runtime.shutdown_background();
        self.committer
            .join()
            .unwrap_or(Err(Failure::new("the relay's committer panicked")))?;
        Ok((
            self.requests.load(Ordering::Relaxed) as f64,
            self.commits.load(Ordering::Relaxed) as f64,
        ))
    }
}

/// One connection of the relay: each line read goes to the committer with
/// a second descriptor of the socket, on which the committer answers.
async fn relay_lines(stream: tokio::net::UnixStream, jobs: mpsc::Sender<Arc<UnixStream>>) {
    let Ok(reply) = stream.as_fd().try_clone_to_owned() else {
        return;
    };
    let reply = Arc::new(UnixStream::from(reply));
    let mut lines = tokio::io::BufReader::new(stream);
    let mut line = String::new();
    while matches!(lines.read_line(&mut line).await, Ok(n) if n > 0) {
        line.clear();
        if jobs.send(Arc::clone(&reply)).is_err() {
            break;
        }
    }
}

/// The direct server: one thread that accepts, reads, commits, answers.
struct Direct {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<(), Failure>>,
}

impl Direct {
    fn start(ctx: &Ctx, name: &str) -> Result<Self, Failure> {
        let mut raw = server_db(ctx, name)?;
        let path = ctx.dir.join(format!("{name}.sock"));
        let listener =
            UnixListener::bind(&path).map_err(|_| Failure::new("cannot bind the direct socket"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ceiling-direct".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    let stream =
                        stream.map_err(|_| Failure::new("the direct server's accept failed"))?;
                    let mut lines = BufReader::new(&stream);
                    let mut line = String::new();
                    while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
                        line.clear();
                        raw.commit_one()?;
                        (&stream)
                            .write_all(b"{\"ok\":true}\n")
                            .map_err(|_| Failure::new("the direct server's answer failed"))?;
                    }
                }
                Ok(())
            })
            .map_err(|_| Failure::new("cannot start the direct server"))?;
        Ok(Self { path, stop, thread })
    }

    fn stop(self) -> Result<(), Failure> {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept, which then sees the flag.
        let _ = UnixStream::connect(&self.path);
        self.thread
            .join()
            .unwrap_or(Err(Failure::new("the direct server panicked")))
    }
}

/// A client of the skeleton servers: writes the request line a broker
/// client would, reads one answer line.
struct Skeleton {
    path: PathBuf,
    /// The connection every request uses, or `None` for one a request.
    kept: Option<Mutex<BufReader<UnixStream>>>,
}

impl Skeleton {
    fn connecting(path: PathBuf) -> Self {
        Self { path, kept: None }
    }

    fn kept(path: &Path) -> Result<Self, Failure> {
        let stream = connect(path).map_err(|_| Failure::new("cannot connect to the relay"))?;
        Ok(Self {
            path: path.to_owned(),
            kept: Some(Mutex::new(BufReader::new(stream))),
        })
    }
}

/// How long a client waits for an answer: a server whose committer failed
/// leaves a request unanswered, and the figure then fails instead of
/// hanging.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// A connection to the server at `path` that waits at most
/// [`ANSWER_WAIT`] for each answer.
fn connect(path: &Path) -> std::io::Result<UnixStream> {
    let stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(ANSWER_WAIT))?;
    Ok(stream)
}

/// One request line on `connection`, and its answer line.
fn exchange(connection: &mut BufReader<UnixStream>, line: &[u8]) -> Result<Value, Refusal> {
    let unavailable = |_| Refusal::BrokerUnavailable;
    connection.get_mut().write_all(line).map_err(unavailable)?;
    let mut answer = String::new();
    match connection.read_line(&mut answer) {
        Ok(n) if n > 0 => serde_json::from_str(&answer).map_err(|_| Refusal::BrokerUnavailable),
        Ok(_) | Err(_) => Err(Refusal::BrokerUnavailable),
    }
}

impl Caller for Skeleton {
    fn call(&self, verb: &str, args: Value) -> Result<Value, Refusal> {
        let mut line = json!({"verb": verb, "args": args}).to_string();
        line.push('\n');
        match &self.kept {
            Some(kept) => {
                let mut connection = kept.lock().map_err(|_| Refusal::BrokerUnavailable)?;
                exchange(&mut connection, line.as_bytes())
            }
            None => {
                let stream = connect(&self.path).map_err(|_| Refusal::BrokerUnavailable)?;
                exchange(&mut BufReader::new(stream), line.as_bytes())
            }
        }
    }
}
