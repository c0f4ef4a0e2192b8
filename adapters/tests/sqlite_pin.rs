//! The pinned `sqlite_master` digest is the digest of exactly this schema.

use mosaic_adapters::sqlite::SqliteStore;

#[test]
fn a_fresh_store_matches_the_pinned_master_digest() {
    let dir = std::env::temp_dir().join(format!("mosaic-pin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bus.sqlite");
    let _ = std::fs::remove_file(&path);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(mosaic_schema::SCHEMA_SQL).unwrap();
    let rows: Vec<(String, String, String, String)> = conn
        .prepare("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    drop(conn);
    let digest = mosaic_schema::sha256_hex(mosaic_schema::canonical_master(rows).as_bytes());
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        digest,
        mosaic_schema::MASTER_SHA256,
        "update MASTER_SHA256 on purpose after a schema change"
    );
    let _ = SqliteStore::open;
}
