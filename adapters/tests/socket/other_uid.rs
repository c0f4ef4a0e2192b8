//! A peer of another uid: a child process that drops to uid 65534.

use super::*;

/// Names the abstract socket that [`foreign_uid_child`] connects to; set
/// only in the child process.
const CHILD_ENV: &str = "MOSAIC_SOCKET_TEST_FOREIGN_CHILD";
const CHILD_UID: u32 = 65_534;

/// Not a test of its own: the client half of
/// [`a_peer_of_another_uid_is_refused_unread`], run in a child process under
/// uid 65534. In a normal run it has nothing to do.
#[test]
fn foreign_uid_child() {
    let Ok(name) = std::env::var(CHILD_ENV) else {
        return;
    };
    let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("address");
    let mut stream = UnixStream::connect_addr(&address).expect("connect");
    stream.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
    // The broker may close before this is written; the answer still waits.
    let _ = stream.write_all(b"{\"cap\":\"stolen\",\"verb\":\"inbox\",\"args\":{}}\n");
    let reply = read_all(&stream);
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let uids = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .expect("Uid line");
    // Real, effective, saved and file-system uid: all must be the foreign one.
    let uids: Vec<&str> = uids.split_whitespace().collect();
    println!(
        "CHILD-UID:{} CHILD-REPLY:{}",
        uids.join(","),
        String::from_utf8_lossy(&reply).trim_end()
    );
}

/// The server admits the peers of one uid only. As root (as CI runs) the
/// foreign peer is a real process of another uid; without root, which
/// cannot start one, this process is the foreign peer of a server told to
/// admit another uid.
#[test]
fn a_peer_of_another_uid_is_refused_unread() {
    if own_uid() == 0 {
        a_process_of_another_uid_is_refused_unread();
    } else {
        this_process_is_refused_by_a_server_for_another_uid();
    }
}

/// A [`counting_echo`] server on the abstract socket `name` with
/// `limits`, and the count of the requests its handler was called for.
fn counting_on(name: &str, limits: Limits) -> (SocketAddr, Arc<AtomicUsize>, Running) {
    let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("address");
    let listener = UnixListener::bind_addr(&address).expect("bind");
    let calls = Arc::new(AtomicUsize::new(0));
    let server = Running::start_on(
        listener,
        PathBuf::new(),
        None,
        counting_echo(&calls),
        limits,
    );
    (address, calls, server)
}

fn this_process_is_refused_by_a_server_for_another_uid() {
    let name = format!("mosaic-socket-test-{}-other", std::process::id());
    let limits = Limits {
        peer_uid: own_uid() ^ 1,
        ..Limits::default()
    };
    let (address, calls, _server) = counting_on(&name, limits);
    let mut stream = UnixStream::connect_addr(&address).expect("connect");
    stream.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
    stream.write_all(b"mine\n").expect("write");
    assert_line(&read_all(&stream), &wire_refusal(Refusal::BadCapability));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

fn a_process_of_another_uid_is_refused_unread() {
    // An abstract socket has no file permissions, so the foreign process
    // can reach it and only the server's uid check stands in its way.
    let name = format!("mosaic-socket-test-{}", std::process::id());
    let (address, calls, _server) = counting_on(&name, Limits::default());

    // A copy of this test binary that uid 65534 may run, wherever the
    // build folder is.
    let dir = private_dir();
    let exe = dir.path().join("socket-test");
    {
        let _fs = fs_lock();
        std::fs::copy(std::env::current_exe().expect("exe"), &exe).expect("copy");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let output = Command::new(&exe)
        .args([
            "--exact",
            "other_uid::foreign_uid_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &name)
        .uid(CHILD_UID)
        .gid(CHILD_UID)
        .stdin(Stdio::null())
        .output()
        .expect("child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = format!(
        "CHILD-UID:{CHILD_UID},{CHILD_UID},{CHILD_UID},{CHILD_UID} CHILD-REPLY:{}",
        String::from_utf8_lossy(&error_line(Refusal::BadCapability))
    );
    // The harness prints the test name on the same line.
    assert!(stdout.contains(&expected), "{stdout}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // Our own uid is still served on the same socket.
    let mut own = UnixStream::connect_addr(&address).expect("connect");
    own.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
    own.write_all(b"mine\n").expect("write");
    assert_line(&read_all(&own), b"mine\n");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
