//! `mosaic-bus mcp`: an MCP server on stdio for an agent harness. The
//! server is `mosaic_client::mcp::run`; this is its command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use mosaic_domain::CallerKind;

use super::args::{code_on_stderr, non_empty_path, verb_list, LogArgs, LOG_ENV_HELP};
use super::logs;

pub(crate) const ABOUT: &str = "\
An MCP server on stdin and stdout for an agent harness (Claude Code, pi and \
others): one tool per agent verb, named with underscores for dots \
(role_claim, message_send, decision_raise, ...); the human's verbs are not \
exposed. Each tool call is one request to the broker with this run's \
capability, found as for `call`. A refusal is a tool error whose text \
starts with its static code, then says what it means and what to do; on \
outcome-unknown inspect the trail, never resend blindly. Stdout carries \
only MCP messages; logs go to stderr.";

/// The help after `mcp`'s arguments.
pub(crate) fn after() -> String {
    format!(
        "\
Tools:
{tools}

Environment:
  MOSAIC_BUS_CAP_FD      the descriptor holding the capability (without
                         --cap-file)
  MOSAIC_BUS_CAP_FILE    a private 0600 file holding it (without --cap-file
                         or MOSAIC_BUS_CAP_FD)
  MOSAIC_BUS_SOCKET      the socket (without --socket)
{log_env}

Exit codes:
  0  the client closed stdin (with --tools: the list was printed)
  2  it could not start: one static code on the last line of stderr
     (bad-request for a usage error, bad-capability, unsafe-path)

Examples:
  a harness's MCP server entry:
    {{\"command\": \"mosaic-bus\", \"args\": [\"mcp\"]}}
  the tools as JSON, for a harness that registers its own (harness/pi/):
    mosaic-bus mcp --tools

Reference: docs/agents.md.",
        tools = verb_list(CallerKind::Agent).replace('.', "_"),
        log_env = LOG_ENV_HELP,
    )
}

/// `mcp`.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// The broker's socket, <dataRoot>/bus/bus.sock.
    #[arg(long, value_name = "PATH", env = "MOSAIC_BUS_SOCKET", value_parser = non_empty_path(),
          required_unless_present = "tools")]
    pub socket: Option<PathBuf>,
    /// Print the tools (the MCP tools/list array: name, description,
    /// inputSchema, annotations) as one JSON line and exit, without a
    /// broker or a capability (a socket or capability given is unused).
    #[arg(long)]
    pub tools: bool,
    /// Read the capability from this private file (mode 0600) instead of the
    /// descriptor named by MOSAIC_BUS_CAP_FD.
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub cap_file: Option<PathBuf>,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

/// Runs the MCP server until the client closes stdin.
pub fn main(args: McpArgs) -> ExitCode {
    // The listing alone: what a harness that is no MCP client registers.
    let Some(socket) = args.socket.filter(|_| !args.tools) else {
        println!("{}", mosaic_client::mcp::tools_json());
        return ExitCode::SUCCESS;
    };
    // Stdout is the MCP channel: the logs go to stderr only.
    logs::init(&args.log);
    match mosaic_client::mcp::run(socket, args.cap_file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(refusal) => code_on_stderr(refusal),
    }
}
