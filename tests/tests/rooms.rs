//! The rooms keep their shape (ARCHITECTURE.md):
//!
//! - in no crate of the workspace does a module import itself back through
//!   any chain of its imports (a cycle of any length);
//! - the runtime (`app/src/runtime/`) never uses a command
//!   (`app/src/commands/`);
//! - a command's room (`app/src/commands/X`) imports another command's room
//!   only when that one is a named shared room ([`SHARED_ROOMS`]);
//! - the client crate links no part of the broker ([`NOT_IN_THE_CLIENT`]);
//! - no file under a crate's `src/` is over 900 lines, its unit tests
//!   excluded, but the ones [`LONG_FILES`] names with their reason;
//! - every file under a crate's `src/` is named by ARCHITECTURE.md's map or
//!   by its room's module doc (its parent module's `//!`), and the map is at
//!   most 400 lines.
//!
//! A module's imports are the modules its `use` declarations and its
//! `crate::`, `super::` and `self::` paths name, and its children's names
//! it uses as paths (`host::ABOUT`); declaring a child (`mod host;`) is not
//! an import. Comments and the unit tests' module are left out. A crate's
//! re-exports of its own children (`pub use` in `lib.rs` or a `mod.rs`)
//! are wiring, not imports, and a path through one (`crate::Refusal`) is an
//! import of the module that defines it (`refusal`). A re-export of
//! another module's item (`pub use super::up::Allow`) is an import of the
//! module it names (`up`), as well as of the one that defines the item: a
//! re-exporter cannot be built without the module it re-exports from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 900;

/// The files over [`MAX_LINES`], each by its path from the workspace and
/// why it stays whole. Every one must still be over the cap: an entry that
/// is no longer needed goes.
const LONG_FILES: &[(&str, &str)] = &[
    (
        "domain/src/evidence.rs",
        "the evidence model: every record's type and the one `evidence_kinds!` table \
         the store's kind lists and decoding derive from, read together",
    ),
    (
        "domain/src/fuzzing.rs",
        "fuzz support, not product code: the generators of every machine's inputs \
         beside the invariants they check",
    ),
];

/// The rooms of `app/src/commands/` that any other command's room may
/// import, each with what it is shared for. Any other import between two
/// commands' rooms is refused, so that no two commands grow into each
/// other (a re-export of one command's type by another grows into a cycle
/// as soon as the first imports anything back).
const SHARED_ROOMS: &[(&str, &str)] = &[
    ("args", "what the subcommands share on their command lines"),
    (
        "signals",
        "SIGTERM, SIGINT and SIGCHLD as events, written once",
    ),
    ("logs", "the log subscriber, installed once"),
    (
        "team",
        "the configuration room: the team file `up` launches and `demo` plays",
    ),
    (
        "human",
        "the human's proven transport, which the human CLI and the console both speak",
    ),
    (
        "verify",
        "the verification's answer line, which `verify` and `backup` both print",
    ),
];

/// The packages the client crate must not link, directly or through any
/// other: the store, the HTTP server, `/proc`, and the broker's own crates.
const NOT_IN_THE_CLIENT: &[&str] = &[
    "rusqlite",
    "axum",
    "hyper",
    "hyper-util",
    "procfs",
    "mosaic-adapters",
    "mosaic-ports",
    "mosaic-app",
];

fn app_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../app/src")
}

/// The library crates of the workspace whose modules are checked for
/// cycles and lengths: each one's `src/` and the name its own code may
/// call it by.
const CRATES: &[(&str, &str)] = &[
    ("domain", "mosaic_domain"),
    ("ports", "mosaic_ports"),
    ("client", "mosaic_client"),
    ("adapters", "mosaic_adapters"),
    ("app", "mosaic_app"),
    ("bench", "mosaic_bench"),
    ("tests", "mosaic_tests"),
];

/// Every `.rs` file under `dir`, by its path from `base`.
fn sources(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(base, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(base).expect("under the base").into());
        }
    }
}

/// The module a file is: `lib.rs` is the library's root; `main.rs`, the
/// binary's, stands apart as `main`.
fn module_of(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] {
        parts.clear();
    }
    parts
}

/// The text of a file without its comments and its unit tests' module.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines a file counts: all but its unit tests' module.
fn counted_lines(text: &str) -> usize {
    match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => text[..at].lines().count(),
        None => text.lines().count(),
    }
}

/// Every path a module's code names, as segments: `use` trees expanded
/// (`a::{b, c::d}` gives `a::b` and `a::c::d`) and paths in expressions.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        expand(&rest[..end].replace(char::is_whitespace, ""), &mut found);
        rest = &rest[end..];
    }
    // `a::b` anywhere: the first segment decides whether it is ours.
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_alphabetic() || bytes[i] == '_' {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_alphanumeric() || bytes[i] == '_' || bytes[i] == ':')
            {
                i += 1;
            }
            let word: String = bytes[start..i].iter().collect();
            // A word that ends in `::` opens a `use` tree, read above.
            let path = word.contains("::") && !word.ends_with("::");
            if path && (start == 0 || !matches!(bytes[start - 1], ':' | '.')) {
                found.push(
                    word.split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect(),
                );
            }
        } else {
            i += 1;
        }
    }
    found
}

/// Expands one `use` tree into its paths.
fn expand(tree: &str, out: &mut Vec<Vec<String>>) {
    match tree.find('{') {
        // A plain path.
        None => {
            let path = tree.split(" as ").next().unwrap_or(tree);
            out.push(
                path.split("::")
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            );
        }
        // `prefix::{a, b::{c}}`: each item at depth 0, after the prefix.
        Some(open) => {
            let prefix = &tree[..open];
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&format!("{prefix}{}", &inner[start..i]), out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            if start < inner.len() {
                expand(&format!("{prefix}{}", &inner[start..]), out);
            }
        }
    }
}

/// The module a path names, from module `at`: the longest prefix that is
/// one of `modules`, if the path is the crate's own.
fn resolve(
    at: &[String],
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
    name: &str,
) -> Option<Vec<String>> {
    let (mut base, mut rest) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some(first) if first == name => (Vec::new(), &path[1..]),
        Some("self") => (at.to_vec(), &path[1..]),
        Some("super") => {
            let mut base = at.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            (base, rest)
        }
        Some(first) => {
            let mut child = at.to_vec();
            child.push(first.to_owned());
            if !modules.contains(&child) {
                return None;
            }
            (at.to_vec(), path)
        }
        None => return None,
    };
    let mut best = None;
    loop {
        if modules.contains(&base) {
            best = Some(base.clone());
        }
        let Some((next, tail)) = rest.split_first() else {
            break;
        };
        base.push(next.clone());
        rest = tail;
    }
    best
}

struct App {
    imports: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

/// Every `.rs` file under `src`, by its path from `src`, and its text.
fn files_of(src: &Path) -> Vec<(PathBuf, String)> {
    let mut names = Vec::new();
    sources(src, src, &mut names);
    names.sort();
    names
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(src.join(&file)).expect("a source file");
            (file, text)
        })
        .collect()
}

/// The modules of the crate in `src` (called `name` in its own paths) and
/// the modules each imports.
fn modules_of(src: &Path, name: &str) -> App {
    let files = files_of(src);
    // `main.rs` and `bin/` are crates of their own: their paths into the
    // library start with its name, which `resolve` reads as its root.
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(f, _)| module_of(f)).collect();
    // What each module re-exports of its own children (`pub use`): a name,
    // and the module that defines it. Re-exporting is wiring, not an import.
    let mut exported: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
    for (file, text) in &files {
        let at = module_of(file);
        let (reexports, _) = split_reexports(&code(text));
        for path in reexports {
            let module = resolve(&at, &path, &modules, name);
            if let (Some(module), Some(last)) = (module, path.last()) {
                if module.starts_with(&at) && module != at {
                    exported.insert((at.clone(), last.clone()), module);
                }
            }
        }
    }
    let mut imports = BTreeMap::new();
    for (file, text) in &files {
        let at = module_of(file);
        let (reexports, rest) = split_reexports(&code(text));
        // A re-export of a module that is not one's own child is an import:
        // of the module it names, and (below) of the one behind it.
        let reexported: Vec<Vec<String>> = reexports
            .into_iter()
            .filter(|path| resolve(&at, path, &modules, name).is_some_and(|m| !m.starts_with(&at)))
            .collect();
        let offering: Vec<Vec<String>> = reexported
            .iter()
            .filter_map(|path| resolve(&at, path, &modules, name))
            .collect();
        let named: BTreeSet<Vec<String>> = paths(&rest)
            .into_iter()
            .chain(reexported)
            .collect::<Vec<_>>()
            .iter()
            .filter_map(|path| {
                let mut module = resolve(&at, path, &modules, name)?;
                // `crate::Refusal`, `super::Fake`: the module behind the
                // re-export, as far as re-exports go.
                let item: Vec<&String> = path
                    .iter()
                    .skip_while(|s| matches!(s.as_str(), "crate" | "self" | "super") || *s == name)
                    .collect();
                let after = module.len().checked_sub(prefix_depth(&at, path, name));
                if let Some(next) = after.and_then(|k| item.get(k)) {
                    while let Some(defined) = exported.get(&(module.clone(), (*next).clone())) {
                        module = defined.clone();
                    }
                }
                Some(module)
            })
            .chain(offering)
            .filter(|module| module != &at)
            .collect();
        imports.insert(at, named);
    }
    App { imports }
}

fn app() -> App {
    modules_of(&app_src(), "mosaic_app")
}

/// A module's `pub use` paths (expanded), and its code without them.
fn split_reexports(code: &str) -> (Vec<Vec<String>>, String) {
    let mut reexports = Vec::new();
    let mut rest = String::new();
    let mut text = code;
    while let Some(at) = text.find("pub use ") {
        rest.push_str(&text[..at]);
        let after = &text[at + "pub use ".len()..];
        let end = after.find(';').unwrap_or(after.len());
        expand(
            &after[..end].replace(char::is_whitespace, ""),
            &mut reexports,
        );
        text = after.get(end + 1..).unwrap_or("");
    }
    rest.push_str(text);
    (reexports, rest)
}

/// How deep the module a path starts from is: the crate's root for
/// `crate::` and the crate's name, `at`'s parent for each `super::`, `at`
/// for `self::` and a child's name.
fn prefix_depth(at: &[String], path: &[String], name: &str) -> usize {
    match path.first().map(String::as_str) {
        Some("crate") => 0,
        Some(first) if first == name => 0,
        Some("super") => at
            .len()
            .saturating_sub(path.iter().take_while(|s| *s == "super").count()),
        Some(_) | None => at.len(),
    }
}

/// A cycle among `imports`, if there is one: each module of it in turn,
/// the first again at the end.
fn a_cycle(imports: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    // Depth first, in order: a module met again while still on the path
    // closes a cycle.
    fn visit(
        at: &Vec<String>,
        imports: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| m == at) {
            let mut cycle: Vec<String> = path[start..].iter().map(|m| m.join("::")).collect();
            cycle.push(at.join("::"));
            return Some(cycle);
        }
        if !done.insert(at.clone()) {
            return None;
        }
        path.push(at.clone());
        for next in imports.get(at).into_iter().flatten() {
            if let Some(cycle) = visit(next, imports, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    imports
        .keys()
        .find_map(|module| visit(module, imports, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_of_any_crate_imports_itself_back() {
    let workspace = workspace();
    let mut cycles = Vec::new();
    for &(folder, name) in CRATES {
        let crate_ = modules_of(&workspace.join(folder).join("src"), name);
        assert!(
            crate_.imports.values().any(|named| !named.is_empty()),
            "{folder}: the check sees its imports"
        );
        if let Some(cycle) = a_cycle(&crate_.imports) {
            cycles.push(format!("{folder}: {}", cycle.join(" -> ")));
        }
    }
    assert!(cycles.is_empty(), "{cycles:#?}");
    // The check sees an import (the bus drives the authority machine), a
    // re-export of another module (`pub use crate::caller::Caller`) and a
    // path through the root's re-export (`crate::Refusal`).
    let domain = modules_of(&workspace.join("domain").join("src"), "mosaic_domain");
    let bus = domain.imports.get(&vec!["bus".to_owned()]).expect("bus");
    assert!(bus.contains(&vec!["authority".to_owned()]), "{bus:?}");
    assert!(bus.contains(&vec!["caller".to_owned()]), "{bus:?}");
    assert!(bus.contains(&vec!["refusal".to_owned()]), "{bus:?}");
}

#[test]
fn the_cycle_search_finds_a_long_cycle_and_only_one() {
    let module = |name: &str| vec![name.to_owned()];
    let mut imports = BTreeMap::new();
    imports.insert(module("a"), BTreeSet::from([module("b")]));
    imports.insert(module("b"), BTreeSet::from([module("c"), module("d")]));
    imports.insert(module("c"), BTreeSet::new());
    imports.insert(module("d"), BTreeSet::from([module("c")]));
    assert_eq!(a_cycle(&imports), None);
    imports.insert(module("c"), BTreeSet::from([module("a")]));
    assert_eq!(
        a_cycle(&imports),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn the_runtime_never_uses_a_command() {
    let app = app();
    let mut used = Vec::new();
    for (a, named) in &app.imports {
        if a.first().is_some_and(|m| m == "runtime") {
            used.extend(
                named
                    .iter()
                    .filter(|b| b.first().is_some_and(|m| m == "commands"))
                    .map(|b| format!("{} -> {}", a.join("::"), b.join("::"))),
            );
        }
    }
    assert!(used.is_empty(), "{used:#?}");
    let up = app
        .imports
        .get(&vec!["commands".to_owned(), "up".to_owned()])
        .expect("up");
    assert!(
        up.iter().any(|m| m.first().is_some_and(|m| m == "runtime")),
        "commands use the runtime"
    );
}

/// The workspace's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The folders of the workspace's members, as its `Cargo.toml` lists them.
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).expect("Cargo.toml");
    let list = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("a members list");
    list.split(',')
        .map(|member| member.trim().trim_matches('"').to_owned())
        .filter(|member| !member.is_empty())
        .collect()
}

/// Whether `file` holds unit tests only: `tests.rs`, `tests_*.rs` or
/// `*_tests.rs`, which its module declares under `#[cfg(test)]`.
fn is_unit_tests(file: &Path) -> bool {
    file.file_stem()
        .and_then(|stem| stem.to_str())
        .is_some_and(|stem| {
            stem == "tests" || stem.starts_with("tests_") || stem.ends_with("_tests")
        })
}

/// The files over the cap among `files` (paths from the workspace, and
/// text), unit tests left out, each with its count.
fn over_the_cap(files: &[(String, String)]) -> Vec<(String, usize)> {
    files
        .iter()
        .filter(|(file, _)| !is_unit_tests(Path::new(file)))
        .map(|(file, text)| (file.clone(), counted_lines(text)))
        .filter(|&(_, lines)| lines > MAX_LINES)
        .collect()
}

#[test]
fn no_file_of_any_crate_is_over_the_limit_but_the_named_ones() {
    let mut files = Vec::new();
    for member in members() {
        let src = workspace().join(&member).join("src");
        for (file, text) in files_of(&src) {
            files.push((format!("{member}/src/{}", file.display()), text));
        }
    }
    assert!(
        files.iter().any(|(f, _)| f.starts_with("client/src/")),
        "every member is walked"
    );
    let over = over_the_cap(&files);
    let unnamed: Vec<String> = over
        .iter()
        .filter(|(file, _)| LONG_FILES.iter().all(|(named, _)| named != file))
        .map(|(file, lines)| format!("{file}: {lines}"))
        .collect();
    assert!(unnamed.is_empty(), "over {MAX_LINES} lines: {unnamed:#?}");
    for (named, why) in LONG_FILES {
        assert!(!why.is_empty());
        assert!(
            over.iter().any(|(file, _)| file == named),
            "{named} is named as long, but is no longer over {MAX_LINES} lines"
        );
    }
}

#[test]
fn the_line_cap_counts_code_and_leaves_unit_tests_out() {
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    let short = "fn f() {}\n".repeat(MAX_LINES);
    let with_tests = format!("{short}#[cfg(test)]\nmod tests {{\n{long}}}\n");
    let files = [
        ("a/src/long.rs".to_owned(), long.clone()),
        ("a/src/short.rs".to_owned(), short),
        ("a/src/with_tests.rs".to_owned(), with_tests),
        ("a/src/plan_tests.rs".to_owned(), long.clone()),
        ("a/src/tests_screen.rs".to_owned(), long.clone()),
        ("a/src/x/tests.rs".to_owned(), long),
    ];
    assert_eq!(
        over_the_cap(&files),
        [("a/src/long.rs".to_owned(), MAX_LINES + 1)]
    );
}

/// Writes `files` (paths and texts) under `dir`.
fn write_tree(dir: &Path, files: &[(&str, &str)]) {
    for (file, text) in files {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("the folder");
        std::fs::write(path, text).expect("the file");
    }
}

/// A small crate whose module `a` re-exports an item of its sibling `b`,
/// which imports `a` back: the shape the configuration's room and `up`
/// once had (`pub use super::up::Allow` beside `up`'s
/// `use super::team::AgentSpec`), with the item defined below `b`.
#[test]
fn a_sibling_re_export_that_closes_a_cycle_is_found() {
    let dir = tempfile::tempdir().expect("a folder");
    let lib = "mod a;\nmod b;\n";
    write_tree(
        dir.path(),
        &[
            ("lib.rs", lib),
            ("a.rs", "pub use super::b::Thing;\npub struct Spec;\n"),
            (
                "b/mod.rs",
                "mod inner;\npub use inner::Thing;\nuse super::a::Spec;\n",
            ),
            ("b/inner.rs", "pub struct Thing;\n"),
        ],
    );
    let crate_ = modules_of(dir.path(), "synthetic");
    let module = |path: &[&str]| path.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let a = crate_.imports.get(&module(&["a"])).expect("a");
    assert!(a.contains(&module(&["b"])), "{a:?}");
    assert!(a.contains(&module(&["b", "inner"])), "{a:?}");
    assert_eq!(
        a_cycle(&crate_.imports),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    // Without the re-export, `b` importing `a` is no cycle.
    write_tree(dir.path(), &[("a.rs", "pub struct Spec;\n")]);
    assert_eq!(a_cycle(&modules_of(dir.path(), "synthetic").imports), None);
    // Re-exporting one's own child is wiring, not an import.
    write_tree(
        dir.path(),
        &[
            ("a.rs", "mod own;\npub use own::Thing;\npub struct Spec;\n"),
            ("a/own.rs", "pub struct Thing;\n"),
        ],
    );
    let crate_ = modules_of(dir.path(), "synthetic");
    assert_eq!(a_cycle(&crate_.imports), None);
    assert!(!crate_.imports[&module(&["a"])].contains(&module(&["b"])));
}

/// Each import from one command's room into another's that is not a
/// shared room: `from -> to`.
fn crossings(
    imports: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    shared: &[&str],
) -> Vec<String> {
    fn room(module: &[String]) -> Option<&str> {
        match module {
            [commands, room, ..] if commands == "commands" => Some(room),
            _ => None,
        }
    }
    let mut found = Vec::new();
    for (from, named) in imports {
        let Some(from_room) = room(from) else {
            continue;
        };
        for to in named {
            match room(to) {
                Some(to_room) if to_room != from_room && !shared.contains(&to_room) => {
                    found.push(format!("{} -> {}", from.join("::"), to.join("::")));
                }
                Some(_) | None => {}
            }
        }
    }
    found
}

#[test]
fn a_command_room_imports_another_only_through_a_shared_room() {
    let shared: Vec<&str> = SHARED_ROOMS.iter().map(|(room, _)| *room).collect();
    let app = app();
    let crossing = crossings(&app.imports, &shared);
    assert!(crossing.is_empty(), "{crossing:#?}");
    for (room, why) in SHARED_ROOMS {
        assert!(!why.is_empty());
        assert!(
            app.imports
                .keys()
                .any(|m| m.len() >= 2 && m[0] == "commands" && m[1] == *room),
            "{room} is a room of the commands"
        );
    }
    // The check sees a crossing into a shared room: `up` reads the
    // configuration.
    let commands = |path: &[&str]| {
        std::iter::once("commands")
            .chain(path.iter().copied())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert!(
        app.imports[&commands(&["up"])].contains(&commands(&["team"])),
        "up imports the configuration room"
    );
    // And refuses one into a room that is not shared.
    let mut imports = BTreeMap::new();
    imports.insert(
        commands(&["team"]),
        BTreeSet::from([commands(&["up", "sandbox", "proxy"])]),
    );
    imports.insert(commands(&["up"]), BTreeSet::from([commands(&["team"])]));
    assert_eq!(
        crossings(&imports, &["team"]),
        ["commands::team -> commands::up::sandbox::proxy"]
    );
}

/// The packages `root` links in `lock` (a `Cargo.lock`), itself included:
/// every dependency of every version of each package met, so a package
/// any of them could bring in is among them.
fn linked(lock: &str, root: &str) -> BTreeSet<String> {
    let mut dependencies: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let name = package
            .lines()
            .find_map(|line| line.strip_prefix("name = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .expect("a package's name");
        let listed = package
            .split_once("dependencies = [")
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(list, _)| list)
            .unwrap_or_default();
        dependencies.entry(name.to_owned()).or_default().extend(
            listed
                .split(',')
                .map(|entry| entry.trim().trim_matches('"'))
                .filter(|entry| !entry.is_empty())
                .filter_map(|entry| entry.split(' ').next())
                .map(str::to_owned),
        );
    }
    let mut seen = BTreeSet::new();
    let mut next = vec![root.to_owned()];
    while let Some(package) = next.pop() {
        if seen.insert(package.clone()) {
            next.extend(dependencies.get(&package).into_iter().flatten().cloned());
        }
    }
    seen
}

#[test]
fn the_client_links_no_part_of_the_broker() {
    let lock = std::fs::read_to_string(workspace().join("Cargo.lock")).expect("Cargo.lock");
    let client = linked(&lock, "mosaic-client");
    assert!(client.contains("serde_json") && client.contains("mosaic-domain"));
    let found: Vec<&&str> = NOT_IN_THE_CLIENT
        .iter()
        .filter(|package| client.contains(**package))
        .collect();
    assert!(found.is_empty(), "mosaic-client links {found:?}");
    // The walk sees what the broker links.
    let adapters = linked(&lock, "mosaic-adapters");
    assert!(["rusqlite", "axum", "procfs", "mosaic-client"]
        .iter()
        .all(|package| adapters.contains(*package)));
}

#[test]
fn the_lock_walk_follows_every_version_of_a_dependency() {
    let lock = r#"
[[package]]
name = "top"
version = "0.1.0"
dependencies = [
 "mid 1.0.0",
 "leaf",
]

[[package]]
name = "mid"
version = "1.0.0"

[[package]]
name = "mid"
version = "2.0.0"
dependencies = [
 "deep",
]

[[package]]
name = "leaf"
version = "0.1.0"

[[package]]
name = "deep"
version = "0.1.0"

[[package]]
name = "apart"
version = "0.1.0"
"#;
    assert_eq!(
        linked(lock, "top"),
        BTreeSet::from(["top", "mid", "leaf", "deep"].map(str::to_owned))
    );
}

/// The crates whose every file under `src/` the map or its room's module
/// doc must name, by their folder from the workspace.
const NAMED_CRATES: &[&str] = &[
    "domain", "ports", "client", "adapters", "schema", "app", "bench", "tests",
];

/// The most lines ARCHITECTURE.md may have: a map, not a second copy of
/// the module docs.
const MAP_LINES: usize = 400;

/// The `//!` doc of a file's text.
fn module_doc(text: &str) -> String {
    text.lines()
        .map(str::trim_start)
        .filter_map(|line| line.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The texts of the module docs that may name `file` (a path from its
/// crate's `src/`): its parent module's (`a/b.rs` or `a/b/mod.rs` for
/// `a/b/c.rs`, `a.rs` or `a/mod.rs` for `a/b/mod.rs`), else the crate
/// root's (`lib.rs` and `main.rs`, for a top file or one under `bin/`).
fn parent_docs(file: &Path, texts: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let module = if file.file_name().is_some_and(|n| n == "mod.rs") {
        file.parent()
    } else {
        Some(file)
    };
    let parent = module.and_then(Path::parent).unwrap_or(Path::new(""));
    let candidates: Vec<PathBuf> = if parent.as_os_str().is_empty() {
        vec![]
    } else {
        vec![parent.with_extension("rs"), parent.join("mod.rs")]
    };
    let found: Vec<String> = candidates
        .iter()
        .filter(|c| c.as_path() != file)
        .filter_map(|c| texts.get(c))
        .map(|text| module_doc(text))
        .collect();
    if !found.is_empty() {
        return found;
    }
    ["lib.rs", "main.rs"]
        .iter()
        .map(Path::new)
        .filter(|root| *root != file)
        .filter_map(|root| texts.get(root))
        .map(|text| module_doc(text))
        .collect()
}

/// The part of the map about the crate in `crate_dir`: from its heading
/// (`` ### `domain/` ``) to the next heading of its level or above.
fn section<'m>(map: &'m str, crate_dir: &str) -> &'m str {
    let heading = format!("### `{crate_dir}/`");
    let Some(start) = map.find(&heading) else {
        return "";
    };
    let rest = &map[start + heading.len()..];
    let end = ["\n### ", "\n## "]
        .iter()
        .filter_map(|next| rest.find(next))
        .min()
        .unwrap_or(rest.len());
    &rest[..end]
}

/// Whether `file` (a path from `crate_dir/src/`) is named by the map or by
/// one of the module docs that may name it. The map names a file by its
/// whole path from the workspace anywhere, or in its crate's section by
/// its name or a path that ends it (`` `reads.rs` ``, `` `rows/ends.rs` ``),
/// a folder's `mod.rs` by the folder (`` `src/runtime/` ``), and a crate's
/// root by the section itself. A module doc names it as the map does, or by
/// its module's name (`` `reads` ``, [`reads`], `` `reads::View` ``). The
/// names every folder has (`mod.rs`, `lib.rs`, `main.rs`) alone name
/// nothing.
fn is_named(crate_dir: &str, file: &Path, map: &str, docs: &[String]) -> bool {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let folder = file
        .parent()
        .and_then(Path::file_name)
        .map(|f| f.to_string_lossy().into_owned());
    let generic = matches!(name.as_str(), "mod.rs" | "lib.rs" | "main.rs");
    let in_code = |text: &str, word: &str| {
        text.contains(&format!("`{word}`")) || text.contains(&format!("/{word}`"))
    };
    let own = section(map, crate_dir);
    let root = file.parent().is_some_and(|p| p.as_os_str().is_empty()) && generic;
    let by_map = map.contains(&format!("`{crate_dir}/src/{}`", file.display()))
        || (!generic && in_code(own, &name))
        || (root && !own.is_empty())
        || (name == "mod.rs"
            && folder
                .as_ref()
                .is_some_and(|f| in_code(own, &format!("{f}/"))));
    let stem = if name == "mod.rs" {
        folder.clone().unwrap_or_default()
    } else {
        name.trim_end_matches(".rs").to_owned()
    };
    let by_doc = !root
        && docs.iter().any(|doc| {
            (!generic && in_code(doc, &name))
                || doc.contains(&format!("`{stem}`"))
                || doc.contains(&format!("`{stem}::"))
                || doc.contains(&format!("`{stem}/"))
                || in_code(doc, &format!("{stem}/"))
        });
    by_map || by_doc
}

/// The files of `crate_dir/src/` that neither the map nor their room's
/// module doc names.
fn unnamed_in(crate_dir: &str, map: &str) -> Vec<String> {
    let src = workspace().join(crate_dir).join("src");
    let texts: BTreeMap<PathBuf, String> = files_of(&src).into_iter().collect();
    texts
        .keys()
        .filter(|file| !is_named(crate_dir, file, map, &parent_docs(file, &texts)))
        .map(|file| format!("{crate_dir}/src/{}", file.display()))
        .collect()
}

#[test]
fn every_file_is_named_by_the_map_or_its_rooms_module_doc() {
    let map = std::fs::read_to_string(workspace().join("ARCHITECTURE.md")).expect("the map");
    let unnamed: Vec<String> = NAMED_CRATES
        .iter()
        .flat_map(|crate_dir| unnamed_in(crate_dir, &map))
        .collect();
    assert!(
        unnamed.is_empty(),
        "neither ARCHITECTURE.md nor their room's module doc names {unnamed:#?}"
    );
}

#[test]
fn a_file_is_named_by_the_map_or_by_its_parents_doc_only() {
    let texts: BTreeMap<PathBuf, String> = [
        ("lib.rs", "//! The crate: [`store`] and `rows/`.\n"),
        ("store.rs", "//! The store.\n"),
        ("rows/mod.rs", "//! Rows: `ends.rs`.\n"),
        ("rows/ends.rs", "//! Ends.\n"),
        ("rows/grants.rs", "//! Grants; `store` is elsewhere.\n"),
        ("other.rs", "//! Names `grants`.\n"),
    ]
    .into_iter()
    .map(|(file, text)| (PathBuf::from(file), text.to_owned()))
    .collect();
    let named = |file: &str, map: &str| {
        let file = Path::new(file);
        is_named("kit", file, map, &parent_docs(file, &texts))
    };
    // The root by the crate's folder in the map; the others by their
    // parent's doc.
    assert!(named("lib.rs", "### `kit/` — the kit\n"));
    assert!(!named("lib.rs", "### `other/` — `kit/`\n"));
    assert!(named("store.rs", ""));
    assert!(named("rows/mod.rs", ""));
    assert!(named("rows/ends.rs", ""));
    // `grants` is named only by a module that is not its parent.
    assert!(!named("rows/grants.rs", ""));
    assert!(named(
        "rows/grants.rs",
        "### `kit/`\n- `grants.rs`: the grants."
    ));
    assert!(named("rows/grants.rs", "`kit/src/rows/grants.rs`"));
    // Named in another crate's section only: not named.
    assert!(!named(
        "rows/grants.rs",
        "### `kit/`\n- `ends.rs`\n### `other/`\n- `grants.rs`"
    ));
    assert!(!named("other.rs", "the other file"));
}

#[test]
fn the_map_is_short() {
    let map = std::fs::read_to_string(workspace().join("ARCHITECTURE.md")).expect("the map");
    let lines = map.lines().count();
    assert!(
        lines <= MAP_LINES,
        "ARCHITECTURE.md has {lines} lines, over {MAP_LINES}"
    );
}

#[test]
fn the_import_reader_sees_use_trees_and_paths() {
    let mut found = Vec::new();
    expand("super::{a, b::{c, d}}", &mut found);
    assert_eq!(
        found,
        [
            vec!["super", "a"],
            vec!["super", "b", "c"],
            vec!["super", "b", "d"]
        ]
    );
    let named = paths("let x = host::ABOUT; use crate::runtime::{Broker, boot};");
    assert!(named.contains(&vec!["host".to_owned(), "ABOUT".to_owned()]));
    assert!(named.contains(&vec![
        "crate".to_owned(),
        "runtime".to_owned(),
        "boot".to_owned()
    ]));
}
