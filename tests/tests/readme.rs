//! The README's tables say what the tables in the code say: every refusal
//! code with its meaning (`mosaic_domain::Refusal`), every socket verb
//! (`mosaic_domain::Verb`), and every MCP tool with its arguments (the
//! verbs agents may call, each with its argument type's keys, optional
//! ones marked `?`).

use std::collections::BTreeSet;

use mosaic_adapters::wire::VerbArgs;
use mosaic_domain::{CallerKind, Refusal, Verb};

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md")
}

/// The rows of the table whose header row is `header`, each split into
/// its cells.
#[track_caller]
fn table(readme: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = readme.lines().skip_while(|l| *l != header);
    assert_eq!(
        lines.next(),
        Some(header),
        "README.md has no table {header}"
    );
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
fn the_readme_lists_every_refusal_code() {
    let readme = readme();
    for refusal in Refusal::ALL {
        let row = format!("| `{}` |", refusal.code());
        assert!(
            readme.contains(&row),
            "README.md has no row for {}",
            refusal.code()
        );
    }
}

#[test]
fn the_refusal_table_is_the_refusal_rows() {
    let rows = table(&readme(), "| code | meaning |");
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
    let rows = table(&readme(), "| verb | args | result |");
    let listed: Vec<String> = rows.iter().flat_map(|row| names(&row[0])).collect();
    let expected: Vec<String> = Verb::ALL.iter().map(|v| v.as_str().to_owned()).collect();
    assert_eq!(listed, expected);
}

#[test]
fn the_mcp_table_lists_each_agent_verb_with_its_arguments() {
    let rows = table(&readme(), "| tool | verb | arguments |");
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
