//! What each agent's network is, and what `up` says and starts for it.
//!
//! - `"none"` (the default): a network namespace with loopback only. The
//!   agent reaches the broker through its socket, a file, and nothing else.
//! - `"proxy"`: the same namespace, and `up`'s forward proxy
//!   ([`super::proxy`]) through the bridge inside ([`super::bridge_main`]),
//!   which admits only the agent's `"allow"` list.
//! - `"host"`: the host's network, loopback included. Every loopback
//!   service of the user is then in the agent's reach, and some run what
//!   they are sent (a `node --inspect` debugger, a dev server), outside any
//!   sandbox; so `up` warns once, naming the agents.
//!
//! An agent without a sandbox has the host's network whatever its
//! configuration says: `up`'s first line says `"network": "host"` for it,
//! beside `"sandboxed": false`, and the one warning about running without
//! a sandbox covers it.

use std::io;
use std::path::PathBuf;

use mosaic_adapters::cause::logged;
use mosaic_domain::{Refusal, RunId};

use super::proxy::{Limits, Proxy};
use crate::commands::team::{AgentSpec, Allow, Network};

/// Where the proxy's socket is inside the sandbox: under the sandbox's own
/// `/run`, a tmpfs.
pub(crate) const PROXY_SOCKET: &str = "/run/mosaic-bus/proxy.sock";

/// The port the bridge listens on, on the sandbox's loopback (squid's, and
/// free in a namespace of the agent's own).
pub(crate) const PROXY_PORT: u16 = 3128;

/// The warning of one `up` about its sandboxed agents' networks, at most
/// once: the agents with `"network": "host"` (without a sandbox, its own
/// warning says that the agents run as the user, network and all).
/// Abstract Unix sockets need no warning: a sandboxed agent makes no Unix
/// socket.
pub(crate) fn warn(agents: &[AgentSpec]) {
    let on_host: Vec<&str> = agents
        .iter()
        .filter(|spec| spec.network == Network::Host)
        .map(|spec| spec.role.as_str())
        .collect();
    if !on_host.is_empty() {
        tracing::warn!(
            agents = on_host.join(", ").as_str(),
            "these agents have the host's network (\"network\": \"host\" on the first line): \
             every loopback service of this user, a debugger or a dev server say, can run \
             code for them outside the sandbox; \"network\": \"proxy\" with an \"allow\" list \
             reaches only the hosts it names"
        );
    }
}

/// The forward proxy, started when a sandboxed agent has
/// `"network": "proxy"`.
///
/// # Errors
/// `launch-failed` when its runtime or its private folder cannot be made.
pub(crate) fn proxy(agents: &[AgentSpec], sandboxed: bool) -> Result<Option<Proxy>, Refusal> {
    if !sandboxed || agents.iter().all(|spec| spec.network != Network::Proxy) {
        return Ok(None);
    }
    Proxy::start(Limits::default())
        .map(Some)
        .map_err(logged(Refusal::LaunchFailed, "starting the proxy"))
}

/// For a sandboxed agent with `"network": "proxy"` (`network`), the
/// socket of its own on which the proxy now listens for `run`, admitting
/// `allow` (its plan's: its `"allow"` list and a harness's model
/// endpoint); `None` for the others.
pub(crate) fn listen(
    proxy: Option<&Proxy>,
    network: Network,
    run: &RunId,
    allow: &[Allow],
    places: Option<crate::runtime::RunPlaces>,
) -> io::Result<Option<PathBuf>> {
    match (network, proxy) {
        (Network::Proxy, Some(proxy)) => proxy.listen(run.as_str(), allow, places).map(Some),
        (Network::Proxy, None) => Err(io::ErrorKind::NotFound.into()),
        (Network::None | Network::Host, _) => Ok(None),
    }
}
