//! `mutants/accepted.txt`, the survivors of mutation testing we accept,
//! names only code that exists: every line's file is there and defines the
//! function its mutant changes, and every line gives a reason. The mutation
//! run itself stays out of the default run (docs/contributing.md).

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The function a cargo-mutants description changes, as its last path
/// segment: `fmt` for `replace <impl Display for X>::fmt -> ... with ...`,
/// `concerns` for `replace == with != in Evidence::concerns`.
fn function(mutant: &str) -> &str {
    let path = match mutant.rsplit_once(" in ") {
        Some((_, path)) => path,
        None => {
            let rest = mutant.strip_prefix("replace ").unwrap_or(mutant);
            let end = rest.find(" -> ").or_else(|| rest.find(" with "));
            &rest[..end.unwrap_or(rest.len())]
        }
    };
    let name = path.rsplit("::").next().unwrap_or(path);
    name.split('<').next().unwrap_or(name).trim()
}

#[test]
fn the_function_named_by_a_mutant_description_is_its_last_path_segment() {
    assert_eq!(
        function("replace == with != in Evidence::concerns"),
        "concerns"
    );
    assert_eq!(
        function("replace <impl fmt::Display for OptionKey>::fmt -> fmt::Result with Ok(Default::default())"),
        "fmt"
    );
    assert_eq!(
        function("replace Journaled<K, V>::commit with ()"),
        "commit"
    );
    assert_eq!(
        function("replace days_in_month -> i64 with 1"),
        "days_in_month"
    );
    assert_eq!(
        function("delete match arm 2 in days_in_month"),
        "days_in_month"
    );
}

#[test]
fn every_accepted_survivor_names_a_function_that_exists_and_a_reason() {
    let path = root().join("mutants/accepted.txt");
    let text = std::fs::read_to_string(&path).expect("mutants/accepted.txt");
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (mutant, reason) = line
            .split_once(" -- ")
            .unwrap_or_else(|| panic!("no reason: {line}"));
        assert!(!reason.trim().is_empty(), "no reason: {line}");
        let (file, mutant) = mutant
            .split_once(": ")
            .unwrap_or_else(|| panic!("no file: {line}"));
        let source = std::fs::read_to_string(root().join(file))
            .unwrap_or_else(|e| panic!("{file}: {e} ({line})"));
        let name = function(mutant);
        assert!(
            source.contains(&format!("fn {name}(")) || source.contains(&format!("fn {name}<")),
            "{file} has no function {name}: {line}"
        );
    }
}
