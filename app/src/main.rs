//! `mosaic-bus`: the binary. It only wires: each subcommand parses its
//! arguments, builds the adapters it needs and hands them to the runtime.
//!
//! It carries the help text, the exit-code contract and the dispatch of
//! `broker`, `up`, `call`, `mcp`, `human`, `demo` and `unlock`.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

use mosaic_adapters::fs::{self, DataRoot};
use mosaic_adapters::procfs::ProcFs;
use mosaic_adapters::system::SystemClock;
use mosaic_domain::{CallerKind, Refusal, Verb};
use mosaic_ports::Clock;

const HELP: &str = "\
mosaic-bus: a local coordination broker for teams of AI agents

USAGE:
    mosaic-bus <COMMAND>

COMMANDS:
    help        Print this help
    version     Print the version
    broker      Run the broker for a trusted host: newline-delimited JSON on
                stdin/stdout (DESIGN.md section 4). First
                {\"op\":\"boot\",\"config\":{dataRoot,businesses,launches,readers,
                repoRoots,projectRoots?,sync?,browser?}}, answered with the
                socket path, one capability per launch and per reader, and
                with browser:{listen} the browser url and UI token; then {\"op\":\"bindLaunch\",\"record\":
                {business,role,run,harness,address?,pid,startTime}} and
                {\"op\":\"close\"}. End of stdin closes with exit 2; SIGTERM and
                SIGINT close cleanly with exit 0; a startup or protocol
                failure prints {\"ok\":false,\"error\":CODE} and exits 2.
    call VERB [ARGS_JSON] [--socket PATH] [--cap-file PATH]
                Send one request to the broker and print its JSON answer.
                The capability comes from the descriptor named by
                MOSAIC_BUS_CAP_FD or from a private 0600 --cap-file, never
                from an argument; the socket from --socket or
                MOSAIC_BUS_SOCKET. Exit 0 when ok, 1 on a refusal (on
                outcome-unknown inspect the trail; never resend blindly),
                2 on a usage error. No retry. VERB is one of (agents):
{agent_verbs}
                and (readers): {reader_verbs}.
    up --config FILE [--data-root D] [--browser ADDR] [--stay]
                The standalone host: boot the broker in this process,
                launch the agents the config lists ({\"business\":{...},
                \"agents\":[{role,harness,command}]}, e.g. examples/
                business.json), each with MOSAIC_RUN_ID, MOSAIC_BUS_SOCKET
                and its capability on the sealed descriptor named by
                MOSAIC_BUS_CAP_FD (never in the environment); an agent reads
                one line (\"ready\") on stdin before its first call. Writes
                the reader capability to D/reader.cap (0600, removed on
                close) and prints one JSON line: dataRoot, socket,
                readerCap, agents (role, run, harness, pid). Runs until
                SIGINT/SIGTERM or until every agent has exited (--stay:
                keep serving until a signal). Without --data-root it uses
                a new private folder under the temporary directory and
                keeps it. --browser 127.0.0.1:PORT also serves browser
                control (port 0: any free port): the line adds browser
                {url, pane, tokenFile}; the UI token is in D/ui.token
                (0600, removed on close); open <pane>?token=<it>. Exit 0;
                1 when an agent exited non-zero; 2 when it cannot start
                ({\"ok\":false,\"error\":CODE} on stdout) or close.
    mcp [--socket PATH] [--cap-file PATH]
                An MCP server on stdin/stdout for an agent harness: one tool
                per agent verb, named with underscores for dots (role_claim,
                decision_raise, ...); the human's verbs are not exposed. Each
                call is one request to the broker. The capability and the socket come as for call. A
                refusal is a tool error whose text starts with its static
                code; on outcome-unknown inspect the trail, never resend
                blindly. Exit 0 when the client closes stdin; 2 when it
                cannot start (one static code on stderr).
    human SOCKET
                The human's transport: reads {business, verb, args} from
                stdin and prints the broker's JSON answer (exit 0 ok, 1
                refused, 2 usage). It re-executes itself once with a fresh
                nonce; the broker proves from /proc that the caller is this
                binary, with that nonce and no agent among its ancestors,
                then acts as the business's configured human
                (human-proof-failed otherwise). Verbs:
{human_verbs}.
    demo [--data-root D]
                Play one exchange of the example business (examples/
                business.json: claims, a cross-role decision approved and
                spent once, a message delivered and acknowledged) against a
                real data root and SQLite store, printing JSON lines and the
                decision's trail. Without --data-root it uses a new private
                folder under the temporary directory and keeps it. Exit 2
                with one static code on stderr when it cannot run.
    unlock --data-root D
                After a broker crash (its writer.lock is left behind and a
                new broker refuses with stale-lock): prove that the broker
                recorded in D/bus/writer.lock (pid and start time) is gone,
                copy bus.sqlite, bus.sqlite-wal and bus.sqlite-shm into a new
                D/bus/evidence-<time>/, then remove only the lock and the
                socket. Prints one JSON line:
                  {\"ok\":true,\"evidence\":\"<folder>\"}   exit 0
                  {\"ok\":false,\"error\":\"<code>\"}       exit 2
                Codes: lock-held (the broker may still run: the lock is
                held, or its pid lives with the recorded start time, or
                /proc cannot tell), no-lock (there is no writer.lock),
                bad-request (bad arguments), stale-lock (the lock does not hold
                \"pid start_time\": nothing is touched; inspect it and remove
                it by hand), unsafe-path (a symlink, a foreign owner or
                unsafe permissions), storage-unavailable (the evidence could
                not be written or a removal failed). Evidence is never
                deleted.

EXIT CODES:
    0   success
    1   call: a refusal; up: an agent exited non-zero
    2   usage or startup failure; one static code on stderr (unlock: one
        JSON line on stdout)
";

/// The help, with each caller's verbs listed from the verb table.
fn help() -> String {
    let verbs = |caller| {
        let names: Vec<&str> = Verb::ALL
            .iter()
            .filter(|v| v.serves(caller))
            .map(|v| v.as_str())
            .collect();
        names.join(", ")
    };
    HELP.replace("{agent_verbs}", &indented(&verbs(CallerKind::Agent)))
        .replace("{reader_verbs}", &verbs(CallerKind::Reader))
        .replace("{human_verbs}", &indented(&verbs(CallerKind::Human)))
}

/// `text` wrapped at 76 columns, each line indented like the help's
/// descriptions.
fn indented(text: &str) -> String {
    const INDENT: &str = "                ";
    let mut lines = vec![INDENT.to_owned()];
    for word in text.split(' ') {
        let line = lines.last_mut().expect("one line at least");
        if line.len() > INDENT.len() && line.len() + 1 + word.len() > 76 {
            lines.push(format!("{INDENT}{word}"));
        } else {
            if line.len() > INDENT.len() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines.join("\n")
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().map(|a| a.to_str()) {
        None | Some(Some("help" | "--help" | "-h")) => {
            print!("{}", help());
            ExitCode::SUCCESS
        }
        Some(Some("version" | "--version" | "-V")) => {
            println!("mosaic-bus {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(Some("unlock")) => unlock(&args[1..]),
        Some(Some("demo")) => demo(&args[1..]),
        Some(Some("up")) => ExitCode::from(mosaic_app::up::run(&args[1..], &mut std::io::stdout())),
        Some(Some("human")) => {
            let (line, code) = mosaic_app::human::run(&args[1..], std::io::stdin());
            println!("{line}");
            ExitCode::from(code)
        }
        Some(Some("mcp")) => ExitCode::from(mosaic_adapters::mcp::run(&args[1..])),
        Some(Some("call")) => {
            let (line, code) = mosaic_app::call::run(&args[1..]);
            println!("{line}");
            ExitCode::from(code)
        }
        Some(Some("broker")) if args.len() == 1 => {
            let code = mosaic_app::host::run(
                std::io::BufReader::new(std::io::stdin()),
                &mut std::io::stdout().lock(),
            );
            ExitCode::from(code)
        }
        Some(Some(_) | None) => {
            eprintln!("unknown-command");
            eprint!("{}", help());
            ExitCode::from(2)
        }
    }
}

/// `unlock --data-root D`: one JSON line on stdout, exit 0 or 2.
fn unlock(args: &[OsString]) -> ExitCode {
    let outcome = data_root_arg(args).and_then(|path| {
        let root = DataRoot::open(path)?;
        fs::unlock(&root, &ProcFs::new(), SystemClock.now())
    });
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

/// `demo [--data-root D]`: JSON lines on stdout, exit 0; or a code on stderr, exit 2.
fn demo(args: &[OsString]) -> ExitCode {
    let root = if args.is_empty() {
        Ok(None)
    } else {
        data_root_arg(args).map(Some)
    };
    let mut out = std::io::stdout().lock();
    match root.and_then(|root| mosaic_app::demo::run(root, &mut out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(refusal) => {
            eprintln!("{}", refusal.code());
            ExitCode::from(2)
        }
    }
}

/// `--data-root D` or `--data-root=D`, and nothing else.
fn data_root_arg(args: &[OsString]) -> Result<PathBuf, Refusal> {
    match args {
        [flag, path] if flag == "--data-root" && !path.is_empty() => Ok(PathBuf::from(path)),
        [one] => one
            .as_bytes()
            .strip_prefix(b"--data-root=")
            .filter(|path| !path.is_empty())
            .map(|path| PathBuf::from(OsStr::from_bytes(path)))
            .ok_or(Refusal::BadRequest),
        _ => Err(Refusal::BadRequest),
    }
}
