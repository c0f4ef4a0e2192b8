//! One launch of `up`, steps 1 to 4 of its module documentation: the
//! agent's plan rendered for this launch (`sandbox::plan`: the command and
//! its environment, whole), the spawn with the capability's descriptor,
//! the binding and the sealed capability. What only a launch makes is
//! made here: the run's proxy socket, its cgroup, the feed's cursor. A
//! harness agent ([`super::harness`]) gets its capability as a file, and
//! its output goes to its transcript; another agent's, to its run's file
//! ([`super::output`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use mosaic_adapters::cause;
use mosaic_adapters::procfs::ProcFs;
use mosaic_domain::evidence::LaunchRecord;
use mosaic_domain::Refusal;
use mosaic_ports::ProcessTable;

use super::harness::capfile;
use super::launch::{cap_memfd, fill_and_seal, spawn_inheriting};
use super::plans::Planned;
use super::runs::Event;
use super::sandbox::bwrap::AbstractSockets;
use super::sandbox::network;
use super::sandbox::plan::render::LaunchValues;
use super::sandbox::plan::Handoff;
use super::{control, output, Agent, Failure, RunningHost};
use crate::commands::team::Idle;

impl RunningHost {
    /// One launch of `planned`, its run's plan and, when `up` starts a
    /// harness, its launch, as a run of agent `member`. The index of the
    /// run in `agents`.
    pub(super) fn launch(&mut self, member: usize, planned: Planned) -> Result<usize, Failure> {
        let Planned { plan, prepared } = planned;
        let role = plan.role.clone();
        let failed = |e: io::Error| {
            cause::log(Refusal::LaunchFailed, "launching an agent", &e);
            Failure::of(&role, Refusal::LaunchFailed)
        };
        let cap = u64::from(self.members[member].spec.state_mib) << 20;
        let output = match &prepared {
            Some(prepared) => prepared.transcript.clone(),
            None => output::output_file(&self.data_root, &plan.run)
                .map_err(|r| Failure::of(&role, r))?,
        };
        let memfd = cap_memfd().map_err(failed)?;
        // The run's places, set before it starts: its connections to the
        // broker and the proxy's descriptors for it count in them.
        let places = self.broker.as_ref().map(|broker| {
            let places = broker.run_places(&plan.run);
            let cap = self
                .members
                .get(member)
                .map_or(crate::runtime::DEFAULT_CONNECTIONS, |m| {
                    usize::try_from(m.spec.connections).unwrap_or(usize::MAX)
                });
            places.set_cap(cap);
            places
        });
        let proxy = network::listen(
            self.proxy.as_ref(),
            plan.network,
            &plan.run,
            &plan.allow,
            places,
        )
        .map_err(failed)?;
        let run_cgroup = match (&plan.walls, &self.cgroups) {
            (Some(walls), Some(cgroups)) => {
                cgroups.make(plan.run.as_str(), walls.processes, walls.memory_mib)
            }
            (Some(_), None) | (None, _) => None,
        };
        // Taken before the spawn, so no later than the binding: the agent's
        // first wait misses nothing that happens after its launch.
        let since = self
            .broker
            .as_ref()
            .ok_or(Refusal::BrokerUnavailable)?
            .feed_cursor();
        // A sandbox's supervisor takes its orders on its end of this pair.
        let control = match &plan.walls {
            Some(_) => Some(control::pair().map_err(failed)?),
            None => None,
        };
        let now = LaunchValues {
            since,
            cap_fd: memfd.as_raw_fd(),
            control_fd: control.as_ref().map(|(_, theirs)| theirs.as_raw_fd()),
            proxy: proxy.as_deref(),
            cgroup: run_cgroup.as_ref().map_or(&[], |c| c.dirs()),
        };
        tracing::debug!(
            role = role.as_str(),
            run = plan.run.as_str(),
            plan = serde_json::to_string(&plan.view())
                .unwrap_or_default()
                .as_str(),
            "an agent's plan"
        );
        let mut command = plan.command(now);
        command
            // A sandbox's programs get their input from its supervisor.
            .stdin(if control.is_some() {
                Stdio::null()
            } else {
                Stdio::piped()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let sandboxed = plan.walls.is_some();
        // An unsandboxed harness finds its capability in the run's file,
        // and gets no descriptor: it would not pass one on.
        let run_file = match (&plan.handoff, sandboxed) {
            (Handoff::File { path, .. }, false) => Some(path.clone()),
            (Handoff::File { .. }, true) | (Handoff::Descriptor, _) => None,
        };
        let mut inherited = Vec::new();
        if run_file.is_none() {
            inherited.push(memfd.as_fd());
        }
        inherited.extend(
            plan.walls
                .iter()
                .flat_map(|w| w.held.iter().map(AsFd::as_fd)),
        );
        inherited.extend(control.iter().map(|(_, theirs)| theirs.as_fd()));
        let mut child = spawn_inheriting(&mut command, &inherited).map_err(failed)?;
        // Only the sandbox holds its end now.
        let control = control.map(|(ours, _)| ours);
        let pid = child.id();
        self.agents.push(Agent {
            member,
            role: role.clone(),
            run: plan.run.clone(),
            harness: plan.harness,
            version: plan.version.clone(),
            sandboxed,
            network: plan.network,
            abstract_sockets: AbstractSockets::of(sandboxed),
            stdin: child.stdin.take(),
            input: prepared.as_ref().map(|p| p.input.clone()),
            resume: prepared.as_ref().and_then(|p| p.resume.clone()),
            cap: None,
            since,
            work: None,
            transcript: prepared.as_ref().map(|p| p.transcript.clone()),
            state: prepared.as_ref().map(|p| p.grants.state.clone()),
            transcript_end: None,
            user_config: match (&prepared, sandboxed) {
                (Some(p), true) => p.grants.user.iter().map(|(s, _)| s.clone()).collect(),
                (Some(_) | None, _) => Vec::new(),
            },
            output: output.clone(),
            cap_file: None,
            child,
            control,
            exited: false,
            program_exit: None,
            restarts: 0,
            ending: None,
            noted: None,
            cgroup: run_cgroup,
        });
        // Once it is ours to stop: a failure here kills it with the rest.
        if let Some(agent) = self.agents.last_mut() {
            match &prepared {
                Some(prepared) => {
                    let end = self
                        .relays
                        .start_harness(
                            &role,
                            &plan.run,
                            (prepared, cap),
                            &mut agent.child,
                            &self.activities,
                        )
                        .map_err(failed)?;
                    agent.transcript_end = Some(end);
                }
                None => self
                    .relays
                    .start(role.as_str(), (&output, cap), &mut agent.child)
                    .map_err(failed)?,
            }
        }
        // Our child, not yet reaped: the pid names it and nobody else.
        let start_time = ProcFs::new()
            .process(pid)
            .map_err(|_| Failure::of(&role, Refusal::LaunchFailed))?
            .start_time;
        let broker = self.broker.as_ref().ok_or(Refusal::BrokerUnavailable)?;
        let issued = broker
            .bind_launch(LaunchRecord {
                business: self.business.clone(),
                role: role.clone(),
                run: plan.run.clone(),
                harness: plan.harness,
                address: None,
                pid,
                start_time,
            })
            .map_err(|r| Failure::of(&role, r))?;
        fill_and_seal(&memfd, &issued.cap).map_err(failed)?;
        // A harness run that may sleep is woken by what its feed brings,
        // which `up` waits for as the run.
        if sandboxed && prepared.is_some() && self.members[member].spec.life.idle == Idle::Exit {
            if let Some(agent) = self.agents.last_mut() {
                agent.cap = Some(issued.cap.clone());
            }
        }
        if let Some(path) = run_file {
            capfile::write_cap(&issued.cap, &path).map_err(|r| Failure::of(&role, r))?;
            if let Some(agent) = self.agents.last_mut() {
                agent.cap_file = Some(path);
            }
        }
        if let Some(Some(control)) = self.agents.last().map(|a| a.control.as_ref()) {
            let (events, heard) = (self.events.0.clone(), plan.run.clone());
            let hand = move |report| {
                let run = heard.clone();
                let event = match report {
                    Some(report) => Event::Report { run, report },
                    None => Event::ControlClosed { run },
                };
                events.send(event).is_ok()
            };
            control.listen(&plan.run, hand).map_err(failed)?;
        }
        // This process's copy is closed here, before the next launch; the
        // checked paths' descriptors go with the plan.
        drop(memfd);
        Ok(self.agents.len() - 1)
    }
}
