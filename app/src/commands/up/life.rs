//! One agent's life under `up`, as a machine without I/O: which run it is
//! in, whether its program runs, when it starts again, and when and why
//! its run ends. The supervisor ([`super::supervise`]) feeds it what
//! happened (`handle_*`, each with the time it happened), does what it
//! asks ([`Life::poll_effect`]) and wakes it at [`Life::next_deadline`];
//! the tests drive it with made-up times, so no test waits for a backoff.
//!
//! # A run's life
//!
//! A run is its sandbox: the program inside may exit and start again
//! without ending the run. After the program exits, `"restart"` decides
//! ([`Restart`]): `no` ends the run; `on-failure` starts it again after a
//! non-zero exit or a signal, `always` after any exit. Each start again
//! waits a backoff, 1 s doubled for each restart already counted in the
//! window of `"restartLimit"` (at most 60 s); past `count` restarts in
//! that window, the run ends `failed` ([`Why::RestartLimit`]).
//!
//! An unsandboxed run cannot outlive its process: its exit ends the run,
//! and a restart is a new run ([`Effect::Launch`]). So is a restart after
//! the sandbox itself is gone (bwrap or the program inside killed from
//! outside): the run ends with how it ended, and the next starts under the
//! same policy and the same count.
//!
//! A harness agent with `"idle": "exit"` in a sandbox sleeps instead
//! when its program exits 0 (its hook let it stop, nothing being left for
//! it): the run lives on with no program ([`Phase::Sleeping`]), `up` waits
//! on the run's change feed ([`Effect::Sleep`]), and the work that arrives
//! ([`Life::handle_work`]) starts the program again in the run, its
//! conversation resumed and the work as its prompt ([`Effect::Wake`]). A
//! wake is not a restart: it is counted by no limit.
//!
//! A run also ends when its budget is spent ([`Why::Budget`]), and when
//! someone else ends it (the human's `run.end`, a revoke): the machine
//! then stops it, SIGTERM to the program ([`Effect::Term`]) and, once the
//! program exited or `"stopGraceS"` passed, SIGKILL to the whole sandbox
//! ([`Effect::Kill`]). An end the broker records for `up` is
//! [`Effect::End`]; every end, whoever made it, is recorded once.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mosaic_domain::evidence::{EndCause, Ending};
use mosaic_domain::Refusal;

use crate::commands::team::{LifeSpec, Restart};

/// The first backoff before a program starts again.
pub(super) const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest backoff.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How a process ended, as `wait` said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exit {
    /// It exited with this status.
    Status(i32),
    /// A signal killed it.
    Signal(i32),
    /// How is unknown (it could not be waited for).
    Unknown,
}

impl Exit {
    /// From an exit status `wait` returned (`None`: it could not).
    pub(super) fn of(status: Option<std::process::ExitStatus>) -> Exit {
        use std::os::unix::process::ExitStatusExt as _;
        match status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => Exit::Status(code),
                (None, Some(signal)) => Exit::Signal(signal),
                (None, None) => Exit::Unknown,
            },
            None => Exit::Unknown,
        }
    }

    /// From the two parts a report carries.
    pub(super) fn of_parts(code: Option<i32>, signal: Option<i32>) -> Exit {
        match (code, signal) {
            (Some(code), _) => Exit::Status(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Unknown,
        }
    }

    /// Whether it is a success: status 0.
    pub(super) fn success(self) -> bool {
        self == Exit::Status(0)
    }

    /// Its exit code and signal, each where it applies.
    pub(super) fn parts(self) -> (Option<i32>, Option<i32>) {
        match self {
            Exit::Status(code) => (Some(code), None),
            Exit::Signal(signal) => (None, Some(signal)),
            Exit::Unknown => (None, None),
        }
    }

    /// The run's ending for this exit: `exited` for status 0 (or
    /// unknown), `failed` for the rest. A status or signal out of range
    /// (which no `wait` gives) is kept as the cause alone.
    pub(super) fn ending(self) -> Ending {
        let (code, signal) = self.parts();
        Ending::of_exit(code, signal).unwrap_or_else(|_: Refusal| {
            Ending::of_cause(if self.success() || self == Exit::Unknown {
                EndCause::Exited
            } else {
                EndCause::Failed
            })
        })
    }
}

/// Which budget limit a run reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// `turns`.
    Turns,
    /// `tokens`.
    Tokens,
    /// `costUsd`.
    Cost,
    /// `wallS`.
    Wall,
    /// `stateMiB`, or the files a run may leave: what its activity wrote
    /// outside its grants.
    State,
}

impl Limit {
    /// The key's name, as the configuration and the log say it.
    pub(super) fn key(self) -> &'static str {
        match self {
            Limit::Turns => "turns",
            Limit::Tokens => "tokens",
            Limit::Cost => "costUsd",
            Limit::Wall => "wallS",
            Limit::State => "stateMiB",
        }
    }
}

/// Why `up` ended a run, beyond its cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// Its program (or, unsandboxed, its process) ended, and is not
    /// started again in the run.
    Exited,
    /// Its sandbox was gone before its program ended.
    SandboxGone,
    /// Its program failed more often than `restartLimit` allows.
    RestartLimit,
    /// It reached this limit of its budget.
    Budget(Limit),
    /// `up` itself stops.
    Stopped,
}

/// What a run used so far, as its harness reported it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Spent {
    /// Turns.
    pub(super) turns: u64,
    /// Input and output tokens together.
    pub(super) tokens: u64,
    /// Cost in US dollars.
    pub(super) cost_usd: f64,
}

/// What the machine asks the supervisor to do, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Effect {
    /// Start the program again inside the run's sandbox, and note the
    /// restart.
    Restart,
    /// Record the run's end.
    End(Ending, Why),
    /// SIGTERM to the run's program.
    Term,
    /// SIGKILL to the run's whole sandbox (or process group).
    Kill,
    /// Launch a new run; [`Life::handle_launched`] or
    /// [`Life::handle_launch_failed`] says how it went.
    Launch,
    /// Wait on the run's change feed for work, with no program running;
    /// [`Life::handle_work`] says when it arrived.
    Sleep,
    /// Start the program again inside the run's sandbox, its conversation
    /// resumed, with the work that arrived as its prompt.
    Wake,
}

/// Where an agent's life is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// No run, none planned: the first launch is not done, launching is
    /// off, or the last run ended for good.
    Down,
    /// A run lives, launched at `launched`, and its program runs.
    Running { launched: Instant },
    /// A run lives; its program exited and starts again at `at`.
    Restarting { launched: Instant, at: Instant },
    /// A run lives; its program ended with nothing left to do, and starts
    /// again when work arrives.
    Sleeping { launched: Instant },
    /// The run is being stopped: its program had SIGTERM, and the whole
    /// sandbox gets SIGKILL at `kill_at` unless it is gone before.
    Stopping { kill_at: Instant },
    /// The run ended; its sandbox had SIGKILL and is waited for.
    Closing,
    /// No run; a new one is launched at `at`.
    Relaunching { at: Instant },
}

/// One agent's life: see the module documentation.
#[derive(Debug)]
pub(super) struct Life {
    spec: LifeSpec,
    sandboxed: bool,
    /// Whether its run sleeps when its program exits 0.
    sleeps: bool,
    phase: Phase,
    /// Whether the current run's end is recorded (by `up` or by anyone).
    ended: bool,
    /// When each restart counted in the window was decided, oldest first.
    restarts: VecDeque<Instant>,
    effects: VecDeque<Effect>,
}

impl Life {
    /// An agent with `spec`, whose runs are sandboxed or not, not launched.
    pub(super) fn new(spec: LifeSpec, sandboxed: bool) -> Life {
        Life {
            spec,
            sandboxed,
            sleeps: false,
            phase: Phase::Down,
            ended: false,
            restarts: VecDeque::new(),
            effects: VecDeque::new(),
        }
    }

    /// The same agent, whose run sleeps when its program exits 0 (a
    /// harness agent with `"idle": "exit"`), when `sleeps` and its runs
    /// are sandboxed: an unsandboxed run is its program, and cannot
    /// outlive it.
    pub(super) fn sleeping_when_idle(mut self, sleeps: bool) -> Life {
        self.sleeps = sleeps && self.sandboxed;
        self
    }

    /// Where it is.
    pub(super) fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether a run of it lives (launched, not ended).
    pub(super) fn live(&self) -> bool {
        !self.ended
            && matches!(
                self.phase,
                Phase::Running { .. } | Phase::Restarting { .. } | Phase::Sleeping { .. }
            )
    }

    /// Whether it is down for good: no run, nothing planned.
    pub(super) fn down(&self) -> bool {
        self.phase == Phase::Down
    }

    /// The next effect to carry out, if any.
    pub(super) fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// The earliest time it must be woken at ([`Life::handle_tick`]).
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let wall = |launched: Instant| self.spec.budget.wall.map(|w| launched + w);
        match self.phase {
            Phase::Down | Phase::Closing => None,
            Phase::Running { launched } | Phase::Sleeping { launched } => wall(launched),
            Phase::Restarting { launched, at } => Some(wall(launched).map_or(at, |w| w.min(at))),
            Phase::Stopping { kill_at, .. } => Some(kill_at),
            Phase::Relaunching { at } => Some(at),
        }
    }

    /// A run was launched at `now`; its program runs.
    pub(super) fn handle_launched(&mut self, now: Instant) {
        self.phase = Phase::Running { launched: now };
        self.ended = false;
    }

    /// A launch failed (launching is off, or the launch itself): the agent
    /// is down until it is started again.
    pub(super) fn handle_launch_failed(&mut self) {
        self.phase = Phase::Down;
    }

    /// The human asked to start the agent again (the console's `S`): a
    /// new run now, with the restarts counted from zero; only when it is
    /// down. Whether it was.
    pub(super) fn handle_start(&mut self) -> bool {
        if self.phase != Phase::Down {
            return false;
        }
        self.restarts.clear();
        self.effects.push_back(Effect::Launch);
        true
    }

    /// The run's program exited at `now`, its sandbox still there (a
    /// sandboxed run's report). Unsandboxed, the process is the run's:
    /// use [`Life::handle_gone`].
    pub(super) fn handle_program_exit(&mut self, now: Instant, exit: Exit) {
        match self.phase {
            Phase::Running { launched } if self.sleeps && exit.success() => {
                self.phase = Phase::Sleeping { launched };
                self.effects.push_back(Effect::Sleep);
            }
            Phase::Running { launched } => match self.restart_after(now, exit) {
                Ok(backoff) => {
                    self.phase = Phase::Restarting {
                        launched,
                        at: now + backoff,
                    };
                }
                Err(why) => {
                    self.end(ending_for(exit, why), why);
                    self.effects.push_back(Effect::Kill);
                    self.phase = Phase::Closing;
                }
            },
            // Stopped as asked: nothing is left to wait for but the kill.
            Phase::Stopping { .. } => {
                self.effects.push_back(Effect::Kill);
                self.phase = Phase::Closing;
            }
            Phase::Down
            | Phase::Restarting { .. }
            | Phase::Sleeping { .. }
            | Phase::Closing
            | Phase::Relaunching { .. } => {}
        }
    }

    /// Work arrived for the sleeping run: its program starts again.
    /// Whether it was asleep to take it (else the run is ending, or its
    /// program runs and hears of the work itself).
    pub(super) fn handle_work(&mut self) -> bool {
        match self.phase {
            Phase::Sleeping { launched } if !self.ended => {
                self.phase = Phase::Running { launched };
                self.effects.push_back(Effect::Wake);
                true
            }
            Phase::Sleeping { .. }
            | Phase::Running { .. }
            | Phase::Restarting { .. }
            | Phase::Stopping { .. }
            | Phase::Closing
            | Phase::Relaunching { .. }
            | Phase::Down => false,
        }
    }

    /// The sleeping run can never be woken (its agent released its role,
    /// so nothing concerns it any more): it ends as its program did, with
    /// status 0, and its sandbox goes.
    pub(super) fn handle_done(&mut self) {
        match self.phase {
            Phase::Sleeping { .. } => {
                self.end(Exit::Status(0).ending(), Why::Exited);
                self.effects.push_back(Effect::Kill);
                self.phase = Phase::Closing;
            }
            Phase::Running { .. }
            | Phase::Restarting { .. }
            | Phase::Stopping { .. }
            | Phase::Closing
            | Phase::Relaunching { .. }
            | Phase::Down => {}
        }
    }

    /// The run's sandbox (or, unsandboxed, its process) is gone, ended so,
    /// at `now`.
    pub(super) fn handle_gone(&mut self, now: Instant, exit: Exit) {
        match self.phase {
            Phase::Running { .. } | Phase::Restarting { .. } | Phase::Sleeping { .. } => {
                let why = if self.sandboxed {
                    Why::SandboxGone
                } else {
                    Why::Exited
                };
                // A run's end is its process's: the status it ended with.
                if !self.ended {
                    let ending = match self.restart_after(now, exit) {
                        Ok(backoff) => {
                            self.phase = Phase::Relaunching { at: now + backoff };
                            exit.ending()
                        }
                        Err(Why::RestartLimit) => {
                            self.phase = Phase::Down;
                            self.end(ending_for(exit, Why::RestartLimit), Why::RestartLimit);
                            return;
                        }
                        Err(_) => {
                            self.phase = Phase::Down;
                            exit.ending()
                        }
                    };
                    self.end(ending, why);
                } else {
                    self.phase = Phase::Down;
                }
            }
            Phase::Stopping { .. } | Phase::Closing => self.phase = Phase::Down,
            Phase::Down | Phase::Relaunching { .. } => {}
        }
    }

    /// The broker recorded the end of the current run at `now`, which
    /// `up` did not ask for (the human's, a revoke's): stop it.
    pub(super) fn handle_ended(&mut self, now: Instant) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.stop(now);
    }

    /// The run used `spent` so far, at `now`: past a limit of its budget,
    /// it ends (`budget`) and is stopped.
    pub(super) fn handle_usage(&mut self, now: Instant, spent: Spent) {
        if !self.live() {
            return;
        }
        let budget = self.spec.budget;
        let reached = [
            (Limit::Turns, budget.turns.is_some_and(|t| spent.turns >= t)),
            (
                Limit::Tokens,
                budget.tokens.is_some_and(|t| spent.tokens >= t),
            ),
            (
                Limit::Cost,
                // Millionths of a dollar: what the limit was parsed into.
                budget
                    .cost_micro_usd
                    .is_some_and(|c| spent.cost_usd * 1e6 >= c as f64),
            ),
        ]
        .into_iter()
        .find_map(|(limit, reached)| reached.then_some(limit));
        if let Some(limit) = reached {
            self.spend(now, limit);
        }
    }

    /// What the run wrote outside its grants (its output, its harness's
    /// state) reached its cap, at `now`: it ends (`budget`) and is
    /// stopped.
    pub(super) fn handle_state_full(&mut self, now: Instant) {
        if self.live() {
            self.spend(now, Limit::State);
        }
    }

    /// Time passed: `now` is at or after a deadline it gave, or any time.
    pub(super) fn handle_tick(&mut self, now: Instant) {
        let wall = self.spec.budget.wall;
        let wall_spent = |launched: Instant| wall.is_some_and(|w| now >= launched + w);
        match self.phase {
            Phase::Running { launched } if wall_spent(launched) => self.spend(now, Limit::Wall),
            Phase::Restarting { launched, .. } | Phase::Sleeping { launched }
                if wall_spent(launched) =>
            {
                self.spend(now, Limit::Wall);
            }
            Phase::Restarting { launched, at } if now >= at => {
                self.effects.push_back(Effect::Restart);
                self.phase = Phase::Running { launched };
            }
            Phase::Stopping { kill_at } if now >= kill_at => {
                self.effects.push_back(Effect::Kill);
                self.phase = Phase::Closing;
            }
            Phase::Relaunching { at } if now >= at => {
                self.effects.push_back(Effect::Launch);
                // Until the launch says how it went.
                self.phase = Phase::Down;
            }
            Phase::Running { .. }
            | Phase::Restarting { .. }
            | Phase::Sleeping { .. }
            | Phase::Stopping { .. }
            | Phase::Relaunching { .. }
            | Phase::Closing
            | Phase::Down => {}
        }
    }

    /// `up` itself stops at `now`: the run ends (`exited`, or how its
    /// program exited when it did on its own) and is stopped, and nothing
    /// starts again.
    pub(super) fn handle_shutdown(&mut self, now: Instant) {
        match self.phase {
            Phase::Running { .. } | Phase::Restarting { .. } | Phase::Sleeping { .. } => {
                if !self.ended {
                    self.end(Ending::of_cause(EndCause::Exited), Why::Stopped);
                }
                self.stop(now);
            }
            Phase::Relaunching { .. } => self.phase = Phase::Down,
            Phase::Stopping { .. } | Phase::Closing | Phase::Down => {}
        }
    }

    /// Ends the run for its budget's `limit` and stops it.
    fn spend(&mut self, now: Instant, limit: Limit) {
        self.end(Ending::of_cause(EndCause::Budget), Why::Budget(limit));
        self.stop(now);
    }

    /// Records the end, once.
    fn end(&mut self, ending: Ending, why: Why) {
        if !self.ended {
            self.ended = true;
            self.effects.push_back(Effect::End(ending, why));
        }
    }

    /// Stops the live run: SIGTERM to its program when one runs, SIGKILL
    /// to its sandbox at once when none does (or the grace is zero).
    fn stop(&mut self, now: Instant) {
        match self.phase {
            Phase::Running { .. } if !self.spec.stop_grace.is_zero() => {
                self.effects.push_back(Effect::Term);
                self.phase = Phase::Stopping {
                    kill_at: now + self.spec.stop_grace,
                };
            }
            // No program runs to stop: the sandbox goes at once.
            Phase::Running { .. } | Phase::Restarting { .. } | Phase::Sleeping { .. } => {
                self.effects.push_back(Effect::Kill);
                self.phase = Phase::Closing;
            }
            Phase::Relaunching { .. } => self.phase = Phase::Down,
            Phase::Down | Phase::Stopping { .. } | Phase::Closing => {}
        }
    }

    /// Whether the program starts again after `exit` at `now`, and after
    /// which backoff; else why not. A restart is counted when decided.
    fn restart_after(&mut self, now: Instant, exit: Exit) -> Result<Duration, Why> {
        let wanted = match self.spec.restart {
            Restart::No => false,
            Restart::OnFailure => !exit.success(),
            Restart::Always => true,
        };
        if !wanted {
            return Err(Why::Exited);
        }
        let window = self.spec.limit.within;
        while self
            .restarts
            .front()
            .is_some_and(|&at| now.saturating_duration_since(at) >= window)
        {
            self.restarts.pop_front();
        }
        let counted = self.restarts.len();
        if counted >= self.spec.limit.count as usize {
            return Err(Why::RestartLimit);
        }
        self.restarts.push_back(now);
        Ok(backoff(counted))
    }
}

/// The backoff before a restart when `counted` restarts are already in
/// the window: 1 s, doubled for each, at most 60 s.
pub(super) fn backoff(counted: usize) -> Duration {
    let doublings = u32::try_from(counted).unwrap_or(u32::MAX).min(6);
    (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

/// The ending of a run that ends after `exit`, for `why`: the exit's own,
/// but `failed` when its restarts were spent (even after status 0).
fn ending_for(exit: Exit, why: Why) -> Ending {
    match why {
        Why::RestartLimit if exit.success() || exit == Exit::Unknown => {
            Ending::of_cause(EndCause::Failed)
        }
        Why::RestartLimit | Why::Exited | Why::SandboxGone | Why::Budget(_) | Why::Stopped => {
            exit.ending()
        }
    }
}

#[cfg(test)]
#[path = "life_tests.rs"]
mod tests;
