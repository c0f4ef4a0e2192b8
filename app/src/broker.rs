//! The broker runtime: one per data root.
//!
//! [`start_broker`] validates a boot configuration, takes the data root's
//! writer lock, opens (or creates) the verified SQLite store, replays it,
//! binds the boot launches, issues one capability per launch and per reader,
//! binds `bus/bus.sock` and starts serving. [`Broker::bind_launch`] binds a
//! later launch; [`Broker::close`] stops serving, closes the store, and
//! removes the socket and the lock.
//!
//! Threads: one writer thread owns the [`Driver`] (the only writing store
//! connection) and group-commits: it stages every queued request in arrival
//! order, each in its own savepoint, commits the batch once, and only then
//! answers them. A tokio runtime serves the socket, with one task per
//! connection that, for each of its lines in turn, parses the line, finds
//! the caller by capability, and waits for the writer's answer; reads
//! (`inbox`, `tasks`, `agents`, `trail`) run beside the writer instead, on
//! [`Reads`]' own connections.
//! Capabilities live only in this process's memory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use mosaic_adapters::config::{BootConfig, ConfigError};
use mosaic_adapters::credentials::{
    CredentialStatus, CredentialStore, FileEnvCredentials, Service,
};
use mosaic_adapters::fs::{self, DataRoot, WriterLock};
use mosaic_adapters::http::{self, SseTransport};
use mosaic_adapters::procfs::ProcFs;
use mosaic_adapters::socket::{self, Disconnect, Peer};
use mosaic_adapters::sqlite::SqliteStore;
use mosaic_adapters::system::{OsEntropy, SystemClock};
use mosaic_adapters::wire::browser::{self as browser_wire, BrowserCall};
use mosaic_adapters::wire::{self, Call};
use mosaic_domain::authority::Grant;
use mosaic_domain::bus::{Caller, Command, Reply};
use mosaic_domain::evidence::{AgentRef, LaunchRecord, Subject};
use mosaic_domain::{
    Action, BusinessId, CallerKind, Capability, DecisionId, Refusal, Target, Verb,
};
use mosaic_ports::{BrowserControl, BrowserTransport, Entropy, ProcessTable, StoreReaders};
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::browser::{self, BrowserHub};
use crate::driver::{Driver, LeakGuard};
use crate::feed::{self, Feed, Page, Waited};
use crate::human_proof::BrokerExe;
use crate::pipeline::{
    self, admit, commit_batch, read_now, stage_request, Admitted, Proven, Prover, Who, Writer,
    WriterWorld,
};
use crate::reads::{Reads, View};
use crate::world::{BrokerIdentity, Ports, SharedEntropy, Time};
use mosaic_adapters::cause::{self, logged};

/// What a capability stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Binding {
    /// A bound run working as its role.
    Agent {
        business: BusinessId,
        agent: AgentRef,
    },
    /// A read-only capability of one business.
    Reader { business: BusinessId },
}

impl Binding {
    fn caller(&self) -> Caller {
        match self {
            Binding::Agent { business, agent } => Caller::Agent {
                business: business.clone(),
                agent: agent.clone(),
            },
            Binding::Reader { business } => Caller::Reader {
                business: business.clone(),
            },
        }
    }
}

/// A capability issued for a launch.
#[derive(Debug, Clone)]
pub struct IssuedLaunch {
    /// The launch's business.
    pub business: BusinessId,
    /// The launch's run.
    pub run: mosaic_domain::RunId,
    /// The capability; hand it only to that run, on a private channel.
    pub cap: Capability,
}

/// A capability issued for a reader.
#[derive(Debug, Clone)]
pub struct IssuedReader {
    /// The business it reads.
    pub business: BusinessId,
    /// The capability.
    pub cap: Capability,
}

/// What a successful boot hands the host.
#[derive(Debug, Clone)]
pub struct Booted {
    /// The socket path.
    pub socket: PathBuf,
    /// One capability per boot launch.
    pub launches: Vec<IssuedLaunch>,
    /// One capability per reader.
    pub readers: Vec<IssuedReader>,
    /// Browser control, when the boot configuration enabled it.
    pub browser: Option<BrowserEndpoint>,
}

/// Where panes connect, and the UI token every route requires.
#[derive(Debug, Clone)]
pub struct BrowserEndpoint {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The UI token; hand it only to the UI.
    pub token: Capability,
}

/// Why a broker did not start: a static code and, for a bad credential
/// reference, which one (`"acme/dev gitea"`, never its content), for a bad
/// role reference of a business, which one (`"acme launch.by ops"`, see
/// [`ConfigError`]), or for a boot launch whose process check failed, its
/// run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootFailure {
    /// The code.
    pub refusal: Refusal,
    /// The credential or role reference at fault, if one was.
    pub reference: Option<String>,
    /// The boot launch at fault, if one was.
    pub run: Option<mosaic_domain::RunId>,
}

impl From<Refusal> for BootFailure {
    fn from(refusal: Refusal) -> Self {
        Self {
            refusal,
            reference: None,
            run: None,
        }
    }
}

impl From<ConfigError> for BootFailure {
    fn from(error: ConfigError) -> Self {
        Self {
            refusal: error.refusal,
            reference: error.reference,
            run: None,
        }
    }
}

impl From<BootFailure> for Refusal {
    fn from(failure: BootFailure) -> Self {
        failure.refusal
    }
}

/// One unit of work for the writer thread.
enum Job {
    /// A parsed request (or its argument refusal) from a known caller.
    Request {
        who: Proven,
        verb: &'static str,
        call: Result<Call, Refusal>,
        reply: oneshot::Sender<Result<Value, Refusal>>,
        /// For a `browser.request`: told early (see [`Early`]).
        early: Option<Early>,
    },
    /// A launch to bind.
    Bind {
        record: LaunchRecord,
        reply: mpsc::Sender<Result<(), Refusal>>,
    },
    /// A command of the trusted in-process API (`authorize`, `record_event`).
    Trusted {
        caller: Caller,
        command: Command,
        reply: mpsc::Sender<Result<Reply, Refusal>>,
    },
    /// A refusal of a read to record (reads run beside the writer).
    Refuse {
        caller: Caller,
        verb: &'static str,
        refusal: Refusal,
        reply: oneshot::Sender<Result<Value, Refusal>>,
    },
    /// A command the broker itself records for a caller (a browser
    /// request's outcome), answered to an async task.
    Record {
        caller: Caller,
        command: Command,
        reply: oneshot::Sender<Result<Reply, Refusal>>,
    },
}

/// How a `browser.request` hears of its authorization before its answer:
/// `staged` once it is staged without a refusal, before its batch commits
/// (the request is delivered to the panes meanwhile), then `durable` as
/// soon as the batch has synced, before any answer goes out (the panes'
/// claims wait for it).
struct Early {
    staged: oneshot::Sender<()>,
    durable: watch::Sender<Option<bool>>,
}

/// A running broker.
pub struct Broker {
    registry: Arc<RwLock<HashMap<Capability, Binding>>>,
    jobs: Option<mpsc::Sender<Job>>,
    writer: Option<JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<Result<(), Refusal>>>,
    browser_stop: Option<oneshot::Sender<()>>,
    browser_server: Option<tokio::task::JoinHandle<Result<(), Refusal>>>,
    lock: Option<WriterLock>,
    socket: PathBuf,
    entropy: std::sync::Mutex<SharedEntropy>,
    credentials: Arc<CredentialStore>,
    time: Time,
    launch_check: LaunchCheck,
    /// Closed first on shutdown, so no wait for changes holds it up.
    feed: Arc<Feed>,
}

/// A launch record must describe a process that runs now, as this broker's
/// user, started when the record says: the pid and the kernel's start time
/// are what identifies a managed process (and what the human proof matches
/// ancestors against), so a record that names no such process is refused
/// before it is bound.
struct LaunchCheck {
    processes: Arc<dyn ProcessTable>,
    uid: u32,
}

impl LaunchCheck {
    /// # Errors
    /// `launch-not-running` (no such process, or it cannot be read),
    /// `launch-start-mismatch`, `launch-foreign-user`.
    fn check(&self, record: &LaunchRecord) -> Result<(), Refusal> {
        let process = self.processes.process(record.pid).map_err(|e| {
            tracing::warn!(
                code = Refusal::LaunchNotRunning.code(),
                run = record.run.as_str(),
                pid = record.pid,
                cause = e.to_string().as_str(),
                "the launch's process cannot be read"
            );
            Refusal::LaunchNotRunning
        })?;
        if process.start_time != record.start_time {
            return Err(Refusal::LaunchStartMismatch);
        }
        if process.uid != self.uid {
            return Err(Refusal::LaunchForeignUser);
        }
        Ok(())
    }
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

/// Starts a broker in this process (the library form of `mosaic-bus
/// broker`): the runtime of [`start_runtime`] over the real adapters, the
/// SQLite store of the data root under its writer lock, the system clock,
/// the kernel's entropy, `/proc`, and credential files and variables.
///
/// # Errors
/// One static code: the data root (`unsafe-path`), the lock (`lock-held`,
/// `stale-lock`), the store (`schema-mismatch`, `integrity-failed`,
/// `storage-unavailable`), and those of [`start_runtime`]. Everything
/// acquired so far is released again.
pub fn start_broker(config: BootConfig) -> Result<(Broker, Booted), BootFailure> {
    let data_root = config.data_root.clone();
    boot_real(config).map_err(|failure| refused_boot(&data_root, failure))
}

/// [`start_broker`] before its refusal is logged.
fn boot_real(config: BootConfig) -> Result<(Broker, Booted), BootFailure> {
    let root = DataRoot::open(&config.data_root)?;
    let me = ProcFs::new().current().map_err(logged(
        Refusal::StorageUnavailable,
        "reading this process in /proc",
    ))?;
    let lock = WriterLock::acquire(&root, me.pid, me.start_time)?;
    // One open file per connection; most hosts start us at 1024.
    let files = socket::raise_open_file_limit();
    if let Some(files) = files.filter(|&f| f < socket::MAX_CONNECTIONS as u64) {
        tracing::warn!(
            open_files = files,
            connections = socket::MAX_CONNECTIONS,
            "the open-file limit is below the connection limit"
        );
    }
    let started = real_ports(&root, &config).and_then(|ports| serve(&root, ports, config));
    match started {
        Ok((mut broker, booted)) => {
            broker.lock = Some(lock);
            Ok((broker, booted))
        }
        Err(failure) => {
            // Nothing was served; the lock must not outlive this failed start.
            let _ = lock.release();
            Err(failure)
        }
    }
}

/// The real adapters, the store opened (or created) at the data root.
fn real_ports(root: &DataRoot, config: &BootConfig) -> Result<Ports<SqliteStore>, BootFailure> {
    let db = root.db_path();
    if db.exists() {
        fs::check_private_file(&db)?;
    }
    let store = SqliteStore::open_or_create(&db).map_err(|e| {
        let refusal = e.refusal();
        // The cause of an unavailable store is an OS or driver error; the
        // others are the store's verdict on the file, named by the code.
        cause::log(refusal, "opening the store", &e);
        refusal
    })?;
    let cost = store.open_cost();
    tracing::info!(
        rows = cost.rows,
        open_ms = millis(cost.open),
        integrity_ms = millis(cost.integrity),
        ledger_ms = millis(cost.ledger),
        "store verified"
    );
    // A token file may lie in none of these: the data root, this binary's
    // own checkout, a repository or a project.
    let mut protected = vec![root.root().to_path_buf()];
    protected.extend(own_repository_root());
    protected.extend(config.repo_roots.iter().cloned());
    protected.extend(config.project_roots.iter().cloned());
    Ok(Ports {
        store,
        clock: Arc::new(SystemClock),
        entropy: Box::new(OsEntropy),
        processes: Arc::new(ProcFs::new()),
        credentials: Box::new(FileEnvCredentials::new(protected)),
        identity: BrokerIdentity {
            uid: rustix::process::geteuid().as_raw(),
            exe: BrokerExe::of(&ProcFs::new(), std::process::id())?,
        },
    })
}

/// Starts the broker runtime over any ports: the in-memory fakes of
/// `mosaic-ports` (feature `fakes`) as well as the real adapters. It serves
/// the real socket at `<dataRoot>/bus/bus.sock`, the real protocol, and
/// with `browser_listen` the real browser HTTP/SSE; only what it reads from
/// the world comes from `ports`. It takes no writer lock: that guards the
/// data root's SQLite file, which [`start_broker`] opens.
///
/// ```
/// use std::sync::Arc;
/// use mosaic_adapters::config::business_from_json;
/// use mosaic_adapters::config::BootConfig;
/// use mosaic_adapters::socket::Client;
/// use mosaic_app::broker::start_runtime;
/// use mosaic_app::human_proof::BrokerExe;
/// use mosaic_app::world::{BrokerIdentity, Ports};
/// use mosaic_domain::evidence::{Harness, LaunchRecord};
/// use mosaic_domain::{BusinessId, RoleInstance, RunId, Timestamp, Verb};
/// use mosaic_ports::fakes::{
///     FakeCredentials, FakeProcess, FakeProcessTable, ManualClock, MemoryStore, SeededEntropy,
/// };
/// use mosaic_ports::ExeIdentity;
///
/// let business = business_from_json(r#"{"id": "acme", "human": "alice",
///     "arbiters": {"technical": "lead", "delivery": "lead"},
///     "roles": {"lead": {"authority": {"withinRole": ["message.send"], "crossRole": []}}}}"#)
/// .unwrap();
/// let dir = tempfile::tempdir().unwrap();
/// let ports = Ports {
///     store: MemoryStore::new(),
///     clock: Arc::new(ManualClock::new(Timestamp::from_unix_ms(1_767_225_600_000).unwrap())),
///     entropy: Box::new(SeededEntropy::new(1)),
///     // The launched agent, as the broker checks it at binding.
///     processes: Arc::new(FakeProcessTable::new().with(FakeProcess::new(4242, 1).uid(1000).start_time(17))),
///     credentials: Box::new(FakeCredentials::new()),
///     identity: BrokerIdentity {
///         uid: 1000,
///         exe: BrokerExe { path: "/opt/mosaic-bus".into(), identity: ExeIdentity { dev: 1, ino: 2 } },
///     },
/// };
/// let launch = LaunchRecord {
///     business: BusinessId::parse("acme").unwrap(),
///     role: RoleInstance::parse("lead").unwrap(),
///     run: RunId::parse("lead-1").unwrap(),
///     harness: Harness::Pi,
///     address: None,
///     pid: 4242,
///     start_time: 17,
/// };
/// let (broker, booted) = start_runtime(ports, BootConfig {
///     data_root: dir.path().to_owned(),
///     businesses: vec![business],
///     launches: vec![launch],
///     ..BootConfig::default()
/// })
/// .unwrap();
/// let lead = Client::new(&booted.socket, booted.launches[0].cap.expose());
/// let claimed = lead.call(Verb::RoleClaim.as_str(), serde_json::json!({})).unwrap();
/// assert_eq!(claimed, serde_json::json!({"status": "claimed"}));
/// broker.close().unwrap();
/// ```
///
/// # Errors
/// One static code: the data root (`unsafe-path`), a credential reference
/// (`unsafe-path`, `bad-config`, with the reference's name), the store
/// (`storage-unavailable`), a boot launch (its binding refusal), the
/// socket (`unsafe-path`, `broker-unavailable`).
pub fn start_runtime<S>(
    ports: Ports<S>,
    config: BootConfig,
) -> Result<(Broker, Booted), BootFailure>
where
    S: StoreReaders + Send + 'static,
{
    let data_root = config.data_root.clone();
    DataRoot::open(&config.data_root)
        .map_err(BootFailure::from)
        .and_then(|root| serve(&root, ports, config))
        .map_err(|failure| refused_boot(&data_root, failure))
}

/// Logs a refused boot: its code, and the credential reference or the
/// boot launch it concerns (the cause was logged where it arose).
fn refused_boot(data_root: &Path, failure: BootFailure) -> BootFailure {
    tracing::error!(
        code = failure.refusal.code(),
        data_root = &*data_root.to_string_lossy(),
        reference = failure.reference.as_deref(),
        run = failure.run.as_ref().map(mosaic_domain::RunId::as_str),
        "the boot was refused"
    );
    failure
}

/// The source checkout this binary was built in, if it runs from one: the
/// nearest ancestor of the executable that holds `.git`.
fn own_repository_root() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The writer's guard: no evidence may carry a loaded token.
fn leak_guard(credentials: &Arc<CredentialStore>) -> Option<LeakGuard> {
    if credentials.is_empty() {
        return None;
    }
    let credentials = Arc::clone(credentials);
    Some(Box::new(move |bytes| {
        credentials.contains_known_token(bytes)
    }))
}

/// Loads the credentials, rebuilds the bus from the store, binds the boot
/// launches, issues the capabilities, binds the socket (and browser
/// control), then starts the writer thread and the socket runtime.
fn serve<S>(
    root: &DataRoot,
    ports: Ports<S>,
    config: BootConfig,
) -> Result<(Broker, Booted), BootFailure>
where
    S: StoreReaders + Send + 'static,
{
    let Ports {
        store,
        clock,
        entropy,
        processes,
        credentials,
        identity,
    } = ports;
    let credentials = CredentialStore::load(&config.businesses, &config.sync, &*credentials)
        .map_err(|(refusal, reference)| BootFailure {
            refusal,
            reference: Some(reference),
            run: None,
        })?;
    let credentials = Arc::new(credentials);
    let time = Time::new(clock);
    let business_ids: Vec<BusinessId> = config.businesses.iter().map(|b| b.id().clone()).collect();
    let replay = std::time::Instant::now();
    let mut driver = Driver::open(config.businesses, store)?;
    tracing::info!(replay_ms = millis(replay.elapsed()), "state replayed");
    if let Some(guard) = leak_guard(&credentials) {
        driver = driver.with_leak_guard(guard);
    }
    let mut entropy = SharedEntropy::new(entropy);
    let launch_check = LaunchCheck {
        processes: Arc::clone(&processes),
        uid: identity.uid,
    };
    let mut registry = HashMap::new();
    let mut launches = Vec::new();
    for record in config.launches {
        launch_check.check(&record).map_err(|refusal| BootFailure {
            refusal,
            reference: None,
            run: Some(record.run.clone()),
        })?;
        driver.bind(time.now(), record.clone())?;
        let cap = entropy
            .capability()
            .map_err(logged(Refusal::StorageUnavailable, "drawing a capability"))?;
        registry.insert(cap.clone(), agent_binding(&record));
        launches.push(IssuedLaunch {
            business: record.business,
            run: record.run,
            cap,
        });
    }
    let mut readers = Vec::new();
    for business in config.readers {
        let cap = entropy
            .capability()
            .map_err(logged(Refusal::StorageUnavailable, "drawing a capability"))?;
        registry.insert(
            cap.clone(),
            Binding::Reader {
                business: business.clone(),
            },
        );
        readers.push(IssuedReader { business, cap });
    }
    // Bound before any thread starts: binding sets the process umask.
    let socket_path = root.socket_path();
    let listener = socket::bind_private(&socket_path)?;
    let browser_listener = match &config.browser_listen {
        Some(listen) => {
            let token = entropy
                .capability()
                .map_err(logged(Refusal::StorageUnavailable, "drawing the UI token"))?;
            Some((http::bind(listen)?, token))
        }
        None => None,
    };
    let registry = Arc::new(RwLock::new(registry));
    driver.take_changed_machines();
    // The feed starts after the boot's own bindings.
    let (head, _) = driver.take_changes();
    let reads = Arc::new(Reads::open(
        driver.store(),
        View::first(driver.bus(), &business_ids),
        head,
    )?);
    let feed = Arc::clone(reads.feed());
    let (jobs, queue) = mpsc::channel();
    let writer = {
        let reads = Arc::clone(&reads);
        let world = WriterWorld {
            time: time.clone(),
            entropy: entropy.clone(),
        };
        std::thread::Builder::new()
            .name(WRITER_THREAD.into())
            .spawn(move || write_loop(driver, queue, world, reads))
    }
    .map_err(logged(
        Refusal::StorageUnavailable,
        "starting the writer thread",
    ))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(logged(
            Refusal::BrokerUnavailable,
            "starting the socket runtime",
        ))?;
    let (stop, stopped) = oneshot::channel::<()>();
    // The hub reaches the panes through the SSE transport of the HTTP
    // server, which reaches the hub through its `BrowserControl` seam.
    let panes = browser_listener.as_ref().map(|_| {
        let credentials = Arc::clone(&credentials);
        let secrets: browser::Secrets =
            Arc::new(move |bytes: &[u8]| credentials.contains_known_token(bytes));
        let transport = Arc::new(SseTransport::new());
        let hub = Arc::new(BrowserHub::new(
            root.root().join("browser"),
            secrets,
            time.clone(),
            entropy.clone(),
            Arc::clone(&transport) as Arc<dyn BrowserTransport>,
        ));
        (hub, transport)
    });
    let hub = panes.as_ref().map(|(hub, _)| Arc::clone(hub));
    let prover = Arc::new(Prover::new(processes, identity, time.clone()));
    let handler = {
        let registry = Arc::clone(&registry);
        let jobs = jobs.clone();
        let credentials = Arc::clone(&credentials);
        let hub = hub.clone();
        let time = time.clone();
        move |peer: Peer, line: Vec<u8>, gone: Disconnect| {
            let (registry, jobs) = (Arc::clone(&registry), jobs.clone());
            let credentials = Arc::clone(&credentials);
            let hub = hub.clone();
            let reads = Arc::clone(&reads);
            let prover = Arc::clone(&prover);
            let time = time.clone();
            async move {
                // A token is refused on the way in (before anything is
                // written or emitted) and, should one ever be stored, on
                // the way out.
                let connection = Connection {
                    registry: &registry,
                    jobs: &jobs,
                    reads: &reads,
                    hub: hub.as_deref(),
                    credentials: &credentials,
                    prover: &prover,
                    time: &time,
                    gone,
                };
                let started = std::time::Instant::now();
                let mut seen = Seen::default();
                let mut response = answer(connection, peer, &line, &mut seen).await;
                if credentials.contains_known_token(response.as_bytes()) {
                    response = wire::err(Refusal::CredentialLeak);
                }
                if tracing::enabled!(tracing::Level::DEBUG) {
                    seen.log(&response, started.elapsed());
                }
                response.into_bytes()
            }
        }
    };
    let server = runtime.spawn(socket::serve(listener, handler, async move {
        let _ = stopped.await;
    }));
    let (browser_stop, browser_server, endpoint) = match (browser_listener, panes) {
        (Some((listener, token)), Some((hub, transport))) => {
            let address = listener.local_addr().map_err(logged(
                Refusal::BrokerUnavailable,
                "the browser listener's address",
            ))?;
            let endpoint = BrowserEndpoint {
                url: format!("http://{address}"),
                token: token.clone(),
            };
            let (stop, stopped) = oneshot::channel::<()>();
            runtime.spawn(Arc::clone(&hub).run_timers());
            let control = hub as Arc<dyn BrowserControl<Value>>;
            let server = runtime.spawn(http::serve(
                listener,
                control,
                transport,
                token,
                async move {
                    let _ = stopped.await;
                },
            ));
            (Some(stop), Some(server), Some(endpoint))
        }
        (Some(_) | None, Some(_) | None) => (None, None, None),
    };
    let broker = Broker {
        registry,
        jobs: Some(jobs),
        writer: Some(writer),
        runtime: Some(runtime),
        stop: Some(stop),
        server: Some(server),
        browser_stop,
        browser_server,
        lock: None,
        socket: socket_path.clone(),
        entropy: std::sync::Mutex::new(entropy),
        credentials,
        time,
        launch_check,
        feed,
    };
    tracing::info!(
        data_root = &*root.root().to_string_lossy(),
        businesses = business_ids.len(),
        launches = launches.len(),
        readers = readers.len(),
        socket = &*socket_path.to_string_lossy(),
        browser = endpoint.as_ref().map(|e| e.url.as_str()),
        "broker serving"
    );
    Ok((
        broker,
        Booted {
            socket: socket_path,
            launches,
            readers,
            browser: endpoint,
        },
    ))
}

/// A duration in milliseconds, to the microsecond, for the boot log.
fn millis(d: std::time::Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

fn agent_binding(record: &LaunchRecord) -> Binding {
    Binding::Agent {
        business: record.business.clone(),
        agent: AgentRef {
            role: record.role.clone(),
            run: record.run.clone(),
        },
    }
}

/// What one socket connection's handler works with.
struct Connection<'a, S> {
    registry: &'a RwLock<HashMap<Capability, Binding>>,
    jobs: &'a mpsc::Sender<Job>,
    reads: &'a Arc<Reads<S>>,
    hub: Option<&'a BrowserHub>,
    credentials: &'a CredentialStore,
    prover: &'a Prover,
    time: &'a Time,
    gone: Disconnect,
}

/// What the request's log line says of it, learned as it is admitted.
#[derive(Debug, Default)]
struct Seen {
    verb: Option<&'static str>,
    caller: Option<&'static str>,
}

impl Seen {
    /// Learns the verb and the caller's kind of an admitted request.
    fn admitted(&mut self, admitted: &Admitted) {
        self.verb = Some(admitted.verb);
        self.caller = Some(match &admitted.who {
            Who::Known(caller) => match caller.kind() {
                CallerKind::Agent => "agent",
                CallerKind::Reader => "reader",
                CallerKind::Human => "human",
            },
            Who::Human { .. } => "human",
        });
    }

    /// One debug line per request: verb, caller kind, the answer's code
    /// (`ok` or the refusal's) and how long it took. Never the line itself,
    /// which holds the capability, nor its arguments or result.
    fn log(&self, response: &str, took: std::time::Duration) {
        #[derive(serde::Deserialize)]
        struct Outcome<'a> {
            ok: bool,
            #[serde(borrow)]
            error: Option<&'a str>,
        }
        let outcome = serde_json::from_str::<Outcome<'_>>(response).ok();
        let code = match &outcome {
            Some(Outcome { ok: true, .. }) => "ok",
            Some(Outcome {
                ok: false,
                error: Some(code),
            }) => code,
            Some(Outcome {
                ok: false,
                error: None,
            })
            | None => "?",
        };
        tracing::debug!(
            verb = self.verb,
            caller = self.caller,
            code,
            micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            "request"
        );
    }
}

/// Answers one request line: [`admit`] it, then run a read beside the
/// writer, or hand it to the writer (a `browser.request` also to a pane).
async fn answer<S: StoreReaders + Send + 'static>(
    connection: Connection<'_, S>,
    peer: Peer,
    line: &[u8],
    seen: &mut Seen,
) -> String {
    let Connection {
        registry,
        jobs,
        reads,
        hub,
        credentials,
        prover,
        time,
        gone,
    } = connection;
    let secrets = |bytes: &[u8]| credentials.contains_known_token(bytes);
    let secrets = (!credentials.is_empty()).then_some(&secrets as &pipeline::Secrets<'_>);
    let lookup = |cap: &Capability| {
        let registry = registry.read().ok()?;
        registry.get(cap).map(Binding::caller)
    };
    let admitted = match admit(line, peer, secrets, lookup) {
        Ok(admitted) => admitted,
        Err(refusal) => return wire::err(refusal),
    };
    seen.admitted(&admitted);
    if let (Ok(Call::Changes { since, timeout_ms }), Who::Known(caller)) =
        (&admitted.call, &admitted.who)
    {
        let wait = mosaic_domain::changes::wait(*timeout_ms);
        let asked = Asked {
            caller: caller.clone(),
            since: *since,
            wait,
        };
        return changes(reads, jobs, time, asked, &gone).await;
    }
    if let Some((caller, call)) = admitted.read_beside_writer() {
        let (caller, call) = (caller.clone(), call.clone());
        return read_beside_writer(reads, jobs, caller, admitted.verb, call).await;
    }
    let browser = match (&admitted.call, &admitted.who) {
        (Ok(Call::BrowserRequest(call)), Who::Known(caller @ Caller::Agent { .. })) => {
            Some((call.clone(), caller.clone()))
        }
        (Ok(_) | Err(_), Who::Known(_) | Who::Human { .. }) => None,
    };
    let Admitted { who, verb, call } = admitted;
    let who = prover.prove(reads, who).await;
    let Some((browser, caller)) = browser else {
        let answer = ask(jobs, |reply| Job::Request {
            who,
            verb,
            call,
            reply,
            early: None,
        })
        .await;
        return wire::response(answer);
    };
    let (staged, on_staged) = oneshot::channel();
    let (durable, authority) = watch::channel(None);
    let (reply, answered) = oneshot::channel();
    let job = Job::Request {
        who,
        verb,
        call,
        reply,
        early: Some(Early { staged, durable }),
    };
    if jobs.send(job).is_err() {
        return browser_wire::error_response(Refusal::BrokerUnavailable, None);
    }
    let answered = async {
        answered
            .await
            .unwrap_or(Err(Refusal::BrokerUnavailable))
            .map(drop)
    };
    if on_staged.await.is_ok() {
        return browse(jobs, hub, &gone, &browser, caller, authority, answered).await;
    }
    // Refused while staging, or the writer is gone: nothing was delivered.
    match answered.await {
        Err(refusal) => browser_wire::error_response(refusal, None),
        Ok(()) => {
            browse(jobs, hub, &gone, &browser, caller, authority, async {
                Ok(())
            })
            .await
        }
    }
}

/// A `changes` call from a known caller.
struct Asked {
    caller: Caller,
    since: Option<u64>,
    wait: Duration,
}

/// Answers `changes` beside the writer: at once without `since`, else
/// when a change concerning the caller lies after it, or at the wait's
/// end. A caller that disconnects ends its wait, which records nothing;
/// its answer is the empty page at `since` (a caller that only shut down
/// its writing side, with more lines on its connection, still reads one
/// JSON line for each). Only a refusal goes to the writer, to be recorded.
async fn changes<S: StoreReaders + Send + 'static>(
    reads: &Arc<Reads<S>>,
    jobs: &mpsc::Sender<Job>,
    time: &Time,
    asked: Asked,
    gone: &Disconnect,
) -> String {
    let Asked {
        caller,
        since,
        wait,
    } = asked;
    let watcher = reads
        .view()
        .ok_or(Refusal::BrokerUnavailable)
        .and_then(|view| view.watcher(&caller));
    let page = match (watcher, since) {
        (Err(refusal), _) => Err(refusal),
        (Ok(_), None) => Ok(Page {
            cursor: reads.feed().head(),
            changes: Vec::new(),
        }),
        (Ok(watcher), Some(since)) => {
            match feed::wait(reads, time, watcher, since, wait, gone.disconnected()).await {
                Ok(Waited::Page(page)) => Ok(page),
                Ok(Waited::Gone) => Ok(Page {
                    cursor: since,
                    changes: Vec::new(),
                }),
                Err(refusal) => Err(refusal),
            }
        }
    };
    let refusal = match page {
        Ok(page) => return wire::ok(wire::changes_json(page.cursor, &page.changes)),
        Err(refusal) => refusal,
    };
    let verb = Verb::Changes.as_str();
    let recorded = ask(jobs, |reply| Job::Refuse {
        caller,
        verb,
        refusal,
        reply,
    })
    .await;
    wire::response(recorded)
}

/// Answers an agent's or reader's read on a reader connection, on a
/// blocking thread once a connection is free, never behind the writer;
/// only a refusal goes to the writer, to be recorded.
async fn read_beside_writer<S: StoreReaders + Send + 'static>(
    reads: &Arc<Reads<S>>,
    jobs: &mpsc::Sender<Job>,
    caller: Caller,
    verb: &'static str,
    call: Call,
) -> String {
    // Waiting here holds no thread: only `READERS` reads take one at a time.
    let permit = match reads.permit().await {
        Ok(permit) => permit,
        Err(refusal) => return wire::err(refusal),
    };
    let answer = {
        let (reads, caller) = (Arc::clone(reads), caller.clone());
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            reads.with_store(|view, store| read_now(view, store, &caller, call))
        })
        .await
        .unwrap_or(Err(Refusal::BrokerUnavailable))
    };
    let refusal = match answer {
        Ok(text) => return wire::ok_text(&text),
        Err(refusal) => refusal,
    };
    let recorded = ask(jobs, |reply| Job::Refuse {
        caller,
        verb,
        refusal,
        reply,
    })
    .await;
    wire::response(recorded)
}

/// Hands the writer the job `make` builds around a reply channel and waits
/// for its answer; a writer that is gone is `broker-unavailable`.
async fn ask<T>(
    jobs: &mpsc::Sender<Job>,
    make: impl FnOnce(oneshot::Sender<Result<T, Refusal>>) -> Job,
) -> Result<T, Refusal> {
    let (reply, answered) = oneshot::channel();
    jobs.send(make(reply))
        .map_err(|_| Refusal::BrokerUnavailable)?;
    answered.await.unwrap_or(Err(Refusal::BrokerUnavailable))
}

/// Carries a staged `browser.request` to a pane while its authorization
/// syncs (`authority` says when it is durable; `answered` is the writer's
/// answer), and records its outcome (with a digest, never the payload)
/// before answering. An authorization that failed is answered with its
/// refusal, and nothing more is recorded.
async fn browse(
    jobs: &mpsc::Sender<Job>,
    hub: Option<&BrowserHub>,
    gone: &Disconnect,
    call: &BrowserCall,
    caller: Caller,
    authority: watch::Receiver<Option<bool>>,
    answered: impl std::future::Future<Output = Result<(), Refusal>>,
) -> String {
    let Some(hub) = hub else {
        if let Err(refusal) = answered.await {
            return browser_wire::error_response(refusal, None);
        }
        let sentence =
            "Browser control is not enabled: the broker was booted without `browser.listen`.";
        return browser_wire::error_response(Refusal::NoBrowserClient, Some(sentence.to_owned()));
    };
    let (request, outcome) = browser::request(hub, call, gone, authority).await;
    if let Err(refusal) = answered.await {
        return browser_wire::error_response(refusal, None);
    }
    let answer = match &outcome {
        Ok(text) => wire::ok_text(text),
        Err(refusal) => {
            let sentence = (*refusal == Refusal::NoBrowserClient)
                .then(|| browser::no_client_sentence(hub, &call.action));
            browser_wire::error_response(*refusal, sentence)
        }
    };
    if !matches!(caller, Caller::Agent { .. }) {
        return answer;
    }
    let body = browser_wire::completed_body(
        &call.action,
        request.as_ref(),
        outcome.err(),
        answer.len(),
        &browser::hex_digest(answer.as_bytes()),
    );
    let command = Command::RecordBrowserOutcome {
        body: body.to_string(),
    };
    let (reply, recorded) = oneshot::channel();
    let sent = jobs.send(Job::Record {
        caller: caller.clone(),
        command,
        reply,
    });
    // The pane acted; an outcome that cannot be recorded is still the
    // truth the agent must hear, so only a lost writer changes the answer.
    if sent.is_err() || recorded.await.is_err() {
        return wire::err(Refusal::StorageUnavailable);
    }
    answer
}

/// The writer thread's name (its `comm`, as `/proc` shows it).
pub const WRITER_THREAD: &str = "mosaic-writer";

/// The most requests one group commit takes.
const MAX_BATCH: usize = 256;

/// The writer thread. Group commit: it waits for a job, then stages every
/// job already queued behind it (up to [`MAX_BATCH`]), each in its own
/// savepoint, commits them with one sync, and only then sends their
/// answers. With nothing else queued, a request commits at once; requests
/// that arrive while a commit syncs form the next batch.
fn write_loop<S: StoreReaders>(
    mut driver: Driver<S>,
    queue: mpsc::Receiver<Job>,
    mut world: WriterWorld,
    reads: Arc<Reads<S>>,
) {
    let mut answers = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = queue.recv() {
        let mut next = Some(first);
        while let Some(job) = next {
            let writer = Writer {
                driver: &mut driver,
                world: &mut world,
                reads: &reads,
            };
            answers.push(stage_job(writer, job));
            next = if answers.len() < MAX_BATCH {
                queue.try_recv().ok()
            } else {
                None
            };
        }
        // The view is published before any answer goes out.
        let durable = commit_batch(&mut driver, &reads);
        for answer in answers.drain(..) {
            answer.send(durable);
        }
    }
    // The writer's connection must close last: its close checkpoints.
    reads.close();
    drop(driver);
}

/// An answer held until its batch is durable.
enum Answer {
    /// A request's answer, and its [`Early`] `durable` signal.
    Request(
        oneshot::Sender<Result<Value, Refusal>>,
        Result<Value, Refusal>,
        Option<watch::Sender<Option<bool>>>,
    ),
    Bind(mpsc::Sender<Result<(), Refusal>>, Result<(), Refusal>),
    Reply(mpsc::Sender<Result<Reply, Refusal>>, Result<Reply, Refusal>),
    Recorded(
        oneshot::Sender<Result<Reply, Refusal>>,
        Result<Reply, Refusal>,
    ),
}

impl Answer {
    /// Sends the answer, or `storage-unavailable` when its batch failed.
    fn send(self, durable: Result<(), Refusal>) {
        // A caller that stopped waiting has nobody to tell.
        match self {
            Answer::Request(to, answer, early) => {
                let answer = durable.and(answer);
                if let Some(early) = early {
                    early.send_replace(Some(answer.is_ok()));
                }
                drop(to.send(answer));
            }
            Answer::Bind(to, answer) => drop(to.send(durable.and(answer))),
            Answer::Reply(to, answer) => drop(to.send(durable.and(answer))),
            Answer::Recorded(to, answer) => drop(to.send(durable.and(answer))),
        }
    }
}

/// Stages one job in the open batch and returns its provisional answer.
fn stage_job<S: StoreReaders>(writer: Writer<'_, S>, job: Job) -> Answer {
    let Writer {
        driver,
        world,
        reads,
    } = writer;
    let now = world.time.now();
    match job {
        Job::Request {
            who,
            verb,
            call,
            reply,
            early,
        } => {
            let writer = Writer {
                driver,
                world,
                reads,
            };
            let result = stage_request(writer, who, verb, call);
            let durable = early.map(|Early { staged, durable }| {
                if result.is_ok() {
                    let _ = staged.send(());
                }
                durable
            });
            Answer::Request(reply, result, durable)
        }
        Job::Refuse {
            caller,
            verb,
            refusal,
            reply,
        } => {
            let result = driver.stage_refusal(now, Some(&caller), verb, refusal);
            Answer::Request(reply, Err(result), None)
        }
        Job::Bind { record, reply } => {
            let result = driver.stage_bind(now, record).map(|_| ());
            Answer::Bind(reply, result)
        }
        Job::Trusted {
            caller,
            command,
            reply,
        } => {
            let verb = command.verb();
            let result = driver.stage_call(now, &caller, verb, command);
            Answer::Reply(reply, result)
        }
        Job::Record {
            caller,
            command,
            reply,
        } => {
            let verb = command.verb();
            let result = driver.stage_call(now, &caller, verb, command);
            Answer::Recorded(reply, result)
        }
    }
}

impl Broker {
    /// The socket path.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// Binds a launch the host performed and issues its capability. A run
    /// bound again (with the identical record) gets a new capability; its
    /// old one stops working.
    ///
    /// # Errors
    /// The process check's refusal (`launch-not-running`,
    /// `launch-start-mismatch`, `launch-foreign-user`), then the binding's
    /// (`launch-mismatch`, `launch-revoked`, `unknown-role`, `bad-config`,
    /// `storage-unavailable`); the broker keeps running.
    pub fn bind_launch(&self, record: LaunchRecord) -> Result<IssuedLaunch, Refusal> {
        let fields = (
            record.business.clone(),
            record.role.clone(),
            record.run.clone(),
        );
        let pid = record.pid;
        let bound = self.bind(record);
        let (business, role, run) = (fields.0.as_str(), fields.1.as_str(), fields.2.as_str());
        match &bound {
            Ok(_) => tracing::info!(business, role, run, pid, "launch bound"),
            Err(refusal) => tracing::warn!(
                code = refusal.code(),
                business,
                role,
                run,
                pid,
                "bindLaunch refused"
            ),
        }
        bound
    }

    /// [`Broker::bind_launch`] before it is logged.
    fn bind(&self, record: LaunchRecord) -> Result<IssuedLaunch, Refusal> {
        self.launch_check.check(&record)?;
        let jobs = self.jobs.as_ref().ok_or(Refusal::BrokerUnavailable)?;
        let (reply, answered) = mpsc::channel();
        jobs.send(Job::Bind {
            record: record.clone(),
            reply,
        })
        .map_err(|_| Refusal::BrokerUnavailable)?;
        answered.recv().map_err(|_| Refusal::BrokerUnavailable)??;
        let cap = self
            .entropy
            .lock()
            .map_err(|_| Refusal::BrokerUnavailable)?
            .capability()
            .map_err(logged(Refusal::StorageUnavailable, "drawing a capability"))?;
        let binding = agent_binding(&record);
        let mut registry = self
            .registry
            .write()
            .map_err(|_| Refusal::BrokerUnavailable)?;
        registry.retain(|_, b| b != &binding);
        registry.insert(cap.clone(), binding);
        Ok(IssuedLaunch {
            business: record.business,
            run: record.run,
            cap,
        })
    }

    /// The trusted adapter API `authorize(cap, action, {decision, target})`
    /// (never a socket verb): checks that the capability's run holds its
    /// role and that `action` on `target` is within-role or approved by
    /// `decision`, spends that approval, and records `action.allowed`, in
    /// one transaction. It is not itself an external executor: a caller must
    /// not treat an earlier grant as authority after an await or a holder
    /// change.
    ///
    /// # Errors
    /// `bad-capability`, `not-holder`, and the authorization refusals
    /// (`not-authorized`, `decision-consumed`, `decision-mismatch`, …).
    pub fn authorize(
        &self,
        cap: &Capability,
        action: Action,
        target: Option<Target>,
        decision: Option<DecisionId>,
    ) -> Result<Grant, Refusal> {
        match self.trusted(
            cap,
            Command::Authorize {
                action,
                target,
                decision,
            },
        )? {
            Reply::Authorized(grant) => Ok(grant),
            Reply::Claimed(_)
            | Reply::Done
            | Reply::Decision(_)
            | Reply::Sent { .. }
            | Reply::Received(_) => Err(Refusal::BadRequest),
        }
    }

    /// The trusted adapter API `record_event(cap, {kind, body, subject})`:
    /// stamps the capability's identity, in its own transaction. `body` must
    /// be a JSON object; a `task_ref` in it must equal a task `subject`;
    /// `task.created` needs `body.request` (a human input of this business)
    /// and `body.requirement`. Human input, launch control, the bus's own
    /// kinds and `browser.*` (the broker's own record of a browser
    /// request's outcome) refuse.
    ///
    /// # Errors
    /// `bad-capability`, `not-holder`, `bad-request` for a body or subject
    /// breaking the rules, `not-authorized` for a reserved kind, and
    /// `unknown-reference` / `cross-business` for a `request` that names no
    /// human input of this business.
    pub fn record_event(
        &self,
        cap: &Capability,
        kind: &str,
        body: &Value,
        subject: Option<Subject>,
    ) -> Result<(), Refusal> {
        use mosaic_domain::bus::{BodyField, EventBody};
        let kind = Action::parse(kind)?;
        // The body's rules are the domain's (`Command::record_event`); only
        // reading JSON is done here.
        let object = body.as_object().ok_or(Refusal::BadRequest)?;
        let field = |name: &str| match object.get(name) {
            None => BodyField::Absent,
            Some(value) => value.as_str().map_or(BodyField::NotText, BodyField::Text),
        };
        let body = EventBody {
            text: body.to_string(),
            task_ref: field("task_ref"),
            requirement: field("requirement"),
            request: field("request"),
        };
        let command = Command::record_event(kind, body, subject)?;
        self.trusted(cap, command).map(|_| ())
    }

    /// The trusted adapter API `credentials.use(key, service, callback)`:
    /// calls `callback` with the token of `service` for `key`
    /// (`business/instance`, or `business/@sync` for the read-only tracker
    /// identity). Only that in-process callback sees the token; it must not
    /// spawn children with it, log it or persist it. Socket clients never
    /// reach this.
    ///
    /// # Errors
    /// - `unknown-reference`: no such credential;
    /// - `credential-expired`: a Vikunja token from midnight UTC of its
    ///   expiry date (the callback is not called);
    /// - `service-failed`: the callback failed (none of its error is kept);
    /// - `credential-leak`: the returned value (keys included) contains a
    ///   loaded token; it is dropped.
    pub fn use_credential<E>(
        &self,
        key: &str,
        service: Service,
        callback: impl FnOnce(&[u8]) -> Result<Value, E>,
    ) -> Result<Value, Refusal> {
        let value = self
            .credentials
            .use_token(key, service, self.time.now(), callback)?;
        if self
            .credentials
            .contains_known_token(value.to_string().as_bytes())
        {
            return Err(Refusal::CredentialLeak);
        }
        Ok(value)
    }

    /// The trusted adapter API `credentials.status()`: metadata only
    /// (valid, expiring, expired, rotation-due) for a notifier.
    pub fn credential_status(&self) -> Vec<CredentialStatus> {
        self.credentials.status(self.time.now())
    }

    fn trusted(&self, cap: &Capability, command: Command) -> Result<Reply, Refusal> {
        let binding = self
            .registry
            .read()
            .ok()
            .and_then(|r| r.get(cap).cloned())
            .ok_or(Refusal::BadCapability)?;
        let jobs = self.jobs.as_ref().ok_or(Refusal::BrokerUnavailable)?;
        let (reply, answered) = mpsc::channel();
        jobs.send(Job::Trusted {
            caller: binding.caller(),
            command,
            reply,
        })
        .map_err(|_| Refusal::BrokerUnavailable)?;
        answered.recv().map_err(|_| Refusal::BrokerUnavailable)?
    }

    /// Stops serving, lets requests in flight finish, closes the store, and
    /// removes the socket and the writer lock.
    ///
    /// # Errors
    /// `storage-unavailable` when the socket or the lock cannot be removed.
    pub fn close(mut self) -> Result<(), Refusal> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<(), Refusal> {
        // `close` and then `Drop` both come here; only the first closes.
        if self.jobs.is_none() {
            return Ok(());
        }
        let closed = self.close_all();
        match &closed {
            Ok(()) => tracing::info!(socket = &*self.socket.to_string_lossy(), "broker closed"),
            Err(refusal) => tracing::error!(
                code = refusal.code(),
                socket = &*self.socket.to_string_lossy(),
                "the broker's close failed"
            ),
        }
        closed
    }

    fn close_all(&mut self) -> Result<(), Refusal> {
        self.feed.close();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(stop) = self.browser_stop.take() {
            let _ = stop.send(());
        }
        if let (Some(runtime), Some(server)) = (self.runtime.as_ref(), self.browser_server.take()) {
            // Open event streams would hold a graceful shutdown forever.
            server.abort();
            let _ = runtime.block_on(server);
        }
        if let (Some(runtime), Some(server)) = (self.runtime.as_ref(), self.server.take()) {
            let _ = runtime.block_on(server);
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        self.registry.write().map(|mut r| r.clear()).ok();
        drop(self.jobs.take());
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
        let Some(lock) = self.lock.take() else {
            return Ok(());
        };
        // A socket someone already deleted is as good as removed.
        let socket = match std::fs::remove_file(&self.socket) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            removed => removed,
        };
        let released = lock.release();
        socket.map_err(logged(Refusal::StorageUnavailable, "removing the socket"))?;
        released
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // A broker dropped without `close` (an error path, a panic unwinding)
        // still closes cleanly; only a crash leaves the lock behind.
        let _ = self.shut_down();
    }
}
