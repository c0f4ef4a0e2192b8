//! Boot: from a boot configuration to a serving [`Broker`].
//!
//! [`start_broker`] is the real assembly: the data root's writer lock, the
//! verified SQLite store ([`open_store`]), `/proc`, the system clock and
//! the kernel's entropy, handed to the same runtime [`start_runtime`]
//! starts over any ports. Either way the boot loads the credentials,
//! replays the store, ends the runs whose processes are gone
//! ([`end_gone_runs`]), checks and binds the boot launches, issues the
//! capabilities, binds the socket (and browser control) before any thread
//! starts, then starts the writer thread and the socket runtime.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, RwLock};

use mosaic_adapters::cause::{self, logged};
use mosaic_adapters::config::{BootConfig, ConfigError};
use mosaic_adapters::credentials::{CredentialStore, FileEnvCredentials};
use mosaic_adapters::fs::{self, DataRoot, WriterLock};
use mosaic_adapters::procfs::ProcFs;
use mosaic_adapters::socket;
use mosaic_adapters::sqlite::SqliteStore;
use mosaic_adapters::system::{OsEntropy, SystemClock};
use mosaic_domain::browser::AddressPolicy;
use mosaic_domain::evidence::{EndCause, Ending};
use mosaic_domain::{text, BusinessId, Capability, Refusal};
use mosaic_ports::{Entropy, ProcessTable, StoreReaders};
use tokio::sync::oneshot;

use super::broker::Broker;
use super::browsing::BrowserEndpoint;
use super::browsing::Panes;
use super::calls::Calls;
use super::closing::{Closing, Failure};
use super::connection::{Connections, Shared};
use super::driver::{Driver, LeakGuard};
use super::exits::{self, Exits};
use super::human_proof::BrokerExe;
use super::launch::{agent_binding, Binding, IssuedLaunch, IssuedReader, LaunchCheck};
use super::pipeline::{Prover, WriterWorld};
use super::places::{Places, DEFAULT_CONNECTIONS};
use super::reads::{Reads, View};
use super::world::{BrokerIdentity, Ports, SharedEntropy, Time};
use super::writer::{write_loop, WRITER_THREAD};

/// The most blocking threads the socket runtime keeps: human proofs and
/// reads beside the writer take turns of their own (4 each), so these are
/// never all busy; a cap keeps a flood from growing them.
const BLOCKING_THREADS: usize = 32;

/// The socket runtime's worker threads: a CPU each but the one the writer
/// keeps busy, and one at least. Their work is reading lines, parsing and
/// waking others; a second worker on two CPUs only added wake-ups between
/// the workers (bench/README.md, 2026-12-04).
pub fn socket_workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    cpus.saturating_sub(1).max(1)
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
            "the open-file limit is below the connection limit: fewer places"
        );
    }
    let started = real_ports(&root, &config).and_then(|ports| serve(&root, ports, config));
    match started {
        Ok((broker, booted)) => {
            *broker
                .closing
                .lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(lock);
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
    let store = open_store(root)?;
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
            // Without its own namespaces no proof could pass: refuse to boot.
            namespaces: ProcFs::new()
                .namespaces(std::process::id())
                .map_err(logged(
                    Refusal::StorageUnavailable,
                    "reading the broker's namespaces",
                ))?,
        },
    })
}

/// Opens (or creates) the data root's SQLite store and verifies it, as
/// every boot does: the file must be private, and a store that fails its
/// checks is refused with its code; the cause is logged. Take the data
/// root's writer lock first.
///
/// # Errors
/// `unsafe-path`, `schema-mismatch`, `integrity-failed`,
/// `storage-unavailable`.
pub fn open_store(root: &DataRoot) -> Result<SqliteStore, Refusal> {
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
    Ok(store)
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
/// use mosaic_client::socket::Client;
/// use mosaic_app::runtime::start_runtime;
/// use mosaic_app::runtime::human_proof::BrokerExe;
/// use mosaic_app::runtime::{BrokerIdentity, Ports};
/// use mosaic_domain::evidence::{Harness, LaunchRecord};
/// use mosaic_domain::{BusinessId, RoleInstance, RunId, Timestamp, Verb};
/// use mosaic_ports::fakes::{
///     FakeCredentials, FakeProcess, FakeProcessTable, ManualClock, MemoryStore, SeededEntropy,
///     HOST_NAMESPACES,
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
///         namespaces: HOST_NAMESPACES,
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
        data_root = &*fs::neutral_path(data_root),
        reference = failure
            .reference
            .as_deref()
            .map(text::neutralise)
            .as_deref(),
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
    end_gone_runs(&mut driver, &time, &*processes)?;
    let launch_check = LaunchCheck {
        processes: Arc::clone(&processes),
        uid: identity.uid,
    };
    let issued = issue(
        &mut driver,
        &time,
        &mut entropy,
        &launch_check,
        config.launches,
        config.readers,
    )?;
    // Bound before any thread starts: binding sets the process umask.
    let socket_path = root.socket_path();
    let listener = socket::bind_private(&socket_path)?;
    let panes = match &config.browser_listen {
        Some(listen) => Some(Panes::bind(
            listen,
            root.root(),
            &credentials,
            &time,
            &mut entropy,
        )?),
        None => None,
    };
    driver.take_changed_machines();
    // The feed starts after the boot's own bindings and ends.
    let (head, _) = driver.take_changes();
    driver.take_ends();
    let exits = Arc::new(Exits::new(Arc::clone(&processes)));
    let calls = Arc::new(Calls::default());
    let reads = Arc::new(Reads::open(
        driver.store(),
        View::first(
            driver.bus(),
            &business_ids,
            Arc::clone(&exits),
            Arc::clone(&calls),
        ),
        head,
    )?);
    let feed = Arc::clone(reads.feed());
    let registry = Arc::new(RwLock::new(issued.registry));
    let closing = Closing::start(
        socket_path.clone(),
        Arc::clone(&registry),
        Arc::clone(&feed),
    )?;
    let (jobs, queue) = mpsc::channel();
    *locked(&closing.jobs) = Some(jobs.clone());
    let writer = {
        let reads = Arc::clone(&reads);
        let world = WriterWorld {
            time: time.clone(),
            entropy: entropy.clone(),
        };
        // A writer that dies (a panic) closes the broker: see `closing`.
        let watch = closing.watch(Failure::Writer);
        std::thread::Builder::new()
            .name(WRITER_THREAD.into())
            .spawn(move || {
                write_loop(driver, queue, world, reads);
                watch.ended();
            })
    }
    .map_err(logged(
        Refusal::StorageUnavailable,
        "starting the writer thread",
    ))?;
    *locked(&closing.writer) = Some(writer);
    // Blocking threads (proofs, reads beside the writer: each bounded by
    // its own turns) are few and go back within a second of a flood.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(socket_workers())
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_keep_alive(std::time::Duration::from_secs(1))
        .enable_all()
        .build()
        .map_err(logged(
            Refusal::BrokerUnavailable,
            "starting the socket runtime",
        ))?;
    // The socket's places fit in the open files left once the store, the
    // listeners, the human's reserve and the HTTP port's cap are counted;
    // each run holds at most its own budget of them.
    let http = if panes.is_some() {
        mosaic_adapters::http::MAX_HTTP_CONNECTIONS
    } else {
        0
    };
    let limits = socket::budget(socket::open_file_limit(), http);
    tracing::debug!(
        connections = limits.max_connections,
        unauthenticated = limits.max_unauthenticated,
        per_run = DEFAULT_CONNECTIONS,
        "socket places"
    );
    // The human's browser goes to no private address the configuration
    // does not name, but for the panes' own server.
    let mut browser_policy = AddressPolicy::new(config.browser_allow_private);
    if let Some(panes) = &panes {
        browser_policy.allow(panes.address()?);
    }
    let browser_policy = Arc::new(browser_policy);
    let connections = socket::Budget::new(limits.max_connections);
    let places = Arc::new(Places::new(connections.clone()));
    let shared = Shared {
        registry: Arc::clone(&registry),
        jobs,
        reads,
        hub: panes.as_ref().map(|p| Arc::clone(&p.hub)),
        credentials: Arc::clone(&credentials),
        prover: Arc::new(Prover::new(processes, identity, time.clone())),
        time: time.clone(),
        places: Arc::clone(&places),
        calls: Arc::clone(&calls),
        browser_policy: Arc::clone(&browser_policy),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    *locked(&closing.stop) = Some(stop);
    let serving = runtime.spawn(socket::serve_in(
        listener,
        Connections(Arc::new(shared)),
        limits,
        connections,
        async move {
            let _ = stopped.await;
        },
    ));
    // A server that ends before the close asked it to (it failed to start,
    // or panicked) closes the broker: see `closing`.
    let watch = closing.watch(Failure::SocketServer);
    let server = runtime.spawn(async move {
        let served = serving.await.unwrap_or(Err(Refusal::BrokerUnavailable));
        if served.is_ok() {
            watch.ended();
        }
        served
    });
    *locked(&closing.server) = Some(server);
    let (browser, endpoint) = match panes
        .map(|panes| panes.serve(&runtime, &browser_policy))
        .transpose()?
    {
        Some((serving, endpoint)) => (Some(serving), Some(endpoint)),
        None => (None, None),
    };
    *locked(&closing.browser) = browser;
    *locked(&closing.runtime) = Some(runtime);
    let broker = Broker {
        closing,
        closed: false,
        registry,
        socket: socket_path.clone(),
        entropy: std::sync::Mutex::new(entropy),
        credentials,
        time,
        launch_check,
        feed,
        exits,
        places,
        calls,
    };
    tracing::info!(
        data_root = &*root.root().to_string_lossy(),
        businesses = business_ids.len(),
        launches = issued.launches.len(),
        readers = issued.readers.len(),
        socket = &*socket_path.to_string_lossy(),
        browser = endpoint.as_ref().map(|e| e.url.as_str()),
        "broker serving"
    );
    Ok((
        broker,
        Booted {
            socket: socket_path,
            launches: issued.launches,
            readers: issued.readers,
            browser: endpoint,
        },
    ))
}

/// Ends, with cause `process-gone`, every bound run that has not ended
/// and whose process (pid and start time) is gone: its role is free for
/// the next run, so a host that died without ending its runs (an `up`
/// killed outright) holds no role after `unlock`. One transaction.
///
/// # Errors
/// `storage-unavailable` when the ends cannot be recorded.
fn end_gone_runs<S: StoreReaders>(
    driver: &mut Driver<S>,
    time: &Time,
    processes: &dyn ProcessTable,
) -> Result<(), BootFailure> {
    let bus = driver.bus();
    let gone: Vec<_> = bus
        .launches()
        .records()
        .filter(|r| bus.claims().ended(&r.run).is_none() && exits::gone(processes, r))
        .cloned()
        .collect();
    if gone.is_empty() {
        return Ok(());
    }
    let now = time.now();
    let ending = Ending::of_cause(EndCause::ProcessGone);
    let staged: Result<(), Refusal> = gone
        .iter()
        .try_for_each(|record| driver.stage_end(now, &record.run, ending));
    // The batch is closed either way; a failed one commits nothing.
    driver.finish().and(staged)?;
    for record in &gone {
        tracing::info!(
            business = record.business.as_str(),
            role = record.role.as_str(),
            run = record.run.as_str(),
            pid = record.pid,
            "the run's process is gone: the run ended"
        );
    }
    Ok(())
}

/// The capabilities a boot issues, and the registry that holds them.
struct Issued {
    registry: HashMap<Capability, Binding>,
    launches: Vec<IssuedLaunch>,
    readers: Vec<IssuedReader>,
}

/// Checks and binds each boot launch, and issues one capability per launch
/// and per reader.
fn issue<S: StoreReaders>(
    driver: &mut Driver<S>,
    time: &Time,
    entropy: &mut SharedEntropy,
    launch_check: &LaunchCheck,
    launches: Vec<mosaic_domain::evidence::LaunchRecord>,
    readers: Vec<BusinessId>,
) -> Result<Issued, BootFailure> {
    let mut issued = Issued {
        registry: HashMap::new(),
        launches: Vec::new(),
        readers: Vec::new(),
    };
    let mut draw = || {
        entropy
            .capability()
            .map_err(logged(Refusal::StorageUnavailable, "drawing a capability"))
    };
    for record in launches {
        launch_check.check(&record).map_err(|refusal| BootFailure {
            refusal,
            reference: None,
            run: Some(record.run.clone()),
        })?;
        driver.bind(time.now(), record.clone())?;
        let cap = draw()?;
        issued.registry.insert(cap.clone(), agent_binding(&record));
        issued.launches.push(IssuedLaunch {
            business: record.business,
            run: record.run,
            cap,
        });
    }
    for business in readers {
        let cap = draw()?;
        issued.registry.insert(
            cap.clone(),
            Binding::Reader {
                business: business.clone(),
            },
        );
        issued.readers.push(IssuedReader { business, cap });
    }
    Ok(issued)
}

/// A lock of the closing parts, whoever panicked holding it.
fn locked<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A duration in milliseconds, to the microsecond, for the boot log.
fn millis(d: std::time::Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}
