//! `mosaic-bus`: the binary. It only wires: the command line
//! (`mosaic_app::commands::Cli`, parsed by `clap`), then each subcommand's
//! `main`, and a usage error mapped onto that subcommand's contract.
//!
//! Exit codes: 0 success; 1 a refusal (`call`, `human`) or a failed agent
//! (`up`); 2 a usage error or a failure to start, reported as each
//! subcommand reports its codes ([`cli::Contract`]).

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches};
use mosaic_adapters::wire;
use mosaic_app::commands::{self, Cli, Command, Contract};
use mosaic_domain::Refusal;

fn main() -> ExitCode {
    commands::adopt_connector();
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
        Some(Command::Broker(args)) => commands::host::main(args),
        Some(Command::Up(args)) => commands::up::main(args),
        Some(Command::Call(args)) => commands::call::main(args),
        Some(Command::Mcp(args)) => commands::mcp::main(args),
        Some(Command::Human(args)) => commands::human::main(args),
        Some(Command::Console(args)) => commands::console::main(args),
        Some(Command::Demo(args)) => commands::demo::main(args),
        Some(Command::Unlock(args)) => commands::unlock::main(args),
        Some(Command::Verify(args)) => commands::verify::main(args),
        Some(Command::Backup(args)) => commands::backup::main(args),
        Some(Command::Head(args)) => commands::head::main(args),
        Some(Command::SandboxExec(args)) => commands::up::sandbox_exec(args),
        Some(Command::SandboxBridge(args)) => commands::up::sandbox_bridge(args),
        Some(Command::SandboxCgroup(args)) => commands::up::sandbox_cgroup(args),
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
