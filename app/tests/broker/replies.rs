//! The writer answers a request on its socket itself (the connection lent
//! to it for that answer): under group commit, with several connections'
//! requests in each batch, every connection still gets its answers in the
//! order of its lines, each the answer to its own line. The answers of a
//! failed batch are `faults.rs`'s (over a store that fails on demand).
//!
//! Lines go out on plain `UnixStream`s, all of a connection's at once, so
//! the broker reads them while the writer answers the ones before.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::{json, Value};

use crate::support::{acme, acme_launches, config, data_root, Broker, WAIT};

/// How many connections write at once, and how many lines each.
const CONNECTIONS: usize = 6;
const LINES: usize = 24;

/// `{"cap":cap,"verb":verb,"args":args}` and its newline.
fn line(cap: &str, verb: &str, args: Value) -> Vec<u8> {
    let mut line = json!({"cap": cap, "verb": verb, "args": args})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

/// Connection `k`'s `i`-th line: `lead-1` sends `c{k}-{i}` to qa, except
/// every third line, which `ops-1` sends and is refused (and recorded, on
/// the writer, in the same batches).
fn request(lead: &str, ops: &str, k: usize, i: usize) -> Vec<u8> {
    let args = json!({"to": "qa", "body": format!("c{k}-{i}")});
    if i % 3 == 2 {
        line(ops, "message.send", args)
    } else {
        line(lead, "message.send", args)
    }
}

/// Every answer line until the broker closes the connection, parsed.
fn answers(socket: &Path, lines: &[u8]) -> Vec<Value> {
    let mut stream = UnixStream::connect(socket).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    stream.set_write_timeout(Some(WAIT)).expect("timeout");
    stream.write_all(lines).expect("write");
    stream.shutdown(Shutdown::Write).expect("half-close");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("the answers");
    assert_eq!(bytes.last(), Some(&b'\n'), "whole lines: {bytes:?}");
    bytes
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("a JSON answer"))
        .collect()
}

#[test]
fn answers_written_by_the_writer_keep_each_connections_order_under_group_commit() {
    let root = data_root();
    let b = Broker::boot(
        root.path(),
        &config(root.path(), &[acme()], &acme_launches(), &["acme"]),
    );
    let (lead, qa, ops) = (b.agent("lead-1"), b.agent("qa-1"), b.agent("ops-1"));
    lead.claim();
    qa.claim();
    ops.claim();
    let writers: Vec<_> = (0..CONNECTIONS)
        .map(|k| {
            let lines: Vec<u8> = (0..LINES)
                .flat_map(|i| request(&lead.cap, &ops.cap, k, i))
                .collect();
            let socket = b.socket.clone();
            std::thread::spawn(move || answers(&socket, &lines))
        })
        .collect();
    // Which body each answered id was sent with, by its line.
    let mut sent: HashMap<String, String> = HashMap::new();
    for (k, writer) in writers.into_iter().enumerate() {
        let answers = writer.join().expect("a connection's answers");
        assert_eq!(answers.len(), LINES, "connection {k}: {answers:?}");
        for (i, answer) in answers.iter().enumerate() {
            if i % 3 == 2 {
                assert_eq!(
                    *answer,
                    json!({"ok": false, "error": "not-authorized"}),
                    "connection {k}, line {i}"
                );
                continue;
            }
            assert_eq!(answer["ok"], true, "connection {k}, line {i}: {answer}");
            let id = answer["result"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("connection {k}, line {i}: no id in {answer}"));
            sent.insert(id.to_owned(), format!("c{k}-{i}"));
        }
    }
    let received = qa.ok("message.receive", json!({}));
    let received = received.as_array().expect("messages");
    assert_eq!(
        received.len(),
        sent.len(),
        "every acknowledged send arrived"
    );
    for message in received {
        let id = message["id"].as_str().expect("an id");
        assert_eq!(
            Some(message["body"].as_str().expect("a body")),
            sent.get(id).map(String::as_str),
            "the answer that carried {id} was the answer to its own line"
        );
    }
}
