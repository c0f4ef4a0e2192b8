//! `mosaic-bus`: the binary. It only wires: the command line ([`cli`],
//! parsed by `clap`), the logs ([`logs`]), and for each subcommand the
//! adapters it needs handed to the runtime, and its exit code.
//!
//! Exit codes: 0 success; 1 a refusal (`call`, `human`) or a failed agent
//! (`up`); 2 a usage error or a failure to start, reported as each
//! subcommand reports its codes ([`cli::Contract`]).

mod cli;
mod logs;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches};
use mosaic_adapters::fs::{self, DataRoot};
use mosaic_adapters::procfs::ProcFs;
use mosaic_adapters::system::SystemClock;
use mosaic_adapters::wire;
use mosaic_domain::Refusal;
use mosaic_ports::Clock;

use cli::{Cli, Command, Contract};

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let cli = match Cli::command()
        .try_get_matches_from(&argv)
        .and_then(|matches| Cli::from_arg_matches(&matches))
    {
        Ok(cli) => cli,
        Err(error) => return refused_usage(&argv, &error),
    };
    match cli.command {
        None => {
            let _ = Cli::command().print_long_help();
            ExitCode::SUCCESS
        }
        Some(Command::Version) => {
            println!("mosaic-bus {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(Command::Broker(args)) => {
            logs::init(&args.log);
            let code = mosaic_app::host::run(
                std::io::BufReader::new(std::io::stdin()),
                &mut std::io::stdout().lock(),
            );
            ExitCode::from(code)
        }
        Some(Command::Up(args)) => {
            logs::init(&args.log);
            let options = mosaic_app::up::Options {
                config: args.config,
                data_root: args.data_root,
                stay: args.stay,
                browser: args.browser,
                secrets_dir: args.secrets_dir,
            };
            ExitCode::from(mosaic_app::up::run(options, &mut std::io::stdout()))
        }
        Some(Command::Call(args)) => {
            let (line, code) = mosaic_app::call::run(mosaic_app::call::Args {
                verb: args.verb,
                args: args.args,
                socket: args.socket,
                cap_file: args.cap_file,
            });
            println!("{line}");
            ExitCode::from(code)
        }
        Some(Command::Mcp(args)) => {
            // Stdout is the MCP channel: the logs go to stderr only.
            logs::init(&args.log);
            match mosaic_adapters::mcp::run(args.socket, args.cap_file) {
                Ok(()) => ExitCode::SUCCESS,
                Err(refusal) => code_on_stderr(refusal),
            }
        }
        Some(Command::Human(args)) => {
            let (line, code) = mosaic_app::human::run(&args.socket, std::io::stdin());
            println!("{line}");
            ExitCode::from(code)
        }
        Some(Command::Demo(args)) => {
            logs::init(&args.log);
            let mut out = std::io::stdout().lock();
            match mosaic_app::demo::run(args.data_root, &mut out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(refusal) => code_on_stderr(refusal),
            }
        }
        Some(Command::Unlock(args)) => {
            let outcome = DataRoot::open(&args.data_root)
                .and_then(|root| fs::unlock(&root, &ProcFs::new(), SystemClock.now()));
            let (line, code) = match outcome {
                Ok(evidence) => (
                    serde_json::json!({"ok": true, "evidence": evidence.to_string_lossy()}),
                    ExitCode::SUCCESS,
                ),
                Err(refusal) => (
                    serde_json::json!({"ok": false, "error": refusal.code()}),
                    ExitCode::from(2),
                ),
            };
            println!("{line}");
            code
        }
    }
}

/// A command line clap did not accept. Help and version go to stdout with
/// exit 0. A usage error exits 2 with clap's explanation on stderr and
/// `bad-request` where the subcommand puts its codes (its JSON line on
/// stdout, or the last line of stderr); an unknown command ends stderr with
/// `unknown-command`.
fn refused_usage(argv: &[OsString], error: &clap::Error) -> ExitCode {
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        let _ = error.print();
        return ExitCode::SUCCESS;
    }
    // Subcommands come first: no option precedes them.
    let contract = argv
        .get(1)
        .and_then(|name| name.to_str())
        .and_then(Command::contract);
    let code = match contract {
        Some(Contract::JsonLineOnly) => {
            println!(
                "{}",
                serde_json::json!({"ok": false, "error": Refusal::BadRequest.code()})
            );
            return ExitCode::from(2);
        }
        Some(Contract::JsonLine) => {
            let line = match argv.get(1).and_then(|name| name.to_str()) {
                // `up` and the host channel print their lines through
                // serde_json.
                Some("up" | "broker") => {
                    serde_json::json!({"ok": false, "error": Refusal::BadRequest.code()})
                        .to_string()
                }
                Some(_) | None => wire::err(Refusal::BadRequest),
            };
            println!("{line}");
            None
        }
        Some(Contract::CodeOnStderr) => Some(Refusal::BadRequest.code()),
        None => Some("unknown-command"),
    };
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "{}", error.render());
    if let Some(code) = code {
        let _ = writeln!(stderr, "{code}");
    }
    ExitCode::from(2)
}

/// The contract of `mcp` and `demo` when they cannot run: the static code
/// alone on a line of stderr (after any log line), exit 2.
fn code_on_stderr(refusal: Refusal) -> ExitCode {
    let _ = writeln!(std::io::stderr().lock(), "{}", refusal.code());
    ExitCode::from(2)
}
