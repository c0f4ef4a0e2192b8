//! How `up` supervises the agents it launched: one loop on the calling
//! thread waits for whatever comes first (a signal, a child's exit, a
//! report from a sandbox's supervisor, an end the broker recorded, a
//! harness's usage, an order of the console, the launch switch, or the
//! next deadline of an agent's life), hands it to the agents' life
//! machines ([`super::runs`]), and carries out what they ask. Every time
//! the machines see is read here, from the one clock, and passed in.
//!
//! It runs until every agent is down for good (unless `--stay`, the
//! console, or launching switched off keep it serving), the console quits,
//! or a signal stops it. Stopping ends every live run (`exited`, why
//! `stopped`), sends SIGTERM to each program, waits for them (5 s, or
//! until a second signal) and then kills what is left, sandboxes whole.

use std::time::{Duration, Instant};

use mosaic_domain::evidence::{EndCause, Ending, RunEnd};
use tokio::sync::broadcast::error::RecvError;

use super::console::Console;
use super::harness::state::{measure, Cap, Used};
use super::launch::{kill_sandbox, signal_group};
use super::life::Exit;
use super::runs::Event;
use super::{RunningHost, STOP_GRACE};
use crate::commands::signals;

/// How often `up` measures what each live run wrote outside its grants
/// (its output file or transcript, its harness's state folder).
const STATE_WATCH: Duration = Duration::from_secs(1);

/// What woke the loop.
enum Woke {
    Signal(signals::Event),
    End(Result<RunEnd, RecvError>),
    Thread(Option<Event>),
    Usage,
    Deadline,
}

impl RunningHost {
    /// Waits for the agents, the console and the signals; returns 0, or 1
    /// when a run failed on its own or the console could not open.
    pub(super) fn supervise(&mut self) -> u8 {
        let mut announced = false;
        loop {
            let now = Instant::now();
            self.reap(now);
            self.settle(now);
            if let Some(console) = &mut self.console {
                if console.exited() {
                    self.stop_agents();
                    break;
                }
            }
            if self.idle() {
                if !self.stay && self.console.is_none() && self.launching {
                    break;
                }
                if !announced {
                    tracing::info!("every agent has exited; serving until stopped");
                    announced = true;
                }
            } else {
                announced = false;
            }
            match self.wait() {
                Woke::Signal(signals::Event::ChildExited) | Woke::Deadline => {}
                Woke::Signal(signals::Event::Stop) => {
                    if let Some(console) = &mut self.console {
                        console.stop(&self.runtime, &mut self.signals, STOP_GRACE);
                    }
                    self.stop_agents();
                    break;
                }
                Woke::End(Ok(end)) => self.on_end(&end, Instant::now()),
                Woke::End(Err(RecvError::Lagged(missed))) => tracing::warn!(
                    missed,
                    "up fell behind the ends of runs; a run someone else ended may still run"
                ),
                Woke::End(Err(RecvError::Closed)) => self.ends = None,
                Woke::Usage => self.on_usage(Instant::now()),
                Woke::Thread(Some(event)) => self.on_event(event),
                // The loop holds a sender: never.
                Woke::Thread(None) => {}
            }
        }
        let console_failed = self.console.as_ref().is_some_and(Console::failed);
        u8::from(self.failed || console_failed)
    }

    /// Hands each agent's life the time, carries out what it asks, and
    /// tells the console how each run is.
    fn settle(&mut self, now: Instant) {
        self.watch_state(now);
        for m in 0..self.members.len() {
            self.members[m].life.handle_tick(now);
            self.act(m, now);
        }
        self.publish_lives();
    }

    /// Each live run whose output and state folder reached its cap
    /// (`"stateMiB"`, or the files a state folder may hold) ends
    /// (`budget`): measured at most every [`STATE_WATCH`].
    fn watch_state(&mut self, now: Instant) {
        if now < self.state_watch {
            return;
        }
        self.state_watch = now + STATE_WATCH;
        for m in 0..self.members.len() {
            let Some(i) = self.members[m].run else {
                continue;
            };
            let agent = &self.agents[i];
            if agent.exited || !self.members[m].life.live() {
                continue;
            }
            let cap = Cap::of_mib(self.members[m].spec.state_mib);
            let output = measure(&agent.output, cap);
            let used = match &agent.state {
                Some(state) => {
                    let state = measure(state, cap);
                    Used {
                        bytes: output.bytes.saturating_add(state.bytes),
                        files: state.files,
                    }
                }
                None => output,
            };
            if cap.reached(used) {
                tracing::warn!(
                    role = agent.role.as_str(),
                    run = agent.run.as_str(),
                    bytes = used.bytes,
                    files = used.files,
                    "the run wrote as much outside its grants as it may (stateMiB, or the \
                     files of its state folder), and ends"
                );
                self.members[m].life.handle_state_full(now);
            }
        }
    }

    /// What a thread told the loop.
    fn on_event(&mut self, event: Event) {
        let now = Instant::now();
        match event {
            Event::Report { run, report } => self.on_report(&run, report, now),
            Event::ControlClosed { run } => self.on_control_closed(&run),
            Event::Order(order) => self.on_order(order),
            Event::LaunchRestored => self.on_restored(),
            Event::Work { run, work } => self.on_work(&run, work, now),
            Event::Released { run } => self.on_released(&run, now),
        }
    }

    /// Whether nothing runs or is planned: every agent down, every process
    /// reaped.
    fn idle(&self) -> bool {
        self.members.iter().all(|m| m.life.down()) && self.agents.iter().all(|a| a.exited)
    }

    /// Waits for the first thing that wakes the loop.
    fn wait(&mut self) -> Woke {
        let watching = self
            .agents
            .iter()
            .any(|a| !a.exited)
            .then_some(self.state_watch);
        let deadline = self
            .members
            .iter()
            .filter_map(|m| m.life.next_deadline())
            .chain(watching)
            .min();
        let usage = self.activities.usage_changed();
        let (signals, ends, events) = (&mut self.signals, &mut self.ends, &mut self.events.1);
        self.runtime.block_on(async {
            let sleep = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            let end = async {
                match ends {
                    Some(ends) => ends.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                event = signals.next() => Woke::Signal(event),
                end = end => Woke::End(end),
                event = events.recv() => Woke::Thread(event),
                () = usage.notified() => Woke::Usage,
                () = sleep => Woke::Deadline,
            }
        })
    }

    /// Collects the runs whose process (bwrap, or the unsandboxed
    /// program) exited, and tells their agents' lives.
    fn reap(&mut self, now: Instant) {
        for i in 0..self.agents.len() {
            let agent = &mut self.agents[i];
            if agent.exited {
                continue;
            }
            let status = match agent.child.try_wait() {
                Ok(None) => continue,
                Ok(Some(status)) => Some(status),
                Err(_) => None,
            };
            agent.exited = true;
            agent.control = None;
            let exit = Exit::of(status);
            // In a sandbox, how its program ended; else the process's own.
            let told = match (agent.sandboxed, agent.program_exit) {
                (true, Some(program)) => program,
                (true, None) | (false, _) => exit,
            };
            if !agent.sandboxed {
                agent.program_exit = Some(exit);
            }
            self.activities.exited(agent.run.as_str(), status, now);
            // `agents` says so from now on, with how it ended.
            if let Some(broker) = &self.broker {
                let (code, signal) = told.parts();
                broker.note_exit(&agent.run, code, signal);
            }
            let m = agent.member;
            if self.members[m].run == Some(i) {
                self.members[m].life.handle_gone(now, exit);
            }
        }
        // A sandbox that has ended leaves its cgroup.
        for agent in self.agents.iter_mut().filter(|a| a.exited) {
            drop(agent.cgroup.take());
        }
    }

    /// Ends every live run and stops it: SIGTERM to each program, a grace
    /// period, then SIGKILL to what is left.
    pub(super) fn stop_agents(&mut self) {
        let now = Instant::now();
        let running = self.agents.iter().filter(|a| !a.exited).count();
        if running > 0 {
            tracing::info!(agents = running, "stopping the agents");
        }
        for m in 0..self.members.len() {
            self.members[m].life.handle_shutdown(now);
            self.act(m, now);
        }
        let deadline = now + STOP_GRACE;
        loop {
            let now = Instant::now();
            self.reap(now);
            self.settle(now);
            let left = deadline.saturating_duration_since(now);
            if self.agents.iter().all(|a| a.exited) || left.is_zero() {
                break;
            }
            match self.wait_stopping(left) {
                Some(Woke::Signal(signals::Event::Stop)) | None => break,
                // Programs that stopped as asked: their sandboxes go at
                // once.
                Some(Woke::Thread(Some(
                    event @ (Event::Report { .. } | Event::ControlClosed { .. }),
                ))) => self.on_event(event),
                Some(
                    Woke::Signal(signals::Event::ChildExited)
                    | Woke::Thread(_)
                    | Woke::End(_)
                    | Woke::Usage
                    | Woke::Deadline,
                ) => {}
            }
        }
        self.kill_agents();
    }

    /// Waits at most `left` for a signal or a thread's word while
    /// stopping; `None` when the time is up.
    fn wait_stopping(&mut self, left: Duration) -> Option<Woke> {
        let (signals, events) = (&mut self.signals, &mut self.events.1);
        self.runtime
            .block_on(async {
                tokio::time::timeout(left, async {
                    tokio::select! {
                        event = signals.next() => Woke::Signal(event),
                        event = events.recv() => Woke::Thread(event),
                    }
                })
                .await
            })
            .ok()
    }

    /// SIGKILL every run still running, with its process group and its
    /// whole sandbox, reap it, and record the end of every bound run not
    /// yet ended. Killed before its input closes: an agent released by the
    /// end of its input could otherwise still start something.
    pub(super) fn kill_agents(&mut self) {
        for agent in self.agents.iter_mut().filter(|a| !a.exited) {
            if agent.sandboxed {
                kill_sandbox(&agent.child);
            }
            signal_group(&agent.child, rustix::process::Signal::KILL);
            let _ = agent.child.kill();
            let _ = agent.child.wait();
            agent.stdin = None;
            agent.control = None;
            agent.exited = true;
        }
        for agent in self.agents.iter_mut().filter(|a| a.ending.is_none()) {
            let ending = Ending::of_cause(EndCause::Exited);
            agent.ending = Some((ending, None));
            if let Some(end) = &agent.transcript_end {
                end.handle_ended(ending);
            }
            if let Some(broker) = &self.broker {
                // A run never bound is unknown to the broker: nothing to end.
                let _ = broker.end_run(&agent.run, ending);
            }
        }
        // Every sandbox has ended: its cgroup can go.
        for agent in &mut self.agents {
            drop(agent.cgroup.take());
        }
    }
}
