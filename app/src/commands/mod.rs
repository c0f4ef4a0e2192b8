//! The programs a person starts: one module per subcommand of
//! `mosaic-bus`, each with its `clap` declaration (its arguments and its
//! help) beside the code that runs it, and this module's [`Cli`] that
//! lists them. A subcommand uses the [`crate::runtime`]; the runtime never
//! uses a subcommand. Signal handling is written once ([`signals`]), and
//! so is the log setup ([`logs`]); the team configuration that `up` and
//! `demo` read is [`team`].
//!
//! Every subcommand's `--help` says what it does, its arguments, the
//! environment it reads, what goes over stdin and stdout, its exit codes
//! and an example. The verb lists of `call` and `human` are generated from
//! the verb table ([`Verb::ALL`] filtered by [`Verb::serves`]), so the help
//! cannot drift from what the broker serves. No text names a file of the
//! source tree: the help says it, or names a page of the docs.
//!
//! Parsing never runs a subcommand: `--help` exits before anything reads
//! stdin. A usage error is not clap's own exit (code 2 with clap's text):
//! `main` maps it onto each subcommand's contract ([`Contract`]), which is
//! exit 2 with a static code where that subcommand puts its codes.

use clap::{Parser, Subcommand};

use args::with_log_env;

mod args;
pub mod backup;
pub mod call;
pub mod console;
pub mod demo;
pub mod head;
pub mod host;
pub mod human;
mod logs;
pub mod mcp;
mod signals;
pub mod team;
pub mod unlock;
pub mod up;
pub mod verify;

/// A client inside `up`'s sandbox, which may not make a Unix socket,
/// reaches the broker through the connector it inherited
/// ([`mosaic_client::socket::connector`]): when
/// `MOSAIC_BUS_CONNECTOR_FD` names an inherited descriptor, every client
/// of this process connects through it. Called first, while the process
/// has one thread; a variable that names no inherited descriptor is
/// ignored, and the client then connects by path as anywhere else.
/// When the connector is gone (a harness that closes inherited
/// descriptors for what it starts), `MOSAIC_BUS_BRIDGE` names the bridge
/// on the sandbox's own loopback instead.
pub fn adopt_connector() {
    use mosaic_client::socket::connector::{
        adopt, adopt_bridge, is_connector, BRIDGE_ENV, CONNECTOR_FD_ENV,
    };
    let fd = std::env::var(CONNECTOR_FD_ENV)
        .ok()
        .and_then(|n| n.parse::<i32>().ok());
    if let Some(fd) = fd {
        if let Ok(connector) = mosaic_adapters::sys::take_inherited_fd(fd) {
            if is_connector(&connector) {
                adopt(connector);
                return;
            }
            // Not ours to close: left open as it came.
            let _ = std::os::fd::IntoRawFd::into_raw_fd(connector);
        }
    }
    let bridge = std::env::var(BRIDGE_ENV)
        .ok()
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok());
    if let Some(bridge) = bridge {
        adopt_bridge(bridge);
    }
}

const ABOUT: &str = "mosaic-bus: a local coordination broker for teams of AI coding agents";

const LONG_ABOUT: &str = "\
mosaic-bus: a local coordination broker for teams of AI coding agents.

One broker per data root keeps the evidence of a business (its roles, \
claims, messages, decisions and authorizations) in a SQLite store, and \
serves agents on a private Unix socket. A host starts it (`broker`), or \
`up` starts it with the agents of a configuration file; agents talk to it \
with `call` or through `mcp`, the human with `human` or `console`.";

const AFTER_HELP: &str = "\
Run `mosaic-bus <COMMAND> --help` for a command's arguments, environment,
protocol and exit codes.

Exit codes (every command):
  0  success
  1  the broker refused (call, human), or an agent failed (up)
  2  a usage error or a failure to start; the static code goes where the
     command puts its answers (a JSON line on stdout, or one line on stderr)

Logs (broker, up, mcp, demo) go to stderr; MOSAIC_LOG filters
them (default `info`; `debug` adds one line per request).

Reference: docs/protocol.md (socket verbs, results, refusal codes),
docs/host.md (the host channel), docs/agents.md (harnesses, MCP, the change
feed), docs/operations.md (data root, crash, unlock, logs).";

/// `mosaic-bus`.
#[derive(Debug, Parser)]
#[command(
    name = "mosaic-bus",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    disable_help_subcommand = false,
    subcommand_required = false
)]
pub struct Cli {
    /// The subcommand; none prints the help.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the broker for a trusted host: JSON lines on stdin and stdout.
    #[command(long_about = host::ABOUT, after_help = with_log_env(host::AFTER))]
    Broker(host::BrokerArgs),
    /// Boot a broker in this process and launch the agents of a configuration.
    #[command(long_about = up::ABOUT, after_help = with_log_env(up::AFTER))]
    Up(up::UpArgs),
    /// Send one request to the broker as an agent or reader; print its answer.
    #[command(long_about = call::ABOUT, after_help = call::after())]
    Call(call::CallArgs),
    /// Serve the agent verbs as MCP tools on stdin and stdout, for a harness.
    #[command(long_about = mcp::ABOUT, after_help = mcp::after())]
    Mcp(mcp::McpArgs),
    /// Send one request as the business's human, proven from /proc.
    #[command(long_about = human::ABOUT, after_help = human::after())]
    Human(human::HumanArgs),
    /// The human's terminal UI over one business, proven as `human` is.
    #[command(long_about = console::ABOUT, after_help = console::after())]
    Console(console::ConsoleArgs),
    /// Play one exchange of the built-in example business on a real store.
    #[command(long_about = demo::ABOUT, after_help = with_log_env(demo::AFTER))]
    Demo(demo::DemoArgs),
    /// After a crash: prove the broker gone, keep the evidence, remove the lock.
    #[command(long_about = unlock::ABOUT, after_help = unlock::AFTER)]
    Unlock(unlock::UnlockArgs),
    /// Print the note of the evidence's hash chain, as a reader asks the broker.
    #[command(long_about = head::ABOUT, after_help = head::AFTER)]
    Head(head::HeadArgs),
    /// Copy the store while the broker runs, verify the copy, print its note.
    #[command(long_about = backup::ABOUT, after_help = backup::AFTER)]
    Backup(backup::BackupArgs),
    /// Verify a store file offline: every open-time check, the hash chain, notes.
    #[command(long_about = verify::ABOUT, after_help = verify::AFTER)]
    Verify(verify::VerifyArgs),
    /// Print the version.
    Version,
    /// Inside an agent's sandbox: close inherited descriptors, run the agent.
    #[command(hide = true, name = "sandbox-exec")]
    SandboxExec(up::SandboxExecArgs),
    /// Inside an agent's sandbox: bridge its loopback port to up's proxy.
    #[command(hide = true, name = "sandbox-bridge")]
    SandboxBridge(up::SandboxBridgeArgs),
    /// Outside an agent's sandbox: join its cgroups, then run bwrap.
    #[command(hide = true, name = "sandbox-cgroup")]
    SandboxCgroup(up::SandboxCgroupArgs),
}

impl Command {
    /// Where this subcommand reports a usage error.
    pub fn contract(name: &str) -> Option<Contract> {
        match name {
            "broker" | "up" | "call" | "human" => Some(Contract::JsonLine),
            "unlock" | "verify" | "backup" => Some(Contract::JsonLineOnly),
            "mcp" | "demo" | "console" | "head" => Some(Contract::CodeOnStderr),
            _ => None,
        }
    }
}

/// How a subcommand reports a usage error: always exit 2 with
/// `bad-request`, either as its JSON refusal line on stdout or as one line
/// on stderr (`mcp`'s stdout is its protocol channel; `demo` prints JSON
/// lines of its own). Clap's explanation goes to stderr too, before the
/// code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// `{"ok":false,"error":"bad-request"}` on stdout.
    JsonLine,
    /// The same line, and nothing on stderr (`unlock` writes one line and
    /// nothing else).
    JsonLineOnly,
    /// `bad-request` alone on the last line of stderr.
    CodeOnStderr,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::path::PathBuf;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    fn up(args: &[&str]) -> Option<up::UpArgs> {
        let argv = ["mosaic-bus", "up"].iter().chain(args);
        match Cli::try_parse_from(argv).ok()?.command? {
            Command::Up(up) => Some(up),
            Command::Broker(_)
            | Command::Call(_)
            | Command::Mcp(_)
            | Command::Human(_)
            | Command::Console(_)
            | Command::Demo(_)
            | Command::Unlock(_)
            | Command::Verify(_)
            | Command::Head(_)
            | Command::Backup(_)
            | Command::Version
            | Command::SandboxExec(_)
            | Command::SandboxBridge(_)
            | Command::SandboxCgroup(_) => None,
        }
    }

    #[test]
    fn up_arguments_parse_strictly() {
        let parsed = up(&[
            "--config",
            "c.json",
            "--data-root=/d",
            "--stay",
            "--browser",
            "127.0.0.1:0",
        ])
        .expect("parses");
        assert_eq!(parsed.config, PathBuf::from("c.json"));
        assert_eq!(parsed.data_root, Some("/d".into()));
        assert!(parsed.stay);
        assert_eq!(parsed.browser.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(parsed.secrets_dir, None);
        let parsed = up(&["--config=c.json", "--secrets-dir", "/s"]).expect("parses");
        assert_eq!(parsed.data_root, None);
        assert_eq!(parsed.secrets_dir, Some("/s".into()));
        for bad in [
            &[][..],
            &["--data-root", "/d"],
            &["--config"],
            &["--config", ""],
            &["--config", "a", "--config", "b"],
            &["--config", "a", "--stay", "--stay"],
            &["--config", "a", "--stay=1"],
            &["--config", "a", "--browser", ""],
            &["--config", "a", "extra"],
        ] {
            assert!(up(bad).is_none(), "{bad:?}");
        }
    }
}
