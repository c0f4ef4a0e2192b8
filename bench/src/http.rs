//! Just enough HTTP/1.1 over `std::net::TcpStream` to act as a pane, as
//! `app/tests/browser_http.rs` does: a keep-alive connection for the claim
//! and result posts (so a round trip measures the broker, not TCP setup),
//! and an SSE event stream read line by line.
//!
//! Every connection has `TCP_NODELAY` (a request is one write, but Nagle
//! must not hold the next one back waiting for an ACK) and read timeouts,
//! so a broker that stops answering fails the figure instead of hanging it.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use serde_json::Value;

use crate::live::Endpoint;
use crate::output::Failure;

/// The longest a post may wait for its answer.
const POST_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest an event stream may stay silent; the broker sends a
/// heartbeat every 5 s.
const EVENTS_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest answer body read.
const MAX_BODY: usize = 1024 * 1024;

fn connect(endpoint: &Endpoint, timeout: Duration) -> Result<TcpStream, Failure> {
    let stream = TcpStream::connect(&endpoint.address)
        .map_err(|_| Failure::new("cannot connect to browser control"))?;
    stream
        .set_nodelay(true)
        .and_then(|()| stream.set_read_timeout(Some(timeout)))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|_| Failure::new("cannot configure a browser control connection"))?;
    Ok(stream)
}

/// How an answer's body is framed.
enum Framing {
    Length(usize),
    Chunked,
}

/// Reads a status line and headers; returns the status and the framing.
fn read_head(reader: &mut impl BufRead) -> Result<(u16, Framing), Failure> {
    let broken = || Failure::new("browser control sent a malformed HTTP head");
    let mut line = String::new();
    let read = reader.read_line(&mut line).map_err(|_| broken())?;
    if read == 0 {
        return Err(Failure::new("browser control closed the connection"));
    }
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(broken)?;
    let mut framing = Framing::Length(0);
    loop {
        line.clear();
        reader.read_line(&mut line).map_err(|_| broken())?;
        let header = line.trim_end();
        if header.is_empty() {
            return Ok((status, framing));
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(broken());
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            framing = Framing::Length(value.parse().map_err(|_| broken())?);
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            && value.eq_ignore_ascii_case("chunked")
        {
            framing = Framing::Chunked;
        }
    }
}

/// Reads a body of the given framing.
fn read_body(reader: &mut impl BufRead, framing: &Framing) -> Result<Vec<u8>, Failure> {
    let broken = || Failure::new("browser control sent a malformed HTTP body");
    match framing {
        Framing::Length(n) if *n > MAX_BODY => Err(broken()),
        Framing::Length(n) => {
            let mut body = vec![0; *n];
            reader.read_exact(&mut body).map_err(|_| broken())?;
            Ok(body)
        }
        Framing::Chunked => {
            let mut body = Vec::new();
            let mut line = String::new();
            loop {
                line.clear();
                reader.read_line(&mut line).map_err(|_| broken())?;
                let size = usize::from_str_radix(line.trim_end(), 16).map_err(|_| broken())?;
                if size == 0 {
                    line.clear();
                    reader.read_line(&mut line).map_err(|_| broken())?;
                    return Ok(body);
                }
                if body.len() + size > MAX_BODY {
                    return Err(broken());
                }
                let start = body.len();
                body.resize(start + size, 0);
                reader
                    .read_exact(&mut body[start..])
                    .map_err(|_| broken())?;
                line.clear();
                reader.read_line(&mut line).map_err(|_| broken())?;
            }
        }
    }
}

/// One keep-alive connection for posts with the UI token.
pub struct Conn {
    reader: BufReader<TcpStream>,
    host: String,
    token: String,
}

impl Conn {
    /// Connects to browser control.
    ///
    /// # Errors
    /// When the connection cannot be made.
    pub fn connect(endpoint: &Endpoint) -> Result<Self, Failure> {
        Ok(Self {
            reader: BufReader::new(connect(endpoint, POST_TIMEOUT)?),
            host: endpoint.address.clone(),
            token: endpoint.token.clone(),
        })
    }

    /// Posts `body` as JSON to `path`; returns the 200 answer's JSON.
    ///
    /// # Errors
    /// When the exchange fails or the status is not 200.
    pub fn post(&mut self, path: &str, body: &Value) -> Result<Value, Failure> {
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            self.token,
            body.len()
        );
        self.reader
            .get_mut()
            .write_all(request.as_bytes())
            .map_err(|_| Failure::new("cannot post to browser control"))?;
        let (status, framing) = read_head(&mut self.reader)?;
        let answer = read_body(&mut self.reader, &framing)?;
        if status != 200 {
            return Err(Failure::new(
                "browser control answered a post with an error status",
            ));
        }
        serde_json::from_slice(&answer)
            .map_err(|_| Failure::new("browser control answered a post with something not JSON"))
    }
}

/// One client's SSE stream, `GET /api/events`.
pub struct Events {
    reader: BufReader<TcpStream>,
}

impl Events {
    /// Opens the stream of client `id` (`browser=1` when `capable`) and
    /// reads its first event, a heartbeat: once it arrived, the broker has
    /// registered the client.
    ///
    /// # Errors
    /// When the stream cannot be opened or does not start with a heartbeat.
    pub fn open(endpoint: &Endpoint, id: &str, capable: bool) -> Result<Self, Failure> {
        let mut stream = connect(endpoint, EVENTS_TIMEOUT)?;
        let browser = if capable { "1" } else { "0" };
        write!(
            stream,
            "GET /api/events?browser={browser}&clientId={id}&token={} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
            endpoint.token, endpoint.address
        )
        .map_err(|_| Failure::new("cannot open an event stream"))?;
        let mut reader = BufReader::new(stream);
        let (status, _) = read_head(&mut reader)?;
        if status != 200 {
            return Err(Failure::new("browser control refused an event stream"));
        }
        let mut events = Self { reader };
        match events.next()? {
            Some(event) if event["type"] == "heartbeat" => Ok(events),
            Some(_) | None => Err(Failure::new(
                "an event stream did not start with a heartbeat",
            )),
        }
    }

    /// The next event's data, or `None` once the stream ended. Chunk
    /// framing lines are skipped: the broker writes each event as one chunk.
    ///
    /// # Errors
    /// When reading fails (a timeout included) or a data line is not JSON.
    pub fn next(&mut self) -> Result<Option<Value>, Failure> {
        let mut line = String::new();
        loop {
            line.clear();
            let read = self
                .reader
                .read_line(&mut line)
                .map_err(|_| Failure::new("an event stream failed"))?;
            if read == 0 {
                return Ok(None);
            }
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                return serde_json::from_str(data)
                    .map(Some)
                    .map_err(|_| Failure::new("an event is not JSON"));
            }
        }
    }

    /// A handle that ends the stream from another thread.
    ///
    /// # Errors
    /// When the socket cannot be duplicated.
    pub fn closer(&self) -> Result<Closer, Failure> {
        self.reader
            .get_ref()
            .try_clone()
            .map(Closer)
            .map_err(|_| Failure::new("cannot duplicate an event stream"))
    }
}

/// Ends an event stream, so whoever reads it sees its end.
pub struct Closer(TcpStream);

impl Closer {
    /// Shuts the connection down both ways.
    pub fn close(&self) {
        let _ = self.0.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(raw: &[u8]) -> (u16, Vec<u8>) {
        let mut reader = raw;
        let (status, framing) = read_head(&mut reader).expect("a head");
        let body = read_body(&mut reader, &framing).expect("a body");
        assert!(reader.is_empty(), "the whole answer was read");
        (status, body)
    }

    #[test]
    fn bodies_framed_by_length_and_by_chunks() {
        assert_eq!(
            answer(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            ),
            (200, b"{}".to_vec())
        );
        assert_eq!(
            answer(b"HTTP/1.1 400 Bad Request\r\ntransfer-encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n"),
            (400, br#"{"a":1}"#.to_vec())
        );
        assert_eq!(
            answer(b"HTTP/1.1 204 No Content\r\n\r\n"),
            (204, Vec::new())
        );
    }

    #[test]
    fn a_broken_head_is_a_failure_not_a_panic() {
        for raw in [
            &b""[..],
            b"garbage\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        ] {
            assert!(read_head(&mut &raw[..]).is_err(), "{raw:?}");
        }
        let mut reader = &b"zz\r\n"[..];
        assert!(read_body(&mut reader, &Framing::Chunked).is_err());
    }
}
