//! The app's rooms keep their shape (ARCHITECTURE.md, `app/`):
//!
//! - no file under `app/src/` imports a module that imports it back;
//! - the runtime (`app/src/runtime/`) never uses a command
//!   (`app/src/commands/`);
//! - no file under `app/src/` is over 900 lines, its unit tests excluded;
//! - ARCHITECTURE.md's code map names every file under `app/src/`.
//!
//! A module's imports are the modules its `use` declarations and its
//! `crate::`, `super::` and `self::` paths name, and its children's names
//! it uses as paths (`host::ABOUT`); declaring a child (`mod host;`) is not
//! an import. Comments and the unit tests' module are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 900;

fn app_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../app/src")
}

/// Every `.rs` file under `dir`, by its path from `app/src`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(app_src()).expect("under app/src").into());
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
fn resolve(at: &[String], path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let (mut base, mut rest) = match path.first().map(String::as_str) {
        Some("crate" | "mosaic_app") => (Vec::new(), &path[1..]),
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

fn app() -> App {
    let mut names = Vec::new();
    sources(&app_src(), &mut names);
    names.sort();
    let files: Vec<(PathBuf, String)> = names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(app_src().join(&name)).expect("a source file");
            (name, text)
        })
        .collect();
    // `main.rs` is its own crate: its paths into the library start with
    // `mosaic_app`, which `resolve` reads as the library's root.
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(f, _)| module_of(f)).collect();
    let mut imports = BTreeMap::new();
    for (file, text) in &files {
        let at = module_of(file);
        let named: BTreeSet<Vec<String>> = paths(&code(text))
            .iter()
            .filter_map(|path| resolve(&at, path, &modules))
            .filter(|module| module != &at)
            .collect();
        imports.insert(at, named);
    }
    App { files, imports }
}

#[test]
fn no_file_imports_a_module_that_imports_it_back() {
    let app = app();
    let mut both_ways = Vec::new();
    for (a, named) in &app.imports {
        for b in named {
            if a < b && app.imports.get(b).is_some_and(|back| back.contains(a)) {
                both_ways.push(format!("{} <-> {}", a.join("::"), b.join("::")));
            }
        }
    }
    assert!(both_ways.is_empty(), "{both_ways:#?}");
    // The check can see an import: the runtime's root uses its rooms.
    let runtime = app
        .imports
        .get(&vec!["runtime".to_owned()])
        .expect("runtime");
    assert!(runtime.contains(&vec!["runtime".to_owned(), "boot".to_owned()]));
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
        up.contains(&vec!["runtime".to_owned()]),
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
