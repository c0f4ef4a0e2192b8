//! The command line of `mosaic-bus`, declared with `clap`'s derive: one
//! struct per subcommand, its help beside it.
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

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::{NonEmptyStringValueParser, OsStringValueParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use mosaic_domain::{CallerKind, Verb};

/// The variable that filters the logs.
pub const LOG_ENV: &str = "MOSAIC_LOG";
/// The variable that picks the log format.
pub const LOG_FORMAT_ENV: &str = "MOSAIC_LOG_FORMAT";

const ABOUT: &str = "mosaic-bus: a local coordination broker for teams of AI coding agents";

const LONG_ABOUT: &str = "\
mosaic-bus: a local coordination broker for teams of AI coding agents.

One broker per data root keeps the evidence of a business (its roles, \
claims, messages, decisions and authorizations) in a SQLite store, and \
serves agents on a private Unix socket. A host starts it (`broker`), or \
`up` starts it with the agents of a configuration file; agents talk to it \
with `call` or through `mcp`, the human with `human`.";

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
    #[command(long_about = BROKER_ABOUT, after_help = with_log_env(BROKER_AFTER))]
    Broker(BrokerArgs),
    /// Boot a broker in this process and launch the agents of a configuration.
    #[command(long_about = UP_ABOUT, after_help = with_log_env(UP_AFTER))]
    Up(UpArgs),
    /// Send one request to the broker as an agent or reader; print its answer.
    #[command(long_about = CALL_ABOUT, after_help = call_after())]
    Call(CallArgs),
    /// Serve the agent verbs as MCP tools on stdin and stdout, for a harness.
    #[command(long_about = MCP_ABOUT, after_help = mcp_after())]
    Mcp(McpArgs),
    /// Send one request as the business's human, proven from /proc.
    #[command(long_about = HUMAN_ABOUT, after_help = human_after())]
    Human(HumanArgs),
    /// Play one exchange of the built-in example business on a real store.
    #[command(long_about = DEMO_ABOUT, after_help = with_log_env(DEMO_AFTER))]
    Demo(DemoArgs),
    /// After a crash: prove the broker gone, keep the evidence, remove the lock.
    #[command(long_about = UNLOCK_ABOUT, after_help = UNLOCK_AFTER)]
    Unlock(UnlockArgs),
    /// Print the version.
    Version,
}

impl Command {
    /// Where this subcommand reports a usage error.
    pub fn contract(name: &str) -> Option<Contract> {
        match name {
            "broker" | "up" | "call" | "human" => Some(Contract::JsonLine),
            "unlock" => Some(Contract::JsonLineOnly),
            "mcp" | "demo" => Some(Contract::CodeOnStderr),
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

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line of text per event: time, level, target, message, fields.
    Text,
    /// One JSON object per line, its fields at the top level.
    Json,
}

/// The log options of the subcommands that log.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// The format of the log lines on stderr: text (one line per event:
    /// time, level, target, message, fields) or json (one object per line).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        default_value_t = LogFormat::Text,
        env = LOG_FORMAT_ENV,
        hide_possible_values = true
    )]
    pub log_format: LogFormat,
    /// More detail: -v logs at debug (one line per request), -vv at trace.
    /// Overrides the default level of MOSAIC_LOG.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

const LOG_ENV_HELP: &str =
    "  MOSAIC_LOG         the log filter (tracing's EnvFilter syntax: `info`,
                     `debug`, `mosaic_app=debug,warn`); default `info`
  MOSAIC_LOG_FORMAT  `text` or `json`, as --log-format";

const BROKER_ABOUT: &str = "\
Run the broker for a trusted host, which speaks newline-delimited JSON to it: \
requests on stdin, one answer line each on stdout. Logs go to stderr and \
never hold a capability or a token.

The first line must be {\"op\":\"boot\",\"config\":{dataRoot, businesses, \
launches, readers, repoRoots, projectRoots?, sync?, browser?}}; it is \
answered {\"ok\":true,\"path\":SOCKET,\"launches\":[{business,run,cap}],\
\"readers\":[{business,cap}]}, and with \"browser\":{\"listen\":\"127.0.0.1:0\"} \
also \"browser\":{url,token}. Then any number of {\"op\":\"bindLaunch\",\
\"record\":{business,role,run,harness,address?,pid,startTime}}, each answered \
{\"ok\":true,\"launch\":{business,run,cap}} or {\"ok\":false,\"error\":CODE}; \
and {\"op\":\"close\"}. A launch record's startTime is field 22 of \
/proc/<pid>/stat. The agents reach the broker on the socket \
<dataRoot>/bus/bus.sock (mode 0600).";

const BROKER_AFTER: &str = "\
Environment:
{log_env}

Exit codes:
  0  closed by {\"op\":\"close\"}, SIGTERM or SIGINT
  2  end of stdin (the host is gone: the broker closes); a boot failure or a
     malformed host line ({\"ok\":false,\"error\":CODE} on stdout, with
     \"reference\" for a bad credential reference or \"run\" for a boot
     launch); a usage error (bad-request); a failed close

Example (a host's side of the channel):
  > {\"op\":\"boot\",\"config\":{\"dataRoot\":\"/srv/bus\",\"businesses\":{\"acme\":{...}},
     \"launches\":[],\"readers\":[\"acme\"],\"repoRoots\":[]}}
  < {\"ok\":true,\"path\":\"/srv/bus/bus/bus.sock\",\"launches\":[],
     \"readers\":[{\"business\":\"acme\",\"cap\":\"<64 hex>\"}]}
  > {\"op\":\"close\"}

Reference: docs/host.md.";

/// `broker`.
#[derive(Debug, Clone, Args)]
pub struct BrokerArgs {
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

const UP_ABOUT: &str = "\
The standalone host: boot a broker in this process, launch the agents the \
configuration lists, and run until SIGINT or SIGTERM, or until every agent \
has exited.

The configuration is {\"business\":{id, human, arbiters, roles, launch?}, \
\"agents\":[{role, harness, command, env?}]}: harness is pi or claude-code, \
command a program and its arguments (no shell), env the names of this \
process's variables the agent also needs. Each agent runs in the \
configuration's directory with MOSAIC_RUN_ID, MOSAIC_BUS_SOCKET and \
MOSAIC_BUS_CAP_FD, the number of an inherited sealed descriptor that holds \
its capability (never an environment value); it must read one line, \
\"ready\", on stdin before its first call.

Stdout gets exactly one line: {\"ok\":true, business, dataRoot, socket, \
readerCap, browser?, agents:[{role, run, harness, pid}]}, never a \
capability. The human's reader capability (reader.cap) and, with --browser, \
the UI token (ui.token) are written to the secrets folder (mode 0600) and \
removed on close. The agents' output is theirs: it goes where this \
process's stdout and stderr go.";

const UP_AFTER: &str = "\
Environment:
{log_env}
  An agent gets PATH (this binary's folder first), HOME, USER, LOGNAME,
  SHELL, LANG, LANGUAGE, LC_*, TERM, TZ, TMPDIR and the variables its `env`
  names, never one that a credential reference of the business names.

Exit codes:
  0  every agent exited 0, or SIGINT/SIGTERM stopped them (SIGTERM to each
     agent's process group, 5 s, then SIGKILL; a second signal kills at once)
  1  an agent exited non-zero on its own (named in the log)
  2  it could not start ({\"ok\":false,\"error\":CODE} on stdout, with \"role\"
     when an agent's launch failed), a usage error (bad-request), or the
     close failed

Example:
  mosaic-bus up --config business.json --browser 127.0.0.1:0

Reference: docs/agents.md, docs/browser.md, docs/operations.md.";

/// `up`.
#[derive(Debug, Clone, Args)]
pub struct UpArgs {
    /// The configuration file: {"business":{...},"agents":[...]}.
    #[arg(long, value_name = "FILE", value_parser = non_empty_path())]
    pub config: PathBuf,
    /// The data root (a private folder, mode 0700). Default: a new private
    /// folder under the temporary directory, kept after the run.
    #[arg(long, value_name = "DIR", value_parser = non_empty_path())]
    pub data_root: Option<PathBuf>,
    /// Where the human's reader capability and UI token are written: a
    /// private folder of ours, not under the data root. Default: a new
    /// private folder under the temporary directory, removed on close.
    #[arg(long, value_name = "DIR", value_parser = non_empty_path())]
    pub secrets_dir: Option<PathBuf>,
    /// Also serve browser control on this loopback address (port 0: any free
    /// port); the summary line names its url, pane and token file.
    #[arg(long, value_name = "ADDR", value_parser = NonEmptyStringValueParser::new())]
    pub browser: Option<String>,
    /// Keep serving after every agent has exited, until SIGINT or SIGTERM.
    #[arg(long)]
    pub stay: bool,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

const CALL_ABOUT: &str = "\
Send one request to the broker and print its JSON answer line on stdout, as \
the broker sent it: {\"ok\":true,\"result\":...} or {\"ok\":false,\"error\":CODE}.

The capability comes from the inherited descriptor named by \
MOSAIC_BUS_CAP_FD (how `up` hands it to an agent) or from a private file \
(--cap-file, mode 0600), never from an argument or an environment value. \
There is no retry: on outcome-unknown the request may have taken effect, so \
inspect the trail before doing anything again. Nothing is read from stdin.";

/// The help after `call`'s arguments: its verbs, from the verb table.
fn call_after() -> String {
    format!(
        "\
Verbs (agents):
{agent}

Verbs (readers):
{reader}

Environment:
  MOSAIC_BUS_CAP_FD      the descriptor holding the capability (without
                         --cap-file)
  MOSAIC_BUS_SOCKET      the socket (without --socket)

Exit codes:
  0  ok
  1  refused: the broker's code, or broker-unavailable, bad-capability,
     unsafe-path (the capability file), outcome-unknown
  2  a usage error: bad-request (missing or unknown arguments, ARGS_JSON
     not JSON)

Example:
  mosaic-bus call message.send '{{\"to\":\"dev\",\"body\":\"merged\"}}'

Reference: docs/protocol.md.",
        agent = verb_list(CallerKind::Agent),
        reader = verb_list(CallerKind::Reader),
    )
}

/// `call`.
#[derive(Debug, Clone, Args)]
pub struct CallArgs {
    /// The verb, e.g. inbox or message.send (listed below).
    #[arg(value_name = "VERB")]
    pub verb: String,
    /// The verb's arguments as one JSON object. Default: {}.
    #[arg(value_name = "ARGS_JSON")]
    pub args: Option<String>,
    /// The broker's socket, <dataRoot>/bus/bus.sock.
    #[arg(long, value_name = "PATH", env = "MOSAIC_BUS_SOCKET", value_parser = non_empty_path())]
    pub socket: PathBuf,
    /// Read the capability from this private file (mode 0600) instead of the
    /// descriptor named by MOSAIC_BUS_CAP_FD.
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub cap_file: Option<PathBuf>,
}

const MCP_ABOUT: &str = "\
An MCP server on stdin and stdout for an agent harness (Claude Code, pi and \
others): one tool per agent verb, named with underscores for dots \
(role_claim, message_send, decision_raise, ...); the human's verbs are not \
exposed. Each tool call is one request to the broker with this run's \
capability, found as for `call`. A refusal is a tool error whose text \
starts with its static code, then says what it means and what to do; on \
outcome-unknown inspect the trail, never resend blindly. Stdout carries \
only MCP messages; logs go to stderr.";

/// The help after `mcp`'s arguments.
fn mcp_after() -> String {
    format!(
        "\
Tools:
{tools}

Environment:
  MOSAIC_BUS_CAP_FD      the descriptor holding the capability (without
                         --cap-file)
  MOSAIC_BUS_SOCKET      the socket (without --socket)
{log_env}

Exit codes:
  0  the client closed stdin
  2  it could not start: one static code on the last line of stderr
     (bad-request for a usage error, bad-capability, unsafe-path)

Example (a harness's MCP server entry):
  {{\"command\": \"mosaic-bus\", \"args\": [\"mcp\"]}}

Reference: docs/agents.md.",
        tools = verb_list(CallerKind::Agent).replace('.', "_"),
        log_env = LOG_ENV_HELP,
    )
}

/// `mcp`.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// The broker's socket, <dataRoot>/bus/bus.sock.
    #[arg(long, value_name = "PATH", env = "MOSAIC_BUS_SOCKET", value_parser = non_empty_path())]
    pub socket: PathBuf,
    /// Read the capability from this private file (mode 0600) instead of the
    /// descriptor named by MOSAIC_BUS_CAP_FD.
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub cap_file: Option<PathBuf>,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

const HUMAN_ABOUT: &str = "\
The human's transport: read one {\"business\", \"verb\", \"args\"?} object from \
stdin (at most 64 KiB) and print the broker's JSON answer line on stdout.

No capability and no name is sent. The command re-executes itself once with \
a fresh nonce in its environment; the broker then proves from /proc that the \
caller is this very binary, carrying that nonce, run by the broker's user, \
with no agent among its ancestors, and acts as the business's configured \
human (human-proof-failed otherwise).";

/// The help after `human`'s arguments: its verbs, from the verb table.
fn human_after() -> String {
    format!(
        "\
Verbs:
{human}

Exit codes:
  0  ok
  1  refused: the broker's code, or human-proof-failed, broker-unavailable,
     outcome-unknown
  2  a usage error: bad-request (arguments, or stdin not one object with a
     string business and verb), unknown-key, request-too-large

Example:
  echo '{{\"business\":\"acme\",\"verb\":\"inbox\"}}' | mosaic-bus human /srv/bus/bus/bus.sock

Reference: docs/protocol.md.",
        human = verb_list(CallerKind::Human),
    )
}

/// `human`.
#[derive(Debug, Clone, Args)]
pub struct HumanArgs {
    /// The broker's socket, <dataRoot>/bus/bus.sock.
    #[arg(value_name = "SOCKET", value_parser = non_empty_path())]
    pub socket: PathBuf,
}

const DEMO_ABOUT: &str = "\
Play one exchange of the example business built into this binary (acme, with \
lead and dev) against a real data root and SQLite store: both claim their \
roles, dev asks lead to approve a merge, lead approves, dev spends the \
approval once (a second spend is refused), dev reports and lead \
acknowledges. Prints one JSON line per step on stdout, then the decision's \
trail. No broker and no socket are involved; `up` plays the same business \
with real processes.";

const DEMO_AFTER: &str = "\
Environment:
{log_env}

Exit codes:
  0  the exchange was played
  2  it could not run: one static code on the last line of stderr
     (bad-request for a usage error, unsafe-path, lock-held, stale-lock,
     storage-unavailable, ...)

Example:
  mosaic-bus demo --data-root ~/mosaic-demo";

/// `demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// The data root (a private folder, mode 0700). Default: a new private
    /// folder under the temporary directory, kept afterwards.
    #[arg(long, value_name = "D", value_parser = non_empty_path())]
    pub data_root: Option<PathBuf>,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

const UNLOCK_ABOUT: &str = "\
After a broker crash its writer lock (<D>/bus/writer.lock) is left behind, \
and a new broker refuses to start with stale-lock. `unlock` proves that the \
broker recorded in the lock (its pid and start time) is gone, copies \
bus.sqlite, bus.sqlite-wal and bus.sqlite-shm into a new \
<D>/bus/evidence-<time>/ folder, then removes only the lock and the socket. \
Evidence is never deleted. Prints one JSON line on stdout.";

const UNLOCK_AFTER: &str = "\
Output and exit codes:
  {\"ok\":true,\"evidence\":\"<folder>\"}   exit 0
  {\"ok\":false,\"error\":\"<code>\"}       exit 2, where the code is
    lock-held            the broker may still run: the lock is held, or its
                         pid lives with the recorded start time, or /proc
                         cannot tell
    no-lock              there is no writer.lock
    stale-lock           the lock does not hold \"pid start_time\": nothing is
                         touched; inspect it and remove it by hand
    unsafe-path          a symlink, a foreign owner or unsafe permissions
    storage-unavailable  the evidence could not be written, or a removal failed
    bad-request          a usage error
Nothing else is written, on stdout or stderr.

Example:
  mosaic-bus unlock --data-root /srv/bus

Reference: docs/operations.md.";

/// `unlock`.
#[derive(Debug, Clone, Args)]
pub struct UnlockArgs {
    /// The data root of the crashed broker.
    #[arg(long, value_name = "D", value_parser = non_empty_path())]
    pub data_root: PathBuf,
}

/// `text` with the log variables' lines in place of `{log_env}`.
fn with_log_env(text: &str) -> String {
    text.replace("{log_env}", LOG_ENV_HELP)
}

/// A path argument that is not empty (an empty one was always a usage
/// error). Not text: any path the OS allows.
fn non_empty_path() -> impl TypedValueParser<Value = PathBuf> {
    OsStringValueParser::new().try_map(|value: OsString| {
        if value.is_empty() {
            Err("an empty path")
        } else {
            Ok(PathBuf::from(value))
        }
    })
}

/// The verbs `caller` may use, comma-separated and wrapped at 78 columns,
/// each line indented by two spaces.
pub fn verb_list(caller: CallerKind) -> String {
    let mut lines = vec![String::from(" ")];
    for name in Verb::ALL
        .iter()
        .filter(|v| v.serves(caller))
        .map(|v| v.as_str())
    {
        let line = lines.last_mut().expect("one line at least");
        if line.len() > 2 && line.len() + name.len() + 2 > 78 {
            line.push(',');
            lines.push(format!("  {name}"));
        } else {
            if line.len() > 2 {
                line.push(',');
            }
            line.push(' ');
            line.push_str(name);
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    fn up(args: &[&str]) -> Option<UpArgs> {
        let argv = ["mosaic-bus", "up"].iter().chain(args);
        match Cli::try_parse_from(argv).ok()?.command? {
            Command::Up(up) => Some(up),
            Command::Broker(_)
            | Command::Call(_)
            | Command::Mcp(_)
            | Command::Human(_)
            | Command::Demo(_)
            | Command::Unlock(_)
            | Command::Version => None,
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

    #[test]
    fn the_verb_lists_are_the_verb_table() {
        for caller in [CallerKind::Agent, CallerKind::Reader, CallerKind::Human] {
            let listed: Vec<String> = verb_list(caller)
                .split(',')
                .map(|v| v.trim().to_owned())
                .collect();
            let table: Vec<&str> = Verb::ALL
                .iter()
                .filter(|v| v.serves(caller))
                .map(|v| v.as_str())
                .collect();
            assert_eq!(listed, table);
            assert!(verb_list(caller).lines().all(|l| l.len() <= 78));
        }
    }
}
