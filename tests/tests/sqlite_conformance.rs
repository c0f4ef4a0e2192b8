//! The SQLite store passes the same store conformance suite as the fake.

use mosaic_tests::sqlite::TempSqlite;
use mosaic_tests::FreshStore;

#[test]
fn the_sqlite_store_passes_the_store_suite() {
    mosaic_ports::conformance::store::run(TempSqlite::fresh);
}
