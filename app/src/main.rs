//! `mosaic-bus`: the binary. It only wires: each subcommand parses its
//! arguments, builds the adapters it needs and hands them to the runtime.
//!
//! Today it carries the help text and the exit-code contract; the broker,
//! `up`, `call`, `human`, `unlock` and `mcp` subcommands arrive with their
//! issues (see README.md, "Status").

use std::process::ExitCode;

const HELP: &str = "\
mosaic-bus: a local coordination broker for teams of AI agents

USAGE:
    mosaic-bus <COMMAND>

COMMANDS:
    help        Print this help
    version     Print the version

Not built yet (see README.md, Status): broker, up, call, human, unlock, mcp.

EXIT CODES:
    0   success
    2   usage or startup failure; one static code on stderr
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("help" | "--help" | "-h") => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Some("version" | "--version" | "-V") => {
            println!("mosaic-bus {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(_) => {
            eprintln!("unknown-command");
            eprint!("{HELP}");
            ExitCode::from(2)
        }
    }
}
