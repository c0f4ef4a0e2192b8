//! The store figures: `message.send` through the real runtime loop
//! ([`Driver`]) over the real store ([`SqliteStore`]), each measured beside
//! raw commits or beside itself at another size, in the run's directory.
//!
//! The business is the bench's own: `bench`, where `lead` and `dev` both
//! send messages within role. Every measured request is `lead` (holding its
//! role) sending to `dev`: the bus authorizes it within role and the store
//! commits two records, `action.allowed` and `message.sent`, in one
//! transaction. Message ids are uniformly random, as the entropy port draws
//! them, so every send lands at a random place in the message id index.

use mosaic_domain::Verb;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mosaic_adapters::sqlite::SqliteStore;
use mosaic_app::runtime::Driver;
use mosaic_domain::bus::{Caller, Command, SendInput};
use mosaic_domain::business::{AuthoritySpec, RoleSpec};
use mosaic_domain::evidence::{
    ActionAllowed, AgentRef, Evidence, MessageClass, MessageEvidence, MessageRecord, Recipient,
    Stamped, Subject,
};
use mosaic_domain::{
    Action, Business, BusinessId, BusinessSpec, HumanName, MessageId, RoleInstance, RunId, Target,
    Timestamp,
};
use mosaic_ports::{EvidenceStore, StoreError};
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use crate::output::{round1, round3, Failure, Fields};
use crate::stats::{Round, Series};
use crate::Ctx;

/// The B-trees one `message.send` wrote a row into up to `mosaic-bus/2`:
/// `ledger` and its unique `at` index, `actions_allowed` and
/// `actions_allowed_subject`, `messages` with its unique `id` index and
/// `messages_recipient`. `mosaic-bus/3` has no `at` index, so a send now
/// writes 6 and this reference (kept for comparison with earlier runs) is
/// one B-tree heavier than the send.
const SEND_BTREES: usize = 7;

/// The B-trees a `message.send` writes on `mosaic-bus/5`: the ledger (both
/// records), `messages` (which carries the grant), its unique `id` index
/// and `messages_recipient`.
const CARRIED_SEND_BTREES: usize = 4;

/// The fewest B-trees a send could write under any layout that keeps what
/// the spec asks of it: the ledger (both records), a unique index of
/// message ids, and an index of each recipient's messages.
const FEWEST_SEND_BTREES: usize = 3;

/// The bench's business: `lead` and `dev` send messages within role.
fn businesses() -> Result<Vec<Business>, Failure> {
    let bad = |_| Failure::new("the bench business does not validate");
    let send = Action::parse(Verb::MessageSend.as_str()).map_err(bad)?;
    let spec = || RoleSpec {
        authority: AuthoritySpec {
            within_role: Some(vec![send.clone()]),
            cross_role: Some(Vec::new()),
        },
        credentials: Default::default(),
    };
    let business = Business::validate(BusinessSpec {
        id: BusinessId::parse("bench").map_err(bad)?,
        human: HumanName::parse("bench").map_err(bad)?,
        technical_arbiter: RoleInstance::parse("lead").map_err(bad)?,
        delivery_arbiter: RoleInstance::parse("lead").map_err(bad)?,
        roles: [
            (RoleInstance::parse("lead").map_err(bad)?, spec()),
            (RoleInstance::parse("dev").map_err(bad)?, spec()),
        ]
        .into_iter()
        .collect(),
        launch_by: vec![],
    })
    .map_err(|invalid| bad(invalid.refusal))?;
    Ok(vec![business])
}

/// The sending agent, its business and the recipient.
struct Parties {
    business: BusinessId,
    lead: AgentRef,
    dev: RoleInstance,
}

impl Parties {
    fn new() -> Result<Self, Failure> {
        let bad = |_| Failure::new("the bench names do not parse");
        Ok(Self {
            business: BusinessId::parse("bench").map_err(bad)?,
            lead: AgentRef {
                role: RoleInstance::parse("lead").map_err(bad)?,
                run: RunId::parse("l0").map_err(bad)?,
            },
            dev: RoleInstance::parse("dev").map_err(bad)?,
        })
    }
}

/// Uniformly random message ids (splitmix64), reproducible per seed.
struct Ids(u64);

impl Ids {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn message(&mut self) -> MessageId {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        b[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        MessageId::from_random(b)
    }
}

fn body(n: usize) -> String {
    format!("bench message {n}: please review the change on the branch and report back")
}

/// The wall clock, as the broker reads it.
fn now() -> Result<Timestamp, Failure> {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| Failure::new("wall clock before 1970"))?
        .as_millis();
    Timestamp::from_unix_ms(i64::try_from(ms).unwrap_or(i64::MAX))
        .map_err(|r| Failure::refused("wall clock out of range", r))
}

fn store_failure(what: StoreError) -> Failure {
    match what {
        StoreError::Duplicate => Failure::new("store refused the fill: duplicate"),
        StoreError::Dangling => Failure::new("store refused the fill: dangling"),
        StoreError::CrossBusiness => Failure::new("store refused the fill: cross-business"),
        StoreError::NonMonotonic => Failure::new("store refused the fill: non-monotonic"),
        StoreError::Malformed => Failure::new("store refused the fill: malformed"),
        StoreError::Full(_) => Failure::new("no space left for the store during the fill"),
        StoreError::Unavailable(_) => Failure::new("store unavailable during the fill"),
    }
}

/// `lead` sending to `dev` through a [`Driver`] over one store.
struct Sender {
    driver: Driver<SqliteStore>,
    caller: Caller,
    to: Recipient,
    ids: Ids,
    sent: usize,
}

impl Sender {
    /// Opens a driver over `store` (rebuilding the bus and resuming its clock
    /// after the store's last write) and makes `lead` hold its role.
    fn open(store: SqliteStore, ids: Ids) -> Result<Self, Failure> {
        let parties = Parties::new()?;
        let mut driver = Driver::open(businesses()?, store)
            .map_err(|r| Failure::refused("the driver does not open the store", r))?;
        let caller = Caller::Agent {
            business: parties.business,
            agent: parties.lead,
        };
        // After a reopen the claim is replayed and this records nothing.
        driver
            .call(now()?, &caller, Command::Claim)
            .map_err(|r| Failure::refused("role.claim refused", r))?;
        Ok(Self {
            driver,
            caller,
            to: Recipient::Role(parties.dev),
            ids,
            sent: 0,
        })
    }

    /// One `message.send`: the bus handles it, the store commits it, then it returns.
    fn send(&mut self) -> Result<(), Failure> {
        let id = self.ids.message();
        let input = SendInput {
            to: self.to.clone(),
            class: Some(MessageClass::Info),
            body: body(self.sent),
            in_reply_to: None,
            corrects: None,
            decision: None,
        };
        let send = Command::Send {
            id,
            input: Box::new(input),
            known: Vec::new(),
        };
        self.driver
            .call(now()?, &self.caller, send)
            .map_err(|r| Failure::refused("message.send refused", r))?;
        self.sent += 1;
        Ok(())
    }

    fn round(&mut self, n: usize) -> Result<Round, Failure> {
        Round::run(n, || self.send())
    }

    fn warm_up(&mut self, n: usize) -> Result<(), Failure> {
        (0..n).try_for_each(|_| self.send())
    }

    fn into_store(self) -> SqliteStore {
        self.driver.into_store()
    }
}

/// The records of one `message.send` from `lead` to `dev`, built by hand
/// and committed through [`EvidenceStore::commit`] with no bus in front:
/// what the schema alone costs (SQL, triggers, pages, sync), the floor the
/// driver stands on.
struct StoreOnly {
    store: SqliteStore,
    parties: Parties,
    send: Action,
    target: Target,
    ids: Ids,
    at: i64,
    sent: usize,
}

impl StoreOnly {
    fn create(path: &Path, ids: Ids) -> Result<Self, Failure> {
        let bad = |_| Failure::new("the bench names do not parse");
        Ok(Self {
            store: SqliteStore::create(path)
                .map_err(|e| Failure::refused("cannot create a store", e.refusal()))?,
            parties: Parties::new()?,
            send: Action::parse(Verb::MessageSend.as_str()).map_err(bad)?,
            target: Target::parse("dev").map_err(bad)?,
            ids,
            at: now()?.unix_ms(),
            sent: 0,
        })
    }

    /// `action.allowed` and `message.sent`, as the bus stages them, in one
    /// commit.
    fn send(&mut self) -> Result<(), Failure> {
        let records = send_records(
            &self.parties,
            &self.send,
            &self.target,
            self.ids.message(),
            self.sent,
            &mut self.at,
        )?;
        self.store.commit(&records).map_err(store_failure)?;
        self.sent += 1;
        Ok(())
    }

    fn round(&mut self, n: usize) -> Result<Round, Failure> {
        Round::run(n, || self.send())
    }
}

/// The records one `message.send` from `lead` to `dev` commits, as the bus
/// stages them: `action.allowed`, then `message.sent`, each a millisecond
/// after `at`, which moves on.
fn send_records(
    parties: &Parties,
    send: &Action,
    target: &Target,
    id: MessageId,
    n: usize,
    at: &mut i64,
) -> Result<[Stamped; 2], Failure> {
    let allowed = Evidence::Allowed(ActionAllowed {
        business: parties.business.clone(),
        agent: parties.lead.clone(),
        action: send.clone(),
        target: Some(target.clone()),
        decision: None,
        subject: Some(Subject::Role(parties.dev.clone())),
    });
    let sent = Evidence::Message(MessageEvidence::Sent(Box::new(MessageRecord {
        id,
        business: parties.business.clone(),
        from: mosaic_domain::evidence::Sender::Agent(parties.lead.clone()),
        to: Recipient::Role(parties.dev.clone()),
        class: Some(MessageClass::Info),
        body: body(n),
        in_reply_to: None,
        corrects: None,
        decision: None,
        request: None,
    })));
    let mut stamp = || {
        *at += 1;
        Timestamp::from_unix_ms(*at).map_err(|r| Failure::refused("time out of range", r))
    };
    Ok([
        Stamped {
            at: stamp()?,
            evidence: allowed,
        },
        Stamped {
            at: stamp()?,
            evidence: sent,
        },
    ])
}

/// Appends the records of `count` `message.send` requests ([`send_records`])
/// to `store`, `batch` requests per transaction, after its last write: the
/// history a business builds up, without a bus in front.
///
/// # Errors
/// When a name does not parse or a commit fails.
pub fn fill_sends(store: &mut SqliteStore, count: usize, batch: usize) -> Result<(), Failure> {
    let bad = |_| Failure::new("the bench names do not parse");
    let parties = Parties::new()?;
    let send = Action::parse(Verb::MessageSend.as_str()).map_err(bad)?;
    let target = Target::parse("dev").map_err(bad)?;
    let mut ids = Ids(0xb007_0001);
    let last = store.last_write().map_err(store_failure)?;
    let mut at = last.map_or(now()?.unix_ms(), |t| t.unix_ms());
    let mut done = 0;
    while done < count {
        let n = batch.min(count - done);
        let mut records = Vec::with_capacity(2 * n);
        for i in done..done + n {
            records.extend(send_records(
                &parties,
                &send,
                &target,
                ids.message(),
                i,
                &mut at,
            )?);
        }
        store.commit(&records).map_err(store_failure)?;
        done += n;
    }
    Ok(())
}

/// Appends `count` `message.sent` records from `lead` to `dev` directly
/// through [`EvidenceStore::commit`], `batch` per transaction, at strictly
/// increasing times after the store's last write.
fn fill(store: &mut SqliteStore, ids: &mut Ids, count: usize, batch: usize) -> Result<(), Failure> {
    let parties = Parties::new()?;
    let last = store.last_write().map_err(store_failure)?;
    let mut at = last.map_or(now()?.unix_ms(), |t| t.unix_ms() + 1);
    let mut done = 0;
    let mut next_report = count / 10;
    while done < count {
        let n = batch.min(count - done);
        let mut records = Vec::with_capacity(n);
        for i in done..done + n {
            let record = MessageRecord {
                id: ids.message(),
                business: parties.business.clone(),
                from: mosaic_domain::evidence::Sender::Agent(parties.lead.clone()),
                to: Recipient::Role(parties.dev.clone()),
                class: Some(MessageClass::Info),
                body: body(i),
                in_reply_to: None,
                corrects: None,
                decision: None,
                request: None,
            };
            let stamp = Timestamp::from_unix_ms(at)
                .map_err(|r| Failure::refused("fill time out of range", r))?;
            records.push(Stamped {
                at: stamp,
                evidence: Evidence::Message(MessageEvidence::Sent(Box::new(record))),
            });
            at += 1;
        }
        store.commit(&records).map_err(store_failure)?;
        done += n;
        if done >= next_report && count >= 100_000 {
            eprintln!("[bench]   filled {done} of {count} messages");
            next_report += count / 10;
        }
    }
    Ok(())
}

/// Rows of `table` in the store at `path`, read through a read-only
/// connection of its own.
pub fn count_rows(path: &Path, table: &'static str) -> Result<i64, Failure> {
    let fail = |_| Failure::new("cannot count the rows of a store");
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(fail)?;
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .map_err(fail)
}

/// A store in the run's directory holding `messages` messages, with a
/// driver reopened over it after the fill.
struct Prepared {
    sender: Sender,
    path: PathBuf,
    fill: Duration,
    reopen: Duration,
}

fn prepare(ctx: &Ctx, file: &str, messages: usize, seed: u64) -> Result<Prepared, Failure> {
    let path = ctx.dir.join(file);
    let store = SqliteStore::create(&path)
        .map_err(|e| Failure::refused("cannot create a store", e.refusal()))?;
    let mut store = Sender::open(store, Ids(seed))?.into_store();
    let mut ids = Ids(seed ^ 0x5eed_f111);
    let started = Instant::now();
    fill(&mut store, &mut ids, messages, ctx.sizes.fill_batch)?;
    let fill = started.elapsed();
    let started = Instant::now();
    let sender = Sender::open(store, ids)?;
    let reopen = started.elapsed();
    Ok(Prepared {
        sender,
        path,
        fill,
        reopen,
    })
}

/// `message_send_1_client`: one client's `message.send` requests/s beside
/// raw commits/s, in alternating rounds on the same disk.
///
/// # Errors
/// When a store cannot be set up or a request or commit fails.
pub fn message_send_1_client(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    let Prepared {
        mut sender, path, ..
    } = prepare(ctx, "send.sqlite", 0, 1)?;
    let ledger_before = count_rows(&path, "ledger")?;
    sender.warm_up(sizes.send_warmup)?;
    let floor_path = ctx.dir.join("store-only.sqlite");
    let mut floor = StoreOnly::create(&floor_path, Ids(4))?;
    (0..sizes.send_warmup).try_for_each(|_| floor.send())?;
    let mut wide = crate::raw::Raw::create(&ctx.dir.join("raw-wide.sqlite"), SEND_BTREES)?;
    wide.warm_up(sizes.send_warmup)?;
    let mut narrow =
        crate::raw::Raw::create(&ctx.dir.join("raw-narrow.sqlite"), FEWEST_SEND_BTREES)?;
    narrow.warm_up(sizes.send_warmup)?;
    let mut carried =
        crate::raw::Raw::create(&ctx.dir.join("raw-carried.sqlite"), CARRIED_SEND_BTREES)?;
    carried.warm_up(sizes.send_warmup)?;
    let raw = ctx.raw()?;
    let (mut sends, mut raws, mut floors, mut wides, mut narrows, mut carrieds) = (
        Series::default(),
        Series::default(),
        Series::default(),
        Series::default(),
        Series::default(),
        Series::default(),
    );
    for round in 0..sizes.send_rounds {
        // Rotate which goes first, so none always follows another.
        let n = sizes.send_per_round;
        for turn in 0..6 {
            match (round + turn) % 6 {
                0 => raws.rounds.push(raw.round(n)?),
                1 => sends.rounds.push(sender.round(n)?),
                2 => floors.rounds.push(floor.round(n)?),
                3 => wides.rounds.push(wide.round(n)?),
                4 => carrieds.rounds.push(carried.round(n)?),
                _ => narrows.rounds.push(narrow.round(n)?),
            }
        }
    }
    drop(floor.store);
    if count_rows(&floor_path, "ledger")? != 2 * floor.sent as i64 {
        return Err(Failure::new(
            "the store-only floor does not hold two records per commit",
        ));
    }
    let requests = sender.sent;
    drop(sender.into_store());
    let ledger_rows = count_rows(&path, "ledger")? - ledger_before;
    let ratio = sends.rate() / raws.rate();
    let mut fields = sends.fields("requests_per_s");
    fields.extend(crate::socket::one_thread_ceilings(&sends, raws.rate()));
    fields.extend([
        ("ratio_to_raw", round3(ratio)),
        ("target", Value::from("ratio_to_raw >= 0.8")),
        ("met", Value::from(ratio >= 0.8)),
        ("raw_commits_per_s", round1(raws.rate())),
        ("raw_p50_us", round1(raws.percentile_us(50.0))),
        ("raw_p99_us", round1(raws.percentile_us(99.0))),
        ("raw_written_bytes_per_op", round1(raws.written_per_op())),
        ("store_only_commits_per_s", round1(floors.rate())),
        ("store_only_p50_us", round1(floors.percentile_us(50.0))),
        ("store_only_ratio_to_raw", round3(floors.rate() / raws.rate())),
        ("store_only_written_bytes_per_op", round1(floors.written_per_op())),
        ("store_only_cpu_us_per_op", round1(floors.cpu_us_per_op())),
        (
            "store_only",
            Value::from("the same two records committed by EvidenceStore::commit with no bus or driver: the schema's own floor"),
        ),
        ("raw_7_btrees_commits_per_s", round1(wides.rate())),
        ("raw_7_btrees_p50_us", round1(wides.percentile_us(50.0))),
        ("raw_7_btrees_ratio_to_raw", round3(wides.rate() / raws.rate())),
        ("raw_7_btrees_written_bytes_per_op", round1(wides.written_per_op())),
        ("raw_7_btrees_cpu_us_per_op", round1(wides.cpu_us_per_op())),
        (
            "raw_7_btrees",
            Value::from("raw rusqlite, one row into each of 7 plain tables per commit: as many B-trees as a message.send wrote up to mosaic-bus/2, with no schema around them"),
        ),
        ("raw_4_btrees_commits_per_s", round1(carrieds.rate())),
        ("raw_4_btrees_p50_us", round1(carrieds.percentile_us(50.0))),
        ("raw_4_btrees_ratio_to_raw", round3(carrieds.rate() / raws.rate())),
        ("raw_4_btrees_written_bytes_per_op", round1(carrieds.written_per_op())),
        ("raw_4_btrees_cpu_us_per_op", round1(carrieds.cpu_us_per_op())),
        (
            "raw_4_btrees",
            Value::from("raw rusqlite, one row into each of 4 plain tables per commit: the B-trees a message.send writes on mosaic-bus/5 (the ledger, messages carrying the grant, its id index, messages_recipient), with no schema around them"),
        ),
        ("raw_3_btrees_commits_per_s", round1(narrows.rate())),
        ("raw_3_btrees_p50_us", round1(narrows.percentile_us(50.0))),
        ("raw_3_btrees_ratio_to_raw", round3(narrows.rate() / raws.rate())),
        ("raw_3_btrees_written_bytes_per_op", round1(narrows.written_per_op())),
        ("raw_3_btrees_cpu_us_per_op", round1(narrows.cpu_us_per_op())),
        (
            "raw_3_btrees",
            Value::from("raw rusqlite, one row into each of 3 plain tables per commit: the fewest B-trees any layout of a send could write (the ledger, a unique message id index, a recipient index), with no schema around them"),
        ),
        (
            "records_per_request",
            round3(ledger_rows as f64 / requests as f64),
        ),
        (
            "reference",
            Value::from("raw single-row commits in rounds alternating with these, same directory"),
        ),
    ]);
    Ok(fields)
}

/// `commit_cost_rows`: the cost of one `message.send` when the store holds
/// about 1 k messages and when it holds about 1 M, in rounds alternating
/// between two stores in the same directory.
///
/// # Errors
/// When a store cannot be set up or filled, or a request fails.
pub fn commit_cost_rows(ctx: &mut Ctx) -> Result<Fields, Failure> {
    let sizes = ctx.sizes.clone();
    eprintln!("[bench]   small store: {} messages", sizes.small_messages);
    let mut small = prepare(ctx, "small.sqlite", sizes.small_messages, 2)?;
    eprintln!("[bench]   large store: {} messages", sizes.large_messages);
    let mut large = prepare(ctx, "large.sqlite", sizes.large_messages, 3)?;
    small.sender.warm_up(sizes.send_warmup)?;
    large.sender.warm_up(sizes.send_warmup)?;
    let small_start = sizes.small_messages + small.sender.sent;
    let large_start = sizes.large_messages + large.sender.sent;
    let (mut s, mut l) = (Series::default(), Series::default());
    for round in 0..sizes.cost_rounds {
        if round % 2 == 0 {
            s.rounds.push(small.sender.round(sizes.cost_per_round)?);
            l.rounds.push(large.sender.round(sizes.cost_per_round)?);
        } else {
            l.rounds.push(large.sender.round(sizes.cost_per_round)?);
            s.rounds.push(small.sender.round(sizes.cost_per_round)?);
        }
    }
    let (small_sent, large_sent) = (small.sender.sent, large.sender.sent);
    drop(small.sender.into_store());
    drop(large.sender.into_store());
    let small_end = count_rows(&small.path, "messages")?;
    let large_end = count_rows(&large.path, "messages")?;
    if small_end != (sizes.small_messages + small_sent) as i64
        || large_end != (sizes.large_messages + large_sent) as i64
    {
        return Err(Failure::new(
            "a store does not hold the messages the bench wrote",
        ));
    }
    let ratio_p50 = l.round_p50_us() / s.round_p50_us();
    let ratio_mean = l.round_mean_us() / s.round_mean_us();
    let ratio = ratio_p50.max(ratio_mean);
    let fill_s = large.fill.as_secs_f64();
    Ok(vec![
        ("small_messages", Value::from(small_start)),
        ("large_messages", Value::from(large_start)),
        ("small_p50_us", round1(s.round_p50_us())),
        ("small_mean_us", round1(s.round_mean_us())),
        ("small_p99_us", round1(s.percentile_us(99.0))),
        ("large_p50_us", round1(l.round_p50_us())),
        ("large_mean_us", round1(l.round_mean_us())),
        ("large_p99_us", round1(l.percentile_us(99.0))),
        ("small_written_bytes_per_op", round1(s.written_per_op())),
        ("large_written_bytes_per_op", round1(l.written_per_op())),
        ("ratio_p50", round3(ratio_p50)),
        ("ratio_mean", round3(ratio_mean)),
        ("ratio", round3(ratio)),
        (
            "ratio_basis",
            Value::from("max(ratio_p50, ratio_mean); each the median over rounds"),
        ),
        ("target", Value::from("ratio <= 1.25")),
        ("met", Value::from(ratio <= 1.25)),
        ("rounds", Value::from(sizes.cost_rounds)),
        ("per_round", Value::from(sizes.cost_per_round)),
        ("large_fill_s", round3(fill_s)),
        (
            "large_fill_rows_per_s",
            round1(sizes.large_messages as f64 / fill_s),
        ),
        ("large_reopen_s", round3(large.reopen.as_secs_f64())),
        ("small_reopen_s", round3(small.reopen.as_secs_f64())),
    ])
}
