//! The team configuration: the file `up` launches and `demo` plays,
//! `{"business": {…}, "agents": […]}`. See `up`'s module documentation for
//! what each key means. `allow.rs` reads an `allow` entry, `harness.rs` a
//! harness agent's keys, `life.rs` an agent's life keys (`restart`,
//! `restartLimit`, `budget`, `stopGraceS`, `idle`), `work.rs` how it works
//! in its workdir (`tools`, `git`, `userConfig`), and `error.rs` says why a
//! configuration is refused.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use mosaic_adapters::cause::logged;
use mosaic_adapters::config::business_from_value;
use mosaic_domain::evidence::Harness;
use mosaic_domain::{Business, Refusal, RoleInstance};
use serde::Deserialize;
use serde_json::Value;

pub use allow::Allow;
pub use error::TeamError;
pub use harness::{HarnessRun, Model, ModelUrl, DEFAULT_KEY_ENV, DEFAULT_MODEL_HOST, MAX_PROMPT};
pub use life::{Budget, Idle, LifeSpec, Restart, RestartLimit};
pub use work::{GitIdentity, Tools, WorkSpec};

pub(crate) mod allow;
mod error;
mod harness;
mod life;
mod work;
use harness::is_env_name;

/// The largest configuration file read.
const MAX_CONFIG: u64 = 1024 * 1024;

/// A parsed `up` configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpConfig {
    /// The business the broker serves.
    pub business: Business,
    /// The agents to launch, in this order.
    pub agents: Vec<AgentSpec>,
    /// Whether the agents run in a sandbox (`sandbox`, default `auto`).
    pub sandbox: SandboxMode,
    /// The configuration file itself, absolute when loaded from a file: a
    /// sandbox binds it read-only even inside a writable `workdir`, so an
    /// agent cannot change how the next `up` starts it.
    pub file: Option<PathBuf>,
}

/// The top-level `sandbox` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Every agent in a sandbox, or `up` refuses to start
    /// (`sandbox-unavailable`).
    Required,
    /// A sandbox when bubblewrap can make one; otherwise the agents run
    /// unsandboxed, with one warning.
    #[default]
    Auto,
    /// No sandbox: the agents run as `up`'s user in `up`'s namespaces.
    Off,
}

/// An agent's `network` key: what its sandbox lets it reach beyond the
/// broker's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// A network namespace of its own with loopback only: the default,
    /// since the host's loopback holds services that run what they are
    /// sent (debuggers, dev servers).
    #[default]
    None,
    /// A loopback-only namespace, and `up`'s forward proxy, which admits
    /// only the `host:port` names of the agent's `allow` list.
    Proxy,
    /// The host's network, loopback services included: a deliberate
    /// choice, which `up` warns about.
    Host,
}

impl Network {
    /// Its name in the configuration and on `up`'s first line.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Proxy => "proxy",
            Network::Host => "host",
        }
    }
}

impl AgentSpec {
    /// Where it runs without a sandbox: its `workdir`, or else the
    /// configuration's folder (in a sandbox, an empty folder of its own).
    pub fn cwd(&self) -> &Path {
        self.workdir.as_deref().unwrap_or(&self.config_dir)
    }
}

/// One agent to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    /// Its role instance.
    pub role: RoleInstance,
    /// Its harness.
    pub harness: Harness,
    /// The program: absolute, or a bare name looked up in `PATH` (for a
    /// harness `up` starts, `"program"` or else the harness's own name).
    pub program: PathBuf,
    /// The program's arguments: the command's, or for a harness `up`
    /// starts the `"args"` it appends to its own.
    pub args: Vec<String>,
    /// For an agent without a `"command"`, what `up` starts its harness
    /// with; `None` for a command.
    pub harnessed: Option<HarnessRun>,
    /// The `workdir` (absolute), writable in a sandbox; `None` when the
    /// configuration names none, and the agent then runs in `config_dir`,
    /// or in a sandbox in an empty private folder (its home).
    pub workdir: Option<PathBuf>,
    /// The configuration file's directory, where relative programs are.
    pub config_dir: PathBuf,
    /// The names of `up`'s environment variables the agent also gets,
    /// beyond `up`'s base environment (`env` in the configuration).
    pub env: Vec<String>,
    /// Its network in a sandbox.
    pub network: Network,
    /// With `"network": "proxy"`, what the proxy admits (`allow`).
    pub allow: Vec<Allow>,
    /// Extra paths a sandbox binds read-only (absolute).
    pub read: Vec<PathBuf>,
    /// Extra paths a sandbox binds writable (absolute).
    pub write: Vec<PathBuf>,
    /// The size cap, in MiB, of its private `/tmp` and of its home in a
    /// sandbox, each (`tmpMiB`, default [`DEFAULT_TMP_MIB`]).
    pub tmp_mib: u32,
    /// The most processes (threads included) its sandbox may hold, as
    /// `RLIMIT_NPROC` (`processes`, default [`DEFAULT_PROCESSES`]).
    pub processes: u32,
    /// The most memory, in MiB, its sandbox's processes may hold where a
    /// cgroup caps them (`memoryMiB`, default [`DEFAULT_MEMORY_MIB`]).
    pub memory_mib: u32,
    /// The most, in MiB, that its activity may write outside its grants
    /// in one run: its output file or transcript and its harness's state
    /// folder (`stateMiB`, default [`DEFAULT_STATE_MIB`]).
    pub state_mib: u32,
    /// The most places each of its runs holds of the broker at once: its
    /// connections to the broker and the proxy's descriptors for it
    /// (`connections`, default [`DEFAULT_CONNECTIONS`], 1 to 4096).
    pub connections: u32,
    /// Whether its writable paths may overlap another agent's that says
    /// so too (`shared`, default `false`): each can then steer the other.
    pub shared: bool,
    /// How `up` keeps its runs alive and stops them (`restart`,
    /// `restartLimit`, `budget`, `stopGraceS`, `idle`).
    pub life: LifeSpec,
    /// How it works in its workdir (`tools`, `git`, `userConfig`).
    pub work: WorkSpec,
}

/// The default size cap of a sandboxed agent's `/tmp` and home, each.
pub const DEFAULT_TMP_MIB: u32 = 256;

/// How many places of the broker one run holds at once unless its agent
/// says otherwise (`connections`): the broker's own default per run.
pub const DEFAULT_CONNECTIONS: u32 = 64;

/// The default cap on a sandboxed agent's processes and threads.
pub const DEFAULT_PROCESSES: u32 = 1024;

/// The default memory cap of a sandboxed agent, where a cgroup holds it.
pub const DEFAULT_MEMORY_MIB: u32 = 4096;

/// The default cap of what one run writes outside its grants.
pub const DEFAULT_STATE_MIB: u32 = 512;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigJson {
    business: Value,
    agents: Vec<AgentJson>,
    #[serde(default)]
    sandbox: SandboxMode,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentJson {
    role: String,
    harness: String,
    command: Option<Vec<String>>,
    prompt: Option<String>,
    model: Option<harness::ModelJson>,
    program: Option<String>,
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Vec<String>,
    workdir: Option<String>,
    network: Option<Network>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    #[serde(rename = "tmpMiB")]
    tmp_mib: Option<u32>,
    processes: Option<u32>,
    #[serde(rename = "memoryMiB")]
    memory_mib: Option<u32>,
    #[serde(rename = "stateMiB")]
    state_mib: Option<u32>,
    connections: Option<u32>,
    #[serde(default)]
    shared: bool,
    restart: Option<Restart>,
    #[serde(rename = "restartLimit")]
    restart_limit: Option<life::LimitJson>,
    budget: Option<life::BudgetJson>,
    #[serde(rename = "stopGraceS")]
    stop_grace_s: Option<u64>,
    idle: Option<life::Idle>,
    tools: Option<Tools>,
    git: Option<work::GitJson>,
    #[serde(rename = "userConfig")]
    user_config: Option<bool>,
}

/// `value`, or `default` when absent; `bad-config` outside `range`.
fn within(
    value: Option<u32>,
    default: u32,
    range: std::ops::RangeInclusive<u32>,
) -> Result<u32, Refusal> {
    let value = value.unwrap_or(default);
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(Refusal::BadConfig)
    }
}

/// A path of the configuration: non-empty, without NUL, resolved against
/// the configuration's directory when relative, and without `..` (so what
/// a sandbox binds is what the text says, checked against the data root
/// and the secrets folder before anything is bound).
fn config_path(text: &str, dir: &Path) -> Result<PathBuf, Refusal> {
    let path = Path::new(text);
    if text.is_empty()
        || text.contains('\0')
        || path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(Refusal::BadConfig);
    }
    Ok(dir.join(path))
}

impl UpConfig {
    /// Parses a configuration whose file lives in `dir` (an absolute path:
    /// relative programs, relative paths and by default every agent's
    /// working directory are there).
    ///
    /// # Errors
    /// `bad-config` for any other shape, an empty `agents` or command, an
    /// empty or NUL-holding command word, a bad harness or role name, an
    /// `env` entry that is not a variable name or that names a credential
    /// reference of the business (a service token never reaches an agent),
    /// a `sandbox` or `network` of another value, an `allow` list without
    /// `"network": "proxy"` or with an entry that is not `host:port`
    /// ([`Allow::parse`]), a `workdir`, `read` or `write` path that is
    /// empty or holds `..` or NUL, a `tmpMiB` outside 1–65536, a
    /// `processes` outside 16–65536 or a `memoryMiB` outside 32–1048576;
    /// `unknown-role` for an agent whose role the business lacks; and the
    /// codes of [`business_from_value`], with the reference it names. A
    /// prompt over [`MAX_PROMPT`] names its agent and says why.
    pub fn parse(text: &str, dir: &Path) -> Result<Self, TeamError> {
        let json: ConfigJson = serde_json::from_str(text)
            .map_err(logged(Refusal::BadConfig, "parsing the configuration"))?;
        let business = business_from_value(json.business)?;
        let secret = credential_env_names(&business);
        if json.agents.is_empty() {
            return Err(Refusal::BadConfig.into());
        }
        let agents = json
            .agents
            .into_iter()
            .map(|agent| -> Result<AgentSpec, TeamError> {
                let role = RoleInstance::parse(&agent.role).map_err(|_| Refusal::BadConfig)?;
                business.role(&role).ok_or(Refusal::UnknownRole)?;
                let harness = Harness::parse(&agent.harness)?;
                if agent
                    .env
                    .iter()
                    .any(|name| !is_env_name(name) || secret.contains(name))
                {
                    return Err(Refusal::BadConfig.into());
                }
                let keys = harness::HarnessKeys {
                    prompt: agent.prompt,
                    model: agent.model,
                    program: agent.program,
                    args: agent.args,
                };
                let (program, args, harnessed, network) = match agent.command {
                    Some(command) => {
                        if keys.any() {
                            return Err(Refusal::BadConfig.into());
                        }
                        let (program, args) = command_words(command, dir)?;
                        (program, args, None, agent.network.unwrap_or_default())
                    }
                    None => {
                        let (program, args, run) =
                            harness::parse(&role, harness, keys, dir, &secret)?;
                        // A harness needs its model: without a network it
                        // could not reach it, so its default is the proxy,
                        // which admits the model's host, and `"none"` is
                        // refused.
                        let network = match agent.network {
                            None | Some(Network::Proxy) => Network::Proxy,
                            Some(Network::Host) => Network::Host,
                            Some(Network::None) => return Err(Refusal::BadConfig.into()),
                        };
                        (program, args, Some(run), network)
                    }
                };
                if !agent.allow.is_empty() && network != Network::Proxy {
                    return Err(Refusal::BadConfig.into());
                }
                let allow = agent
                    .allow
                    .iter()
                    .map(|text| Allow::parse(text).ok_or(Refusal::BadConfig))
                    .collect::<Result<_, _>>()?;
                let life = life::LifeKeys {
                    restart: agent.restart,
                    restart_limit: agent.restart_limit,
                    budget: agent.budget,
                    stop_grace_s: agent.stop_grace_s,
                    idle: agent.idle,
                }
                .parse(harnessed.is_some())?;
                let work = work::WorkKeys {
                    tools: agent.tools,
                    git: agent.git,
                    user_config: agent.user_config,
                }
                .parse(
                    &role,
                    business.id(),
                    harnessed.is_some(),
                    agent.workdir.is_some(),
                )?;
                let paths = |texts: Vec<String>| {
                    texts
                        .iter()
                        .map(|text| config_path(text, dir))
                        .collect::<Result<Vec<_>, _>>()
                };
                let workdir = agent
                    .workdir
                    .map(|workdir| config_path(&workdir, dir))
                    .transpose()?;
                let args = match workdir {
                    Some(_) => args,
                    None => args.into_iter().map(|a| named_file(a, dir)).collect(),
                };
                Ok(AgentSpec {
                    role,
                    harness,
                    program,
                    args,
                    harnessed,
                    workdir,
                    config_dir: dir.to_path_buf(),
                    env: agent.env,
                    network,
                    allow,
                    read: paths(agent.read)?,
                    write: paths(agent.write)?,
                    tmp_mib: within(agent.tmp_mib, DEFAULT_TMP_MIB, 1..=65_536)?,
                    processes: within(agent.processes, DEFAULT_PROCESSES, 16..=65_536)?,
                    memory_mib: within(agent.memory_mib, DEFAULT_MEMORY_MIB, 32..=1_048_576)?,
                    state_mib: within(agent.state_mib, DEFAULT_STATE_MIB, 1..=1_048_576)?,
                    connections: within(agent.connections, DEFAULT_CONNECTIONS, 1..=4096)?,
                    shared: agent.shared,
                    life,
                    work,
                })
            })
            .collect::<Result<_, TeamError>>()?;
        Ok(Self {
            business,
            agents,
            sandbox: json.sandbox,
            file: None,
        })
    }

    /// The names of the environment variables that hold this business's
    /// service tokens (`{"env": NAME}` references): never passed to an agent.
    pub fn credential_env(&self) -> Vec<String> {
        credential_env_names(&self.business)
    }

    /// The files that hold this business's service tokens (`{"file":
    /// PATH}` references): no sandbox binds a folder that holds one.
    pub fn credential_files(&self) -> Vec<PathBuf> {
        credential_file_paths(&self.business)
    }

    /// Reads and parses the configuration file at `path`.
    ///
    /// # Errors
    /// `bad-config` when it cannot be read, is larger than 1 MiB or is not
    /// UTF-8; and the codes of [`UpConfig::parse`].
    pub fn load(path: &Path) -> Result<Self, TeamError> {
        let path = std::path::absolute(path).map_err(|_| Refusal::BadConfig)?;
        let dir = path.parent().ok_or(Refusal::BadConfig)?;
        let mut text = String::new();
        File::open(&path)
            .and_then(|f| f.take(MAX_CONFIG + 1).read_to_string(&mut text))
            .map_err(logged(Refusal::BadConfig, "reading the configuration"))?;
        if text.len() as u64 > MAX_CONFIG {
            return Err(Refusal::BadConfig.into());
        }
        let mut config = Self::parse(&text, dir)?;
        config.file = Some(path.clone());
        Ok(config)
    }
}

/// A command's program and arguments: non-empty words without NUL, the
/// program resolved against `dir` when it is a relative path with a `/`.
fn command_words(command: Vec<String>, dir: &Path) -> Result<(PathBuf, Vec<String>), Refusal> {
    if command.iter().any(|w| w.is_empty() || w.contains('\0')) {
        return Err(Refusal::BadConfig);
    }
    let mut words = command.into_iter();
    let program = PathBuf::from(words.next().ok_or(Refusal::BadConfig)?);
    let program = if program.is_relative() && program.components().count() > 1 {
        dir.join(program)
    } else {
        program
    };
    Ok((program, words.collect()))
}

/// `word`, an argument of an agent without a `workdir`, made absolute
/// when it is a relative path naming a file in `dir`, the configuration's
/// folder (a script, a harness's extension): in a sandbox the agent does
/// not run in that folder, and sees the file alone, bound read-only where
/// the absolute path says.
fn named_file(word: String, dir: &Path) -> String {
    let path = Path::new(&word);
    if path.is_absolute() || !dir.join(path).is_file() {
        return word;
    }
    // Resolved, so the path the agent is given is the one the sandbox
    // binds (the kernel's name of the file, without `..` or links).
    match std::fs::canonicalize(dir.join(path)).map(|p| p.to_str().map(str::to_owned)) {
        Ok(Some(absolute)) => absolute,
        Ok(None) | Err(_) => word,
    }
}

/// Where `business`'s roles read their service tokens from.
fn credential_sources(
    business: &Business,
) -> impl Iterator<Item = &mosaic_domain::business::CredentialSource> {
    business
        .roles()
        .flat_map(|(_, role)| {
            let credentials = role.credentials();
            [
                credentials.gitea.as_ref().map(|c| &c.source),
                credentials.vikunja.as_ref().map(|c| &c.source),
            ]
        })
        .flatten()
}

/// The files that hold `business`'s service tokens.
fn credential_file_paths(business: &Business) -> Vec<PathBuf> {
    use mosaic_domain::business::CredentialSource;
    credential_sources(business)
        .filter_map(|source| match source {
            CredentialSource::File(path) => Some(PathBuf::from(path)),
            CredentialSource::Env(_) => None,
        })
        .collect()
}

/// The environment variables that hold `business`'s service tokens.
fn credential_env_names(business: &Business) -> Vec<String> {
    use mosaic_domain::business::CredentialSource;
    credential_sources(business)
        .filter_map(|source| match source {
            CredentialSource::Env(name) => Some(name.clone()),
            CredentialSource::File(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUSINESS: &str = r#"{"id":"acme","human":"alice","arbiters":{"technical":"lead","delivery":"lead"},
        "roles":{"lead":{"authority":{"withinRole":[],"crossRole":[]}}}}"#;

    fn config(agents: &str) -> String {
        format!(r#"{{"business":{BUSINESS},"agents":{agents}}}"#)
    }

    #[test]
    fn a_configuration_parses_and_resolves_relative_programs() {
        let text = config(
            r#"[{"role":"lead","harness":"pi","command":["agents/lead.sh","x"]},
                {"role":"lead","harness":"claude-code","command":["sh","-c","true"]}]"#,
        );
        let parsed = UpConfig::parse(&text, Path::new("/etc/demo")).unwrap();
        assert_eq!(parsed.business.id().as_str(), "acme");
        assert_eq!(
            parsed.agents[0].program,
            PathBuf::from("/etc/demo/agents/lead.sh")
        );
        assert_eq!(parsed.agents[0].args, ["x"]);
        assert_eq!(parsed.agents[0].workdir, None);
        assert_eq!(parsed.agents[0].cwd(), Path::new("/etc/demo"));
        assert_eq!(parsed.agents[1].program, PathBuf::from("sh"));
        assert_eq!(parsed.agents[1].harness, Harness::ClaudeCode);
        // The sandbox's defaults: `auto`, no network, no workdir (the
        // configuration's folder, read-only), nothing extra bound.
        assert_eq!(parsed.sandbox, SandboxMode::Auto);
        assert_eq!(parsed.agents[0].network, Network::None);
        assert!(parsed.agents[0].allow.is_empty());
        assert!(parsed.agents[0].read.is_empty() && parsed.agents[0].write.is_empty());
    }

    #[test]
    fn the_sandbox_keys_parse_and_resolve_their_paths() {
        let text = config(
            r#"[{"role":"lead","harness":"pi","command":["sh"],"workdir":"work",
                 "network":"none","read":["/opt/tools"],"write":["cache","/var/tmp/x"]}]"#,
        )
        .replacen('{', r#"{"sandbox":"required","#, 1);
        let parsed = UpConfig::parse(&text, Path::new("/etc/demo")).unwrap();
        assert_eq!(parsed.sandbox, SandboxMode::Required);
        assert_eq!(parsed.agents[0].tmp_mib, DEFAULT_TMP_MIB);
        assert_eq!(parsed.agents[0].processes, DEFAULT_PROCESSES);
        assert_eq!(parsed.agents[0].memory_mib, DEFAULT_MEMORY_MIB);
        let capped = text.replace(
            r#""network""#,
            r#""tmpMiB":8,"processes":64,"memoryMiB":512,"network""#,
        );
        let capped = UpConfig::parse(&capped, Path::new("/etc/demo")).unwrap();
        let agent = &capped.agents[0];
        assert_eq!(
            (agent.tmp_mib, agent.processes, agent.memory_mib),
            (8, 64, 512)
        );
        for bad in [
            r#""tmpMiB":0,"#,
            r#""processes":8,"#,
            r#""tmpMiB":"8","#,
            r#""memoryMiB":16,"#,
        ] {
            let text = text.replace(r#""network""#, &format!(r#"{bad}"network""#));
            assert!(
                UpConfig::parse(&text, Path::new("/etc/demo")).is_err(),
                "{bad}"
            );
        }
        let agent = &parsed.agents[0];
        assert_eq!(agent.workdir, Some(PathBuf::from("/etc/demo/work")));
        assert_eq!(agent.config_dir, PathBuf::from("/etc/demo"));
        assert_eq!(agent.network, Network::None);
        assert_eq!(agent.read, [PathBuf::from("/opt/tools")]);
        assert_eq!(
            agent.write,
            [
                PathBuf::from("/etc/demo/cache"),
                PathBuf::from("/var/tmp/x")
            ]
        );
        let proxy = config(
            r#"[{"role":"lead","harness":"pi","command":["sh"],"network":"proxy",
                 "allow":["api.example.com:443","*.example.org:80","127.0.0.1:8080"]}]"#,
        );
        let agent = &UpConfig::parse(&proxy, Path::new("/")).unwrap().agents[0];
        assert_eq!(agent.network, Network::Proxy);
        let allow: Vec<String> = agent.allow.iter().map(ToString::to_string).collect();
        assert_eq!(
            allow,
            ["api.example.com:443", "*.example.org:80", "127.0.0.1:8080"]
        );
        let host = config(r#"[{"role":"lead","harness":"pi","command":["sh"],"network":"host"}]"#);
        let parsed = UpConfig::parse(&host, Path::new("/")).unwrap();
        assert_eq!(parsed.agents[0].network, Network::Host);
        let off = config(r#"[{"role":"lead","harness":"pi","command":["sh"]}]"#).replacen(
            '{',
            r#"{"sandbox":"off","#,
            1,
        );
        assert_eq!(
            UpConfig::parse(&off, Path::new("/")).unwrap().sandbox,
            SandboxMode::Off
        );
    }

    #[test]
    fn bad_configurations_refuse_with_static_codes() {
        let agent = r#"{"role":"lead","harness":"pi","command":["sh"]}"#;
        let cases = [
            (config("[]"), Refusal::BadConfig),
            (
                config(&format!("[{agent}]")).replace(r#""agents""#, r#""extra":1,"agents""#),
                Refusal::BadConfig,
            ),
            (
                config(&format!(
                    "[{}]",
                    agent.replace(r#""pi""#, r#""pi","cwd":"/""#)
                )),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace("lead", "ghost"))),
                Refusal::UnknownRole,
            ),
            (
                config(&format!("[{}]", agent.replace("lead", "A B"))),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace("pi", "codex"))),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace(r#"["sh"]"#, "[]"))),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace(r#"["sh"]"#, r#"["sh",""]"#))),
                Refusal::BadConfig,
            ),
            (
                config(&format!("[{}]", agent.replace(r#"["sh"]"#, r#""sh""#))),
                Refusal::BadConfig,
            ),
            (format!(r#"{{"agents":[{agent}]}}"#), Refusal::BadConfig),
            (
                config(&format!("[{agent}]"))
                    .replace(r#""delivery":"lead""#, r#""delivery":"ghost""#),
                Refusal::UnknownRole,
            ),
            ("[]".to_owned(), Refusal::BadConfig),
            (
                config(&format!("[{agent}]")).replacen('{', r#"{"sandbox":"maybe","#, 1),
                Refusal::BadConfig,
            ),
            (
                config(&format!(
                    "[{}]",
                    agent.replace(r#""pi""#, r#""pi","network":"lan""#)
                )),
                Refusal::BadConfig,
            ),
            (
                config(&format!(
                    "[{}]",
                    agent.replace(r#""pi""#, r#""pi","allow":["example.com:443"]"#)
                )),
                Refusal::BadConfig,
            ),
            (
                config(&format!(
                    "[{}]",
                    agent.replace(
                        r#""pi""#,
                        r#""pi","network":"proxy","allow":["example.com"]"#
                    )
                )),
                Refusal::BadConfig,
            ),
            (
                config(&format!(
                    "[{}]",
                    agent.replace(r#""pi""#, r#""pi","workdir":"../up""#)
                )),
                Refusal::BadConfig,
            ),
            (
                config(&format!(
                    "[{}]",
                    agent.replace(r#""pi""#, r#""pi","read":[""]"#)
                )),
                Refusal::BadConfig,
            ),
            (
                config(&format!(
                    "[{}]",
                    agent.replace(r#""pi""#, r#""pi","write":"/x""#)
                )),
                Refusal::BadConfig,
            ),
        ];
        for (text, code) in cases {
            assert_eq!(
                UpConfig::parse(&text, Path::new("/"))
                    .map_err(Refusal::from)
                    .err(),
                Some(code),
                "{text}"
            );
        }
    }

    #[test]
    fn harness_agents_parse_with_their_defaults_and_the_proxy() {
        let text = config(
            r#"[{"role":"lead","harness":"claude-code","prompt":"Claim your role."},
                {"role":"lead","harness":"pi","prompt":"Go.","program":"bin/pi","args":["--x"],
                 "model":{"api":"anthropic","baseUrl":"http://127.0.0.1:8080","id":"m-1",
                          "keyEnv":"MODEL_KEY"},
                 "allow":["example.com:443"]}]"#,
        );
        let parsed = UpConfig::parse(&text, Path::new("/etc/demo")).unwrap();
        let claude = &parsed.agents[0];
        assert_eq!(claude.program, PathBuf::from("claude"));
        assert!(claude.args.is_empty());
        assert_eq!(claude.network, Network::Proxy);
        let run = claude.harnessed.as_ref().unwrap();
        assert_eq!(run.prompt, "Claim your role.");
        assert_eq!(
            (run.model.base_url.as_ref(), run.model.id.as_deref()),
            (None, None)
        );
        assert_eq!(run.model.key_env, DEFAULT_KEY_ENV);
        assert_eq!(run.model.endpoint.to_string(), DEFAULT_MODEL_HOST);
        let pi = &parsed.agents[1];
        assert_eq!(pi.program, PathBuf::from("/etc/demo/bin/pi"));
        assert_eq!(pi.args, ["--x"]);
        let model = &pi.harnessed.as_ref().unwrap().model;
        assert_eq!(model.key_env, "MODEL_KEY");
        assert_eq!(model.id.as_deref(), Some("m-1"));
        assert_eq!(model.endpoint.to_string(), "127.0.0.1:8080");
        assert_eq!(model.loopback_port(), Some(8080));
        // A command keeps its own network default and has no harness run.
        let command = config(r#"[{"role":"lead","harness":"pi","command":["sh"]}]"#);
        let parsed = UpConfig::parse(&command, Path::new("/")).unwrap();
        assert_eq!(parsed.agents[0].harnessed, None);
        assert_eq!(parsed.agents[0].network, Network::None);
    }

    #[test]
    fn bad_harness_keys_refuse_with_bad_config() {
        let secret = BUSINESS.replace(
            r#""lead":{"authority""#,
            r#""lead":{"credentials":{"gitea":{"env":"GITEA_TOKEN"}},"authority""#,
        );
        let harness = |keys: &str| {
            format!(r#"{{"business":{secret},"agents":[{{"role":"lead","harness":"pi"{keys}}}]}}"#)
        };
        // The business with a service token parses, so each case below is
        // refused for its harness keys alone.
        assert!(UpConfig::parse(&harness(r#","prompt":"go""#), Path::new("/")).is_ok());
        for keys in [
            "",
            r#","prompt":"""#,
            r#","prompt":"  ""#,
            r#","prompt":"go","network":"none""#,
            r#","command":["sh"],"prompt":"go""#,
            r#","command":["sh"],"args":["x"]"#,
            r#","command":["sh"],"program":"pi""#,
            r#","command":["sh"],"model":{"api":"anthropic"}"#,
            r#","prompt":"go","program":"""#,
            r#","prompt":"go","args":[""]"#,
            r#","prompt":"go","args":"x""#,
            r#","prompt":"go","model":{}"#,
            r#","prompt":"go","model":{"api":"openai"}"#,
            r#","prompt":"go","model":{"api":"anthropic","extra":1}"#,
            r#","prompt":"go","model":{"api":"anthropic","baseUrl":"example.com"}"#,
            r#","prompt":"go","model":{"api":"anthropic","id":""}"#,
            r#","prompt":"go","model":{"api":"anthropic","keyEnv":"A-B"}"#,
            r#","prompt":"go","model":{"api":"anthropic","keyEnv":"GITEA_TOKEN"}"#,
        ] {
            assert_eq!(
                UpConfig::parse(&harness(keys), Path::new("/"))
                    .map_err(Refusal::from)
                    .err(),
                Some(Refusal::BadConfig),
                "{keys}"
            );
        }
    }

    #[test]
    fn the_example_configuration_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let parsed = UpConfig::load(&dir.join("business.json")).unwrap();
        let roles: Vec<&str> = parsed.agents.iter().map(|a| a.role.as_str()).collect();
        assert_eq!(roles, ["lead", "dev"]);
        for agent in &parsed.agents {
            let script = agent.cwd().join(&agent.args[0]);
            assert!(script.is_file(), "{}", script.display());
        }
        // The team of real harnesses: lead on Claude Code, dev on pi.
        let team = UpConfig::load(&dir.join("claude-team.json")).unwrap();
        let harnesses: Vec<(&str, Harness, bool)> = team
            .agents
            .iter()
            .map(|a| (a.role.as_str(), a.harness, a.harnessed.is_some()))
            .collect();
        assert_eq!(
            harnesses,
            [
                ("lead", Harness::ClaudeCode, true),
                ("dev", Harness::Pi, true)
            ]
        );
    }
}
