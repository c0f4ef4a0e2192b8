//! The keys of an agent that say how `up` keeps its run alive and when it
//! ends it: `"restart"`, `"restartLimit"`, `"budget"`, `"stopGraceS"` and,
//! for a harness agent, `"idle"`, parsed into a [`LifeSpec`]. `up`'s supervisor ([`crate::commands::up`])
//! applies them; docs/agents.md says what each does for users.

use std::time::Duration;

use mosaic_domain::Refusal;
use serde::Deserialize;

/// When the program of a run starts again after it exited (`"restart"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    /// Never: the run ends with its program (the default for commands).
    No,
    /// After a non-zero exit or a signal (the default for harness agents).
    OnFailure,
    /// After every exit.
    Always,
}

/// What a harness agent does when nothing is left for it (`"idle"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Idle {
    /// Its program ends, and `up` starts it again in the same run, its
    /// conversation resumed, when work arrives (the default).
    Exit,
    /// Its program waits for work, however long that takes.
    Wait,
}

/// At most `count` restarts within `within` (`"restartLimit"`); past it
/// the run ends `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartLimit {
    /// The most restarts in the window.
    pub count: u32,
    /// The window, counted back from each exit.
    pub within: Duration,
}

/// The default limit: 5 restarts in 600 s.
const DEFAULT_RESTART_LIMIT: RestartLimit = RestartLimit {
    count: 5,
    within: Duration::from_secs(600),
};

/// The default time between SIGTERM to a run's program and SIGKILL to its
/// sandbox when a run is stopped.
const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);

/// What a run may use over its life (`"budget"`), each limit optional:
/// reaching one ends the run with cause `budget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budget {
    /// Turns (model answers), as its harness reports them.
    pub turns: Option<u64>,
    /// Input and output tokens together.
    pub tokens: Option<u64>,
    /// Cost, in millionths of a US dollar (`"costUsd"` in dollars).
    pub cost_micro_usd: Option<u64>,
    /// Time since the run was launched (`"wallS"`).
    pub wall: Option<Duration>,
}

/// How `up` keeps one agent's runs alive and stops them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifeSpec {
    /// `"restart"`.
    pub restart: Restart,
    /// `"restartLimit"`.
    pub limit: RestartLimit,
    /// `"budget"`.
    pub budget: Budget,
    /// `"stopGraceS"`.
    pub stop_grace: Duration,
    /// `"idle"`: only a harness agent's program is ever left idle.
    pub idle: Idle,
}

impl LifeSpec {
    /// The life of an agent whose configuration names none of the keys;
    /// `harness` says whether `up` starts its harness itself.
    pub fn defaults(harness: bool) -> LifeSpec {
        LifeSpec {
            restart: if harness {
                Restart::OnFailure
            } else {
                Restart::No
            },
            limit: DEFAULT_RESTART_LIMIT,
            budget: Budget::default(),
            stop_grace: DEFAULT_STOP_GRACE,
            idle: Idle::Exit,
        }
    }
}

/// The life keys as written.
#[derive(Debug, Default)]
pub(super) struct LifeKeys {
    pub(super) restart: Option<Restart>,
    pub(super) restart_limit: Option<LimitJson>,
    pub(super) budget: Option<BudgetJson>,
    pub(super) stop_grace_s: Option<u64>,
    pub(super) idle: Option<Idle>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitJson {
    count: u32,
    #[serde(rename = "withinS")]
    within_s: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BudgetJson {
    turns: Option<u64>,
    tokens: Option<u64>,
    #[serde(rename = "costUsd")]
    cost_usd: Option<f64>,
    #[serde(rename = "wallS")]
    wall_s: Option<u64>,
}

/// The most restarts a limit may allow in its window.
const MAX_RESTARTS: u32 = 1000;
/// The longest window, grace and wall budget: a week.
const MAX_SECONDS: u64 = 7 * 24 * 3600;
/// The highest cost budget, in dollars.
const MAX_COST_USD: f64 = 1_000_000.0;

impl LifeKeys {
    /// The life of an agent with these keys; `harness` says whether `up`
    /// starts its harness itself (its default restart is `on-failure`).
    ///
    /// # Errors
    /// `bad-config` for a `restartLimit.count` above 1000, a `withinS`,
    /// `stopGraceS` or `wallS` above a week (or a `withinS` or `wallS` of
    /// 0), a `turns` or `tokens` of 0, or a `costUsd` that is not a
    /// positive number up to 1,000,000, or an `idle` on an agent whose
    /// harness `up` does not start.
    pub(super) fn parse(self, harness: bool) -> Result<LifeSpec, Refusal> {
        let defaults = LifeSpec::defaults(harness);
        let restart = self.restart.unwrap_or(defaults.restart);
        let idle = match (self.idle, harness) {
            (Some(_), false) => return Err(Refusal::BadConfig),
            (idle, true | false) => idle.unwrap_or(defaults.idle),
        };
        let limit = match self.restart_limit {
            None => defaults.limit,
            Some(limit) => {
                if limit.count > MAX_RESTARTS || !(1..=MAX_SECONDS).contains(&limit.within_s) {
                    return Err(Refusal::BadConfig);
                }
                RestartLimit {
                    count: limit.count,
                    within: Duration::from_secs(limit.within_s),
                }
            }
        };
        let stop_grace = match self.stop_grace_s {
            None => defaults.stop_grace,
            Some(s) if s <= MAX_SECONDS => Duration::from_secs(s),
            Some(_) => return Err(Refusal::BadConfig),
        };
        let budget = match self.budget {
            None => Budget::default(),
            Some(b) => {
                let positive = |n: Option<u64>| n.is_none_or(|n| n > 0);
                let cost_ok = b
                    .cost_usd
                    .is_none_or(|c| c.is_finite() && c > 0.0 && c <= MAX_COST_USD);
                let wall_ok = b.wall_s.is_none_or(|s| (1..=MAX_SECONDS).contains(&s));
                if !positive(b.turns) || !positive(b.tokens) || !cost_ok || !wall_ok {
                    return Err(Refusal::BadConfig);
                }
                Budget {
                    turns: b.turns,
                    tokens: b.tokens,
                    // In range and positive, so the product fits; at least
                    // one millionth, so a tiny budget is not none.
                    cost_micro_usd: b.cost_usd.map(|c| ((c * 1e6).round() as u64).max(1)),
                    wall: b.wall_s.map(Duration::from_secs),
                }
            }
        };
        Ok(LifeSpec {
            restart,
            limit,
            budget,
            stop_grace,
            idle,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, harness: bool) -> Result<LifeSpec, Refusal> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Keys {
            restart: Option<Restart>,
            #[serde(rename = "restartLimit")]
            restart_limit: Option<LimitJson>,
            budget: Option<BudgetJson>,
            #[serde(rename = "stopGraceS")]
            stop_grace_s: Option<u64>,
            idle: Option<Idle>,
        }
        let keys: Keys = serde_json::from_str(text).map_err(|_| Refusal::BadConfig)?;
        LifeKeys {
            restart: keys.restart,
            restart_limit: keys.restart_limit,
            budget: keys.budget,
            stop_grace_s: keys.stop_grace_s,
            idle: keys.idle,
        }
        .parse(harness)
    }

    #[test]
    fn the_defaults_depend_on_whether_up_starts_the_harness() {
        let harness = parse("{}", true).unwrap();
        assert_eq!(harness.restart, Restart::OnFailure);
        assert_eq!(harness.limit, DEFAULT_RESTART_LIMIT);
        assert_eq!(harness.stop_grace, Duration::from_secs(10));
        assert_eq!(harness.budget, Budget::default());
        assert_eq!(harness.idle, Idle::Exit);
        assert_eq!(parse("{}", false).unwrap().restart, Restart::No);
    }

    #[test]
    fn every_key_parses_and_bad_values_refuse() {
        let life = parse(
            r#"{"restart":"always","restartLimit":{"count":2,"withinS":30},
                "budget":{"turns":3,"tokens":1000,"costUsd":0.25,"wallS":60},"stopGraceS":0}"#,
            false,
        )
        .unwrap();
        assert_eq!(life.restart, Restart::Always);
        assert_eq!(
            life.limit,
            RestartLimit {
                count: 2,
                within: Duration::from_secs(30)
            }
        );
        assert_eq!(
            life.budget,
            Budget {
                turns: Some(3),
                tokens: Some(1000),
                cost_micro_usd: Some(250_000),
                wall: Some(Duration::from_secs(60)),
            }
        );
        assert_eq!(life.stop_grace, Duration::ZERO);
        assert_eq!(
            parse(r#"{"restart":"no"}"#, true).unwrap().restart,
            Restart::No
        );
        assert_eq!(parse(r#"{"idle":"wait"}"#, true).unwrap().idle, Idle::Wait);
        assert_eq!(parse(r#"{"idle":"exit"}"#, true).unwrap().idle, Idle::Exit);
        assert_eq!(
            parse(r#"{"idle":"wait"}"#, false),
            Err(Refusal::BadConfig),
            "a command's program is its own"
        );
        for bad in [
            r#"{"restart":"sometimes"}"#,
            r#"{"restartLimit":{"count":2}}"#,
            r#"{"restartLimit":{"count":2,"withinS":0}}"#,
            r#"{"restartLimit":{"count":1001,"withinS":5}}"#,
            r#"{"restartLimit":{"count":1,"withinS":5,"x":1}}"#,
            r#"{"budget":{"turns":0}}"#,
            r#"{"budget":{"tokens":0}}"#,
            r#"{"budget":{"costUsd":0}}"#,
            r#"{"budget":{"costUsd":-1}}"#,
            r#"{"budget":{"wallS":0}}"#,
            r#"{"budget":{"wall":3}}"#,
            r#"{"stopGraceS":-1}"#,
            r#"{"stopGraceS":604801}"#,
            r#"{"idle":"sleep"}"#,
        ] {
            assert_eq!(parse(bad, true), Err(Refusal::BadConfig), "{bad}");
        }
    }
}
