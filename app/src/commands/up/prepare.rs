//! What a run needs before its launch: its run id, its harness's folders
//! and files ([`super::harness::prepare`]) and its sandbox's plan, built
//! (and so checked) before anything of it starts. `up` prepares every
//! agent's first run before the first launch, so a refused path starts
//! nobody ([`super::start`]), and each later run of an agent the same way
//! ([`Session::prepare_run`]).

use mosaic_domain::RunId;

use super::harness;
use super::launch::run_id;
use super::sandbox::plan::Plan;
use super::{sandbox_plan, Failure, Session};
use crate::commands::team::AgentSpec;

impl Session {
    /// A new run of `spec`: its id, its sandbox's plan (when `up` makes
    /// sandboxes) and its harness's launch (when `up` starts one).
    ///
    /// # Errors
    /// As the first launch's: the harness's and the plan's refusals, with
    /// the agent's role.
    pub(super) fn prepare_run(
        &self,
        spec: &AgentSpec,
    ) -> Result<(RunId, Option<Plan>, Option<harness::Prepared>), Failure> {
        let run = run_id(&spec.role).map_err(|r| Failure::of(&spec.role, r))?;
        let at = harness::Where {
            data_root: &self.data_root,
            exe: &self.exe,
            socket: &self.socket,
            path: &self.path,
            sandboxed: self.sandbox.is_some(),
        };
        let prepared = spec
            .harnessed
            .as_ref()
            .map(|h| harness::prepare(spec, h, &run, &at))
            .transpose()
            .map_err(|r| Failure::of(&spec.role, r))?;
        let plan = match &self.sandbox {
            Some(sandbox) => Some(sandbox_plan(
                spec,
                prepared.as_ref(),
                sandbox,
                &self.path,
                &self.secret_env,
            )?),
            None => None,
        };
        Ok((run, plan, prepared))
    }
}
