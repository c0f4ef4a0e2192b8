//! One launch of `up`, steps 1 to 4 of its module documentation: the
//! command (bwrap and `sandbox-exec`, or the program itself), its
//! environment, the spawn with the capability's descriptor, the binding
//! and the sealed capability. A harness agent ([`super::harness`]) runs
//! its prepared program and arguments, gets its capability as a file, and
//! its output goes to its transcript; another agent's, to its run's file
//! ([`super::output`]).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use mosaic_adapters::cause;
use mosaic_adapters::procfs::ProcFs;
use mosaic_client::cap::{CAP_FD_ENV, CAP_FILE_ENV, SOCKET_ENV};
use mosaic_domain::evidence::LaunchRecord;
use mosaic_domain::{Refusal, RunId};
use mosaic_ports::ProcessTable;

use super::harness::{capfile, Input, Prepared};
use super::launch::{agent_env, cap_memfd, fill_and_seal, spawn_inheriting};
use super::runs::Event;
use super::sandbox::bwrap::AbstractSockets;
use super::sandbox::exec_main::EXEC_SUBCOMMAND;
use super::sandbox::plan::Plan;
use super::sandbox::{cgroup, network};
use super::{control, output, Agent, Failure, Session, CONSOLE_ENV, RUN_ID_ENV, SINCE_ENV};
use crate::commands::team::{AgentSpec, Network};

/// The `sh` script that starts an unsandboxed harness once `up` has
/// written its capability's file: it reads the `ready` line (a shell reads
/// a pipe one byte at a time, so pi's prompt after it stays in the pipe),
/// then becomes the program, its arguments after the script's name.
const WAIT_READY: &str = r#"IFS= read -r line && [ "$line" = ready ] && exec "$@""#;

/// The same, for a harness that reads no input (Claude Code, which would
/// read a piped stdin as more prompt).
const WAIT_READY_NULL: &str = r#"IFS= read -r line && [ "$line" = ready ] && exec "$@" </dev/null"#;

impl Session {
    /// One launch of `spec` as `run`, a run of agent `member`; `plan` is
    /// its sandbox's, when it has one, and `prepared` its harness's, when
    /// `up` starts one. The index of the run in `agents`.
    pub(super) fn launch(
        &mut self,
        member: usize,
        spec: &AgentSpec,
        run: RunId,
        plan: Option<&Plan>,
        prepared: Option<Prepared>,
        path: &OsStr,
    ) -> Result<usize, Failure> {
        let failed = |e: io::Error| {
            cause::log(Refusal::LaunchFailed, "launching an agent", &e);
            Failure::of(&spec.role, Refusal::LaunchFailed)
        };
        let output = match &prepared {
            Some(prepared) => prepared.transcript.clone(),
            None => output::output_file(&self.data_root, &run)
                .map_err(|r| Failure::of(&spec.role, r))?,
        };
        let memfd = cap_memfd().map_err(failed)?;
        let fd = memfd.as_raw_fd().to_string();
        let landlock = self.sandbox.as_ref().is_some_and(|s| s.landlock);
        let mut run_cgroup = None;
        // A sandbox's supervisor takes its orders on its end of this pair.
        let mut control = None;
        let (mut command, sandboxed) = match (&self.sandbox, plan) {
            (Some(sandbox), Some(plan)) => {
                tracing::debug!(
                    role = spec.role.as_str(),
                    mounts = plan.mounts.len(),
                    denied = plan
                        .seccomp
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(",")
                        .as_str(),
                    "starting an agent in its sandbox"
                );
                let extra: Vec<_> = prepared.iter().map(|p| p.endpoint.clone()).collect();
                let proxy =
                    network::listen(self.proxy.as_ref(), spec, &run, &extra).map_err(failed)?;
                run_cgroup = sandbox
                    .cgroups
                    .make(run.as_str(), plan.processes, spec.memory_mib);
                let exe = &sandbox.places.exe;
                let mut command = cgroup::command(sandbox.bwrap.path(), exe, run_cgroup.as_ref());
                let (ours, theirs) = control::pair().map_err(failed)?;
                let control_fd = theirs.as_raw_fd().to_string();
                control = Some((ours, theirs));
                command
                    .args(plan.bwrap_args(proxy.as_deref()))
                    .arg(&sandbox.places.exe)
                    .args([EXEC_SUBCOMMAND, "--keep-fd", &fd])
                    .args(["--control-fd", &control_fd])
                    .args(plan.landlock.then_some("--landlock"))
                    .args(["--processes", &plan.processes.to_string()])
                    .args(network::exec_args(proxy.is_some()));
                if let Some(prepared) = &prepared {
                    command.arg("--cap-file");
                    if prepared.input == Input::Null {
                        command.arg("--stdin-null");
                    }
                    if let (Some(_), Some(port)) = (&proxy, prepared.forward) {
                        command.args(["--forward", &port.to_string()]);
                    }
                }
                command.arg("--").arg(&plan.program);
                match &prepared {
                    Some(prepared) => command.args(&prepared.args),
                    None => command.args(&spec.args),
                };
                command
                    // bwrap's own; the agent's is its `--chdir`.
                    .current_dir("/")
                    .env_clear()
                    .envs(plan.env.iter().map(|(k, v)| (k, v)));
                (command, true)
            }
            (Some(_) | None, _) => {
                let mut command = match &prepared {
                    Some(prepared) => {
                        let script = match prepared.input {
                            Input::Null => WAIT_READY_NULL,
                            Input::Line(_) => WAIT_READY,
                        };
                        let mut command = Command::new("/bin/sh");
                        command
                            .args(["-c", script, "sh"])
                            .arg(&prepared.program)
                            .args(&prepared.args);
                        command
                    }
                    None => {
                        let mut command = Command::new(&spec.program);
                        command.args(&spec.args);
                        command
                    }
                };
                command.current_dir(spec.cwd()).env_clear().envs(agent_env(
                    spec,
                    std::env::vars_os(),
                    &self.secret_env,
                ));
                (command, false)
            }
        };
        // Taken before the spawn, so no later than the binding: the agent's
        // first wait misses nothing that happens after its launch.
        let since = self
            .broker
            .as_ref()
            .ok_or(Refusal::BrokerUnavailable)?
            .feed_cursor();
        command
            .env(RUN_ID_ENV, run.as_str())
            .env(SINCE_ENV, since.to_string())
            .env(SOCKET_ENV, &self.socket)
            .env("PATH", path)
            // A sandbox's programs get their input from its supervisor.
            .stdin(if control.is_some() {
                Stdio::null()
            } else {
                Stdio::piped()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // An unsandboxed harness finds its capability in the run's file,
        // and gets no descriptor: it would not pass one on.
        let unsandboxed_harness = !sandboxed && prepared.is_some();
        if !unsandboxed_harness {
            command.env(CAP_FD_ENV, &fd);
        }
        if let Some(prepared) = &prepared {
            command.envs(prepared.env.iter().map(|(k, v)| (k, v)));
            if unsandboxed_harness {
                command.env(CAP_FILE_ENV, &prepared.cap_file);
            }
        }
        if self.log.is_some() {
            command.env(CONSOLE_ENV, "1");
        }
        let mut inherited = Vec::new();
        if !unsandboxed_harness {
            inherited.push(memfd.as_fd());
        }
        inherited.extend(plan.iter().flat_map(|p| p.held.iter().map(AsFd::as_fd)));
        inherited.extend(control.iter().map(|(_, theirs)| theirs.as_fd()));
        let mut child = spawn_inheriting(&mut command, &inherited).map_err(failed)?;
        // Only the sandbox holds its end now.
        let control = control.map(|(ours, _)| ours);
        let pid = child.id();
        self.agents.push(Agent {
            member,
            role: spec.role.clone(),
            run: run.clone(),
            harness: spec.harness,
            sandboxed,
            network: if sandboxed {
                spec.network
            } else {
                Network::Host
            },
            abstract_sockets: AbstractSockets::of(sandboxed, spec.network, landlock),
            stdin: child.stdin.take(),
            input: prepared.as_ref().map(|p| p.input.clone()),
            transcript: prepared.as_ref().map(|p| p.transcript.clone()),
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
            let role = spec.role.as_str();
            match &prepared {
                Some(prepared) => self
                    .relays
                    .start_harness(
                        &spec.role,
                        &run,
                        prepared,
                        &mut agent.child,
                        &self.activities,
                    )
                    .map_err(failed)?,
                None => self
                    .relays
                    .start(role, &output, &mut agent.child)
                    .map_err(failed)?,
            }
        }
        // Our child, not yet reaped: the pid names it and nobody else.
        let start_time = ProcFs::new()
            .process(pid)
            .map_err(|_| Failure::of(&spec.role, Refusal::LaunchFailed))?
            .start_time;
        let broker = self.broker.as_ref().ok_or(Refusal::BrokerUnavailable)?;
        let issued = broker
            .bind_launch(LaunchRecord {
                business: self.business.clone(),
                role: spec.role.clone(),
                run: run.clone(),
                harness: spec.harness,
                address: None,
                pid,
                start_time,
            })
            .map_err(|r| Failure::of(&spec.role, r))?;
        fill_and_seal(&memfd, &issued.cap).map_err(failed)?;
        if let (true, Some(prepared)) = (unsandboxed_harness, &prepared) {
            capfile::write_cap(&issued.cap, &prepared.cap_file)
                .map_err(|r| Failure::of(&spec.role, r))?;
            if let Some(agent) = self.agents.last_mut() {
                agent.cap_file = Some(prepared.cap_file.clone());
            }
        }
        if let Some(Some(control)) = self.agents.last().map(|a| a.control.as_ref()) {
            let (events, heard) = (self.events.0.clone(), run.clone());
            let hand = move |report| {
                let run = heard.clone();
                let event = match report {
                    Some(report) => Event::Report { run, report },
                    None => Event::ControlClosed { run },
                };
                events.send(event).is_ok()
            };
            control.listen(&run, hand).map_err(failed)?;
        }
        // This process's copy is closed here, before the next launch.
        drop(memfd);
        Ok(self.agents.len() - 1)
    }
}
