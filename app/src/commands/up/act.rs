//! What the supervising loop ([`super::supervise`]) does with each thing
//! it hears: it hands the agent's life machine ([`super::life`]) what
//! happened and carries out what the machine asks ([`RunningHost::act`]):
//! start the program again in its sandbox, record the run's end, stop or
//! kill it, launch a new run, wait on a sleeping run's feed and wake it
//! with the work that arrived ([`super::wake`]); it notes restarts and
//! usage with the broker and tells the console how each run is.

use std::time::Instant;

use mosaic_adapters::wire::Usage;
use mosaic_client::wire::life::{self as line, Order};
use mosaic_domain::evidence::{EndCause, Ending, RunEnd};
use mosaic_domain::{Refusal, RunId};
use rustix::process::Signal;

use super::harness::activity::LifeEntry;
use super::harness::Input;
use super::launch::{kill_sandbox, signal_group};
use super::life::{Effect, Exit, Phase, Spent, Why};
use super::runs::Work;
use super::runs::{describe, Agent};
use super::sandbox::control::{Order as Command, Report, Stdin};
use super::switch;
use super::wake;
use super::{RunningHost, READY_LINE};

/// Orders `agent`'s supervisor to start its program with `order`; a
/// supervisor that takes no order is logged, and the run's end will say
/// the rest.
fn send_start(agent: &mut Agent, order: &Command) {
    if let Some(control) = &mut agent.control {
        if let Err(e) = control.order(order) {
            tracing::warn!(
                run = agent.run.as_str(),
                cause = e.to_string().as_str(),
                "the sandbox's supervisor took no start"
            );
        }
    }
}

/// The order that starts its program: its input as the harness or the
/// command reads it (`ready` for a command; pi's prompt, the pipe held
/// open; nothing for Claude Code).
fn start_order(agent: &Agent) -> Command {
    let stdin = match &agent.input {
        None => Stdin::Text {
            text: READY_LINE.to_owned(),
            hold: false,
        },
        Some(Input::Line(line)) => Stdin::Text {
            text: format!("{line}\n"),
            hold: true,
        },
        Some(Input::Null) => Stdin::Null,
    };
    Command::Start {
        args: Vec::new(),
        argv: None,
        env: Vec::new(),
        stdin,
    }
}

impl RunningHost {
    /// The index of the run `run`.
    pub(super) fn agent_of(&self, run: &RunId) -> Option<usize> {
        self.agents.iter().position(|a| &a.run == run)
    }

    /// Whether run `i` is its agent's current run.
    fn current(&self, i: usize) -> bool {
        self.members[self.agents[i].member].run == Some(i)
    }

    /// Lets run `i` proceed once its capability is sealed: unsandboxed,
    /// one `ready` line on its standard input (then end of input, or for
    /// pi its prompt and the pipe held open); sandboxed, the first start
    /// order, which carries the same.
    pub(super) fn release(&mut self, i: usize) {
        let agent = &mut self.agents[i];
        let order = start_order(agent);
        if let Some(control) = &mut agent.control {
            if let Err(e) = control.order(&order) {
                tracing::warn!(
                    run = agent.run.as_str(),
                    cause = e.to_string().as_str(),
                    "the sandbox's supervisor took no start"
                );
            }
            return;
        }
        if let Some(mut stdin) = agent.stdin.take() {
            use std::io::Write as _;
            // An agent that already exited cannot read it; its exit is
            // reported like any other.
            let _ = stdin.write_all(READY_LINE.as_bytes());
            if let Some(Input::Line(line)) = &agent.input {
                let _ = stdin
                    .write_all(format!("{line}\n").as_bytes())
                    .and_then(|()| stdin.flush());
                agent.stdin = Some(stdin);
            }
        }
    }

    /// Carries out what agent `m`'s life asks, at `now`.
    pub(super) fn act(&mut self, m: usize, now: Instant) {
        while let Some(effect) = self.members[m].life.poll_effect() {
            let current = self.members[m].run;
            match (effect, current) {
                (Effect::Launch, _) => self.relaunch(m, now),
                (Effect::Restart, Some(i)) => self.restart(i, now),
                (Effect::End(ending, why), Some(i)) => self.end(i, ending, why),
                (Effect::Term, Some(i)) => self.signal(i, Signal::TERM),
                (Effect::Kill, Some(i)) => self.signal(i, Signal::KILL),
                (Effect::Sleep, Some(i)) => self.sleep(i),
                (Effect::Wake, Some(i)) => self.wake(i, now),
                // No run: nothing to start, end, stop or wake.
                (
                    Effect::Restart
                    | Effect::End(..)
                    | Effect::Term
                    | Effect::Kill
                    | Effect::Sleep
                    | Effect::Wake,
                    None,
                ) => {}
            }
        }
    }

    /// Starts run `i`'s program again inside its sandbox.
    fn restart(&mut self, i: usize, now: Instant) {
        let agent = &mut self.agents[i];
        agent.restarts += 1;
        let order = start_order(agent);
        tracing::info!(
            role = agent.role.as_str(),
            run = agent.run.as_str(),
            restarts = agent.restarts,
            "the agent's program starts again in its run"
        );
        send_start(agent, &order);
        self.activities.restarted(agent.run.as_str(), now);
        if let Some(broker) = &self.broker {
            broker.note_restart(&agent.run);
        }
    }

    /// Run `i`'s program ended with nothing left to do: `up` waits on the
    /// run's feed for work, from the furthest cursor handed to the run.
    fn sleep(&mut self, i: usize) {
        let agent = &self.agents[i];
        let seen = self.broker.as_ref().and_then(|b| b.seen_cursor(&agent.run));
        let since = seen.map_or(agent.since, |seen| seen.max(agent.since));
        tracing::info!(
            role = agent.role.as_str(),
            run = agent.run.as_str(),
            since,
            "the agent is idle: its program ended, and starts again in its run when work arrives"
        );
        let Some(cap) = &agent.cap else {
            tracing::warn!(
                run = agent.run.as_str(),
                "up holds no capability of the sleeping run: it stays asleep until it is ended"
            );
            return;
        };
        let watched = wake::watch(
            self.socket.clone(),
            cap.expose(),
            agent.run.clone(),
            since,
            self.events.0.clone(),
        );
        if let Err(e) = watched {
            tracing::error!(
                run = agent.run.as_str(),
                cause = e.to_string().as_str(),
                "up cannot wait for the sleeping run's work: it stays asleep until it is ended"
            );
        }
    }

    /// Work arrived for the sleeping run `run`, at `now`.
    pub(super) fn on_work(&mut self, run: &RunId, work: Work, now: Instant) {
        let Some(i) = self.agent_of(run) else {
            return;
        };
        if !self.current(i) {
            return;
        }
        self.agents[i].work = Some(work);
        let m = self.agents[i].member;
        if !self.members[m].life.handle_work() {
            // The run is ending: its work goes with it.
            self.agents[i].work = None;
        }
        self.act(m, now);
    }

    /// Sleeping run `run`'s agent released its role, at `now`: the run
    /// ends, as its program did.
    pub(super) fn on_released(&mut self, run: &RunId, now: Instant) {
        let Some(i) = self.agent_of(run) else {
            return;
        };
        if !self.current(i) {
            return;
        }
        let m = self.agents[i].member;
        self.members[m].life.handle_done();
        self.act(m, now);
    }

    /// Starts sleeping run `i`'s program again, its conversation resumed,
    /// with the work that arrived as its prompt.
    fn wake(&mut self, i: usize, now: Instant) {
        let agent = &mut self.agents[i];
        let Some(work) = agent.work.take() else {
            return;
        };
        let order = match (&agent.resume, &agent.input) {
            (Some(resume), Some(input)) => wake::order(resume, input, &work),
            (None, _) | (_, None) => {
                tracing::warn!(
                    run = agent.run.as_str(),
                    "the agent's arguments are not text: it starts again without its conversation"
                );
                start_order(agent)
            }
        };
        agent.since = work.cursor;
        tracing::info!(
            role = agent.role.as_str(),
            run = agent.run.as_str(),
            cursor = work.cursor,
            "work arrived: the agent's program starts again in its run, its conversation resumed"
        );
        send_start(agent, &order);
        self.activities.restarted(agent.run.as_str(), now);
    }

    /// Records run `i`'s end, for `why`, and logs it.
    fn end(&mut self, i: usize, ending: Ending, why: Why) {
        let agent = &mut self.agents[i];
        if agent.ending.is_some() {
            return;
        }
        agent.ending = Some((ending, Some(why)));
        if let Some(end) = &agent.transcript_end {
            end.handle_ended(ending);
        }
        let (role, run) = (agent.role.as_str(), agent.run.as_str());
        let exit = Exit::of_parts(ending.status(), ending.signal());
        let error = self.activities.used(run).and_then(|(_, error)| error);
        let cause = ending.cause().as_str();
        match why {
            Why::Exited | Why::SandboxGone | Why::RestartLimit
                if ending.cause() == EndCause::Failed =>
            {
                self.failed = true;
                let why = match why {
                    Why::RestartLimit => "its program failed more often than restartLimit allows",
                    Why::SandboxGone => "its sandbox was gone before its program ended",
                    Why::Exited | Why::Budget(_) | Why::Stopped => "its program failed",
                };
                tracing::warn!(
                    role,
                    run,
                    why,
                    error = error.as_deref(),
                    status = describe(exit).as_str(),
                    "an agent failed"
                );
            }
            Why::Budget(limit) => tracing::warn!(
                role,
                run,
                limit = limit.key(),
                "the run reached its budget's limit and ends"
            ),
            Why::Exited | Why::SandboxGone | Why::RestartLimit | Why::Stopped => {
                tracing::info!(
                    role,
                    run,
                    cause,
                    status = describe(exit).as_str(),
                    "the run ends"
                );
            }
        }
        let Some(broker) = &self.broker else {
            return;
        };
        if let Err(refusal) = broker.end_run(&agent.run, ending) {
            // Ended already (by the human, say): the end we heard of
            // stands; the broker logged the refusal.
            tracing::debug!(
                code = refusal.code(),
                run,
                "the run's end was not recorded again"
            );
        }
    }

    /// `signal` to run `i`: to its program through its supervisor, and
    /// for SIGKILL to its whole sandbox; unsandboxed, to its process group.
    fn signal(&mut self, i: usize, signal: Signal) {
        let agent = &mut self.agents[i];
        if agent.exited {
            return;
        }
        match (&mut agent.control, signal == Signal::KILL) {
            (Some(control), false) => {
                if control.order(&Command::Term {}).is_err() {
                    // The supervisor is gone: nothing is left to ask.
                    kill_sandbox(&agent.child);
                }
            }
            (Some(_), true) => {
                kill_sandbox(&agent.child);
                signal_group(&agent.child, Signal::KILL);
            }
            (None, _) => signal_group(&agent.child, signal),
        }
    }

    /// Kills and forgets the last run launched, of agent `m`, which was
    /// never bound (its binding was refused): no capability reached it.
    pub(super) fn discard_last(&mut self, m: usize) {
        if self.agents.last().is_none_or(|a| a.member != m) {
            return;
        }
        let Some(mut agent) = self.agents.pop() else {
            return;
        };
        if agent.sandboxed {
            kill_sandbox(&agent.child);
        }
        signal_group(&agent.child, Signal::KILL);
        let _ = agent.child.kill();
        let _ = agent.child.wait();
        if self.members[m].run == Some(self.agents.len()) {
            self.members[m].run = None;
        }
    }

    /// Launches a new run of agent `m` now (a restart that cannot stay in
    /// its run, or the human's start); logs why it could not.
    fn relaunch(&mut self, m: usize, now: Instant) {
        let spec = self.members[m].spec.clone();
        let last = self.members[m].run.map(|i| self.agents[i].run.clone());
        if !self.launching {
            self.members[m].held = true;
            self.members[m].life.handle_launch_failed();
            return;
        }
        if !self.disk_room(&spec.role) {
            self.members[m].life.handle_launch_failed();
            return;
        }
        let before = self.agents.len();
        let launched = self
            .prepare_run(m)
            .and_then(|planned| self.launch(m, planned));
        if launched.is_err() && self.agents.len() > before {
            self.discard_last(m);
        }
        match launched {
            Ok(i) => {
                self.members[m].run = Some(i);
                self.members[m].life.handle_launched(now);
                self.release(i);
                let sandboxed = self.agents[i].sandboxed;
                tracing::info!(
                    role = spec.role.as_str(),
                    run = self.agents[i].run.as_str(),
                    last = last.as_ref().map(RunId::as_str),
                    pid = self.agents[i].child.id(),
                    "a new run starts (a run that ended cannot start again: {})",
                    if sandboxed {
                        "its sandbox is gone"
                    } else {
                        "an unsandboxed run is its process"
                    }
                );
            }
            Err(failure) if failure.code == Refusal::LaunchRevoked => {
                self.members[m].held = true;
                self.members[m].life.handle_launch_failed();
                self.switched_off();
            }
            Err(failure) => {
                self.members[m].life.handle_launch_failed();
                tracing::error!(
                    code = failure.code.code(),
                    role = spec.role.as_str(),
                    "a new run of the agent could not be launched"
                );
            }
        }
    }

    /// Whether the data root's disk has room for a run of `role`, as the
    /// broker measures it (its reserve held, free space and files to
    /// spare): without it no agent starts, the log says why, and the human
    /// is served meanwhile.
    pub(super) fn disk_room(&self, role: &mosaic_domain::RoleInstance) -> bool {
        let Some(broker) = &self.broker else {
            return true;
        };
        match broker.check_disk() {
            Ok(()) => true,
            Err(refusal) => {
                tracing::warn!(
                    code = refusal.code(),
                    role = role.as_str(),
                    "the data root's disk has no room for an agent's run (free space or \
                     files, beyond the human's reserve): the agent is not started; start it \
                     from the console once there is room"
                );
                false
            }
        }
    }

    /// Launching is off, as the broker said: no agent starts, the log
    /// says in one sentence how to switch it back on, and a thread hears
    /// the switch from now until it is on ([`switch::watch`]). Only while
    /// launching is off does `up` hold a connection of the broker's for it.
    pub(super) fn switched_off(&mut self) {
        if !self.launching {
            return;
        }
        self.launching = false;
        tracing::warn!(
            business = self.business.as_str(),
            "launching is switched off for this business, so up starts no agent: switch it \
             back on with L in up --console (or the human CLI's launch.restore), and up then \
             starts them"
        );
        let key = self
            .reader_cap
            .as_ref()
            .and_then(|file| std::fs::read_to_string(file).ok());
        let watched = match key {
            Some(key) => switch::watch(
                self.socket.clone(),
                key.trim().to_owned(),
                self.events.0.clone(),
            ),
            None => Err(std::io::Error::other("no reader capability")),
        };
        if let Err(e) = watched {
            tracing::error!(
                cause = e.to_string().as_str(),
                "up cannot hear the launch switch: start it again once launching is on"
            );
        }
    }

    /// A sandbox's supervisor reported on run `run`, at `now`.
    pub(super) fn on_report(&mut self, run: &RunId, report: Report, now: Instant) {
        let Some(i) = self.agent_of(run) else {
            return;
        };
        let Report::Exited { code, signal } = report else {
            return;
        };
        let exit = Exit::of_parts(code, signal);
        self.agents[i].program_exit = Some(exit);
        let status = match exit {
            Exit::Unknown => None,
            Exit::Status(_) | Exit::Signal(_) => Some(status_of(exit.parts())),
        };
        self.activities.exited(run.as_str(), status, now);
        let agent = &self.agents[i];
        let error = self.activities.used(run.as_str()).and_then(|(_, e)| e);
        tracing::info!(
            role = agent.role.as_str(),
            run = run.as_str(),
            status = describe(exit).as_str(),
            error = error.as_deref(),
            "the agent's program ended"
        );
        if self.current(i) {
            let m = agent.member;
            self.members[m].life.handle_program_exit(now, exit);
        }
    }

    /// A sandbox's control channel ended: its supervisor is gone, so
    /// nothing can start its program again; the sandbox is killed, and its
    /// end follows once it is reaped.
    pub(super) fn on_control_closed(&mut self, run: &RunId) {
        let Some(i) = self.agent_of(run) else {
            return;
        };
        let agent = &mut self.agents[i];
        agent.control = None;
        if !agent.exited {
            kill_sandbox(&agent.child);
            signal_group(&agent.child, Signal::KILL);
        }
    }

    /// The broker recorded an end, whoever made it, at `now`.
    pub(super) fn on_end(&mut self, end: &RunEnd, now: Instant) {
        let Some(i) = self.agent_of(&end.agent.run) else {
            return;
        };
        let agent = &mut self.agents[i];
        if agent.ending.is_none() {
            agent.ending = Some((end.ending, None));
            if let Some(transcript) = &agent.transcript_end {
                transcript.handle_ended(end.ending);
            }
            tracing::info!(
                role = agent.role.as_str(),
                run = agent.run.as_str(),
                cause = end.ending.cause().as_str(),
                "the run was ended, and its sandbox is stopped"
            );
        }
        if self.current(i) {
            let m = self.agents[i].member;
            self.members[m].life.handle_ended(now);
        }
    }

    /// A run's usage may have changed: noted with the broker, and weighed
    /// against its budget, at `now`.
    pub(super) fn on_usage(&mut self, now: Instant) {
        for m in 0..self.members.len() {
            let Some(i) = self.members[m].run else {
                continue;
            };
            let agent = &mut self.agents[i];
            let Some((tally, _)) = self.activities.used(agent.run.as_str()) else {
                continue;
            };
            if agent.noted == Some(tally) {
                continue;
            }
            agent.noted = Some(tally);
            if let Some(broker) = &self.broker {
                let usage = Usage {
                    turns: tally.turns,
                    input_tokens: tally.input_tokens,
                    output_tokens: tally.output_tokens,
                    cost_usd: tally.cost_usd,
                };
                if let Err(refusal) = broker.note_usage(&agent.run, usage) {
                    tracing::debug!(code = refusal.code(), "a usage the broker refused");
                }
            }
            let spent = Spent {
                turns: tally.turns,
                tokens: tally.input_tokens.saturating_add(tally.output_tokens),
                cost_usd: tally.cost_usd,
            };
            self.members[m].life.handle_usage(now, spent);
        }
    }

    /// The console ordered something.
    pub(super) fn on_order(&mut self, order: Order) {
        let Order::Start { run } = order;
        let found = RunId::parse(&run).ok().and_then(|run| self.agent_of(&run));
        let Some(i) = found else {
            tracing::warn!("the console asked to start an agent of a run up does not know");
            return;
        };
        let m = self.agents[i].member;
        let role = self.members[m].spec.role.clone();
        let role = role.as_str();
        if self.members[m].life.handle_start() {
            self.members[m].held = false;
            tracing::info!(role, run = run.as_str(), "the human starts the agent again");
        } else {
            tracing::info!(
                role,
                run = run.as_str(),
                "the human asked to start the agent again, and it is not down"
            );
        }
    }

    /// The human switched launching back on: every agent that waited for
    /// it is launched.
    pub(super) fn on_restored(&mut self) {
        if self.launching {
            return;
        }
        self.launching = true;
        tracing::info!("launching is switched on: up starts the agents that waited for it");
        for member in &mut self.members {
            if member.held && member.life.handle_start() {
                member.held = false;
            }
        }
    }

    /// Tells the console each run's life as it is at `now`.
    pub(super) fn publish_lives(&self) {
        for (i, agent) in self.agents.iter().enumerate() {
            let phase = self
                .current(i)
                .then(|| self.members[agent.member].life.phase());
            let (living, restart_at) = living_state(phase);
            let state = match (&agent.ending, agent.exited, phase) {
                (Some((ending, why)), true, _) | (Some((ending, why)), _, None) => {
                    line::State::Ended {
                        cause: ending.cause().as_str().to_owned(),
                        status: ending.status(),
                        signal: ending.signal(),
                        signal_name: ending.signal().map(line::signal_name),
                        why: why.map(line_why),
                        limit: match why {
                            Some(Why::Budget(limit)) => Some(limit.key().to_owned()),
                            Some(_) | None => None,
                        },
                    }
                }
                (Some(_), false, Some(_)) => line::State::Stopping,
                (None, _, _) => living,
            };
            self.activities.set_life(
                agent.run.as_str(),
                LifeEntry {
                    role: agent.role.as_str().to_owned(),
                    state,
                    restart_at,
                    restarts: agent.restarts,
                    // A path that is no UTF-8 is named as near as it can
                    // be: the console only reads it and shows it.
                    output: Some(agent.output.to_string_lossy().into_owned()),
                },
            );
        }
    }
}

/// A run that has not ended, on the console's line, by its agent's phase
/// (`None` when the agent has a newer run); and when its program starts
/// again, while it is restarting.
fn living_state(phase: Option<Phase>) -> (line::State, Option<Instant>) {
    match phase {
        Some(Phase::Restarting { at, .. }) => (line::State::Restarting { in_ms: 0 }, Some(at)),
        Some(Phase::Sleeping { .. }) => (line::State::Sleeping, None),
        Some(
            Phase::Down
            | Phase::Running { .. }
            | Phase::Stopping { .. }
            | Phase::Closing
            | Phase::Relaunching { .. },
        )
        | None => (line::State::Running, None),
    }
}

/// Why as the console's line says it.
fn line_why(why: Why) -> line::Why {
    match why {
        Why::Exited => line::Why::Exited,
        Why::SandboxGone => line::Why::SandboxGone,
        Why::RestartLimit => line::Why::RestartLimit,
        Why::Budget(_) => line::Why::Budget,
        Why::Stopped => line::Why::Stopped,
    }
}

/// An exit status with these parts, for the activity table.
fn status_of((code, signal): (Option<i32>, Option<i32>)) -> std::process::ExitStatus {
    use std::os::unix::process::ExitStatusExt as _;
    match (code, signal) {
        (Some(code), _) => std::process::ExitStatus::from_raw((code & 0xff) << 8),
        (None, Some(signal)) => std::process::ExitStatus::from_raw(signal & 0x7f),
        (None, None) => std::process::ExitStatus::from_raw(0),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use mosaic_client::wire::life as line;

    use super::{living_state, Phase};

    #[test]
    fn a_living_run_is_told_sleeping_restarting_or_running_by_its_phase() {
        let launched = Instant::now();
        let at = launched + Duration::from_secs(2);
        assert_eq!(
            living_state(Some(Phase::Sleeping { launched })),
            (line::State::Sleeping, None)
        );
        assert_eq!(
            living_state(Some(Phase::Restarting { launched, at })),
            (line::State::Restarting { in_ms: 0 }, Some(at))
        );
        for phase in [Some(Phase::Running { launched }), None] {
            assert_eq!(living_state(phase), (line::State::Running, None));
        }
    }
}
