//! The real broker, started in this process with
//! [`mosaic_app::runtime::start_broker`] on a fresh data root in the run's
//! directory, and socket clients holding the capabilities it issued.
//!
//! Every figure that goes through the socket starts its own broker, so no
//! figure sees another's rows. The business is the bench's own (`bench`):
//! each role named by the figure may send messages within role (and, where
//! the figure asks for it, act on the browser), and every launch is this
//! process, since the bench is where the agents run.

use mosaic_domain::Verb;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mosaic_adapters::config::boot_from_value;
use mosaic_app::runtime::{start_broker, Broker};
use mosaic_client::socket::{Client, Session};
use mosaic_domain::Refusal;
use serde_json::{json, Map, Value};

use crate::output::Failure;
use crate::stats::Round;
use crate::Ctx;

/// The recipient of every measured `message.send`: a role nobody holds, so
/// its unread messages grow but nobody's inbox is read while sending.
pub const SINK: &str = "sink";

/// What a role may do within role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grants {
    /// `message.send`.
    Send,
    /// `message.send` and `browser.snapshot`.
    SendAndSnapshot,
}

/// The bench business: `roles` with their within-role grants, plus
/// [`SINK`], which may do nothing.
pub fn business(roles: &[(String, Grants)]) -> Value {
    let mut map = Map::new();
    for (role, grants) in roles {
        let within = match grants {
            Grants::Send => json!([Verb::MessageSend.as_str()]),
            Grants::SendAndSnapshot => json!([Verb::MessageSend.as_str(), "browser.snapshot"]),
        };
        map.insert(
            role.clone(),
            json!({"authority": {"withinRole": within, "crossRole": []}}),
        );
    }
    map.insert(
        SINK.to_owned(),
        json!({"authority": {"withinRole": [], "crossRole": []}}),
    );
    let arbiter = roles.first().map_or(SINK, |(role, _)| role.as_str());
    json!({
        "id": "bench",
        "human": "alice",
        "arbiters": {"technical": arbiter, "delivery": arbiter},
        "roles": map,
    })
}

/// The boot configuration of a broker on `root` with one launch (run
/// `<role>-1`, this process) per role of `roles`, and browser control on a
/// free loopback port when `browser`.
pub fn boot_config(root: &std::path::Path, roles: &[(String, Grants)], browser: bool) -> Value {
    let launches: Vec<Value> = roles
        .iter()
        .map(|(role, _)| {
            json!({
                "business": "bench",
                "role": role,
                "run": run_of(role),
                "harness": "pi",
                "pid": std::process::id(),
                "startTime": own_start_time(),
            })
        })
        .collect();
    let mut config = json!({
        "dataRoot": root.to_string_lossy(),
        "businesses": {"bench": business(roles)},
        "launches": launches,
        "readers": [],
        "repoRoots": [],
    });
    if browser {
        config["browser"] = json!({"listen": "127.0.0.1:0"});
    }
    config
}

/// The run the bench launches for `role`.
pub fn run_of(role: &str) -> String {
    format!("{role}-1")
}

/// A new private (0700) data root `name` in the run's directory.
///
/// # Errors
/// When it exists or cannot be created.
pub fn data_root(ctx: &Ctx, name: &str) -> Result<PathBuf, Failure> {
    let root = ctx.dir.join(name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&root)
        .map_err(|_| Failure::new("cannot create a data root in the bench directory"))?;
    Ok(root)
}

/// Where panes connect: `127.0.0.1:PORT` and the UI token.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `127.0.0.1:PORT`.
    pub address: String,
    /// The UI token.
    pub token: String,
}

impl Endpoint {
    /// From the broker's `http://127.0.0.1:PORT` and token.
    ///
    /// # Errors
    /// When the URL is not plain `http://`.
    pub fn new(url: &str, token: String) -> Result<Self, Failure> {
        let address = url
            .strip_prefix("http://")
            .ok_or(Failure::new("the browser url is not http://"))?;
        Ok(Self {
            address: address.to_owned(),
            token,
        })
    }
}

/// How a bench agent calls the broker: through the [`Client`], one
/// connection per request, or through a [`Session`], which keeps its
/// connection open between requests as a long-lived agent does.
pub trait Caller: Sync {
    /// One call: its result or its refusal.
    ///
    /// # Errors
    /// The refusal.
    fn call(&self, verb: &str, args: Value) -> Result<Value, Refusal>;
}

impl Caller for Client {
    fn call(&self, verb: &str, args: Value) -> Result<Value, Refusal> {
        Client::call(self, verb, args)
    }
}

impl Caller for Session {
    fn call(&self, verb: &str, args: Value) -> Result<Value, Refusal> {
        Session::call(self, verb, args)
    }
}

/// A broker serving the run's directory, and one client per launched role.
pub struct Live {
    broker: Option<Broker>,
    /// The data root.
    pub root: PathBuf,
    /// One client per role, in the order the roles were given.
    pub clients: Vec<Client>,
    /// Browser control, when enabled.
    pub browser: Option<Endpoint>,
}

impl Live {
    /// Starts a broker on the new data root `name` with one launch per
    /// role, and makes every run claim its role.
    ///
    /// # Errors
    /// When the data root, the configuration, the boot or a claim fails.
    pub fn start(
        ctx: &Ctx,
        name: &str,
        roles: &[(String, Grants)],
        browser: bool,
    ) -> Result<Self, Failure> {
        let root = data_root(ctx, name)?;
        let config = boot_from_value(boot_config(&root, roles, browser)).map_err(|r| {
            Failure::refused("the bench boot configuration does not parse", r.refusal)
        })?;
        let (broker, booted) = start_broker(config)
            .map_err(|f| Failure::refused("the broker does not start", f.refusal))?;
        let clients: Vec<Client> = roles
            .iter()
            .map(|(role, _)| {
                let run = run_of(role);
                booted
                    .launches
                    .iter()
                    .find(|l| l.run.as_str() == run)
                    .map(|l| Client::new(&booted.socket, l.cap.expose()))
                    .ok_or(Failure::new("the broker issued no capability for a launch"))
            })
            .collect::<Result<_, _>>()?;
        for client in &clients {
            client
                .call(Verb::RoleClaim.as_str(), json!({}))
                .map_err(|r| Failure::refused("role.claim refused", r))?;
        }
        let browser = match booted.browser {
            Some(endpoint) => Some(Endpoint::new(&endpoint.url, endpoint.token.expose())?),
            None => None,
        };
        Ok(Self {
            broker: Some(broker),
            root,
            clients,
            browser,
        })
    }

    /// One [`Session`] per role, in the order of [`Live::clients`]: the
    /// same capabilities over connections kept open.
    pub fn sessions(&self) -> Vec<Session> {
        self.clients.iter().cloned().map(Session::new).collect()
    }

    /// Stops the broker: socket and lock removed, store closed.
    ///
    /// # Errors
    /// When it does not close cleanly.
    pub fn close(mut self) -> Result<(), Failure> {
        match self.broker.take() {
            Some(broker) => broker
                .close()
                .map_err(|r| Failure::refused("the broker does not close cleanly", r)),
            None => Ok(()),
        }
    }
}

/// The `n`th message body: about the size of the store figures' bodies.
pub fn body(n: usize) -> String {
    format!("bench message {n}: please review the change on the branch and report back")
}

/// One `message.send` to [`SINK`] through the socket.
///
/// # Errors
/// The refusal, as a failure.
pub fn send(client: &impl Caller, n: usize) -> Result<(), Failure> {
    client
        .call(
            Verb::MessageSend.as_str(),
            json!({"to": SINK, "class": "INFO", "body": body(n)}),
        )
        .map(|_| ())
        .map_err(|r| Failure::refused("message.send refused", r))
}

/// `n` untimed sends, enough for a fresh store's WAL to wrap once (about
/// 8 pages per request) so measured rounds see the steady state.
///
/// # Errors
/// The first refusal.
pub fn warm_up(client: &impl Caller, n: usize) -> Result<(), Failure> {
    (0..n).try_for_each(|i| send(client, i))
}

/// A round of `per_client` sends from each of `clients` at once, each from
/// its own thread: every latency, and the wall time from the first start
/// to the last answer; also the CPU time the client threads used.
///
/// # Errors
/// The first refusal of any client.
pub fn concurrent_round(
    clients: &[impl Caller],
    per_client: usize,
) -> Result<(Round, Duration), Failure> {
    let before = crate::stats::written_bytes();
    let cpu_before = crate::stats::cpu_time();
    let start = Instant::now();
    let results: Vec<Result<(Vec<Duration>, Duration), Failure>> = std::thread::scope(|scope| {
        let handles: Vec<_> = clients
            .iter()
            .map(|client| {
                scope.spawn(move || {
                    let mut samples = Vec::with_capacity(per_client);
                    for i in 0..per_client {
                        let t = Instant::now();
                        send(client, i)?;
                        samples.push(t.elapsed());
                    }
                    Ok((samples, crate::stats::thread_cpu_time()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or(Err(Failure::new("a client thread panicked")))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let written = before
        .zip(crate::stats::written_bytes())
        .map(|(b, a)| a.saturating_sub(b));
    let mut samples = Vec::with_capacity(clients.len() * per_client);
    let mut client_cpu = Duration::ZERO;
    for result in results {
        let (client_samples, cpu) = result?;
        samples.extend(client_samples);
        client_cpu += cpu;
    }
    let round = Round {
        samples,
        elapsed,
        written,
        cpu: crate::stats::cpu_time().saturating_sub(cpu_before),
    };
    Ok((round, client_cpu))
}

/// This process's start time (field 22 of its stat): the launches a bench
/// broker binds name this process, which runs as the broker's user.
pub(crate) fn own_start_time() -> u64 {
    mosaic_adapters::procfs::ProcFs::new()
        .current()
        .map_or(0, |me| me.start_time)
}
