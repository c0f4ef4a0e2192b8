//! A private tmux server for the tests of a real terminal: its own `-L`
//! name and `TMUX_TMPDIR`, no `TMUX` inherited, driven with `send-keys`
//! and read with `capture-pane`. Every wait reads the screen again after
//! a short pause ([`PAUSE`]), bounded by a deadline.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::WAIT;

/// The pause between two reads of a screen, a file or `/proc`.
pub const PAUSE: Duration = Duration::from_millis(20);

/// A private tmux server running one session, `console`.
pub struct Tmux {
    name: String,
    dir: tempfile::TempDir,
}

impl Tmux {
    /// A detached session of `width`×`height` running `command`, started
    /// with an empty environment but `PATH`, `TERM` and `SHELL`: the tmux server
    /// detaches, so the test process is not among the console's ancestors.
    pub fn start(command: &str, width: u16, height: u16) -> Tmux {
        let dir = tempfile::tempdir().expect("a tmux folder");
        let tmux = Tmux {
            name: format!("mosaic-console-{}", std::process::id()),
            dir,
        };
        let started = tmux
            .command()
            .args(["new-session", "-d", "-s", "console", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .arg(command)
            .status()
            .expect("tmux");
        assert!(started.success(), "tmux new-session: {started}");
        tmux
    }

    pub fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command
            .arg("-L")
            .arg(&self.name)
            .arg("-f")
            .arg("/dev/null")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TERM", "xterm-256color")
            // Else tmux runs commands with the user's login shell, which
            // for an unprivileged uid such as nobody is `nologin`.
            .env("SHELL", "/bin/sh")
            .env("TMUX_TMPDIR", self.dir.path())
            .stdin(Stdio::null());
        command
    }

    /// `send-keys` of tmux key names (`Enter`, `]`, `y`).
    pub fn keys(&self, keys: &[&str]) {
        let sent = self
            .command()
            .args(["send-keys", "-t", "console"])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(sent.success(), "send-keys {keys:?}");
    }

    /// The screen's text (wrapped lines joined), or `None` once the
    /// session is gone.
    pub fn screen(&self) -> Option<String> {
        let Output { status, stdout, .. } = self
            .command()
            .args(["capture-pane", "-p", "-J", "-t", "console"])
            .output()
            .expect("tmux capture-pane");
        status
            .success()
            .then(|| String::from_utf8_lossy(&stdout).into_owned())
    }

    /// The screen's rows as the terminal shows them: a line that wrapped
    /// is two rows here.
    pub fn rows(&self) -> Vec<String> {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", "console"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The screen's bytes with the escape sequences tmux keeps for it
    /// (`capture-pane -e`): its attributes and colours.
    pub fn screen_escaped(&self) -> Vec<u8> {
        self.command()
            .args(["capture-pane", "-p", "-e", "-t", "console"])
            .output()
            .expect("tmux capture-pane")
            .stdout
    }

    /// A tmux format's value for the pane (`#{pane_title}`).
    pub fn format(&self, format: &str) -> String {
        let out = self
            .command()
            .args(["display-message", "-p", "-t", "console", format])
            .output()
            .expect("tmux display-message");
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// Reads the screen until it shows `text`, within `within`.
    #[track_caller]
    pub fn wait_for(&self, text: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.screen().unwrap_or_default();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{text:?} not on screen within {within:?}:\n{screen}"
            );
            std::thread::sleep(PAUSE);
        }
    }

    /// Reads the screen until the session has ended, within [`WAIT`].
    #[track_caller]
    pub fn wait_gone(&self) {
        let deadline = Instant::now() + WAIT;
        while let Some(screen) = self.screen() {
            assert!(Instant::now() < deadline, "still running:\n{screen}");
            std::thread::sleep(PAUSE);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
    }
}
