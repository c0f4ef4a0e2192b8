//! What the human has outside the sandbox: a tmux server, an abstract
//! socket, a process of its own and the terminal `up` runs in.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support::up::private_dir;

/// What the human has outside the sandbox: a private tmux server with a
/// session `human` running its shell, an abstract socket, a process of its
/// own, and the terminal `up` runs in. Dropped, it stops them.
pub struct Outside {
    pub tmux_dir: PathBuf,
    pub tmux_socket: PathBuf,
    pub abstract_name: String,
    _abstract: UnixListener,
    /// The human's process, for `kill` and `ptrace`.
    pub victim: Child,
    /// The terminal's master side, held while `up` runs.
    _master: std::os::fd::OwnedFd,
    /// The terminal's other side: `up`'s standard input and controlling
    /// terminal.
    pub terminal: std::fs::File,
}

impl Outside {
    pub fn start(work: &Path) -> Outside {
        let tmux_dir = work.join("tmux");
        private_dir(&tmux_dir);
        let name = "mosaic-sandbox-probe";
        let started = Command::new("tmux")
            .args([
                "-L",
                name,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "human",
                "sh",
            ])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            // The shell of the human's panes (nobody's login shell is
            // nologin).
            .env("SHELL", "/bin/sh")
            .env("HOME", work)
            .env("TMUX_TMPDIR", &tmux_dir)
            .status()
            .expect("tmux");
        assert!(started.success(), "the human's tmux server started");
        let uid = rustix::process::getuid().as_raw();
        let tmux_socket = tmux_dir.join(format!("tmux-{uid}")).join(name);
        assert!(tmux_socket.exists(), "{tmux_socket:?}");
        // Tests of this file run at once: each serves a name of its own.
        static SERVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SERVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let abstract_name = format!("mosaic-sandbox-probe-{}-{n}", std::process::id());
        let address =
            SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("an abstract name");
        let listener = UnixListener::bind_addr(&address).expect("an abstract socket");
        let victim = Command::new("sh")
            .args(["-c", "read _"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("the human's process");
        let (master, terminal) = pty();
        Outside {
            tmux_dir,
            tmux_socket,
            abstract_name,
            _abstract: listener,
            victim,
            _master: master,
            terminal,
        }
    }

    /// Whether the human's process is still running.
    pub fn victim_alive(&mut self) -> bool {
        self.victim.try_wait().expect("try_wait").is_none()
    }
}

/// A new pty: its master side, and its other side opened read-write (not
/// made this process's controlling terminal), for `up` to run in.
pub fn pty() -> (std::os::fd::OwnedFd, std::fs::File) {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    let master =
        openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("a pty");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let slave = ptsname(&master, Vec::new()).expect("ptsname");
    let terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(slave.to_str().expect("a path"))
        .expect("the terminal");
    (master, terminal)
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", "mosaic-sandbox-probe", "kill-server"])
            .env_clear()
            .env("TMUX_TMPDIR", &self.tmux_dir)
            .status();
        let _ = self.victim.kill();
        let _ = self.victim.wait();
    }
}
