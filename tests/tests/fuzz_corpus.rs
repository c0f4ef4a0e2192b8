//! Replays every fuzz target's seed corpus through the same plain function
//! the target calls, so a normal test run exercises each target. A target's
//! function panics only when one of its invariants breaks; the panic message
//! names the invariant and the test names the corpus file.

use std::path::Path;

/// Feeds every file of `fuzz/corpus/<target>/` to `run`; returns how many.
fn replay(target: &str, run: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .collect();
    paths.sort();
    for path in &paths {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("{target}: {}", path.display());
        run(&data);
    }
    paths.len()
}

#[test]
fn parsers_corpus_replays_without_a_finding() {
    assert!(
        replay("parsers", mosaic_domain::fuzzing::parsers) >= 10,
        "the seed corpus is present"
    );
}

#[test]
fn request_line_corpus_replays_without_a_finding() {
    assert!(
        replay("request_line", mosaic_app::fuzzing::request_line) >= 20,
        "the seed corpus is present"
    );
}

#[test]
fn host_line_corpus_replays_without_a_finding() {
    assert!(
        replay("host_line", mosaic_app::fuzzing::host_line) >= 10,
        "the seed corpus is present"
    );
}

#[test]
fn config_corpus_replays_without_a_finding() {
    assert!(
        replay("config", mosaic_app::fuzzing::config) >= 10,
        "the seed corpus is present"
    );
}

#[test]
fn machines_corpus_replays_without_a_finding() {
    assert!(
        replay("machines", mosaic_domain::fuzzing::machines) >= 10,
        "the seed corpus is present"
    );
}

#[test]
fn browser_bodies_corpus_replays_without_a_finding() {
    assert!(
        replay("browser_bodies", mosaic_app::fuzzing::browser_bodies) >= 10,
        "the seed corpus is present"
    );
}
