//! The synchronous runtime loop around the domain bus.
//!
//! [`Driver`] is the smallest correct loop: read the store facts a verb
//! references, hand the verb to the bus, commit its evidence in one
//! transaction, and only then settle the bus and answer. A refusal is
//! recorded in a transaction of its own; if that fails the caller gets
//! `storage-unavailable`. It is generic over the store, so tests drive the
//! in-memory fake and the SQLite store through exactly the same path, and the
//! broker's writer runs it over SQLite.

use mosaic_domain::bus::{Bus, Caller, Command, Reply};
use mosaic_domain::claims::BindReply;
use mosaic_domain::evidence::LaunchRecord;
use mosaic_domain::messages::{receive_batch, RECEIVE_LIMIT};
use mosaic_domain::{Business, Refusal, Timestamp};
use mosaic_ports::{EvidenceStore, StoreError};

/// Whether bytes contain a secret that must never be written.
pub type LeakGuard = Box<dyn Fn(&[u8]) -> bool + Send>;

/// A synchronous runtime loop over one store.
pub struct Driver<S> {
    bus: Bus,
    store: S,
    guard: Option<LeakGuard>,
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
        Ok(Self {
            bus,
            store,
            guard: None,
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
    /// refusal is recorded too, in a transaction of its own.
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
        let command = self.with_facts(caller, command)?;
        match self.bus.handle(now, caller, command) {
            Ok(reply) => match self.commit() {
                Ok(()) => Ok(reply),
                Err(Refusal::CredentialLeak) => {
                    Err(self.refuse(now, Some(caller), verb, Refusal::CredentialLeak))
                }
                Err(refusal) => Err(refusal),
            },
            Err(refusal) => {
                self.bus
                    .handle_refused(now, Some(caller), Some(verb), refusal);
                self.commit()?;
                Err(refusal)
            }
        }
    }

    /// Records a refusal that happened before the bus saw the verb (for
    /// example malformed arguments from a known caller), in a transaction of
    /// its own. Returns the refusal to answer with: `refusal` itself, or
    /// `storage-unavailable` when it could not be recorded.
    pub fn refuse(
        &mut self,
        now: Timestamp,
        caller: Option<&Caller>,
        verb: &str,
        refusal: Refusal,
    ) -> Refusal {
        self.bus.handle_refused(now, caller, Some(verb), refusal);
        match self.commit() {
            Ok(()) => refusal,
            Err(storage) => storage,
        }
    }

    /// Binds a launch, as the host's `bindLaunch` does.
    ///
    /// # Errors
    /// The binding's refusal or `storage-unavailable`.
    pub fn bind(&mut self, now: Timestamp, record: LaunchRecord) -> Result<BindReply, Refusal> {
        let reply = self.bus.handle_bind(now, record)?;
        self.commit()?;
        Ok(reply)
    }

    fn commit(&mut self) -> Result<(), Refusal> {
        let mut batch = Vec::new();
        while let Some(record) = self.bus.poll_effect() {
            batch.push(record);
        }
        if batch.is_empty() {
            return Ok(());
        }
        if let Some(guard) = &self.guard {
            // Every text field shows in `Debug`; token characters are never
            // escaped there.
            if batch.iter().any(|r| guard(format!("{r:?}").as_bytes())) {
                self.bus.handle_rolled_back();
                return Err(Refusal::CredentialLeak);
            }
        }
        match self.store.commit(&batch) {
            Ok(()) => {
                self.bus.handle_committed();
                Ok(())
            }
            Err(e) => {
                self.bus.handle_rolled_back();
                Err(refused_by_store(e))
            }
        }
    }

    /// Fills in the store facts a message verb carries.
    fn with_facts(&self, caller: &Caller, command: Command) -> Result<Command, Refusal> {
        let mut known = Vec::new();
        for id in command.references() {
            known.extend(self.store.message(&id).map_err(storage)?);
        }
        Ok(match command {
            Command::Send { id, input, .. } => Command::Send { id, input, known },
            Command::Read { id, .. } => Command::Read {
                id,
                known: known.pop(),
            },
            Command::Receive { .. } => match caller {
                Caller::Agent { business, agent } => Command::Receive {
                    batch: receive_batch(
                        self.store
                            .undelivered(business, &agent.role, RECEIVE_LIMIT)
                            .map_err(storage)?,
                    ),
                },
                Caller::Reader { .. } | Caller::Human { .. } => {
                    Command::Receive { batch: Vec::new() }
                }
            },
            command @ (Command::Claim
            | Command::Release
            | Command::Revoke { .. }
            | Command::Raise { .. }
            | Command::Resolve { .. }
            | Command::Seen { .. }
            | Command::Withdraw { .. }
            | Command::EmitRoutine { .. }
            | Command::LaunchRevoke
            | Command::LaunchRestore
            | Command::Authorize { .. }
            | Command::RecordEvent { .. }) => command,
        })
    }
}

fn storage(_: StoreError) -> Refusal {
    Refusal::StorageUnavailable
}

/// The refusal for a commit the store turned down. The domain checks every
/// rule it has the facts for, so a rule break here is one only the store can
/// see (a human input named by `task.created`, say): it is reported as what
/// it is, not as an outage. Nothing was committed either way.
fn refused_by_store(e: StoreError) -> Refusal {
    match e {
        StoreError::Dangling => Refusal::UnknownReference,
        StoreError::CrossBusiness => Refusal::CrossBusiness,
        StoreError::Duplicate | StoreError::Malformed => Refusal::BadRequest,
        StoreError::NonMonotonic | StoreError::Unavailable(_) => Refusal::StorageUnavailable,
    }
}
