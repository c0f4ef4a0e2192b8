//! The hash chain over the ledger (since `mosaic-bus/4`).
//!
//! Each ledger row stores `hash = SHA-256(0x01 ‖ previous hash ‖ encoding)`,
//! where the encoding covers the ledger row and its typed row, one field
//! per stored column. The first row's previous hash is [`genesis`] of the
//! store's random id in `meta`.
//!
//! The encoding is [`Link`], and nothing else: the writer feeds it the
//! values it binds, every verifier the values SQLite returns, so both hash
//! the same bytes or the chain does not verify (the store's round-trip test
//! writes every table and recomputes the chain from what SQLite returns).
//! It is, in order:
//! - the schema version, as a text field;
//! - per row: `R`, the table's name as a text field, the column count as a
//!   big-endian `u64`, then each column as a field. An `action.allowed` is
//!   the row of the view `actions_allowed` under that name, whether it is
//!   stored in `allowances` or carried by its message (`mosaic-bus/5`);
//!   the message that carries it is hashed with its `allowed` column.
//!
//! A field is a tag and its bytes: `0` NULL; `1` integer, 8 bytes
//! big-endian; `2` real, its IEEE bits, 8 bytes big-endian; `3` text and `4`
//! blob, a big-endian `u64` length and the bytes as stored (text is never
//! normalised). So NULL, `''`, `0` and `'0'` all hash apart, and no field
//! can run into the next.
//!
//! A link's bytes are gathered in one buffer and hashed in one call: the
//! boot's ledger pass hashes every record, and feeding the hasher field by
//! field cost more than the hashing itself.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Row, ToSql};
use sha2::{Digest, Sha256};

/// A SHA-256 hash.
pub(crate) type Hash = [u8; 32];

/// The ledger's columns a link covers, in order (every one but `hash`).
pub(crate) const LEDGER_COLUMNS: [&str; 4] = ["seq", "at", "kind", "business"];

/// The previous hash of the first row: SHA-256(0x00 ‖ the store id as a
/// text field).
pub(crate) fn genesis(store_id: &str) -> Hash {
    let mut link = Link(vec![0x00]);
    link.value(ValueRef::Text(store_id.as_bytes()));
    link.finish()
}

/// One link being encoded: 0x01 ‖ previous ‖ version ‖ rows…, hashed by
/// [`Link::finish`].
pub(crate) struct Link(Vec<u8>);

impl Link {
    /// A link after `prev`, its encoding begun with the schema version.
    pub(crate) fn after(prev: &Hash) -> Link {
        let mut link = Link(Vec::with_capacity(512));
        link.restart(prev);
        link
    }

    /// Clears this link for the one after `prev`, keeping its buffer.
    pub(crate) fn restart(&mut self, prev: &Hash) {
        self.0.clear();
        self.0.push(0x01);
        self.0.extend_from_slice(prev);
        self.value(ValueRef::Text(mosaic_schema::VERSION.as_bytes()));
    }

    /// Starts a row of `table` with `columns` fields.
    fn row(&mut self, table: &str, columns: usize) {
        self.0.push(b'R');
        self.value(ValueRef::Text(table.as_bytes()));
        self.0.extend_from_slice(&(columns as u64).to_be_bytes());
    }

    /// One field.
    fn value(&mut self, value: ValueRef<'_>) {
        match value {
            ValueRef::Null => self.0.push(0),
            ValueRef::Integer(i) => {
                self.0.push(1);
                self.0.extend_from_slice(&i.to_be_bytes());
            }
            ValueRef::Real(f) => {
                self.0.push(2);
                self.0.extend_from_slice(&f.to_bits().to_be_bytes());
            }
            ValueRef::Text(bytes) => self.bytes(3, bytes),
            ValueRef::Blob(bytes) => self.bytes(4, bytes),
        }
    }

    fn bytes(&mut self, tag: u8, bytes: &[u8]) {
        self.0.push(tag);
        self.0
            .extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        self.0.extend_from_slice(bytes);
    }

    /// A row as the writer binds it: `table`'s columns in the table's own
    /// order. A value that is not a plain SQLite value cannot be hashed.
    pub(crate) fn bound(&mut self, table: &str, params: &[&dyn ToSql]) -> rusqlite::Result<()> {
        self.row(table, params.len());
        for param in params {
            let out = param.to_sql()?;
            if let ToSqlOutput::Borrowed(v) = out {
                self.value(v);
            } else if let ToSqlOutput::Owned(v) = &out {
                self.value(v.into());
            } else {
                return Err(rusqlite::Error::ToSqlConversionFailure(
                    "a value the chain cannot hash".into(),
                ));
            }
        }
        Ok(())
    }

    /// A row as SQLite returns it: `table`'s first `columns` columns of
    /// `row`.
    pub(crate) fn stored(
        &mut self,
        table: &str,
        row: &Row<'_>,
        columns: usize,
    ) -> rusqlite::Result<()> {
        self.row(table, columns);
        for i in 0..columns {
            self.value(row.get_ref(i)?);
        }
        Ok(())
    }

    /// A row of `table` from values at hand: a record that has no row of
    /// its own, as the view that shows it returns it (`mosaic-bus/5`).
    pub(crate) fn values(&mut self, table: &str, values: &[ValueRef<'_>]) {
        self.row(table, values.len());
        for value in values {
            self.value(*value);
        }
    }

    /// The link's hash.
    pub(crate) fn finish(&self) -> Hash {
        Sha256::digest(&self.0).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn hash_of(table: &str, params: &[&dyn ToSql]) -> Hash {
        let mut link = Link::after(&genesis("store"));
        link.bound(table, params).unwrap();
        link.finish()
    }

    fn hex(hash: Hash) -> String {
        hash.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The encoding is a file format: these hashes were computed apart from
    /// this code (Python's `hashlib` over the bytes the module comment
    /// describes), so a change to the bytes, however the code is arranged,
    /// fails here.
    #[test]
    fn the_encoding_hashes_the_bytes_the_format_describes() {
        let genesis = genesis("store");
        assert_eq!(
            hex(genesis),
            "0d567b5ac7eac5c58f6919c8acf51b7fede9cf5b7bffcb3cca56ba6c7a9ca59f"
        );
        let mut link = Link::after(&genesis);
        link.bound("t", &[&7_i64, &"a", &None::<String>]).unwrap();
        assert_eq!(
            hex(link.finish()),
            "4172850c88adfad9b49a687c05475be1aa3d2f58a21f3159504d903216bb9d6f"
        );
    }

    #[test]
    fn null_empty_zero_and_their_text_hash_apart() {
        let values: [&dyn ToSql; 5] = [&None::<String>, &"", &0_i64, &"0", &b"0".as_slice()];
        let hashes: Vec<Hash> = values.iter().map(|v| hash_of("t", &[*v])).collect();
        for (i, a) in hashes.iter().enumerate() {
            for b in &hashes[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn fields_never_run_into_each_other_and_the_table_and_store_count() {
        assert_ne!(hash_of("t", &[&"ab", &"c"]), hash_of("t", &[&"a", &"bc"]));
        assert_ne!(hash_of("t", &[&"a"]), hash_of("u", &[&"a"]));
        let mut other = Link::after(&genesis("other store"));
        other.bound("t", &[&"a"]).unwrap();
        assert_ne!(other.finish(), hash_of("t", &[&"a"]));
    }

    /// What the writer binds and what SQLite returns hash alike for the
    /// types the store binds, and apart where a STRICT table stores a value
    /// in another form than the one bound: the round trip is what the
    /// store's tests check for every column.
    #[test]
    fn a_bound_row_and_the_row_sqlite_returns_hash_alike_unless_stored_in_another_form() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (i INTEGER, s TEXT, b BLOB, n TEXT) STRICT")
            .unwrap();
        let params: [&dyn ToSql; 4] = [&7_u32, &"é\u{301}", &vec![0_u8, 1], &None::<String>];
        conn.execute("INSERT INTO t VALUES (?1, ?2, ?3, ?4)", params.as_slice())
            .unwrap();
        let stored = conn
            .query_row("SELECT * FROM t", [], |r| {
                let mut link = Link::after(&genesis("store"));
                link.stored("t", r, 4)?;
                Ok(link.finish())
            })
            .unwrap();
        assert_eq!(stored, hash_of("t", &params));
        // Text bound into an INTEGER column comes back an integer.
        conn.execute("DELETE FROM t", []).unwrap();
        let text: [&dyn ToSql; 4] = [&"7", &"é\u{301}", &vec![0_u8, 1], &None::<String>];
        conn.execute("INSERT INTO t VALUES (?1, ?2, ?3, ?4)", text.as_slice())
            .unwrap();
        let stored_again = conn
            .query_row("SELECT * FROM t", [], |r| {
                let mut link = Link::after(&genesis("store"));
                link.stored("t", r, 4)?;
                Ok(link.finish())
            })
            .unwrap();
        assert_eq!(stored_again, stored);
        assert_ne!(stored_again, hash_of("t", &text));
    }
}
