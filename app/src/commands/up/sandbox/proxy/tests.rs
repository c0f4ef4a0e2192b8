//! The proxy on real sockets: a client on its Unix socket, as the bridge
//! inside a sandbox is, and test servers on loopback standing in for the
//! hosts (listed by address, the documented exception for loopback).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

/// How long a test waits for an answer it expects: generous, since the
/// machine may be loaded; nothing here measures speed.
const WAIT: Duration = Duration::from_secs(30);

fn allow(rules: &[String]) -> Vec<Allow> {
    rules.iter().map(|r| Allow::parse(r).unwrap()).collect()
}

/// A server on loopback that echoes every line back; its port.
fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut out = stream.try_clone().unwrap();
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if writeln!(out, "{line}").is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// A server on loopback that answers each request with the head it got.
fn http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", head.len());
            let _ = stream.write_all(reply.as_bytes());
            let _ = stream.write_all(&head);
        }
    });
    port
}

fn client(socket: &Path) -> UnixStream {
    let stream = UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
}

/// The status line of the proxy's answer, read byte by byte up to the end
/// of its head, so what follows stays in the stream.
fn status(stream: &mut UnixStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            Ok(_) | Err(_) => break,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    head.lines().next().unwrap_or_default().to_owned()
}

/// Sends `CONNECT target`; the answer's status line, the body of a
/// refusal after it.
fn connect(socket: &Path, target: &str) -> (UnixStream, String) {
    let mut stream = client(socket);
    // A proxy at its cap answers and closes without reading, so the write
    // may meet a closed socket (EPIPE); its answer is still there to read.
    let _ = write!(
        stream,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
    );
    let line = status(&mut stream);
    (stream, line)
}

fn body(stream: &mut UnixStream) -> String {
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body);
    body
}

fn proxy(limits: Limits, rules: &[String]) -> (Proxy, PathBuf) {
    let proxy = Proxy::start(limits).unwrap();
    let socket = proxy.listen("lead-0badc0de", &allow(rules), None).unwrap();
    (proxy, socket)
}

#[test]
fn an_allowed_host_is_reached_by_name_and_by_its_listed_address() {
    let port = echo_server();
    let (_proxy, socket) = proxy(
        Limits::default(),
        &[format!("localhost:{port}"), format!("127.0.0.1:{port}")],
    );
    for target in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let (mut stream, line) = connect(&socket, &target);
        assert_eq!(line, "HTTP/1.1 200 Connection established", "{target}");
        stream.write_all(b"hello through the tunnel\n").unwrap();
        let mut echoed = String::new();
        BufReader::new(&mut stream).read_line(&mut echoed).unwrap();
        assert_eq!(echoed, "hello through the tunnel\n");
    }
}

#[test]
fn a_plain_request_goes_on_in_origin_form_without_proxy_headers() {
    let port = http_server();
    let (_proxy, socket) = proxy(Limits::default(), &[format!("127.0.0.1:{port}")]);
    let mut stream = client(&socket);
    write!(
        stream,
        "GET http://127.0.0.1:{port}/path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n\
         Connection: keep-alive\r\nAccept: */*\r\n\r\n"
    )
    .unwrap();
    assert_eq!(status(&mut stream), "HTTP/1.1 200 OK");
    let got = body(&mut stream);
    assert_eq!(
        got,
        format!(
            "GET /path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n\
             Connection: close\r\n\r\n"
        )
    );
}

#[test]
fn a_plain_request_names_its_target_as_its_host_whatever_the_client_said() {
    let port = http_server();
    let (_proxy, socket) = proxy(Limits::default(), &[format!("127.0.0.1:{port}")]);
    let mut stream = client(&socket);
    write!(
        stream,
        "GET http://127.0.0.1:{port}/v1 HTTP/1.1\r\nHost: evil.example.com\r\n\
         Accept: */*\r\nhost: other.example.org\r\n\r\n"
    )
    .unwrap();
    assert_eq!(status(&mut stream), "HTTP/1.1 200 OK");
    assert_eq!(
        body(&mut stream),
        format!(
            "GET /v1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n\
             Connection: close\r\n\r\n"
        )
    );
    // A request with no `Host` at all gets its target's.
    let mut stream = client(&socket);
    write!(stream, "GET http://127.0.0.1:{port} HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(status(&mut stream), "HTTP/1.1 200 OK");
    assert_eq!(
        body(&mut stream),
        format!("GET / HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
    );
}

#[test]
fn a_head_is_a_request_only_once_whole_and_well_formed() {
    let head = b"CONNECT API.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n\x16\x03\x01";
    let whole = head.len() - 3;
    for cut in 0..whole {
        assert!(
            matches!(Request::parse(&head[..cut]), Ok(None)),
            "{:?}",
            String::from_utf8_lossy(&head[..cut])
        );
    }
    let (request, len) = Request::parse(head).unwrap().unwrap();
    assert_eq!(len, whole);
    assert_eq!(
        request.target,
        Target {
            host: Host::Name("api.example.com".into()),
            port: 443
        }
    );
    assert!(request.forward.is_none());
    let fields = "X: y\r\n".repeat(MAX_HEADERS + 1);
    let many = format!("GET http://a.example.com/ HTTP/1.1\r\n{fields}\r\n");
    assert_eq!(
        Request::parse(many.as_bytes()).err(),
        Some(Reason::HeadTooLarge)
    );
    for bad in [
        &b"GET http://a.example.com/ HTTP/2.0\r\n\r\n"[..],
        b"get http://a.example.com/ HTTP/1.1\r\n\r\n",
        b"GET  http://a.example.com/ HTTP/1.1\r\n\r\n",
        b"GET http://a.example.com/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
        b"GET http://a.example.com/ HTTP/1.1\r\nX: \xff\r\n\r\n",
        b"GET https://a.example.com/ HTTP/1.1\r\n\r\n",
        b"GET http://user@a.example.com/ HTTP/1.1\r\n\r\n",
        b"CONNECT a.example.com HTTP/1.1\r\n\r\n",
    ] {
        assert_eq!(
            Request::parse(bad).err(),
            Some(Reason::BadRequest),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn unlisted_hosts_literals_and_private_names_are_refused_with_their_reason() {
    let port = echo_server();
    // `localhost` is admitted by name, but resolves to loopback, which is
    // not listed: refused all the same.
    let (_proxy, socket) = proxy(
        Limits::default(),
        &[format!("localhost:{port}"), "*.example.com:443".into()],
    );
    for (target, status_line, reason) in [
        (
            "example.org:443".to_owned(),
            "HTTP/1.1 403 Forbidden",
            "not-allowed",
        ),
        (
            "example.com:443".to_owned(),
            "HTTP/1.1 403 Forbidden",
            "not-allowed",
        ),
        (
            "api.example.com:80".to_owned(),
            "HTTP/1.1 403 Forbidden",
            "not-allowed",
        ),
        (
            format!("127.0.0.1:{port}"),
            "HTTP/1.1 403 Forbidden",
            "address-literal",
        ),
        (
            format!("[::1]:{port}"),
            "HTTP/1.1 403 Forbidden",
            "address-literal",
        ),
        (
            "93.184.216.34:443".to_owned(),
            "HTTP/1.1 403 Forbidden",
            "address-literal",
        ),
        (
            format!("localhost:{port}"),
            "HTTP/1.1 403 Forbidden",
            "private-address",
        ),
        (
            "bad host:1".to_owned(),
            "HTTP/1.1 400 Bad Request",
            "bad-request",
        ),
    ] {
        let (mut stream, line) = connect(&socket, &target);
        assert_eq!(line, status_line, "{target}");
        assert_eq!(
            body(&mut stream),
            format!("mosaic-bus proxy: {reason}\n"),
            "{target}"
        );
    }
    // A plain request to a host not listed, and one that is not http.
    for request in [
        "GET http://example.org/ HTTP/1.1\r\n\r\n",
        "GET https://example.com/ HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
        "GET http://user@localhost:1/ HTTP/1.1\r\n\r\n",
    ] {
        let mut stream = client(&socket);
        stream.write_all(request.as_bytes()).unwrap();
        let line = status(&mut stream);
        assert!(line.starts_with("HTTP/1.1 4"), "{request:?}: {line}");
    }
}

#[test]
fn a_head_past_the_cap_or_the_deadline_is_refused() {
    let limits = Limits {
        head: 1024,
        head_deadline: Duration::from_millis(300),
        ..Limits::default()
    };
    let (_proxy, socket) = proxy(limits, &[]);
    let mut stream = client(&socket);
    let long = format!(
        "CONNECT a.example.com:443 HTTP/1.1\r\nX: {}\r\n",
        "y".repeat(4096)
    );
    // The proxy may answer and close before all of it is written.
    let _ = stream.write_all(long.as_bytes());
    assert_eq!(
        status(&mut stream),
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    let mut silent = client(&socket);
    silent.write_all(b"CONNECT a.exa").unwrap();
    assert_eq!(status(&mut silent), "HTTP/1.1 408 Request Timeout");
}

#[test]
fn a_client_that_sends_half_a_request_and_leaves_costs_nothing_lasting() {
    let port = echo_server();
    let limits = Limits {
        connections: 1,
        ..Limits::default()
    };
    let (proxy, socket) = proxy(limits, &[format!("127.0.0.1:{port}")]);
    // One client holds the only place with half a request...
    let mut half = client(&socket);
    half.write_all(b"CONNECT 127.0.0.1:").unwrap();
    // ...so the next is turned away at once (once the proxy has seen the
    // first: the answer tells which it saw first).
    let deadline = Instant::now() + WAIT;
    loop {
        let (mut stream, line) = connect(&socket, &format!("127.0.0.1:{port}"));
        if line == "HTTP/1.1 503 Service Unavailable" {
            assert_eq!(
                body(&mut stream),
                "mosaic-bus proxy: too-many-connections\n"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the cap never held: {line}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // It leaves: its place is free again, and the proxy serves.
    drop(half);
    let deadline = Instant::now() + WAIT;
    loop {
        let (mut stream, line) = connect(&socket, &format!("127.0.0.1:{port}"));
        if line == "HTTP/1.1 200 Connection established" {
            stream.write_all(b"still here\n").unwrap();
            let mut echoed = String::new();
            BufReader::new(&mut stream).read_line(&mut echoed).unwrap();
            assert_eq!(echoed, "still here\n");
            break;
        }
        assert_eq!(line, "HTTP/1.1 503 Service Unavailable");
        assert!(Instant::now() < deadline, "the place was never freed");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its folder of sockets is private, and dropped, the proxy removes it.
    let dir = proxy.dir().to_path_buf();
    let mode = std::os::unix::fs::PermissionsExt::mode(&dir.metadata().unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700);
    assert!(socket.starts_with(&dir));
    drop(proxy);
    assert!(!dir.exists());
}

#[test]
fn each_connection_takes_two_places_of_its_run_and_of_the_broker() {
    use mosaic_adapters::socket::Budget;
    let port = echo_server();
    let all = Budget::new(100);
    let (dev, lead) = (Budget::new(4), Budget::new(4));
    let proxy = Proxy::start(Limits::default()).unwrap();
    let rules = allow(&[format!("127.0.0.1:{port}")]);
    let target = format!("127.0.0.1:{port}");
    let dev_socket = proxy
        .listen(
            "dev-0badc0de",
            &rules,
            Some(RunPlaces::new(dev.clone(), all.clone())),
        )
        .unwrap();
    let lead_socket = proxy
        .listen(
            "lead-0badc0de",
            &rules,
            Some(RunPlaces::new(lead.clone(), all.clone())),
        )
        .unwrap();
    // dev's two connections take its four places, and four of the
    // broker's...
    let (_first, line) = connect(&dev_socket, &target);
    assert_eq!(line, "HTTP/1.1 200 Connection established");
    let (_second, line) = connect(&dev_socket, &target);
    assert_eq!(line, "HTTP/1.1 200 Connection established");
    assert_eq!((dev.held(), all.held()), (4, 4));
    // ...so its third is turned away, taking none...
    let (mut third, line) = connect(&dev_socket, &target);
    assert_eq!(line, "HTTP/1.1 503 Service Unavailable");
    assert_eq!(body(&mut third), "mosaic-bus proxy: too-many-connections\n");
    assert_eq!((dev.held(), all.held()), (4, 4));
    // ...while lead's places are its own.
    let (_other, line) = connect(&lead_socket, &target);
    assert_eq!(line, "HTTP/1.1 200 Connection established");
    assert_eq!((lead.held(), all.held()), (2, 6));
}
