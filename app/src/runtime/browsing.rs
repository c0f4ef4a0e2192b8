//! Browser control's glue in the runtime: the hub and the HTTP/SSE server
//! started beside the socket when the boot configuration enables it, and
//! the way from an authorized `browser.request` to a pane and back, with
//! its outcome recorded on the writer.

use std::path::Path;
use std::sync::{mpsc, Arc};

use mosaic_adapters::credentials::CredentialStore;
use mosaic_adapters::http::{self, SseTransport};
use mosaic_adapters::socket::Disconnect;
use mosaic_adapters::wire;
use mosaic_adapters::wire::browser::{self as browser_wire, BrowserCall};
use mosaic_domain::browser::{AddressPolicy, AllowedAddress, Host};
use mosaic_domain::bus::{Caller, Command};
use mosaic_domain::{Capability, Refusal};
use mosaic_ports::{BrowserControl, BrowserTransport, Entropy};
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use super::browser::{self, BrowserHub};
use super::job::{Job, Line, ReplyTo};
use super::world::{SharedEntropy, Time};
use mosaic_adapters::cause::logged;

/// Where panes connect, and the UI token every route requires.
#[derive(Debug, Clone)]
pub struct BrowserEndpoint {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The UI token; hand it only to the UI.
    pub token: Capability,
}

/// Browser control, bound at boot and not yet serving.
pub(super) struct Panes {
    listener: std::net::TcpListener,
    token: Capability,
    pub(super) hub: Arc<BrowserHub>,
    transport: Arc<SseTransport>,
}

/// A serving browser-control server, and how to stop it.
pub(super) struct Serving {
    pub(super) stop: oneshot::Sender<()>,
    pub(super) server: tokio::task::JoinHandle<Result<(), Refusal>>,
}

impl Panes {
    /// Binds `listen` (before any thread starts) and builds the hub, which
    /// reaches the panes through the SSE transport of the HTTP server; the
    /// server reaches the hub through its `BrowserControl` seam.
    ///
    /// # Errors
    /// `storage-unavailable` when no UI token can be drawn; the bind's
    /// refusal.
    pub(super) fn bind(
        listen: &str,
        data_root: &Path,
        credentials: &Arc<CredentialStore>,
        time: &Time,
        entropy: &mut SharedEntropy,
    ) -> Result<Self, Refusal> {
        let token = entropy
            .capability()
            .map_err(logged(Refusal::StorageUnavailable, "drawing the UI token"))?;
        let listener = http::bind(listen)?;
        let credentials = Arc::clone(credentials);
        let secrets: browser::Secrets =
            Arc::new(move |bytes: &[u8]| credentials.contains_known_token(bytes));
        let transport = Arc::new(SseTransport::new());
        let hub = Arc::new(BrowserHub::new(
            data_root.join("browser"),
            secrets,
            time.clone(),
            entropy.clone(),
            Arc::clone(&transport) as Arc<dyn BrowserTransport>,
        ));
        Ok(Self {
            listener,
            token,
            hub,
            transport,
        })
    }

    /// The address panes reach the server at: their own, which the
    /// human's browser may always go to (it serves only the pane and the
    /// fixtures, each behind the UI token).
    ///
    /// # Errors
    /// `broker-unavailable` when the listener's address cannot be read.
    pub(super) fn address(&self) -> Result<AllowedAddress, Refusal> {
        let address = self.listener.local_addr().map_err(logged(
            Refusal::BrokerUnavailable,
            "the browser listener's address",
        ))?;
        let host = match address.ip() {
            std::net::IpAddr::V4(v4) => Host::V4(v4),
            std::net::IpAddr::V6(v6) => Host::V6(v6),
        };
        Ok(AllowedAddress::new(host, address.port()))
    }

    /// Starts the hub's timers and the HTTP server on `runtime`; the pane
    /// checks every navigation against `policy`, as the broker does.
    ///
    /// # Errors
    /// `broker-unavailable` when the listener's address cannot be read.
    pub(super) fn serve(
        self,
        runtime: &tokio::runtime::Runtime,
        policy: &AddressPolicy,
    ) -> Result<(Serving, BrowserEndpoint), Refusal> {
        let address = self.listener.local_addr().map_err(logged(
            Refusal::BrokerUnavailable,
            "the browser listener's address",
        ))?;
        let endpoint = BrowserEndpoint {
            url: format!("http://{address}"),
            token: self.token.clone(),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        runtime.spawn(Arc::clone(&self.hub).run_timers());
        let control = self.hub as Arc<dyn BrowserControl<Value>>;
        let allowed: Vec<String> = policy.allowed().map(ToString::to_string).collect();
        let server = runtime.spawn(http::serve(
            self.listener,
            control,
            self.transport,
            self.token,
            allowed,
            async move {
                let _ = stopped.await;
            },
        ));
        Ok((Serving { stop, server }, endpoint))
    }
}

/// Carries a staged `browser.request` to a pane while its authorization
/// syncs (`authority` says when it is durable; `answered` is the writer's
/// answer), and records its outcome (with a digest, never the payload)
/// before answering. An authorization that failed is answered with its
/// refusal, and nothing more is recorded.
pub(super) async fn browse(
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
    // The pane acted; an outcome that cannot be recorded is still the
    // truth the agent must hear, so only a lost writer changes the answer.
    let job = |reply| Job::Command {
        caller: caller.clone(),
        command,
        reply,
    };
    if let Some(socket) = gone.direct() {
        // The writer answers the agent itself once the outcome is durable,
        // the token guard included.
        let answer = hub.guarded(answer);
        let (reply, written) = oneshot::channel();
        let render = Box::new(move |_recorded| answer);
        let sent = jobs.send(job(ReplyTo::Line(Line {
            render,
            socket: socket.clone(),
            to: reply,
        })));
        return match (sent, written.await) {
            (Ok(()), Ok(answer)) => answer,
            (Err(_), _) | (Ok(()), Err(_)) => wire::err(Refusal::StorageUnavailable),
        };
    }
    let (reply, recorded) = oneshot::channel();
    let sent = jobs.send(job(ReplyTo::Task(reply)));
    if sent.is_err() || recorded.await.is_err() {
        return wire::err(Refusal::StorageUnavailable);
    }
    answer
}
