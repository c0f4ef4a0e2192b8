//! The README documents every refusal code the broker can answer.

#[test]
fn the_readme_lists_every_refusal_code() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    for refusal in mosaic_domain::Refusal::ALL {
        let row = format!("| `{}` |", refusal.code());
        assert!(
            readme.contains(&row),
            "README.md has no row for {}",
            refusal.code()
        );
    }
}
