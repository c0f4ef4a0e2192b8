//! One socket connection's requests: each line is admitted, then taken
//! where [`route`] says (the routing the fuzz harness runs too): read
//! beside the writer, waited on the change feed, or handed to the writer
//! (a `browser.request` also to a pane), and answered with one line.
//! A token is refused on the way in, before anything is written or
//! emitted, and on the way out, should one ever be stored.

use std::sync::{mpsc, Arc};

use mosaic_adapters::credentials::CredentialStore;
use mosaic_adapters::socket::{Disconnect, Handler, Peer, Sender};
use mosaic_adapters::wire::browser::{self as browser_wire, BrowserCall};
use mosaic_adapters::wire::{self, Call, Envelope, Presenter};
use mosaic_domain::browser::AddressPolicy;
use mosaic_domain::bus::Caller;
use mosaic_domain::{CallerKind, Capability, Refusal, Verb};
use mosaic_ports::StoreReaders;
use tokio::sync::{oneshot, watch};

use super::browser::BrowserHub;
use super::browsing::browse;
use super::calls::Calls;
use super::changes::{self, Asked};
use super::job::{ask, ask_line, Early, Job, ReplyTo};
use super::launch::{Binding, Registry};
use super::pipeline::{
    self, admit, human_beside, read_now, route, Admitted, Proven, Prover, Route, Who,
};
use super::places::Places;
use super::reads::Reads;
use super::world::Time;

/// What every connection's handler shares.
pub(super) struct Shared<S> {
    pub(super) registry: Arc<Registry>,
    pub(super) jobs: mpsc::Sender<Job>,
    pub(super) reads: Arc<Reads<S>>,
    pub(super) hub: Option<Arc<BrowserHub>>,
    pub(super) credentials: Arc<CredentialStore>,
    pub(super) prover: Arc<Prover>,
    pub(super) time: Time,
    /// Each run's budget of connections.
    pub(super) places: Arc<Places>,
    /// What each run last asked, and whether it waits.
    pub(super) calls: Arc<Calls>,
    /// Where the human's browser may go.
    pub(super) browser_policy: Arc<AddressPolicy>,
}

/// The socket server's handler: one answer line per request line.
pub(super) struct Connections<S>(pub(super) Arc<Shared<S>>);

impl<S: StoreReaders + Send + 'static> Handler for Connections<S> {
    /// The caller [`admit`] will name, told ahead: a line that is no
    /// envelope, or whose capability was never issued, is refused before
    /// any caller is known (and its connection then closes); a capability
    /// of the registry or a human line authenticates the connection, an
    /// agent's counted in its run's budget too ([`Places`]), so one run
    /// cannot take every place. The envelope is parsed again by `admit`;
    /// only a connection's first line pays for that.
    fn sender(&self, _peer: Peer, line: &[u8]) -> Sender {
        let Ok(envelope) = Envelope::parse(line) else {
            return Sender::Nobody;
        };
        match envelope.presenter() {
            Presenter::Capability(cap) => {
                let binding = self
                    .0
                    .registry
                    .read()
                    .ok()
                    .and_then(|registry| registry.get(cap).cloned());
                match binding {
                    Some(Binding::Agent { agent, .. }) => {
                        Sender::Counted(self.0.places.budget(&agent.run))
                    }
                    Some(Binding::Reader { .. }) => Sender::Caller,
                    None => Sender::Nobody,
                }
            }
            Presenter::Human { .. } => Sender::Human,
        }
    }

    /// A human line takes a reserve place only from a peer that passes the
    /// checks that need no proof: the broker's uid, PID, mount and user
    /// namespaces ([`super::human_proof::may_be_human`]). A sandboxed
    /// agent's lines fail them, however many claim to be human.
    fn may_use_reserve(&self, peer: Peer) -> bool {
        self.0.prover.may_be_human(peer)
    }

    fn handle(
        &self,
        peer: Peer,
        line: Vec<u8>,
        gone: Disconnect,
    ) -> impl std::future::Future<Output = Vec<u8>> + Send {
        let shared = Arc::clone(&self.0);
        async move {
            let started = std::time::Instant::now();
            let mut fields = LogFields::default();
            let response = answer(&shared, peer, &line, gone, &mut fields).await;
            let response = guarded(&shared.credentials, response);
            if tracing::enabled!(tracing::Level::DEBUG) {
                fields.log(&response, started.elapsed());
            }
            response.into_bytes()
        }
    }
}

/// The run of an agent caller, whose calls the broker keeps ([`Calls`]).
fn agent_run(caller: &Caller) -> Option<&mosaic_domain::RunId> {
    match caller {
        Caller::Agent { agent, .. } => Some(&agent.run),
        Caller::Reader { .. } | Caller::Human { .. } => None,
    }
}

/// `response`, or `credential-leak` in its place when it holds a token.
fn guarded(credentials: &CredentialStore, response: String) -> String {
    if credentials.contains_known_token(response.as_bytes()) {
        return wire::err(Refusal::CredentialLeak);
    }
    response
}

/// What the request's log line says of it, learned as it is admitted.
#[derive(Debug, Default)]
struct LogFields {
    verb: Option<&'static str>,
    caller: Option<&'static str>,
}

impl LogFields {
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

/// Answers one request line: [`admit`] it, then take it where [`route`]
/// says: a read beside the writer, a wait for changes, the writer (a
/// `browser.request` also to a pane), the human's proven first.
async fn answer<S: StoreReaders + Send + 'static>(
    shared: &Shared<S>,
    peer: Peer,
    line: &[u8],
    gone: Disconnect,
    fields: &mut LogFields,
) -> String {
    let Shared {
        registry,
        jobs,
        reads,
        credentials,
        prover,
        time,
        ..
    } = shared;
    let secrets = |bytes: &[u8]| credentials.contains_known_token(bytes);
    let secrets = (!credentials.is_empty()).then_some(&secrets as &pipeline::Secrets<'_>);
    let lookup = |cap: &Capability| {
        let registry = registry.read().ok()?;
        registry.get(cap).map(Binding::caller)
    };
    // The human's browser is no wider than the agent's network.
    let admitted = match admit(line, peer, secrets, lookup, &shared.browser_policy) {
        Ok(admitted) => admitted,
        Err(refusal) => return wire::err(refusal),
    };
    fields.admitted(&admitted);
    // What the human reads of an agent is what the broker saw it ask.
    if let Who::Known(caller) = &admitted.who {
        if let Some(run) = agent_run(caller) {
            shared.calls.note(run, admitted.verb, time.now());
        }
    }
    match route(&admitted) {
        Route::Feed {
            caller,
            since,
            timeout_ms,
        } => {
            let asked = Asked {
                caller: caller.clone(),
                since,
                wait: mosaic_domain::changes::wait(timeout_ms),
            };
            // A wait is counted while it lasts; an answer at once is no wait.
            let _waiting = since
                .and(agent_run(caller))
                .map(|run| shared.calls.waiting(run));
            let page = changes::page(reads, time, asked, gone.disconnected()).await;
            match page {
                Ok(page) => {
                    // Handed to the run: `up` wakes a sleeping run for what
                    // lies after it.
                    if let (Some(_), Some(run)) = (since, agent_run(caller)) {
                        shared.calls.saw(run, page.cursor);
                    }
                    wire::ok(wire::changes_json(page.cursor, &page.changes))
                }
                Err(refusal) => {
                    record_refusal(jobs, caller.clone(), Verb::Changes.as_str(), refusal).await
                }
            }
        }
        Route::Read { caller, call } => {
            let (caller, call) = (caller.clone(), call.clone());
            read_beside_writer(reads, jobs, caller, admitted.verb, call).await
        }
        Route::Browser { caller, call } => {
            let (caller, call) = (caller.clone(), call.clone());
            browser(shared, admitted, caller, call, gone).await
        }
        Route::HumanFeed { since, timeout_ms } => {
            human_changes(shared, admitted, since, timeout_ms, gone).await
        }
        Route::HumanRead => {
            let Admitted { who, verb, call } = admitted;
            let who = prover.prove(reads, who).await;
            match human_read(shared, who, verb, call).await {
                Ok(answer) => answer,
                Err((who, call)) => write(shared, who, verb, call, &gone).await,
            }
        }
        Route::Writer => {
            let Admitted { who, verb, call } = admitted;
            let who = prover.prove(reads, who).await;
            write(shared, who, verb, call, &gone).await
        }
    }
}

/// Stages a request on the writer and answers with what it says; the
/// writer answers the client itself, the token guard included, when the
/// connection is lent for it.
async fn write<S>(
    shared: &Shared<S>,
    who: Proven,
    verb: &'static str,
    call: Result<Call, Refusal>,
    gone: &Disconnect,
) -> String {
    let request = |reply| Job::Request {
        who,
        verb,
        call,
        reply,
        early: None,
    };
    if let Some(socket) = gone.direct() {
        let credentials = Arc::clone(&shared.credentials);
        let render = Box::new(move |answer| guarded(&credentials, wire::response(answer)));
        return ask_line(&shared.jobs, socket.clone(), render, request).await;
    }
    wire::response(ask(&shared.jobs, request).await)
}

/// An agent's `browser.request`: authorized on the writer, answered early
/// once staged, then carried to a pane ([`browse`]).
async fn browser<S>(
    shared: &Shared<S>,
    admitted: Admitted,
    caller: Caller,
    browser: BrowserCall,
    gone: Disconnect,
) -> String {
    let Admitted { verb, call, .. } = admitted;
    let who = Proven::Known(caller.clone());
    let jobs = &shared.jobs;
    let (staged, on_staged) = oneshot::channel();
    let (durable, authority) = watch::channel(None);
    let (reply, answered) = oneshot::channel();
    let job = Job::Request {
        who,
        verb,
        call,
        reply: ReplyTo::Task(reply),
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
    let hub = shared.hub.as_deref();
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

/// The human's `changes`: proven as every human request is, then waited
/// on the feed with a reader's audience. A failed proof, an unknown
/// business or a refusal of the wait goes to the writer, which records it
/// as it records any human request's.
async fn human_changes<S: StoreReaders + Send + 'static>(
    shared: &Shared<S>,
    admitted: Admitted,
    since: Option<u64>,
    timeout_ms: Option<u64>,
    gone: Disconnect,
) -> String {
    let Admitted { who, verb, call } = admitted;
    let who = shared.prover.prove(&shared.reads, who).await;
    let to_writer = |who, call| {
        ask(&shared.jobs, |reply| Job::Request {
            who,
            verb,
            call,
            reply,
            early: None,
        })
    };
    // A wait records nothing, so it draws no `human.input` id; the
    // watcher is the business's, whoever the input would have been.
    let view = shared.reads.view();
    let Some(caller) = human_beside(&who, |business| view.is_some_and(|v| v.knows(business)))
    else {
        return wire::response(to_writer(who, call).await);
    };
    let asked = Asked {
        caller,
        since,
        wait: mosaic_domain::changes::wait(timeout_ms),
    };
    match changes::page(&shared.reads, &shared.time, asked, gone.disconnected()).await {
        Ok(page) => wire::ok(wire::changes_json(page.cursor, &page.changes)),
        Err(refusal) => wire::response(to_writer(who, Err(refusal)).await),
    }
}

/// A proven human's read of a business the broker knows
/// ([`human_beside`]): run beside the writer, as an agent's is, so the
/// human's answer never waits for a group commit's sync behind what a
/// flood has the writer record. Anything else (a failed proof, an unknown
/// business) comes back for the writer, which records it as it records
/// any human request's; so does a refusal of the read itself.
async fn human_read<S: StoreReaders + Send + 'static>(
    shared: &Shared<S>,
    who: Proven,
    verb: &'static str,
    call: Result<Call, Refusal>,
) -> Result<String, (Proven, Result<Call, Refusal>)> {
    let view = shared.reads.view();
    let Some(caller) = human_beside(&who, |business| view.is_some_and(|v| v.knows(business)))
    else {
        return Err((who, call));
    };
    let Ok(read) = call else {
        return Err((who, call));
    };
    let permit = match shared.reads.permit().await {
        Ok(permit) => permit,
        Err(refusal) => return Ok(wire::err(refusal)),
    };
    let reads = Arc::clone(&shared.reads);
    let answer = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        reads.with_store(|view, store| read_now(view, store, &caller, read))
    })
    .await
    .unwrap_or(Err(Refusal::BrokerUnavailable));
    Ok(match answer {
        Ok(text) => wire::ok_text(&text),
        Err(refusal) => wire::response(
            ask(&shared.jobs, |reply| Job::Request {
                who,
                verb,
                call: Err(refusal),
                reply,
                early: None,
            })
            .await,
        ),
    })
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
    match answer {
        Ok(text) => wire::ok_text(&text),
        Err(refusal) => record_refusal(jobs, caller, verb, refusal).await,
    }
}

/// Records the refusal of a read beside the writer, on the writer, and
/// answers with it (or with `storage-unavailable` when it was not stored).
async fn record_refusal(
    jobs: &mpsc::Sender<Job>,
    caller: Caller,
    verb: &'static str,
    refusal: Refusal,
) -> String {
    let recorded = ask(jobs, |reply| Job::Refuse {
        caller,
        verb,
        refusal,
        reply,
    })
    .await;
    wire::response(recorded)
}
