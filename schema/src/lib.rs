//! The pinned SQLite schema of the evidence store.
//!
//! [`SCHEMA_SQL`] is `schema.sql`, byte for byte; [`SCHEMA_SHA256`] pins it,
//! and [`MASTER_SHA256`] pins the canonical dump of `sqlite_master` that
//! loading it produces ([`canonical_master`]). The store checks the second at
//! every open, so an added, dropped or altered table, index, trigger or view
//! refuses to open. Changing the schema means changing both pins on purpose;
//! the tests here fail until you do.
#![warn(missing_docs, unreachable_pub)]

use sha2::{Digest, Sha256};

/// The schema version recorded in `meta` under [`VERSION_KEY`].
pub const VERSION: &str = "mosaic-bus/6";

/// The `meta` key holding the schema version.
pub const VERSION_KEY: &str = "schema_version";

/// The `meta` key holding the store's random id, whose hash is the chain's
/// first previous hash (since `mosaic-bus/4`).
pub const STORE_ID_KEY: &str = "store_id";

/// The schema source.
pub const SCHEMA_SQL: &str = include_str!("../schema.sql");

/// SHA-256 of [`SCHEMA_SQL`], lowercase hex.
pub const SCHEMA_SHA256: &str = "d1cffd57c8f2986bd1f1f1c5217db616fec154729290aabf6d05bd2340c5b8ca";

/// SHA-256 of [`canonical_master`] over a database holding exactly this schema.
pub const MASTER_SHA256: &str = "0097d036efc1698a5caede53aa4b593e858b2f8698400398372effbbdf7ac83e";

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The canonical text of `sqlite_master`: one line per object,
/// `type NUL name NUL tbl_name NUL sql`, sorted, so the digest depends on
/// nothing but the objects themselves. `rows` are `(type, name, tbl_name,
/// sql)`; `sql` is empty for objects SQLite creates itself (autoindexes).
pub fn canonical_master(
    rows: impl IntoIterator<Item = (String, String, String, String)>,
) -> String {
    let mut lines: Vec<String> = rows
        .into_iter()
        .map(|(t, name, table, sql)| format!("{t}\0{name}\0{table}\0{sql}\n"))
        .collect();
    lines.sort();
    lines.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_matches_its_pin() {
        assert_eq!(
            sha256_hex(SCHEMA_SQL.as_bytes()),
            SCHEMA_SHA256,
            "schema.sql changed: update SCHEMA_SHA256 and MASTER_SHA256 on purpose"
        );
    }

    #[test]
    fn the_canonical_dump_ignores_row_order_but_not_content() {
        let row = |n: &str| {
            (
                "table".to_owned(),
                n.to_owned(),
                n.to_owned(),
                format!("CREATE TABLE {n}(x)"),
            )
        };
        assert_eq!(
            canonical_master([row("a"), row("b")]),
            canonical_master([row("b"), row("a")])
        );
        assert_ne!(
            canonical_master([row("a")]),
            canonical_master([row("a"), row("b")])
        );
    }
}
