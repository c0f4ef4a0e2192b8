//! The pinned SQLite schema of the evidence store: `schema.sql`, its
//! SHA-256, and the digest of the canonical `sqlite_master` dump that the
//! store checks at every open. The schema arrives with the store issue; this
//! crate exists so the workspace has its final shape.
#![warn(missing_docs, unreachable_pub)]
