//! `boot_history`: how long a broker takes to boot over its history,
//! through host IPC, beside the two integrity checks the spec requires at
//! open (`PRAGMA quick_check` and `PRAGMA foreign_key_check`), run alone on
//! the same file in the same round.
//!
//! Two data roots are prepared: each is booted once by a broker child (so
//! its store holds the launches of a real boot), then filled directly with
//! the records of `message.send` requests (`action.allowed` and
//! `message.sent`), ~1 k for the small one and ~1 M for the large one.
//! Each round then, for each root in turn: the two checks alone on a plain
//! connection, then a fresh broker child's `boot`, timed from the request
//! line to the reply line, with its phases read from the child's own log
//! (`store verified`: `open_ms`, and inside it `integrity_ms` and
//! `ledger_ms`, which run side by side; `state replayed`: `replay_ms`).
//! The child is `mosaic-bus broker` when that binary sits next to the
//! bench (the phases need its logs); otherwise the bench itself with
//! `--broker-child`, which logs nothing, so the phases are `null`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use mosaic_adapters::sqlite::SqliteStore;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::Value;

use crate::live::{self, Grants};
use crate::output::{round3, Failure, Fields};
use crate::rss::{self, Host};
use crate::stats::median;
use crate::{store, Ctx};

/// The spec's limit: boot within 1.5 × the two checks alone, plus 0.1 s.
const LIMIT_FACTOR: f64 = 1.5;
const LIMIT_SLACK_S: f64 = 0.1;

/// One prepared data root.
struct History {
    config: Value,
    db: PathBuf,
    messages: usize,
    boots: Vec<Boot>,
    checks_s: Vec<f64>,
}

/// One timed boot.
struct Boot {
    total_s: f64,
    open_s: Option<f64>,
    integrity_s: Option<f64>,
    ledger_s: Option<f64>,
    replay_s: Option<f64>,
}

/// `boot_history`.
///
/// # Errors
/// When a root cannot be prepared, a child cannot be started or refuses
/// the boot, or a check fails on a file it must pass on.
pub fn boot_history(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let (program, arg, binary) = rss::program(false)?;
    let sizes = ctx.sizes.clone();
    let mut small = prepare(ctx, "boot-small", sizes.small_messages, &program, arg)?;
    let mut large = prepare(ctx, "boot-large", sizes.large_messages, &program, arg)?;
    for _ in 0..sizes.boot_rounds {
        for history in [&mut small, &mut large] {
            history.checks_s.push(checks_alone(&history.db)?);
            let boot = boot_once(&history.config, &program, arg)?;
            history.boots.push(boot);
        }
    }
    let (small_fields, small_boot, small_ok) = summary(&small, SMALL)?;
    let (large_fields, large_boot, large_ok) = summary(&large, LARGE)?;
    let mut fields: Fields = vec![
        ("broker", Value::from(binary)),
        ("rounds", Value::from(sizes.boot_rounds)),
    ];
    fields.extend(small_fields);
    fields.extend(large_fields);
    fields.push(("ratio_large_small", round3(large_boot / small_boot)));
    fields.push((
        "limit",
        Value::from("boot_s <= 1.5 * checks_s + 0.1 at both sizes"),
    ));
    fields.push(("meets_limit", Value::from(small_ok && large_ok)));
    Ok(fields)
}

/// A data root booted once, then filled with `messages` sends.
fn prepare(
    ctx: &Ctx,
    name: &str,
    messages: usize,
    program: &Path,
    arg: &str,
) -> Result<History, Failure> {
    let root = live::data_root(ctx, name)?;
    let roles = [
        ("lead".to_owned(), Grants::Send),
        ("dev".to_owned(), Grants::Send),
    ];
    let config = live::boot_config(&root, &roles, false);
    boot_once(&config, program, arg)?;
    let db = root.join("bus").join("bus.sqlite");
    let mut store = SqliteStore::open(&db)
        .map_err(|e| Failure::refused("cannot open the booted store", e.refusal()))?;
    let started = Instant::now();
    store::fill_sends(&mut store, messages, ctx.sizes.fill_batch)?;
    if messages >= 100_000 {
        eprintln!(
            "[bench]   {name}: {messages} sends filled in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(History {
        config,
        db,
        messages,
        boots: Vec::new(),
        checks_s: Vec::new(),
    })
}

/// The two integrity checks alone, on a plain connection to `db`, in
/// seconds; the broker is not running.
fn checks_alone(db: &Path) -> Result<f64, Failure> {
    let fail = |_| Failure::new("the integrity checks cannot run");
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(fail)?;
    let started = Instant::now();
    let quick: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(fail)?;
    let dangling: Option<String> = conn
        .query_row("PRAGMA foreign_key_check", [], |r| r.get(0))
        .optional()
        .map_err(fail)?;
    let elapsed = started.elapsed().as_secs_f64();
    if quick != "ok" || dangling.is_some() {
        return Err(Failure::new("a bench store failed its integrity checks"));
    }
    Ok(elapsed)
}

/// A fresh broker child's boot on `config`, timed from the request line to
/// the reply line, then closed; its phases as its log names them.
fn boot_once(config: &Value, program: &Path, arg: &str) -> Result<Boot, Failure> {
    let mut host = Host::spawn_logged(program, arg)?;
    let started = Instant::now();
    host.boot(config)?;
    let total_s = started.elapsed().as_secs_f64();
    let logs = host.close_logged()?;
    let phase = |message: &str, field: &str| {
        logs.iter()
            .find(|line| line["message"] == message)
            .and_then(|line| line[field].as_f64())
            .map(|ms| ms / 1000.0)
    };
    Ok(Boot {
        total_s,
        open_s: phase("store verified", "open_ms"),
        integrity_s: phase("store verified", "integrity_ms"),
        ledger_s: phase("store verified", "ledger_ms"),
        replay_s: phase("state replayed", "replay_ms"),
    })
}

/// The field names of one size.
struct Keys {
    messages: &'static str,
    ledger_rows: &'static str,
    db_mib: &'static str,
    boot_s: &'static str,
    checks_s: &'static str,
    limit_s: &'static str,
    open_s: &'static str,
    integrity_s: &'static str,
    ledger_s: &'static str,
    replay_s: &'static str,
    rest_s: &'static str,
}

const SMALL: Keys = Keys {
    messages: "small_messages",
    ledger_rows: "small_ledger_rows",
    db_mib: "small_db_mib",
    boot_s: "small_boot_s",
    checks_s: "small_checks_s",
    limit_s: "small_limit_s",
    open_s: "small_open_s",
    integrity_s: "small_integrity_s",
    ledger_s: "small_ledger_s",
    replay_s: "small_replay_s",
    rest_s: "small_rest_s",
};

const LARGE: Keys = Keys {
    messages: "large_messages",
    ledger_rows: "large_ledger_rows",
    db_mib: "large_db_mib",
    boot_s: "large_boot_s",
    checks_s: "large_checks_s",
    limit_s: "large_limit_s",
    open_s: "large_open_s",
    integrity_s: "large_integrity_s",
    ledger_s: "large_ledger_s",
    replay_s: "large_replay_s",
    rest_s: "large_rest_s",
};

/// The medians of one size over its rounds, its median boot, and whether
/// the median boot is within the limit.
fn summary(history: &History, keys: Keys) -> Result<(Fields, f64, bool), Failure> {
    let boot = median(history.boots.iter().map(|b| b.total_s).collect());
    let checks = median(history.checks_s.clone());
    let limit = LIMIT_FACTOR * checks + LIMIT_SLACK_S;
    let phase = |of: fn(&Boot) -> Option<f64>| -> Option<f64> {
        let values: Option<Vec<f64>> = history.boots.iter().map(of).collect();
        values.map(median)
    };
    let (open, integrity, ledger, replay) = (
        phase(|b| b.open_s),
        phase(|b| b.integrity_s),
        phase(|b| b.ledger_s),
        phase(|b| b.replay_s),
    );
    let rest = phase(|b| Some(b.total_s - b.open_s? - b.replay_s?));
    let rows = store::count_rows(&history.db, "ledger")?;
    let bytes = std::fs::metadata(&history.db)
        .map_err(|_| Failure::new("cannot read the size of a bench store"))?
        .len();
    let seconds = |v: Option<f64>| v.map_or(Value::Null, round3);
    let fields = vec![
        (keys.messages, Value::from(history.messages)),
        (keys.ledger_rows, Value::from(rows)),
        (keys.db_mib, round3(bytes as f64 / (1024.0 * 1024.0))),
        (keys.boot_s, round3(boot)),
        (keys.checks_s, round3(checks)),
        (keys.limit_s, round3(limit)),
        (keys.open_s, seconds(open)),
        (keys.integrity_s, seconds(integrity)),
        (keys.ledger_s, seconds(ledger)),
        (keys.replay_s, seconds(replay)),
        (keys.rest_s, seconds(rest)),
    ];
    Ok((fields, boot, boot <= limit))
}
