//! Browser control spoken to as a pane speaks to it, over plain HTTP/1.1:
//! requests carrying the UI token, and the SSE event stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use super::{config, launch, Broker};

/// Boots a broker on `root` serving browser control (on a free loopback
/// port) for the business `shop`, whose role `web` may use `actions`
/// within its role; run `web-1` is bound and holds its role.
pub fn boot_shop(root: &std::path::Path, actions: &[&str]) -> Broker {
    let business = json!({
        "id": "shop", "human": "alice",
        "arbiters": {"technical": "web", "delivery": "web"},
        "roles": {"web": {"authority": {"withinRole": actions, "crossRole": []}}}
    });
    let mut config = config(root, &[business], &[launch("shop", "web", "web-1")], &[]);
    config["browser"] = json!({"listen": "127.0.0.1:0"});
    let broker = Broker::boot(root, &config);
    broker.agent("web-1").claim();
    broker
}

/// A broker's browser control: its address and UI token.
pub struct Ui {
    pub address: String,
    pub token: String,
}

impl Ui {
    /// What `broker`'s boot reply says (it was booted with `browser`).
    pub fn of(broker: &Broker) -> Ui {
        let url = broker.boot["browser"]["url"].as_str().expect("url");
        Ui {
            address: url.strip_prefix("http://").expect("http").to_owned(),
            token: broker.boot["browser"]["token"]
                .as_str()
                .expect("token")
                .to_owned(),
        }
    }

    /// One HTTP/1.1 request; the status and the body.
    pub fn http(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.address,
            body.len()
        );
        stream.write_all(head.as_bytes()).expect("head");
        // A server refusing a large body may close before reading it all.
        let _ = stream.write_all(body);
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("an HTTP status: {text:.200}"));
        let split = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(answer.len(), |i| i + 4);
        (status, answer[split..].to_vec())
    }

    pub fn post(&self, path: &str, body: &Value) -> Value {
        let (status, body) =
            self.http("POST", path, Some(&self.token), body.to_string().as_bytes());
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).expect("JSON")
    }

    /// Opens an event stream as client `id`; returns it after the first
    /// heartbeat (the client is registered).
    pub fn listen(&self, id: &str, capable: bool) -> Events {
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        let browser = if capable { "1" } else { "0" };
        write!(
            stream,
            "GET /api/events?browser={browser}&clientId={id}&token={} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
            self.token, self.address
        )
        .expect("request");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut events = Events {
            reader: BufReader::new(stream),
        };
        assert_eq!(events.next()["type"], json!("heartbeat"), "the first event");
        events
    }
}

/// An SSE stream read line by line (chunked framing lines are skipped).
pub struct Events {
    reader: BufReader<TcpStream>,
}

impl Events {
    /// The next event's data, as JSON.
    pub fn next(&mut self) -> Value {
        loop {
            let mut line = String::new();
            let read = self.reader.read_line(&mut line).expect("an event line");
            assert!(read > 0, "the event stream ended");
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                return serde_json::from_str(data).expect("event JSON");
            }
        }
    }

    /// The next event that is not a heartbeat.
    pub fn next_request(&mut self) -> Value {
        loop {
            let event = self.next();
            if event["type"] != "heartbeat" {
                return event;
            }
        }
    }
}
