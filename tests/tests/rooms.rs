//! The rooms keep their shape (ARCHITECTURE.md):
//!
//! - in no crate of the workspace does a module import itself back through
//!   any chain of its imports (a cycle of any length);
//! - the runtime (`app/src/runtime/`) never uses a command
//!   (`app/src/commands/`);
//! - no file under `app/src/` is over 900 lines, its unit tests excluded;
//! - ARCHITECTURE.md's code map names every file under `app/src/`.
//!
//! A module's imports are the modules its `use` declarations and its
//! `crate::`, `super::` and `self::` paths name, and its children's names
//! it uses as paths (`host::ABOUT`); declaring a child (`mod host;`) is not
//! an import. Comments and the unit tests' module are left out. A crate's
//! re-exports of its own children (`pub use` in `lib.rs` or a `mod.rs`)
//! are wiring, not imports, and a path through one (`crate::Refusal`) is an
//! import of the module that defines it (`refusal`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 900;

fn app_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../app/src")
}

/// The library crates of the workspace whose modules are checked for
/// cycles: each one's `src/` and the name its own code may call it by.
const CRATES: &[(&str, &str)] = &[
    ("domain", "mosaic_domain"),
    ("ports", "mosaic_ports"),
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
    files: Vec<(PathBuf, String)>,
    imports: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

/// The modules of the crate in `src` (called `name` in its own paths) and
/// the modules each imports.
fn modules_of(src: &Path, name: &str) -> App {
    let mut names = Vec::new();
    sources(src, src, &mut names);
    names.sort();
    let files: Vec<(PathBuf, String)> = names
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(src.join(&file)).expect("a source file");
            (file, text)
        })
        .collect();
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
        // A re-export of a module that is not one's own child is an import.
        let reexported = reexports
            .into_iter()
            .filter(|path| resolve(&at, path, &modules, name).is_some_and(|m| !m.starts_with(&at)));
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
            .filter(|module| module != &at)
            .collect();
        imports.insert(at, named);
    }
    App { files, imports }
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
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
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

#[test]
fn no_file_is_over_the_limit() {
    let long: Vec<String> = app()
        .files
        .iter()
        .filter(|(_, text)| counted_lines(text) > MAX_LINES)
        .map(|(file, text)| format!("{}: {}", file.display(), counted_lines(text)))
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:#?}");
}

#[test]
fn the_code_map_names_every_file() {
    let map = std::fs::read_to_string(app_src().join("../../ARCHITECTURE.md")).expect("the map");
    let unnamed: Vec<String> = app()
        .files
        .iter()
        .map(|(file, _)| file)
        .filter(|file| {
            let name = file.file_name().expect("a name").to_string_lossy();
            let folder = file
                .parent()
                .and_then(Path::file_name)
                .map(|f| f.to_string_lossy().into_owned());
            let named = map.contains(&format!("`{name}`"))
                || map.contains(&format!("{name}`"))
                || map.contains(&format!("`src/{}`", file.display()));
            let folder_named = name == "mod.rs"
                && folder.is_some_and(|f| {
                    map.contains(&format!("`{f}/`")) || map.contains(&format!("`src/{f}/`"))
                });
            !(named || folder_named)
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md does not name {unnamed:#?}"
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
