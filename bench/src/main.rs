//! `mosaic-bench`: the benchmark of the broker's performance targets.
//!
//! ```text
//! cargo run --release -p mosaic-bench [-- --quick] [--awake] [--keep] [--data-root DIR] [--only FIGURE]...
//! ```
//!
//! Prints one JSON line per figure to stdout (progress goes to stderr). The
//! first line is `{"figure":"environment",...}`; every later figure is
//! measured in the same run and in the same fresh directory as its physical
//! limit, the raw SQLite FULL-sync single-row commit. The directory is a new
//! subdirectory of `--data-root` (default: the system temporary directory),
//! removed again at the end (`--keep` leaves it, and names it on stderr).
//!
//! A figure is one function in [`FIGURES`]: it gets the shared [`Ctx`] and
//! returns its fields, or a [`Failure`] that becomes
//! `{"figure":...,"error":"<static text>"}` and a non-zero exit.
//!
//! `--quick` shrinks every size so CI can check in a few seconds that the
//! whole path runs; its numbers mean nothing. `--awake` keeps one busy
//! lowest-priority thread per CPU running through the whole run, for
//! machines (virtual ones) where an idle CPU makes every fsync wait for a
//! timer tick; `raw_sqlite_commit` shows whether this one does.
//!
//! The store figures drive [`mosaic_app::runtime::Driver`] directly; the
//! socket and browser figures start the real broker in this process, one
//! per figure on a data root of its own ([`live`]), and speak to it as
//! agents and panes do; `broker_rss` starts it as a child process, since
//! this process's memory is the bench's ([`rss`]), and so does
//! `changes_idle`, the change feed's idle cost ([`changes`]), and
//! `human_under_siege`, the human CLI's answer time under floods
//! ([`siege`]). `mosaic-bench --broker-child` is that child when no
//! `mosaic-bus` binary sits next to this one: it runs the host protocol on
//! stdin/stdout and nothing else; `mosaic-bench human SOCKET` is then the
//! human CLI (`mosaic_app::commands::human::run`, as `mosaic-bus human`).
//! Last, `socket_ceilings` serves the raw commit over a socket with no
//! broker, in the broker's thread shape and a shorter one ([`ceilings`]):
//! the ceilings the socket figures are read against.
//!
//! The figures' modules: `raw.rs` the physical limit, `store.rs` the
//! store figures, `socket.rs` the socket figures, `boot.rs` the boot over
//! history, `browser.rs` the browser round trip (with `http.rs`, just
//! enough HTTP to act as a pane). Beside them: `env.rs` the `environment`
//! line, `stats.rs` rounds and their summaries, `output.rs` the JSON
//! lines, `procs.rs` what `/proc` says of a process's threads. The load
//! generator is a binary of its own, `bin/load.rs`.

mod boot;
mod browser;
mod ceilings;
mod changes;
mod env;
mod http;
mod live;
mod output;
mod procs;
mod raw;
mod rss;
mod siege;
mod socket;
mod stats;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use output::{Failure, Fields};

/// The sizes of one run.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Unmeasured raw commits before the first raw round: enough for the
    /// raw database's WAL (about one page per commit) to fill its 1000-page
    /// autocheckpoint once and start over, so rounds see the steady state
    /// (overwriting a WAL in place) and not the slower first pass that grows
    /// the file.
    pub raw_warmup: usize,
    /// Unmeasured `message.send` calls on each store before its first
    /// round, for the same reason (about 8 WAL pages per request).
    pub send_warmup: usize,
    /// Rounds of raw commits for `raw_sqlite_commit`.
    pub raw_rounds: usize,
    /// Raw commits per round.
    pub raw_per_round: usize,
    /// Rounds of `message.send` (each beside a raw round) for the 1-client figure.
    pub send_rounds: usize,
    /// `message.send` calls per round.
    pub send_per_round: usize,
    /// Messages in the small store of `commit_cost_rows`.
    pub small_messages: usize,
    /// Messages in the large store of `commit_cost_rows`.
    pub large_messages: usize,
    /// Records per fill transaction.
    pub fill_batch: usize,
    /// Rounds per store for `commit_cost_rows`.
    pub cost_rounds: usize,
    /// `message.send` calls per round and store.
    pub cost_per_round: usize,
    /// Unmeasured `message.send` calls through the socket on each fresh
    /// broker before its first round (its store's WAL wraps once).
    pub socket_warmup: usize,
    /// Rounds of each socket `message.send` figure (each beside a raw round).
    pub socket_rounds: usize,
    /// `message.send` calls per round with one client, and raw commits per
    /// raw round of the socket figures.
    pub socket_per_round: usize,
    /// Concurrent clients of `message_send_16_clients`.
    pub clients: usize,
    /// `message.send` calls per client and round with many clients.
    pub client_per_round: usize,
    /// Messages sent to the role whose `inbox` is measured.
    pub inbox_messages: usize,
    /// Of those, how many it leaves unread for the steady-state calls.
    pub inbox_unread: usize,
    /// Timed `inbox` calls, on the empty and on the full inbox each:
    /// enough that a p50 spans a few hundred milliseconds, not one short
    /// stretch of whatever the machine was doing.
    pub inbox_calls: usize,
    /// Unmeasured browser round trips before the first round.
    pub browser_warmup: usize,
    /// Rounds of browser round trips (each beside a raw round).
    pub browser_rounds: usize,
    /// Browser round trips per round, and raw commits per raw round.
    pub browser_per_round: usize,
    /// Connected UI clients of the 100-client browser figures.
    pub browser_clients: usize,
    /// Connected clients of the broker whose RSS is measured.
    pub rss_clients: usize,
    /// `message.send` calls that broker serves.
    pub rss_sends: usize,
    /// Browser round trips that broker serves.
    pub rss_trips: usize,
    /// Agents that then work that broker at once (each its own role and
    /// thread, each keeping one connection open).
    pub rss_agents: usize,
    /// Requests each of them makes: `message.send` and `inbox` in turn.
    pub rss_agent_requests: usize,
    /// Unmeasured wake rounds of `changes_wake` before its measured ones.
    pub wake_warmup: usize,
    /// Measured wake rounds of `changes_wake` (and as many reference hops
    /// and immediate `changes` calls).
    pub wake_rounds: usize,
    /// Agents of `changes_idle`, each its own role with one wait open.
    pub idle_agents: usize,
    /// The window over which `changes_idle` reads the broker's CPU time
    /// (once idle before the waits open, once with them open).
    pub idle_window: Duration,
    /// Rounds of `boot_history` (a boot of each store per round).
    pub boot_rounds: usize,
    /// Human `inbox` calls timed per phase of `human_under_siege`.
    pub siege_human_calls: usize,
    /// Junk socket connections held open at once.
    pub siege_junk: usize,
    /// Partial HTTP requests held open at once (at most what the bench's
    /// open-file limit allows).
    pub siege_partial: usize,
    /// Shells in the proof amplification's chain.
    pub siege_chain_depth: usize,
    /// KiB of environment each of them carries.
    pub siege_chain_env_kib: usize,
    /// Loops of forged human lines the deepest shell runs at once.
    pub siege_chain_senders: usize,
    /// The least time the refusal flood runs (the store's growth is
    /// measured over it).
    pub siege_refusal_window: Duration,
}

impl Sizes {
    /// The sizes the performance targets are judged on.
    pub fn full() -> Self {
        Self {
            raw_warmup: 1_200,
            send_warmup: 200,
            raw_rounds: 5,
            raw_per_round: 1_000,
            send_rounds: 15,
            send_per_round: 300,
            small_messages: 1_000,
            large_messages: 1_000_000,
            fill_batch: 10_000,
            cost_rounds: 11,
            cost_per_round: 200,
            socket_warmup: 200,
            socket_rounds: 9,
            socket_per_round: 300,
            clients: 16,
            client_per_round: 50,
            inbox_messages: 10_000,
            inbox_unread: 10,
            inbox_calls: 1_000,
            browser_warmup: 50,
            browser_rounds: 5,
            browser_per_round: 200,
            browser_clients: 100,
            rss_clients: 100,
            rss_sends: 1_000,
            rss_trips: 200,
            rss_agents: 16,
            rss_agent_requests: 400,
            wake_warmup: 20,
            wake_rounds: 500,
            idle_agents: 1_000,
            idle_window: Duration::from_secs(10),
            boot_rounds: 5,
            siege_human_calls: 100,
            siege_junk: 4_200,
            siege_partial: 20_000,
            siege_chain_depth: 300,
            siege_chain_env_kib: 200,
            siege_chain_senders: 8,
            siege_refusal_window: Duration::from_secs(60),
        }
    }

    /// Tiny sizes that only show the whole path runs.
    pub fn quick() -> Self {
        Self {
            raw_warmup: 5,
            send_warmup: 5,
            raw_rounds: 2,
            raw_per_round: 100,
            send_rounds: 2,
            send_per_round: 50,
            small_messages: 1_000,
            large_messages: 20_000,
            fill_batch: 10_000,
            cost_rounds: 2,
            cost_per_round: 50,
            socket_warmup: 5,
            socket_rounds: 2,
            socket_per_round: 20,
            clients: 2,
            client_per_round: 10,
            inbox_messages: 100,
            inbox_unread: 10,
            inbox_calls: 5,
            browser_warmup: 1,
            browser_rounds: 1,
            browser_per_round: 5,
            browser_clients: 3,
            rss_clients: 3,
            rss_sends: 10,
            rss_trips: 5,
            rss_agents: 2,
            rss_agent_requests: 4,
            wake_warmup: 1,
            wake_rounds: 5,
            idle_agents: 5,
            idle_window: Duration::from_millis(200),
            boot_rounds: 2,
            siege_human_calls: 3,
            siege_junk: 20,
            siege_partial: 20,
            siege_chain_depth: 70,
            siege_chain_env_kib: 8,
            siege_chain_senders: 1,
            siege_refusal_window: Duration::from_millis(200),
        }
    }
}

/// What every figure shares: the sizes, the run's directory and the raw
/// reference connection (opened by the first figure that needs it).
pub struct Ctx {
    /// The sizes of this run.
    pub sizes: Sizes,
    /// The fresh directory every database of this run lives in.
    pub dir: PathBuf,
    /// Whether this is a `--quick` run.
    pub quick: bool,
    raw: Option<raw::Raw>,
}

impl Ctx {
    /// The raw reference database in [`Ctx::dir`], created and warmed up
    /// ([`Sizes::raw_warmup`]) on first use.
    ///
    /// # Errors
    /// When it cannot be created with WAL and `synchronous=FULL`, or a
    /// warm-up commit fails.
    pub fn raw(&mut self) -> Result<&mut raw::Raw, Failure> {
        if self.raw.is_none() {
            let mut raw = raw::Raw::create(&self.dir.join("raw.sqlite"), 1)?;
            raw.warm_up(self.sizes.raw_warmup)?;
            self.raw = Some(raw);
        }
        self.raw
            .as_mut()
            .ok_or(Failure::new("raw reference database missing"))
    }
}

/// One figure: its name on the JSON line and the function that measures it.
pub struct Figure {
    /// The `figure` field.
    pub name: &'static str,
    /// Measures it.
    pub run: fn(&mut Ctx) -> Result<Fields, Failure>,
}

/// Every figure, in the order they run.
pub const FIGURES: &[Figure] = &[
    Figure {
        name: "raw_sqlite_commit",
        run: raw::figure,
    },
    Figure {
        name: "message_send_1_client",
        run: store::message_send_1_client,
    },
    Figure {
        name: "commit_cost_rows",
        run: store::commit_cost_rows,
    },
    Figure {
        name: "message_send_1_client_socket",
        run: socket::message_send_1_client_socket,
    },
    Figure {
        name: "message_send_1_client_socket_persistent",
        run: socket::message_send_1_client_socket_persistent,
    },
    Figure {
        name: "message_send_16_clients",
        run: socket::message_send_16_clients,
    },
    Figure {
        name: "inbox_10k",
        run: socket::inbox_10k,
    },
    Figure {
        name: "browser_rtt_1_pane",
        run: browser::rtt_1_pane,
    },
    Figure {
        name: "browser_rtt_100_clients_1_capable",
        run: browser::rtt_100_clients_1_capable,
    },
    Figure {
        name: "browser_rtt_100_racing",
        run: browser::rtt_100_racing,
    },
    Figure {
        name: "broker_rss",
        run: rss::broker_rss,
    },
    Figure {
        name: "changes_wake",
        run: changes::changes_wake,
    },
    Figure {
        name: "changes_idle",
        run: changes::changes_idle,
    },
    Figure {
        name: "boot_history",
        run: boot::boot_history,
    },
    Figure {
        name: "human_under_siege",
        run: siege::human_under_siege,
    },
    Figure {
        name: "socket_ceilings",
        run: ceilings::figure,
    },
];

const USAGE: &str =
    "usage: mosaic-bench [--quick] [--awake] [--keep] [--data-root DIR] [--only FIGURE]...";

struct Options {
    quick: bool,
    awake: bool,
    /// Leave the run's directory (its stores) for a look afterwards.
    keep: bool,
    data_root: Option<PathBuf>,
    /// Figures to run (with `raw_sqlite_commit`, their reference); empty: all.
    only: Vec<String>,
}

fn parse_args() -> Result<Options, &'static str> {
    let mut opts = Options {
        quick: false,
        awake: false,
        keep: false,
        data_root: None,
        only: Vec::new(),
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--quick") => opts.quick = true,
            Some("--awake") => opts.awake = true,
            Some("--keep") => opts.keep = true,
            Some("--data-root") => {
                opts.data_root = Some(PathBuf::from(
                    args.next().ok_or("--data-root needs a directory")?,
                ));
            }
            Some("--only") => {
                let name = args.next().ok_or("--only needs a figure name")?;
                let name = name.to_str().ok_or("unknown figure")?;
                if !FIGURES.iter().any(|f| f.name == name) {
                    return Err("unknown figure");
                }
                opts.only.push(name.to_owned());
            }
            Some("--help" | "-h") => return Err(USAGE),
            Some(_) | None => return Err("unknown argument"),
        }
    }
    Ok(opts)
}

fn main() -> ExitCode {
    // The broker child of `broker_rss` (see `rss.rs`), before anything else.
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.len() == 1 && args[0] == rss::CHILD_FLAG {
        return ExitCode::from(rss::child_main());
    }
    // The human CLI of `human_under_siege` when this binary is its broker.
    if args.len() == 2 && args[0] == siege::HUMAN_ARG {
        return ExitCode::from(siege::human_main(std::path::Path::new(&args[1])));
    }
    let opts = match parse_args() {
        Ok(opts) => opts,
        Err(message) => {
            output::emit_failure("arguments", &Failure::new(message));
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let code = run(&opts);
    eprintln!("[bench] done in {:.1} s", started.elapsed().as_secs_f64());
    code
}

fn run(opts: &Options) -> ExitCode {
    let base = opts.data_root.clone().unwrap_or_else(std::env::temp_dir);
    let dir = match tempfile::Builder::new()
        .prefix("mosaic-bench-")
        .tempdir_in(&base)
    {
        Ok(dir) => dir,
        Err(_) => {
            output::emit_failure(
                "environment",
                &Failure::new("cannot create a fresh directory under the data root"),
            );
            return ExitCode::FAILURE;
        }
    };
    let mut environment = env::fields(&base, dir.path(), opts.quick);
    environment.push(("awake", serde_json::Value::from(opts.awake)));
    output::emit("environment", environment);
    // `--awake`: no CPU idles during any figure (see `raw::Awake`).
    let _awake = opts.awake.then(raw::Awake::start);
    let sizes = if opts.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    let mut ctx = Ctx {
        sizes,
        dir: dir.path().to_owned(),
        quick: opts.quick,
        raw: None,
    };
    let mut ok = true;
    let wanted = |name: &str| {
        opts.only.is_empty() || name == "raw_sqlite_commit" || opts.only.iter().any(|o| o == name)
    };
    for figure in FIGURES.iter().filter(|f| wanted(f.name)) {
        eprintln!("[bench] {} ...", figure.name);
        let started = Instant::now();
        match (figure.run)(&mut ctx) {
            Ok(mut fields) => {
                fields.push(("wall_s", output::round3(started.elapsed().as_secs_f64())));
                output::emit(figure.name, fields);
            }
            Err(failure) => {
                output::emit_failure(figure.name, &failure);
                ok = false;
                break;
            }
        }
    }
    // Close every database before its directory goes.
    drop(ctx);
    if opts.keep {
        eprintln!("[bench] kept {}", dir.keep().display());
    } else if dir.close().is_err() {
        output::emit_failure(
            "cleanup",
            &Failure::new("cannot remove the benchmark directory"),
        );
        return ExitCode::FAILURE;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
