//! Replays every fuzz target's seed corpus through the same plain function
//! the target calls, so a normal test run exercises each target.

use std::path::Path;

/// Feeds every file of `fuzz/corpus/<target>/` to `run`; returns how many.
fn replay(target: &str, run: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
    {
        let path = entry.expect("corpus entry").path();
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        run(&data);
        count += 1;
    }
    count
}

#[test]
fn parsers_corpus_replays_without_a_finding() {
    assert!(
        replay("parsers", mosaic_domain::fuzzing::parsers) >= 10,
        "the seed corpus is present"
    );
}
