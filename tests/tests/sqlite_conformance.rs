//! The SQLite store passes the same store conformance suite as the fake.

use mosaic_tests::sqlite::TempSqlite;
use mosaic_tests::FreshStore;

#[test]
fn the_sqlite_store_passes_the_store_suite() {
    mosaic_ports::conformance::store::run(TempSqlite::fresh);
}

#[test]
fn sqlite_readers_pass_the_readers_suite() {
    let mut dirs = Vec::new();
    mosaic_ports::conformance::store::readers(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = mosaic_adapters::sqlite::SqliteStore::create(&dir.path().join("bus.sqlite"))
            .expect("a new store");
        // The directory outlives every check's store and reader.
        dirs.push(dir);
        store
    });
}
