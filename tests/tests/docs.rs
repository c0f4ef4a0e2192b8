//! The user docs say what the code says, and stay a user's docs.
//!
//! - `docs/protocol.md`'s tables: every refusal code with its meaning
//!   (`mosaic_domain::Refusal`), every socket verb (`mosaic_domain::Verb`)
//!   and who may call it (agent, reader, human: `Verb::callers`);
//! - `docs/agents.md`'s MCP table: every tool with its arguments (the verbs
//!   agents may call, each with its argument type's keys, optional ones
//!   marked `?`);
//! - the README is a front page (under 300 lines), every relative link of
//!   the README and the docs names a file that exists, and no user doc
//!   names a commit or an issue.

use std::collections::BTreeSet;

use mosaic_client::wire::args::VerbArgs;
use mosaic_domain::{CallerKind, Refusal, Verb};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A file of the repository, by its path from the root.
fn doc(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn protocol() -> String {
    doc("docs/protocol.md")
}

/// The README and every page of `docs/`, by path.
fn user_docs() -> Vec<(String, String)> {
    let mut pages = vec![("README.md".to_owned(), doc("README.md"))];
    let mut names: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".md"))
        .collect();
    names.sort();
    for name in names {
        let path = format!("docs/{name}");
        let text = doc(&path);
        pages.push((path, text));
    }
    pages
}

/// The rows of the table whose header row is `header`, each split into
/// its cells.
#[track_caller]
fn table(readme: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = readme.lines().skip_while(|l| *l != header);
    assert_eq!(lines.next(), Some(header), "no table {header}");
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            // `\|` inside a cell is not a separator.
            let row = row.replace("\\|", "\u{0}");
            row.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().replace('\u{0}', "|"))
                .collect()
        })
        .collect()
}

/// The backticked names in a cell.
fn names(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_protocol_lists_every_refusal_code() {
    let protocol = protocol();
    for refusal in Refusal::ALL {
        let row = format!("| `{}` |", refusal.code());
        assert!(
            protocol.contains(&row),
            "docs/protocol.md has no row for {}",
            refusal.code()
        );
    }
}

#[test]
fn the_refusal_table_is_the_refusal_rows() {
    let rows = table(&protocol(), "| code | meaning |");
    let mut listed = BTreeSet::new();
    for row in &rows {
        let [code, meaning] = row.as_slice() else {
            panic!("two cells: {row:?}");
        };
        let [code] = names(code).try_into().expect("one code per row");
        let refusal = Refusal::from_code(&code).unwrap_or_else(|| panic!("no refusal {code}"));
        assert_eq!(meaning, refusal.meaning(), "the meaning of {code}");
        assert!(listed.insert(code.clone()), "{code} twice");
    }
    assert_eq!(listed.len(), Refusal::ALL.len());
}

#[test]
fn the_socket_verb_table_lists_exactly_the_verbs() {
    let rows = table(&protocol(), "| verb | args | result |");
    let listed: Vec<String> = rows.iter().flat_map(|row| names(&row[0])).collect();
    let expected: Vec<String> = Verb::ALL.iter().map(|v| v.as_str().to_owned()).collect();
    assert_eq!(listed, expected);
}

#[test]
fn the_caller_table_says_who_may_call_each_verb() {
    let rows = table(&protocol(), "| verb | agent | reader | human |");
    let mut listed = Vec::new();
    for row in &rows {
        let [verb, callers @ ..] = row.as_slice() else {
            panic!("four cells: {row:?}");
        };
        let [verb] = names(verb).try_into().expect("one verb per row");
        let verb = Verb::parse(&verb).expect("a verb");
        let served = CallerKind::ALL.map(|kind| if verb.serves(kind) { "yes" } else { "no" });
        assert_eq!(callers, served, "who may call {verb}");
        listed.push(verb);
    }
    assert_eq!(listed, Verb::ALL);
}

#[test]
fn the_mcp_table_lists_each_agent_verb_with_its_arguments() {
    let rows = table(&doc("docs/agents.md"), "| tool | verb | arguments |");
    let mut listed = Vec::new();
    for row in &rows {
        let [tools, verb, arguments] = row.as_slice() else {
            panic!("three cells: {row:?}");
        };
        for tool in names(tools) {
            let verb = match names(verb).as_slice() {
                [verb] => Verb::parse(verb).expect("a verb"),
                // `inbox`, `tasks`, `agents`: "the same".
                _ => Verb::parse(&tool).expect("a verb named like its tool"),
            };
            assert_eq!(tool, verb.as_str().replace('.', "_"), "{tool}");
            let schema = verb.input_schema().to_value();
            let required = |key: &str| {
                schema["required"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|k| k == key))
            };
            let expected: Vec<String> = verb
                .arg_keys()
                .iter()
                .map(|&key| {
                    if required(key) {
                        key.to_owned()
                    } else {
                        format!("{key}?")
                    }
                })
                .collect();
            let expected = if expected.is_empty() {
                "none".to_owned()
            } else {
                format!("`{}`", expected.join(", "))
            };
            // The browser row goes on with each action's parameters.
            let given = arguments.split(':').next().unwrap_or_default();
            assert_eq!(given, expected, "the arguments of {tool}");
            listed.push(verb);
        }
    }
    let agents: Vec<Verb> = Verb::ALL
        .iter()
        .copied()
        .filter(|v| v.serves(CallerKind::Agent))
        .collect();
    assert_eq!(listed, agents);
}

#[test]
fn the_readme_is_a_front_page() {
    let lines = doc("README.md").lines().count();
    assert!(lines < 300, "README.md has {lines} lines");
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_relative_link_names_a_file_that_exists() {
    let mut checked = 0;
    for (path, text) in user_docs() {
        let dir = root().join(path.rsplit_once('/').map_or("", |(dir, _)| dir));
        for link in links(&text) {
            if link.starts_with("http") || link.starts_with('#') {
                continue;
            }
            let file = link.split('#').next().unwrap_or_default();
            assert!(
                dir.join(file).exists(),
                "{path} links to {link}, which is not there"
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} links");
}

/// Whether `word` looks like a commit: 7 to 40 hex digits with a digit
/// and a letter.
fn is_commit(word: &str) -> bool {
    (7..=40).contains(&word.len())
        && word
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && word.bytes().any(|b| b.is_ascii_digit())
        && word.bytes().any(|b| b.is_ascii_alphabetic())
}

#[test]
fn no_user_doc_names_a_commit_or_an_issue() {
    for (path, text) in user_docs() {
        for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
            assert!(!is_commit(word), "{path} names commit {word}");
        }
        let lower = text.to_lowercase();
        for (at, _) in lower.match_indices("issue ") {
            let next = lower[at + 6..].chars().next().unwrap_or(' ');
            assert!(
                !next.is_ascii_digit(),
                "{path} names an issue: {}",
                &text[at..(at + 12).min(text.len())]
            );
        }
    }
    assert!(is_commit("d88883e") && !is_commit("0123456") && !is_commit("deadbeef"));
}
