//! The synchronous runtime loop around the domain bus.
//!
//! [`Driver`] is the smallest correct loop: read the store facts a verb
//! references, hand the verb to the bus, stage its evidence, and answer only
//! once that evidence is durable. It is generic over the store, so tests
//! drive the in-memory fake and the SQLite store through exactly the same
//! path, and the broker's writer runs it over SQLite.
//!
//! Group commit: the `stage_*` methods handle one request each inside the
//! open batch (a bus mark plus a store savepoint, so a request that fails
//! undoes only itself) and return its provisional answer; [`Driver::finish`]
//! commits the whole batch with one sync and settles the bus. A provisional
//! answer may be sent only after `finish` returned `Ok`; after an `Err`
//! every answer of the batch is `storage-unavailable` and the bus is exactly
//! as after the previous batch. The one-request methods (`call`, `refuse`,
//! `bind`) are a stage plus a finish. A refusal is recorded as evidence in
//! its own stage, or counted in its window ([`mosaic_domain::refusal_counts`]):
//! a counted refusal is answered with its batch, and the window's count is
//! staged by [`Driver::stage_refusal_counts`] once the window is over.
//!
//! The driver also keeps the ends of runs each committed batch recorded
//! ([`Driver::take_ends`]), which the broker announces to its host.

use mosaic_domain::bus::{Bus, BusMark, Caller, Command, Reply};
use mosaic_domain::changes::{Change, Routing};
use mosaic_domain::claims::BindReply;
use mosaic_domain::evidence::{
    ClaimEvidence, Ending, Evidence, LaunchRecord, RefusalCount, RefusalRecord, RunEnd, Stamped,
};
use mosaic_domain::messages::{receive_batch, RECEIVE_LIMIT};
use mosaic_domain::refusal_counts::{RefusalWindows, Tally};
use mosaic_domain::{Business, Refusal, RunId, Timestamp};
use mosaic_ports::{EvidenceStore, StoreError};

/// Whether bytes contain a secret that must never be written.
pub type LeakGuard = Box<dyn Fn(&[u8]) -> bool + Send>;

/// A synchronous runtime loop over one store.
pub struct Driver<S> {
    bus: Bus,
    store: S,
    guard: Option<LeakGuard>,
    /// The open batch lost its store (`Unavailable` or `Full`): every
    /// later stage is refused and `finish` abandons it.
    broken: bool,
    /// The last batch failed for lack of space ([`StoreError::Full`]).
    out_of_space: bool,
    /// The open batch staged machine state (a claim, a decision, a launch,
    /// a consumed approval), so views of the bus are stale after it.
    changed_machines: bool,
    /// The store's head: the position of its newest committed record.
    head: u64,
    /// The open batch's records, counted, and the changes they make, each
    /// with its record's offset in the batch.
    batch: (u64, Vec<(u64, Change)>),
    /// The changes of the batches committed since the last
    /// [`Driver::take_changes`], at their positions.
    committed: Vec<(u64, Change)>,
    /// The ends of runs the open batch records, and those of the batches
    /// committed since the last [`Driver::take_ends`].
    ends: (Vec<RunEnd>, Vec<RunEnd>),
    /// The windows refusals are counted in.
    windows: RefusalWindows,
    /// The windows' counts the open batch writes.
    writing: Vec<RefusalCount>,
}

impl<S: EvidenceStore> Driver<S> {
    /// A driver that rebuilds its bus from whatever `store` holds.
    ///
    /// # Errors
    /// `storage-unavailable` when the store cannot be read.
    pub fn open(businesses: Vec<Business>, store: S) -> Result<Self, Refusal> {
        let mut bus = Bus::new(businesses, store.last_write().map_err(storage)?);
        store
            .replay(&mut |record| bus.replay(&record))
            .map_err(storage)?;
        let head = store.head().map_err(storage)?;
        Ok(Self {
            bus,
            store,
            guard: None,
            broken: false,
            out_of_space: false,
            changed_machines: false,
            head,
            batch: (0, Vec::new()),
            committed: Vec::new(),
            ends: (Vec::new(), Vec::new()),
            windows: RefusalWindows::default(),
            writing: Vec::new(),
        })
    }

    /// Refuses (`credential-leak`) every commit whose evidence contains what
    /// `guard` finds, before anything is written; the refusal itself is
    /// recorded without the offending content.
    pub fn with_leak_guard(mut self, guard: LeakGuard) -> Self {
        self.guard = Some(guard);
        self
    }

    /// The bus, for inspecting machine state.
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, for injecting faults.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Gives the store back, for example to reopen it.
    pub fn into_store(self) -> S {
        self.store
    }

    /// Handles one verb: facts in, evidence committed, then the reply. A
    /// refusal is recorded too.
    ///
    /// # Errors
    /// The verb's refusal; `storage-unavailable` when the commit failed (and
    /// then the bus is exactly as before the verb) or when the refusal could
    /// not be recorded.
    pub fn call(
        &mut self,
        now: Timestamp,
        caller: &Caller,
        command: Command,
    ) -> Result<Reply, Refusal> {
        let verb = command.verb();
        self.call_as(now, caller, verb, command)
    }

    /// As [`Driver::call`], recording a refusal under `verb`: the wire verb
    /// that asked, where it differs from the command's own
    /// (`browser.request` arrives as an authorization).
    ///
    /// # Errors
    /// As [`Driver::call`].
    pub fn call_as(
        &mut self,
        now: Timestamp,
        caller: &Caller,
        verb: &str,
        command: Command,
    ) -> Result<Reply, Refusal> {
        let answer = self.stage_call(now, caller, verb, command);
        self.finish().and(answer)
    }

    /// Records a refusal that happened before the bus saw the verb (for
    /// example malformed arguments from a known caller). Returns the refusal
    /// to answer with: `refusal` itself, or `storage-unavailable` when it
    /// could not be recorded.
    pub fn refuse(
        &mut self,
        now: Timestamp,
        caller: Option<&Caller>,
        verb: &str,
        refusal: Refusal,
    ) -> Refusal {
        let answer = self.stage_refusal(now, caller, verb, refusal);
        match self.finish() {
            Ok(()) => answer,
            Err(storage) => storage,
        }
    }

    /// Binds a launch, as the host's `bindLaunch` does.
    ///
    /// # Errors
    /// The binding's refusal or `storage-unavailable`.
    pub fn bind(&mut self, now: Timestamp, record: LaunchRecord) -> Result<BindReply, Refusal> {
        let answer = self.stage_bind(now, record);
        self.finish().and(answer)
    }

    /// Ends `run` for its host, as `endRun` does ([`Bus::handle_end`]).
    ///
    /// # Errors
    /// The end's refusal or `storage-unavailable`.
    pub fn end(&mut self, now: Timestamp, run: &RunId, ending: Ending) -> Result<(), Refusal> {
        let answer = self.stage_end(now, run, ending);
        self.finish().and(answer)
    }

    /// [`Driver::call_as`] inside the open batch: the provisional answer.
    /// A refusal is staged as evidence; a request the store turns down is
    /// undone (bus and store) and its refusal staged instead.
    ///
    /// # Errors
    /// As [`Driver::call`], provisionally.
    pub fn stage_call(
        &mut self,
        now: Timestamp,
        caller: &Caller,
        verb: &str,
        command: Command,
    ) -> Result<Reply, Refusal> {
        if self.broken {
            return Err(Refusal::StorageUnavailable);
        }
        let command = self.with_facts(caller, command)?;
        let mark = self.bus.mark();
        match self.bus.handle(now, caller, command) {
            Ok(reply) => match self.stage(mark) {
                Ok(()) => Ok(reply),
                Err(Refusal::StorageUnavailable) => Err(Refusal::StorageUnavailable),
                Err(refusal) => Err(self.stage_refusal(now, Some(caller), verb, refusal)),
            },
            Err(refusal) => Err(self.stage_refusal(now, Some(caller), verb, refusal)),
        }
    }

    /// [`Driver::refuse`] inside the open batch: a row of its own, or, past
    /// its window's first rows (one of nobody, ten of a known caller, per
    /// run, verb and code), counted in its window (then answered with its
    /// batch, the count written when the window is over).
    pub fn stage_refusal(
        &mut self,
        now: Timestamp,
        caller: Option<&Caller>,
        verb: &str,
        refusal: Refusal,
    ) -> Refusal {
        if self.broken {
            return Refusal::StorageUnavailable;
        }
        let record = RefusalRecord::of(caller, Some(verb), refusal);
        if self.windows.tally(now, &record) == Tally::Counted {
            return refusal;
        }
        let mark = self.bus.mark();
        self.bus.handle_refused(now, caller, Some(verb), refusal);
        match self.stage(mark) {
            Ok(()) => refusal,
            Err(_) => Refusal::StorageUnavailable,
        }
    }

    /// Counts a refusal in its window without a row of its own, while the
    /// disk is short (see `super::disk`): only its window's count is
    /// written. Returns the refusal to answer with.
    pub fn count_refusal(
        &mut self,
        now: Timestamp,
        caller: Option<&Caller>,
        verb: &str,
        refusal: Refusal,
    ) -> Refusal {
        let record = RefusalRecord::of(caller, Some(verb), refusal);
        self.windows.count(now, &record);
        refusal
    }

    /// Whether the last batch failed for lack of space; clears it.
    pub fn take_out_of_space(&mut self) -> bool {
        std::mem::take(&mut self.out_of_space)
    }

    /// Stages, in the open batch, the counts of the refusal windows that
    /// are over at `now` (every window's, when `all`: at shutdown). A count
    /// that cannot be staged, or whose batch fails, is written with the
    /// next batch that succeeds.
    pub fn stage_refusal_counts(&mut self, now: Timestamp, all: bool) {
        let counts = if all {
            self.windows.close_all()
        } else {
            self.windows.close(now)
        };
        for count in counts {
            if self.broken {
                self.windows.unwritten(vec![count]);
                continue;
            }
            let mark = self.bus.mark();
            self.bus.handle_refusals_counted(now, count.clone());
            match self.stage(mark) {
                Ok(()) => self.writing.push(count),
                Err(_) => self.windows.unwritten(vec![count]),
            }
        }
    }

    /// Whether no refusal window is open and no count waits: the writer
    /// need not come back unless a job arrives.
    pub fn refusal_counts_idle(&self) -> bool {
        self.windows.is_idle()
    }

    /// [`Driver::bind`] inside the open batch. A refused binding is not
    /// recorded (the host, not an agent, asked).
    ///
    /// # Errors
    /// As [`Driver::bind`], provisionally.
    pub fn stage_bind(
        &mut self,
        now: Timestamp,
        record: LaunchRecord,
    ) -> Result<BindReply, Refusal> {
        if self.broken {
            return Err(Refusal::StorageUnavailable);
        }
        let mark = self.bus.mark();
        let reply = self.bus.handle_bind(now, record)?;
        self.stage(mark)?;
        Ok(reply)
    }

    /// [`Driver::end`] inside the open batch. A refused end is not
    /// recorded (the host, not an agent, asked).
    ///
    /// # Errors
    /// As [`Driver::end`], provisionally.
    pub fn stage_end(
        &mut self,
        now: Timestamp,
        run: &RunId,
        ending: Ending,
    ) -> Result<(), Refusal> {
        if self.broken {
            return Err(Refusal::StorageUnavailable);
        }
        let mark = self.bus.mark();
        self.bus.handle_end(now, run, ending)?;
        self.stage(mark)
    }

    /// Commits the open batch with one sync and settles the bus. Only after
    /// `Ok` may the batch's provisional answers be sent.
    ///
    /// # Errors
    /// `storage-unavailable`: nothing of the batch was committed, every one
    /// of its answers must become `storage-unavailable`, and the bus is as
    /// after the previous batch.
    pub fn finish(&mut self) -> Result<(), Refusal> {
        let committed = if std::mem::take(&mut self.broken) {
            self.store.abandon();
            Err(Refusal::StorageUnavailable)
        } else {
            self.store.commit_staged().map_err(|e| {
                self.out_of_space |= matches!(e, StoreError::Full(_));
                storage(e)
            })
        };
        let (records, changes) = std::mem::take(&mut self.batch);
        self.windows.committed(committed.is_ok());
        let written = std::mem::take(&mut self.writing);
        if committed.is_err() {
            self.windows.unwritten(written);
        }
        let ends = std::mem::take(&mut self.ends.0);
        match committed {
            Ok(()) => {
                self.ends.1.extend(ends);
                self.bus.handle_committed();
                let head = self.head;
                self.committed.extend(
                    changes
                        .into_iter()
                        .map(|(offset, change)| (head + offset + 1, change)),
                );
                self.head += records;
            }
            Err(_) => {
                self.bus.handle_rolled_back();
                self.changed_machines = false;
            }
        }
        committed
    }

    /// The position of the store's newest committed record.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The store's head after the last committed batch, and the changes
    /// committed since the last call, at their positions. They are kept
    /// until taken: the broker's writer takes them after every batch.
    pub fn take_changes(&mut self) -> (u64, Vec<(u64, Change)>) {
        (self.head, std::mem::take(&mut self.committed))
    }

    /// The ends of runs committed since the last call, in commit order.
    /// They are kept until taken: the broker's writer takes them after
    /// every batch and announces them.
    pub fn take_ends(&mut self) -> Vec<RunEnd> {
        std::mem::take(&mut self.ends.1)
    }

    /// Whether machine state changed since the last call: a committed batch
    /// staged a claim, decision, launch or consumed approval. Clears the flag.
    pub fn take_changed_machines(&mut self) -> bool {
        std::mem::take(&mut self.changed_machines)
    }

    /// Moves the bus's queued evidence into the open batch as one stage, or
    /// undoes everything since `mark` (bus and store) when it cannot be
    /// staged. A lost store breaks the whole batch.
    fn stage(&mut self, mark: BusMark) -> Result<(), Refusal> {
        let mut records: Vec<Stamped> = Vec::new();
        while let Some(record) = self.bus.poll_effect() {
            records.push(record);
        }
        if records.is_empty() {
            return Ok(());
        }
        if let Some(guard) = &self.guard {
            // `Evidence::texts` visits every text field of a record, as
            // stored: no formatting to escape or shorten a token.
            let leaks = |r: &Stamped| {
                let mut leak = false;
                r.evidence
                    .texts(|text| leak = leak || guard(text.as_bytes()));
                leak
            };
            if records.iter().any(leaks) {
                self.bus.rollback_to(mark);
                return Err(Refusal::CredentialLeak);
            }
        }
        match self.store.stage(&records) {
            Ok(()) => {
                self.changed_machines |= records.iter().any(|r| r.evidence.is_machine_state());
                self.note_changes(&records);
                Ok(())
            }
            Err(e) => {
                self.bus.rollback_to(mark);
                match e {
                    StoreError::Full(_) => {
                        self.broken = true;
                        self.out_of_space = true;
                    }
                    StoreError::Unavailable(_) => self.broken = true,
                    StoreError::Duplicate
                    | StoreError::Dangling
                    | StoreError::CrossBusiness
                    | StoreError::NonMonotonic
                    | StoreError::Malformed => {}
                }
                Err(refused_by_store(e))
            }
        }
    }

    /// Notes the changes a stage's records make, for the feed, and the
    /// ends of runs among them.
    fn note_changes(&mut self, records: &[Stamped]) {
        let (count, changes) = &mut self.batch;
        for record in records {
            if let Evidence::Claim(ClaimEvidence::Ended(end)) = &record.evidence {
                self.ends.0.push(end.clone());
            }
            let routing = Change::routing_needed(&record.evidence)
                .and_then(|id| self.bus.decisions().get(id))
                .map(|d| Routing::of(&d.record));
            if let Some(change) = Change::of(&record.evidence, routing) {
                changes.push((*count, change));
            }
            *count += 1;
        }
    }

    /// Fills in the store facts a message verb carries.
    fn with_facts(&self, caller: &Caller, command: Command) -> Result<Command, Refusal> {
        let mut facts = Vec::new();
        if command.wants_batch() {
            match caller {
                Caller::Agent { business, agent } => {
                    facts = receive_batch(
                        self.store
                            .undelivered(business, &agent.role, RECEIVE_LIMIT)
                            .map_err(storage)?,
                    );
                }
                Caller::Reader { .. } | Caller::Human { .. } => {}
            }
        }
        for id in command.references() {
            facts.extend(self.store.message(&id).map_err(storage)?);
        }
        Ok(command.with_facts(facts))
    }
}

fn storage(e: StoreError) -> Refusal {
    mosaic_adapters::cause::logged(Refusal::StorageUnavailable, "the store")(e)
}

/// The refusal for a commit the store turned down. The domain checks every
/// rule it has the facts for, so a rule break here is one only the store can
/// see (a human input named by `task.created`, say): it is reported as what
/// it is, not as an outage. Nothing was committed either way.
fn refused_by_store(e: StoreError) -> Refusal {
    match &e {
        StoreError::Dangling => Refusal::UnknownReference,
        StoreError::CrossBusiness => Refusal::CrossBusiness,
        StoreError::Duplicate | StoreError::Malformed => Refusal::BadRequest,
        StoreError::NonMonotonic | StoreError::Full(_) | StoreError::Unavailable(_) => storage(e),
    }
}
