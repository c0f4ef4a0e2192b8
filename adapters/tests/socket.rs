//! The socket adapter over real Unix sockets in private temporary folders:
//! the bound socket's mode, request framing and limits, deadlines, several
//! requests on one connection (order, limits per line, the idle deadline,
//! the cap), many and hostile connections, the disconnect signal,
//! shutdown, the places of connections that have not authenticated and
//! the human reserve, the client and the session against the real server and
//! against scripted fake brokers, and a peer of another uid (a child
//! process that drops to uid 65534).
//!
//! `bind_private` changes the process-wide umask for a moment, and test
//! threads run in parallel; every test therefore creates folders, files and
//! sockets only while holding [`fs_lock`].
//!
//! One file of `socket/` per subject: [`framing`], [`one_connection`],
//! [`hostile`], [`client`] and [`other_uid`]; the helpers they share are
//! here.

#[path = "socket/client.rs"]
mod client;
#[path = "socket/framing.rs"]
mod framing;
#[path = "socket/hostile.rs"]
mod hostile;
#[path = "socket/one_connection.rs"]
mod one_connection;
#[path = "socket/other_uid.rs"]
mod other_uid;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use mosaic_adapters::fs::{check_private_socket, create_private_dir};
use mosaic_adapters::socket::{
    bind_private, serve_with, Disconnect, Handler, Limits, Peer, Sender, MAX_DRAIN,
};
use mosaic_client::socket::{
    error_line, Client, Session, MAX_REQUEST, MAX_RESPONSE, READ_DEADLINE,
};
use mosaic_domain::Refusal;
use serde_json::json;
use tempfile::TempDir;

/// A bound on every blocking wait in these tests, so a bug fails a test
/// instead of hanging it. Never used to wait for something to happen.
const SAFETY_NET: Duration = Duration::from_secs(20);

/// Held while creating anything in the file system (see the file's doc).
fn fs_lock() -> MutexGuard<'static, ()> {
    static FS: Mutex<()> = Mutex::new(());
    FS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn private_dir() -> TempDir {
    let _fs = fs_lock();
    tempfile::tempdir().expect("temporary folder")
}

fn bind_in(dir: &TempDir) -> (PathBuf, UnixListener) {
    let path = dir.path().join("bus.sock");
    let listener = {
        let _fs = fs_lock();
        bind_private(&path).expect("bind")
    };
    (path, listener)
}

/// The uid this test process runs as: the owner of a folder it created.
fn own_uid() -> u32 {
    let dir = private_dir();
    std::fs::metadata(dir.path()).expect("metadata").uid()
}

/// The process's current umask, as the kernel reports it.
fn current_umask() -> String {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("Umask:"))
        .expect("Umask line")
        .trim()
        .to_owned()
}

#[track_caller]
fn assert_line(actual: &[u8], expected: &[u8]) {
    assert!(
        actual == expected,
        "got {:?}, expected {:?}",
        String::from_utf8_lossy(&actual[..actual.len().min(200)]),
        String::from_utf8_lossy(&expected[..expected.len().min(200)])
    );
}

/// An error reply as it appears on the wire, with its `\n`.
fn wire_refusal(refusal: Refusal) -> Vec<u8> {
    let mut line = error_line(refusal);
    line.push(b'\n');
    line
}

fn echo() -> impl Handler {
    |_peer: Peer, line: Vec<u8>, _gone: Disconnect| async move { line }
}

fn short_read_deadline() -> Limits {
    Limits {
        read_deadline: Duration::from_millis(200),
        ..Limits::default()
    }
}

/// A server on its own thread and tokio runtime, stopped when dropped.
struct Running {
    path: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), Refusal>>>,
    _dir: Option<TempDir>,
}

impl Running {
    fn start(handler: impl Handler, limits: Limits) -> Running {
        let dir = private_dir();
        let (path, listener) = bind_in(&dir);
        Running::start_on(listener, path, Some(dir), handler, limits)
    }

    fn start_on(
        listener: UnixListener,
        path: PathBuf,
        dir: Option<TempDir>,
        handler: impl Handler,
        limits: Limits,
    ) -> Running {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(serve_with(listener, handler, limits, async {
                let _ = stopped.await;
            }))
        });
        Running {
            path,
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }

    fn client(&self) -> Client {
        Client::new(&self.path, "cap").with_timeout(SAFETY_NET)
    }

    fn raw(&self) -> UnixStream {
        raw(&self.path)
    }

    /// Asks the server to stop, without waiting for it.
    fn signal_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Stops the server and returns what `serve_with` returned.
    fn stop(mut self) -> Result<(), Refusal> {
        self.signal_stop();
        self.thread
            .take()
            .expect("running")
            .join()
            .expect("server thread")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.signal_stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn raw(path: &Path) -> UnixStream {
    let stream = UnixStream::connect(path).expect("connect");
    stream.set_read_timeout(Some(SAFETY_NET)).expect("timeout");
    stream
}

/// Everything the server sends until it closes. A reset after the data
/// (the server closed with our bytes unread) ends the reading like EOF.
fn read_all(mut stream: &UnixStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

#[derive(Debug, PartialEq)]
enum Happened {
    Started,
    Gone(bool),
}

/// A handler that counts the lines it was given.
fn counting_echo(calls: &Arc<AtomicUsize>) -> impl Handler {
    let counted = Arc::clone(calls);
    move |_peer: Peer, line: Vec<u8>, _gone: Disconnect| {
        counted.fetch_add(1, Ordering::SeqCst);
        async move { line }
    }
}

/// Reads one line (with its `\n`) through `reader`.
#[track_caller]
fn next_answer(reader: &mut BufReader<&UnixStream>) -> Vec<u8> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).expect("an answer");
    line
}
