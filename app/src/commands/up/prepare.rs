//! What a later run needs before its launch: its run id and its plan,
//! made by the one function that made the first runs' ([`plans::plan_one`]),
//! built (and so checked) before anything of it starts, and then its
//! harness's files written. `up` plans every agent's first run before the
//! first launch, so a refused path starts nobody ([`super::start`]), and
//! each later run of an agent the same way ([`RunningHost::prepare_run`]).

use super::launch::run_id;
use super::plans::{self, Planned, Team};
use super::{Failure, RunningHost};

impl RunningHost {
    /// A new run of agent `m`: its plan, and its harness's launch (when
    /// `up` starts one) with its files written.
    ///
    /// # Errors
    /// As the first launch's: the harness's and the plan's refusals, with
    /// the agent's role.
    pub(super) fn prepare_run(&self, m: usize) -> Result<Planned, Failure> {
        let spec = &self.members[m].spec;
        let run = run_id(&spec.role).map_err(|r| Failure::of(&spec.role, r))?;
        let team = Team {
            config: &self.config,
            data_root: &self.data_root,
            socket: &self.socket,
            exe: &self.exe,
            path: &self.path,
            vars: &self.vars,
            console: self.log.is_some(),
            sandbox: self.sandbox.as_ref(),
        };
        let planned = plans::plan_one(&team, spec, &run)?;
        if let Some(prepared) = &planned.prepared {
            prepared.write().map_err(|r| Failure::of(&spec.role, r))?;
        }
        Ok(planned)
    }
}
