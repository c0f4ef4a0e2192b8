//! `mosaic-bench`: the benchmark of DESIGN.md §6.
//!
//! ```text
//! cargo run --release -p mosaic-bench [-- --quick] [--data-root DIR]
//! ```
//!
//! Prints one JSON line per figure to stdout (progress goes to stderr). The
//! first line is `{"figure":"environment",...}`; every later figure is
//! measured in the same run and in the same fresh directory as its physical
//! limit, the raw SQLite FULL-sync single-row commit. The directory is a new
//! subdirectory of `--data-root` (default: the system temporary directory),
//! removed again at the end.
//!
//! A figure is one function in [`FIGURES`]: it gets the shared [`Ctx`] and
//! returns its fields, or a [`Failure`] that becomes
//! `{"figure":...,"error":"<static text>"}` and a non-zero exit.
//!
//! `--quick` shrinks every size so CI can check in a few seconds that the
//! whole path runs; its numbers mean nothing.

mod env;
mod output;
mod raw;
mod stats;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

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
}

impl Sizes {
    /// The sizes the targets of DESIGN.md §6 are judged on.
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
            let mut raw = raw::Raw::create(&self.dir.join("raw.sqlite"))?;
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

/// Every figure, in the order they run. The socket and browser figures of
/// issue 8 join this list with their issues.
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
];

const USAGE: &str = "usage: mosaic-bench [--quick] [--data-root DIR]";

struct Options {
    quick: bool,
    data_root: Option<PathBuf>,
}

fn parse_args() -> Result<Options, &'static str> {
    let mut opts = Options {
        quick: false,
        data_root: None,
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--quick") => opts.quick = true,
            Some("--data-root") => {
                opts.data_root = Some(PathBuf::from(
                    args.next().ok_or("--data-root needs a directory")?,
                ));
            }
            Some("--help" | "-h") => return Err(USAGE),
            Some(_) | None => return Err("unknown argument"),
        }
    }
    Ok(opts)
}

fn main() -> ExitCode {
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
    output::emit("environment", env::fields(&base, dir.path(), opts.quick));
    let sizes = if opts.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    let mut ctx = Ctx {
        sizes,
        dir: dir.path().to_owned(),
        raw: None,
    };
    let mut ok = true;
    for figure in FIGURES {
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
    if dir.close().is_err() {
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
