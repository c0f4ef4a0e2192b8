//! How `up` supervises the agents it launched: it waits for their exits,
//! the console and the signals, reports an agent that failed, and stops
//! them (SIGTERM to each process group, a grace period, then SIGKILL; a
//! sandbox ends at once).

use std::time::Instant;

use super::console::Console;
use super::launch::{describe, exit_parts, kill_sandbox, signal_group};
use super::{Agent, Session, STOP_GRACE};
use crate::commands::signals::Event;

impl Session {
    /// Waits for the agents, the console and the signals; returns 0, or 1
    /// when an agent exited non-zero on its own or the console could not
    /// open.
    pub(super) fn supervise(&mut self) -> u8 {
        let mut announced = false;
        loop {
            self.reap(false);
            if let Some(console) = &mut self.console {
                if console.exited() {
                    self.stop_agents();
                    break;
                }
            }
            if self.agents.iter().all(|a| a.exited) {
                if !self.stay && self.console.is_none() {
                    break;
                }
                if !announced {
                    tracing::info!("every agent has exited; serving until stopped");
                    announced = true;
                }
            }
            match self.runtime.block_on(self.signals.next()) {
                Event::ChildExited => {}
                Event::Stop => {
                    if let Some(console) = &mut self.console {
                        console.stop(&self.runtime, &mut self.signals, STOP_GRACE);
                    }
                    self.stop_agents();
                    break;
                }
            }
        }
        let console_failed = self.console.as_ref().is_some_and(Console::failed);
        u8::from(self.agents.iter().any(|a| a.failed) || console_failed)
    }

    /// Collects the agents that exited; reports non-zero exits unless they
    /// are the ones `up` is stopping.
    fn reap(&mut self, stopping: bool) {
        for agent in self.agents.iter_mut().filter(|a| !a.exited) {
            let status = match agent.child.try_wait() {
                Ok(None) => continue,
                Ok(Some(status)) => Some(status),
                Err(_) => None,
            };
            agent.exited = true;
            // The console's view of a harness agent ends with its exit.
            self.activities
                .exited(agent.run.as_str(), status, std::time::Instant::now());
            // `agents` says so from now on, with how it ended.
            if let Some(broker) = &self.broker {
                let (code, signal) = exit_parts(status);
                broker.note_exit(&agent.run, code, signal);
            }
            if stopping || status.is_some_and(|s| s.success()) {
                continue;
            }
            agent.failed = true;
            tracing::warn!(
                role = agent.role.as_str(),
                run = agent.run.as_str(),
                pid = agent.child.id(),
                status = describe(status).as_str(),
                "an agent failed"
            );
        }
    }

    /// SIGTERM to every agent still running, a grace period, then SIGKILL.
    pub(super) fn stop_agents(&mut self) {
        let running: Vec<&Agent> = self.agents.iter().filter(|a| !a.exited).collect();
        if running.is_empty() {
            return;
        }
        tracing::info!(agents = running.len(), "stopping the agents");
        for agent in running {
            if agent.sandboxed {
                // A sandbox ends at once (see `sandbox`'s documentation),
                // and before bwrap: once bwrap is gone, its child is no
                // longer listed as its own.
                kill_sandbox(&agent.child);
            }
            signal_group(&agent.child, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            self.reap(true);
            let left = deadline.saturating_duration_since(Instant::now());
            if self.agents.iter().all(|a| a.exited) || left.is_zero() {
                break;
            }
            let signals = &mut self.signals;
            // Built inside the runtime: a timer needs its context.
            let next = self
                .runtime
                .block_on(async move { tokio::time::timeout(left, signals.next()).await });
            match next {
                Ok(Event::ChildExited) => {}
                // A second signal, or the grace period is over.
                Ok(Event::Stop) | Err(_) => break,
            }
        }
        self.kill_agents();
    }

    /// SIGKILL every agent still running, with its process group, and reap
    /// it. Killed before its input closes: an agent released by the end of
    /// its input could otherwise still start something.
    pub(super) fn kill_agents(&mut self) {
        for agent in self.agents.iter_mut().filter(|a| !a.exited) {
            if agent.sandboxed {
                kill_sandbox(&agent.child);
            }
            signal_group(&agent.child, rustix::process::Signal::KILL);
            let _ = agent.child.kill();
            let _ = agent.child.wait();
            agent.stdin = None;
            agent.exited = true;
        }
        // Every sandbox has ended: its cgroup can go.
        for agent in &mut self.agents {
            drop(agent.cgroup.take());
        }
    }
}
