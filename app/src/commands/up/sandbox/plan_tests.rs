//! The plan's tests: the whole command line and the whole environment of
//! each agent of `examples/*.json`, sandboxed and not, against a fake host
//! root and without running bwrap; how a launch's values fill them; what
//! the plan binds and refuses; and the environment's allow-list over
//! generated environments.

use std::ffi::OsString;

use proptest::prelude::*;

use super::env::BASE_ENV;
use super::render::{Launch, LaunchValues, WAIT_READY, WAIT_READY_NULL};
use super::*;
use crate::commands::team::UpConfig;
use crate::commands::up::harness::{self, Where};
use crate::commands::up::sandbox::paths;

fn spec(dir: &Path) -> AgentSpec {
    AgentSpec {
        role: RoleInstance::parse("lead").unwrap(),
        harness: Harness::Pi,
        program: PathBuf::from("sh"),
        args: Vec::new(),
        harnessed: None,
        workdir: Some(dir.to_path_buf()),
        config_dir: dir.to_path_buf(),
        env: Vec::new(),
        network: Network::Host,
        allow: Vec::new(),
        read: Vec::new(),
        write: Vec::new(),
        tmp_mib: 4,
        processes: 64,
        memory_mib: 256,
        state_mib: 512,
        connections: 64,
        shared: false,
        life: crate::commands::team::LifeSpec::defaults(false),
        work: crate::commands::team::WorkSpec {
            tools: crate::commands::team::Tools::Bus,
            git: crate::commands::team::GitIdentity {
                name: "lead (acme)".into(),
                email: "lead@acme.invalid".into(),
            },
            user_config: false,
        },
    }
}

/// A host of its own under `root`: merged `/usr` (`bin` a link), a `lib64`
/// folder, an `/etc` with a `shadow` the plan must leave out and a
/// `resolv.conf` link into `/run`, Claude Code installed as npm does (a
/// link into `node_modules`) and pi, and the places of one `up`.
fn host(root: &Path) -> HostPaths {
    for dir in [
        "host/usr/bin",
        "host/usr/lib/node_modules/@anthropic-ai/claude-code/bin",
        "host/lib64",
        "host/etc/ssl",
        "host/run/resolve",
        "data/bus",
        "secrets",
        "work",
        "other",
        "home/alice/tool",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::os::unix::fs::symlink("usr/bin", root.join("host/bin")).unwrap();
    for file in [
        "usr/bin/sh",
        "usr/bin/mosaic-bus",
        "usr/bin/pi",
        "usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
        "etc/passwd",
        "etc/shadow",
        "run/resolve/stub",
    ] {
        let path = root.join("host").join(file);
        std::fs::write(&path, "x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::os::unix::fs::symlink(
        "../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
        root.join("host/usr/bin/claude"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        root.join("host/run/resolve/stub"),
        root.join("host/etc/resolv.conf"),
    )
    .unwrap();
    std::fs::write(root.join("work/team.json"), "{}").unwrap();
    HostPaths {
        host_root: root.join("host"),
        exe: root.join("host/usr/bin/mosaic-bus"),
        socket: root.join("data/bus/bus.sock"),
        data_root: root.join("data"),
        secrets: root.join("secrets"),
        human_home: Some(root.join("home")),
        config_file: Some(root.join("work/team.json")),
        credentials: Vec::new(),
        guards: Vec::new(),
    }
}

/// A fake host in a new folder: the folder (kept while it lives), its
/// resolved path and its places.
fn fake_host() -> (tempfile::TempDir, PathBuf, HostPaths) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let places = host(&root);
    (dir, root, places)
}

fn sandbox(places: HostPaths, landlock: bool) -> Sandbox {
    Sandbox {
        bwrap: PathBuf::from("/usr/bin/bwrap"),
        landlock,
        places,
    }
}

/// `up`'s environment in these tests: a home, a language, a locale
/// category, a temporary folder, the model's key, a variable the example
/// names and one nobody names.
fn vars() -> Vec<(OsString, OsString)> {
    [
        ("HOME", "/home/alice"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("TMPDIR", "/var/tmp"),
        ("ANTHROPIC_API_KEY", "sk-key-value"),
        ("MOSAIC_EXAMPLE_DUMP", "/x/dump"),
        ("UNNAMED", "unnamed-value"),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect()
}

/// The agents' `PATH`: the fake host's programs.
fn path_of(root: &Path) -> OsString {
    root.join("host/usr/bin").into_os_string()
}

/// What the tests vary of a plan's making; the rest is fixed.
struct Make<'a> {
    spec: &'a AgentSpec,
    run: &'a RunId,
    prepared: Option<&'a Prepared>,
    sandbox: Option<&'a Sandbox>,
    path: &'a OsStr,
    vars: &'a [(OsString, OsString)],
    socket: &'a Path,
    console: bool,
}

impl Make<'_> {
    fn build(&self) -> Result<Plan, Refusal> {
        build(&Making {
            spec: self.spec,
            run: self.run,
            prepared: self.prepared,
            version: None,
            path: self.path,
            vars: self.vars,
            secret_env: &[],
            socket: self.socket,
            console: self.console,
            sandbox: self.sandbox,
        })
    }
}

/// A plan of `spec` as `lead-0badc0de`, in `sandbox` or without one,
/// with no harness and no variables.
fn plan_in(spec: &AgentSpec, sandbox: Option<&Sandbox>, root: &Path) -> Result<Plan, Refusal> {
    let run = RunId::parse("lead-0badc0de").unwrap();
    let path = path_of(root);
    let socket = root.join("data/bus/bus.sock");
    Make {
        spec,
        run: &run,
        prepared: None,
        sandbox,
        path: &path,
        vars: &[],
        socket: &socket,
        console: false,
    }
    .build()
}

fn text(words: &[OsString]) -> Vec<String> {
    words
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect()
}

fn owned(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

fn pairs(env: &[(OsString, OsString)]) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
        .collect()
}

fn owned_pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn s(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// bwrap's namespaces, with a network of loopback alone or not.
fn namespaces(own_network: bool) -> Vec<String> {
    let mut words = owned(&[
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup",
    ]);
    if own_network {
        words.push("--unshare-net".into());
    }
    words.extend(owned(&[
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--new-session",
        "--die-with-parent",
    ]));
    words
}

/// The mounts every sandbox of the fake host starts with, up to and
/// including `mosaic-bus`, with `tmp` MiB of `/dev/shm`, `/tmp` and home.
fn system_words(root: &Path, tmp: u64) -> Vec<String> {
    let h = root.join("host");
    let bytes = (tmp << 20).to_string();
    let exe = s(&h.join("usr/bin/mosaic-bus"));
    let mut words = owned(&["--ro-bind", &s(&h.join("usr")), "/usr"]);
    words.extend(owned(&["--symlink", "usr/bin", "/bin"]));
    words.extend(owned(&["--ro-bind", &s(&h.join("lib64")), "/lib64"]));
    for name in ["passwd", "resolv.conf", "ssl"] {
        let source = s(&h.join("etc").join(name));
        words.extend(owned(&["--ro-bind", &source, &format!("/etc/{name}")]));
    }
    words.extend(owned(&[
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
    ]));
    words.extend(owned(&["--size", &bytes, "--tmpfs", "/dev/shm"]));
    words.extend(owned(&["--size", &bytes, "--tmpfs", "/tmp"]));
    words.extend(owned(&["--size", &bytes, "--tmpfs", SANDBOX_HOME]));
    words.extend(owned(&["--ro-bind", &exe, &exe]));
    words
}

/// `sandbox-exec`'s words up to its `--`, as the fake host's `mosaic-bus`.
fn exec_words(root: &Path, landlock: bool, processes: u32, tail: &[&str]) -> Vec<String> {
    let exe = s(&root.join("host/usr/bin/mosaic-bus"));
    let socket = s(&root.join("data/bus/bus.sock"));
    let mut words = owned(&[
        &exe,
        "sandbox-exec",
        "--keep-fd",
        "<cap-fd>",
        "--control-fd",
        "<control-fd>",
        "--bus-socket",
        &socket,
    ]);
    if landlock {
        words.push("--landlock".into());
    }
    let denied: Vec<&str> = DENIED_CALLS.iter().map(|(name, _)| *name).collect();
    words.extend(owned(&[
        "--processes",
        &processes.to_string(),
        "--deny",
        &denied.join(","),
    ]));
    words.extend(owned(tail));
    words.push("--".into());
    words
}

fn examples() -> PathBuf {
    std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")).unwrap()
}

#[test]
fn the_examples_command_agents_have_exactly_this_command_line_and_environment() {
    let (_dir, root, places) = fake_host();
    let file = examples().join("business.json");
    let config = UpConfig::load(&file).unwrap();
    let places = HostPaths {
        config_file: Some(file.clone()),
        ..places
    };
    let sandbox = sandbox(places, true);
    let (path, vars) = (path_of(&root), vars());
    let socket = root.join("data/bus/bus.sock");
    for agent in &config.agents {
        let run = RunId::parse(&format!("{}-0badc0de", agent.role.as_str())).unwrap();
        let plan = Make {
            spec: agent,
            run: &run,
            prepared: None,
            sandbox: Some(&sandbox),
            path: &path,
            vars: &vars,
            socket: &socket,
            console: false,
        }
        .build()
        .unwrap();
        let data = s(&root.join("data"));
        let mut expected = owned(&["/usr/bin/bwrap"]);
        expected.extend(namespaces(true));
        expected.extend(system_words(&root, 256));
        // No workdir: never the configuration's folder, but its `read`
        // folder of scripts, the script its arguments name and the
        // configuration, each by itself; the agent runs in its own empty
        // home.
        let script = s(&examples().join(format!("agents/{}.sh", agent.role.as_str())));
        assert_eq!(agent.args, std::slice::from_ref(&script));
        expected.extend(owned(&[
            "--ro-bind-fd",
            "<fd>",
            &s(&examples().join("agents")),
        ]));
        expected.extend(owned(&["--ro-bind-fd", "<fd>", &script]));
        expected.extend(owned(&["--ro-bind-fd", "<fd>", &s(&file)]));
        expected.extend(owned(&[
            "--tmpfs",
            &data,
            "--ro-bind",
            &s(&socket),
            &s(&socket),
        ]));
        expected.extend(owned(&["--remount-ro", &data, "--remount-ro", "/"]));
        expected.extend(owned(&["--chdir", SANDBOX_HOME, "--"]));
        expected.extend(exec_words(&root, true, 1024, &["--bus-bridge"]));
        expected.push(s(&root.join("host/usr/bin/sh")));
        expected.extend(agent.args.iter().cloned());
        assert_eq!(text(&plan.argv(&Launch::Described)), expected);
        let (name, email) = (
            format!("{} (acme)", agent.role.as_str()),
            format!("{}@acme.invalid", agent.role.as_str()),
        );
        assert_eq!(
            pairs(&plan.environment(&Launch::Described)),
            owned_pairs(&[
                ("GIT_AUTHOR_EMAIL", &email),
                ("GIT_AUTHOR_NAME", &name),
                ("GIT_COMMITTER_EMAIL", &email),
                ("GIT_COMMITTER_NAME", &name),
                ("HOME", SANDBOX_HOME),
                ("LANG", "C.UTF-8"),
                ("MOSAIC_BUS_CAP_FD", "<cap-fd>"),
                ("MOSAIC_BUS_SINCE", "<since>"),
                ("MOSAIC_BUS_SOCKET", &s(&socket)),
                ("MOSAIC_EXAMPLE_DUMP", "/x/dump"),
                ("MOSAIC_RUN_ID", run.as_str()),
                ("PATH", &s(&root.join("host/usr/bin"))),
                ("TMPDIR", "/tmp"),
            ]),
            "{}",
            agent.role.as_str()
        );
        // Each granted path is bound from the descriptor that was checked.
        let walls = plan.walls.as_ref().unwrap();
        for mount in &walls.mounts {
            if let Mount::Granted { fd, path, .. } = mount {
                let held = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
                assert_eq!(&held, path);
            }
        }
        assert_eq!((walls.processes, walls.memory_mib), (1024, 4096));
        assert_eq!(plan.network, Network::None);
        assert!(plan.allow.is_empty() && plan.forwards.is_empty());
    }
}

/// The prepared harness of `spec` as `run`, in the fake host's data root.
fn prepared(spec: &AgentSpec, run: &RunId, root: &Path, sandboxed: bool) -> Prepared {
    let (path, vars) = (path_of(root), vars());
    let at = Where {
        data_root: &root.join("data"),
        exe: &root.join("host/usr/bin/mosaic-bus"),
        socket: &root.join("data/bus/bus.sock"),
        path: &path,
        vars: &vars,
        sandboxed,
    };
    harness::prepare(spec, spec.harnessed.as_ref().unwrap(), run, &at).unwrap()
}

#[test]
fn the_examples_harness_agents_have_exactly_this_command_line_and_environment() {
    let (_dir, root, places) = fake_host();
    let file = examples().join("claude-team.json");
    let config = UpConfig::load(&file).unwrap();
    let places = HostPaths {
        config_file: Some(file.clone()),
        ..places
    };
    let sandbox = sandbox(places, false);
    let (path, vars) = (path_of(&root), vars());
    let socket = root.join("data/bus/bus.sock");
    let data = root.join("data");
    let exe = s(&root.join("host/usr/bin/mosaic-bus"));
    for agent in &config.agents {
        let role = agent.role.as_str();
        let run = RunId::parse(&format!("{role}-0badc0de")).unwrap();
        let ready = prepared(agent, &run, &root, true);
        let plan = Make {
            spec: agent,
            run: &run,
            prepared: Some(&ready),
            sandbox: Some(&sandbox),
            path: &path,
            vars: &vars,
            socket: &socket,
            console: false,
        }
        .build()
        .unwrap();
        let run_dir = data.join("agents/runs").join(run.as_str());
        let state = data.join(format!("agents/state/{role}.{}", agent.harness.as_str()));
        let mut expected = owned(&["/usr/bin/bwrap"]);
        expected.extend(namespaces(true));
        // The programs lie in /usr (Claude Code's install folder too): no
        // bind of their own.
        expected.extend(system_words(&root, 256));
        expected.extend(owned(&["--ro-bind-fd", "<fd>", &s(&file)]));
        expected.extend(owned(&[
            "--tmpfs",
            &s(&data),
            "--ro-bind",
            &s(&socket),
            &s(&socket),
        ]));
        expected.extend(owned(&["--ro-bind", &s(&run_dir), &s(&run_dir)]));
        expected.extend(owned(&["--bind", &s(&state), &s(&state)]));
        // The harness's configuration in its state folder, read-only.
        let fixed: &[&str] = match agent.harness {
            Harness::ClaudeCode => &["settings.json"],
            Harness::Pi => &["settings.json", "models.json"],
        };
        for name in fixed {
            let file = s(&state.join(name));
            expected.extend(owned(&["--ro-bind", &file, &file]));
        }
        expected.extend(owned(&["--remount-ro", &s(&data)]));
        expected.extend(owned(&[
            "--ro-bind",
            "<proxy-socket>",
            "/run/mosaic-bus/proxy.sock",
        ]));
        expected.extend(owned(&["--remount-ro", "/"]));
        expected.extend(owned(&["--chdir", SANDBOX_HOME, "--"]));
        let prompt = &agent.harnessed.as_ref().unwrap().prompt;
        let proxy = ["--proxy-socket", "/run/mosaic-bus/proxy.sock"];
        let mut env = vec![
            ("ANTHROPIC_API_KEY", "sk-key-value".to_owned()),
            ("GIT_AUTHOR_EMAIL", format!("{role}@acme.invalid")),
            ("GIT_AUTHOR_NAME", format!("{role} (acme)")),
            ("GIT_COMMITTER_EMAIL", format!("{role}@acme.invalid")),
            ("GIT_COMMITTER_NAME", format!("{role} (acme)")),
            ("GIT_CONFIG_COUNT", "1".to_owned()),
            ("GIT_CONFIG_KEY_0", "core.excludesFile".to_owned()),
            ("GIT_CONFIG_VALUE_0", s(&run_dir.join("git-ignored"))),
            ("HOME", SANDBOX_HOME.to_owned()),
            ("LANG", "C.UTF-8".to_owned()),
            ("MOSAIC_BUS_CAP_FD", "<cap-fd>".to_owned()),
            ("MOSAIC_BUS_IDLE", "exit".to_owned()),
            ("MOSAIC_BUS_SINCE", "<since>".to_owned()),
            ("MOSAIC_BUS_SOCKET", s(&socket)),
            ("MOSAIC_HOOK_WAIT_MS", "10000".to_owned()),
            ("MOSAIC_RUN_ID", run.as_str().to_owned()),
            ("PATH", s(&root.join("host/usr/bin"))),
            ("TMPDIR", "/tmp".to_owned()),
        ];
        match agent.harness {
            Harness::ClaudeCode => {
                expected.extend(exec_words(
                    &root,
                    false,
                    1024,
                    &[
                        proxy[0],
                        proxy[1],
                        "--bus-bridge",
                        "--cap-file",
                        "--stdin-null",
                    ],
                ));
                let claude = "host/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe";
                expected.push(s(&root.join(claude)));
                expected.extend(owned(&[
                    "-p",
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--include-hook-events",
                    "--strict-mcp-config",
                    &format!("--mcp-config={}", s(&run_dir.join("mcp.json"))),
                    &format!("--settings={}", s(&run_dir.join("settings.json"))),
                    "--allowedTools=mcp__mosaic-bus",
                    // No workdir: the bus's tools alone.
                    "--tools=",
                    "--model=claude-sonnet-4-5",
                    "--",
                    prompt,
                ]));
                env.extend([
                    ("ANTHROPIC_MODEL", "claude-sonnet-4-5".to_owned()),
                    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
                    ("CLAUDE_CONFIG_DIR", s(&state)),
                    ("DISABLE_AUTOUPDATER", "1".to_owned()),
                    ("DISABLE_TELEMETRY", "1".to_owned()),
                    ("ENABLE_TOOL_SEARCH", "false".to_owned()),
                ]);
            }
            Harness::Pi => {
                expected.extend(exec_words(
                    &root,
                    false,
                    1024,
                    &[proxy[0], proxy[1], "--bus-bridge", "--cap-file"],
                ));
                expected.push(s(&root.join("host/usr/bin/pi")));
                let sessions = state.join("sessions").join(run.as_str());
                expected.extend(owned(&["--mode", "rpc", "--provider", "anthropic"]));
                expected.push("--session-dir".to_owned());
                expected.push(s(&sessions));
                expected.extend(owned(&["--no-builtin-tools"]));
                expected.extend(owned(&["--model", "claude-sonnet-4-5", "-e"]));
                expected.push(s(&run_dir.join("mosaic-bus.ts")));
                env.extend([
                    ("MOSAIC_BUS_BIN", exe.clone()),
                    ("PI_CODING_AGENT_DIR", s(&state)),
                    ("PI_OFFLINE", "1".to_owned()),
                    ("PI_SKIP_VERSION_CHECK", "1".to_owned()),
                    ("PI_TELEMETRY", "0".to_owned()),
                ]);
            }
        }
        assert_eq!(text(&plan.argv(&Launch::Described)), expected, "{role}");
        env.sort();
        let env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k.into(), v)).collect();
        assert_eq!(pairs(&plan.environment(&Launch::Described)), env, "{role}");
        assert_eq!(
            plan.allow
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["api.anthropic.com:443"]
        );
        // Nothing is written until `up` writes it.
        assert!(!run_dir.exists() && !state.exists(), "{role}");
        ready.write().unwrap();
        assert!(run_dir.is_dir() && state.is_dir(), "{role}");
        assert_eq!(
            std::fs::read_to_string(run_dir.join("git-ignored")).expect("git-ignored"),
            ".gitmodules\n.envrc\n.npmrc\n.mcp.json\n",
            "{role}"
        );
        // A wake resumes the conversation, before its new prompt.
        let resume = ready.resume.as_ref().expect("text arguments");
        let before_prompt = match agent.harness {
            Harness::ClaudeCode => expected.len() - 2,
            Harness::Pi => expected.len(),
        };
        let configured = expected[before_prompt - (resume.len() - 1)..before_prompt].to_vec();
        assert_eq!(resume[..resume.len() - 1], configured[..], "{role}");
        assert_eq!(
            resume.last().map(String::as_str),
            Some("--continue"),
            "{role}"
        );
    }
}

#[test]
fn without_a_sandbox_the_command_is_the_program_or_a_harness_behind_its_wait() {
    let (_dir, root, _) = fake_host();
    let (path, vars) = (path_of(&root), vars());
    let socket = root.join("data/bus/bus.sock");
    let config = UpConfig::load(&examples().join("business.json")).unwrap();
    let agent = &config.agents[0];
    let run = RunId::parse("lead-0badc0de").unwrap();
    let plan = Make {
        spec: agent,
        run: &run,
        prepared: None,
        sandbox: None,
        path: &path,
        vars: &vars,
        socket: &socket,
        console: true,
    }
    .build()
    .unwrap();
    assert_eq!(
        text(&plan.argv(&Launch::Described)),
        [
            s(&root.join("host/usr/bin/sh")),
            s(&examples().join("agents/lead.sh"))
        ]
    );
    // `up`'s own home (not its temporary folder, nor its locale
    // categories), and the console's mark.
    assert_eq!(
        pairs(&plan.environment(&Launch::Described)),
        owned_pairs(&[
            ("GIT_AUTHOR_EMAIL", "lead@acme.invalid"),
            ("GIT_AUTHOR_NAME", "lead (acme)"),
            ("GIT_COMMITTER_EMAIL", "lead@acme.invalid"),
            ("GIT_COMMITTER_NAME", "lead (acme)"),
            ("HOME", "/home/alice"),
            ("LANG", "C.UTF-8"),
            ("MOSAIC_BUS_CAP_FD", "<cap-fd>"),
            ("MOSAIC_BUS_SINCE", "<since>"),
            ("MOSAIC_BUS_SOCKET", &s(&socket)),
            ("MOSAIC_CONSOLE", "1"),
            ("MOSAIC_EXAMPLE_DUMP", "/x/dump"),
            ("MOSAIC_RUN_ID", "lead-0badc0de"),
            ("PATH", &s(&root.join("host/usr/bin"))),
        ])
    );
    assert_eq!(
        (plan.network, plan.cwd.as_path()),
        (Network::Host, &*examples())
    );
    let command = plan.command(LaunchValues {
        since: 3,
        cap_fd: 9,
        control_fd: None,
        proxy: None,
        cgroup: &[],
    });
    assert_eq!(command.get_current_dir(), Some(examples().as_path()));
    // A harness waits for `ready` behind `sh`, and finds its capability
    // in its run's file, not on a descriptor.
    let team = UpConfig::load(&examples().join("claude-team.json")).unwrap();
    for agent in &team.agents {
        let run = RunId::parse(&format!("{}-0badc0de", agent.role.as_str())).unwrap();
        let ready = prepared(agent, &run, &root, false);
        let plan = Make {
            spec: agent,
            run: &run,
            prepared: Some(&ready),
            sandbox: None,
            path: &path,
            vars: &vars,
            socket: &socket,
            console: false,
        }
        .build()
        .unwrap();
        let argv = text(&plan.argv(&Launch::Described));
        let script = match agent.harness {
            Harness::ClaudeCode => WAIT_READY_NULL,
            Harness::Pi => WAIT_READY,
        };
        assert_eq!(argv[..4], owned(&["/bin/sh", "-c", script, "sh"]));
        assert_eq!(argv[4], s(&ready.program));
        assert_eq!(argv[5..], text(&ready.args));
        let env = pairs(&plan.environment(&Launch::Described));
        let cap = root.join("data/agents/runs").join(run.as_str()).join("cap");
        assert!(
            env.contains(&("MOSAIC_BUS_CAP_FILE".into(), s(&cap))),
            "{env:?}"
        );
        assert!(
            !env.iter().any(|(k, _)| k == "MOSAIC_BUS_CAP_FD"),
            "{env:?}"
        );
        assert!(plan.allow.is_empty(), "no proxy without a sandbox");
    }
}

#[test]
fn a_launch_fills_the_placeholders_and_a_cgroup_goes_before_bwrap() {
    let (_dir, root, places) = fake_host();
    let mut agent = spec(&root.join("work"));
    agent.read = vec![root.join("other")];
    agent.network = Network::Proxy;
    let sandbox = sandbox(places, true);
    let plan = plan_in(&agent, Some(&sandbox), &root).unwrap();
    let described = text(&plan.argv(&Launch::Described));
    let socket = Path::new("/tmp/mosaic-up-proxy-x/lead-1.sock");
    let now = LaunchValues {
        since: 42,
        cap_fd: 7,
        control_fd: Some(11),
        proxy: Some(socket),
        cgroup: &[],
    };
    let filled = text(&plan.argv(&Launch::LaunchValues(now)));
    let mut fds = plan
        .walls
        .as_ref()
        .unwrap()
        .mounts
        .iter()
        .filter_map(|m| match m {
            Mount::Granted { fd, .. } => Some(fd.to_string()),
            Mount::ReadOnly { .. }
            | Mount::Writable { .. }
            | Mount::Symlink { .. }
            | Mount::Tmpfs(_)
            | Mount::Scratch { .. }
            | Mount::Proc(_)
            | Mount::Dev(_)
            | Mount::ProxySocket
            | Mount::RemountRo(_) => None,
        });
    let expected: Vec<String> = described
        .iter()
        .map(|word| match word.as_str() {
            "<cap-fd>" => "7".to_owned(),
            "<control-fd>" => "11".to_owned(),
            "<proxy-socket>" => s(socket),
            "<fd>" => fds.next().unwrap(),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(filled, expected);
    assert_eq!(fds.next(), None, "every granted path's descriptor is named");
    assert!(described.iter().any(|w| w == "<proxy-socket>"));
    let control = filled.iter().position(|w| w == "--control-fd");
    assert_eq!(
        control.map(|at| filled[at + 1].as_str()),
        Some("11"),
        "{filled:?}"
    );
    let env = pairs(&plan.environment(&Launch::LaunchValues(now)));
    assert!(env.contains(&("MOSAIC_BUS_SINCE".into(), "42".into())));
    assert!(env.contains(&("MOSAIC_BUS_CAP_FD".into(), "7".into())));
    // A cgroup: `sandbox-cgroup` joins it, then becomes bwrap.
    let dirs = [PathBuf::from("/sys/fs/cgroup/a"), PathBuf::from("/b")];
    let command = plan.command(LaunchValues {
        cgroup: &dirs,
        ..now
    });
    let exe = s(&root.join("host/usr/bin/mosaic-bus"));
    assert_eq!(s(Path::new(command.get_program())), exe);
    let args: Vec<String> = command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let head = owned(&[
        "sandbox-cgroup",
        "--cgroup",
        "/sys/fs/cgroup/a",
        "--cgroup",
        "/b",
    ]);
    assert_eq!(args[..5], head);
    assert_eq!(args[5..], [&owned(&["--"])[..], &filled].concat());
    assert_eq!(command.get_current_dir(), Some(Path::new("/")));
    let envs: Vec<(String, String)> = command
        .get_envs()
        .map(|(k, v)| {
            let v = v
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_default();
            (k.to_string_lossy().into_owned(), v)
        })
        .collect();
    assert_eq!(envs, env);
}

#[test]
fn the_view_names_the_environment_and_renders_the_same_command_line() {
    let (_dir, root, places) = fake_host();
    let file = examples().join("claude-team.json");
    let config = UpConfig::load(&file).unwrap();
    let places = HostPaths {
        config_file: Some(file),
        ..places
    };
    let sandbox = sandbox(places, true);
    let (path, vars) = (path_of(&root), vars());
    let socket = root.join("data/bus/bus.sock");
    let agent = &config.agents[0];
    let run = RunId::parse("lead-0badc0de").unwrap();
    let ready = prepared(agent, &run, &root, true);
    let plan = build(&Making {
        spec: agent,
        run: &run,
        prepared: Some(&ready),
        version: Some("2.1.3 (Claude Code)"),
        path: &path,
        vars: &vars,
        secret_env: &[],
        socket: &socket,
        console: false,
        sandbox: Some(&sandbox),
    })
    .unwrap();
    let view = serde_json::to_value(plan.view()).unwrap();
    let text = view.to_string();
    assert!(!text.contains("sk-key-value"), "no value of a key: {text}");
    let names: Vec<&str> = view["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    let expected: Vec<String> = plan
        .environment(&Launch::Described)
        .into_iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, expected);
    assert!(names.contains(&"ANTHROPIC_API_KEY"));
    let command: Vec<&str> = view["command"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    let argv = plan.argv(&Launch::Described);
    assert_eq!(command, as_text(&argv));
    assert_eq!(view["version"], "2.1.3 (Claude Code)");
    assert_eq!(
        (&view["role"], &view["run"], &view["harness"]),
        (&json("lead"), &json("lead-0badc0de"), &json("claude-code"))
    );
    assert_eq!(
        (&view["sandboxed"], &view["network"], &view["capability"]),
        (&json(true), &json("proxy"), &json("file"))
    );
    assert_eq!(view["allow"], serde_json::json!(["api.anthropic.com:443"]));
    let walls = &view["sandbox"];
    assert_eq!(walls["landlock"], true);
    assert_eq!(
        (&walls["processes"], &walls["memoryMiB"]),
        (&json(1024), &json(4096))
    );
    assert_eq!(walls["seccomp"][0], "ptrace");
    let mounts = walls["mounts"].as_array().unwrap();
    assert_eq!(
        mounts[0],
        serde_json::json!({"kind": "read-only",
        "source": s(&root.join("host/usr")), "dest": "/usr"})
    );
    assert!(mounts.contains(&serde_json::json!({"kind": "proxy-socket",
        "dest": "/run/mosaic-bus/proxy.sock"})));
    assert!(!mounts.contains(&serde_json::json!({"kind": "granted",
        "path": s(&examples()), "dest": s(&examples()), "writable": false})));
    let file = s(&examples().join("claude-team.json"));
    assert!(mounts.contains(&serde_json::json!({"kind": "granted",
        "path": file, "dest": file, "writable": false})));
}

fn json(value: impl Into<serde_json::Value>) -> serde_json::Value {
    value.into()
}

#[test]
fn the_arguments_render_every_mount_in_order_after_the_namespaces() {
    let (_dir, root, places) = fake_host();

    let sandbox = sandbox(places, false);
    let mut agent = spec(&root.join("work"));
    agent.read = vec![root.join("other")];
    // A program outside every bound folder gets a bind of its own.
    let tool = root.join("home/alice/tool/run");
    std::fs::write(&tool, "x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    agent.program = tool.clone();
    let plan = plan_in(&agent, Some(&sandbox), &root).unwrap();
    let (work, data) = (s(&root.join("work")), s(&root.join("data")));
    let socket = s(&root.join("data/bus/bus.sock"));
    let (tool, other) = (s(&tool), s(&root.join("other")));
    let config = s(&root.join("work/team.json"));
    let mut expected = owned(&["/usr/bin/bwrap"]);
    expected.extend(namespaces(false));
    expected.extend(system_words(&root, 4));
    expected.extend(owned(&["--ro-bind", &tool, &tool]));
    // By depth: the read path and the workdir, then the configuration;
    // never the configuration's folder.
    expected.extend(owned(&["--ro-bind-fd", "<fd>", &other]));
    expected.extend(owned(&["--bind-fd", "<fd>", &work]));
    // In the workdir, which holds none of them, a placeholder for each
    // mandatory read-only path.
    expected.extend(placeholders(&root.join("work")));
    expected.extend(owned(&["--ro-bind-fd", "<fd>", &config]));
    expected.extend(owned(&["--tmpfs", &data, "--ro-bind", &socket, &socket]));
    expected.extend(owned(&["--remount-ro", &data, "--remount-ro", "/"]));
    expected.extend(owned(&["--chdir", &work, "--"]));
    expected.extend(exec_words(&root, false, 64, &["--bus-bridge"]));
    expected.push(tool);
    let argv = text(&plan.argv(&Launch::Described));
    assert_eq!(argv, expected);
    // Nothing of the human's home, the secrets, /etc/shadow or /run.
    for hidden in [
        s(&root.join("secrets")),
        s(&root.join("home")),
        "shadow".into(),
    ] {
        assert!(
            !argv.iter().any(|a| a.ends_with(&hidden)),
            "{hidden}: {argv:?}"
        );
    }
}

#[test]
fn a_bind_that_shows_the_data_root_the_secrets_the_home_or_a_credential_is_refused() {
    let (_dir, root, places) = fake_host();

    let refused = |agent: &AgentSpec, places: &HostPaths| {
        plan_in(agent, Some(&sandbox(places.clone(), false)), &root).err()
    };
    for (field, path) in [
        ("workdir", root.clone()),
        ("workdir", root.join("data")),
        ("read", root.join("data/bus")),
        ("write", root.join("secrets")),
        ("read", root.clone()),
        ("workdir", root.join("home")),
        ("read", root.join("home/alice/..")),
    ] {
        let mut agent = spec(&root.join("work"));
        match field {
            "workdir" => agent.workdir = Some(path.clone()),
            "read" => agent.read = vec![path.clone()],
            _ => agent.write = vec![path.clone()],
        }
        assert_eq!(
            refused(&agent, &places),
            Some(Refusal::UnsafePath),
            "{field} {path:?}"
        );
    }
    // A folder inside the human's home may be bound: a harness's own.
    let mut agent = spec(&root.join("work"));
    agent.read = vec![root.join("home/alice/tool")];
    assert_eq!(refused(&agent, &places), None);
    let mut agent = spec(&root.join("work"));
    agent.read = vec![root.join("missing")];
    assert_eq!(refused(&agent, &places), Some(Refusal::BadConfig));
    // A symbolic link into the data root is followed before the check.
    std::os::unix::fs::symlink(root.join("data"), root.join("work/link")).unwrap();
    let mut agent = spec(&root.join("work"));
    agent.write = vec![root.join("work/link")];
    assert_eq!(refused(&agent, &places), Some(Refusal::UnsafePath));
    // A data root or secrets folder `up` has yet to make (or, dry, will
    // not) is guarded where it would be.
    let later = HostPaths {
        data_root: root.join("other/later-data"),
        ..places.clone()
    };
    let mut agent = spec(&root.join("work"));
    agent.read = vec![root.join("other")];
    assert_eq!(refused(&agent, &later), Some(Refusal::UnsafePath));
    agent.read = vec![root.join("home/alice/tool")];
    assert_eq!(refused(&agent, &later), None);
    // A service credential's file in a bound folder, the system's too.
    let agent = spec(&root.join("work"));
    for file in ["home/alice/tool/gitea.token", "host/usr/vikunja.token"] {
        std::fs::write(root.join(file), "t").unwrap();
        let with = HostPaths {
            credentials: vec![root.join(file)],
            ..places.clone()
        };
        let mut reader = agent.clone();
        reader.read = vec![root.join("home/alice/tool")];
        assert_eq!(refused(&reader, &with), Some(Refusal::UnsafePath), "{file}");
    }
    // A program that is not an executable file starts nobody.
    let mut agent = spec(&root.join("work"));
    agent.program = PathBuf::from("no-such-program");
    assert_eq!(refused(&agent, &places), Some(Refusal::LaunchFailed));
    assert_eq!(
        plan_in(&agent, None, &root).err(),
        Some(Refusal::LaunchFailed)
    );
}

#[test]
fn a_writable_path_may_not_touch_what_is_later_run_or_read_as_configuration() {
    let (_dir, root, places) = fake_host();
    std::fs::create_dir_all(root.join("conf/agents")).unwrap();
    std::fs::create_dir_all(root.join("repo/src")).unwrap();
    std::fs::create_dir_all(root.join("home/alice")).unwrap();
    std::fs::write(root.join("conf/up.json"), "{}").unwrap();
    std::fs::write(root.join("conf/agents/lead.sh"), "x").unwrap();
    std::fs::write(root.join("repo/tool.sh"), "x").unwrap();
    std::fs::write(root.join("home/alice/.bashrc"), "x").unwrap();
    std::fs::create_dir_all(root.join("home/alice/.ssh")).unwrap();
    std::fs::create_dir_all(root.join("home/alice/.config/claude")).unwrap();
    std::fs::write(root.join("home/alice/.ssh/authorized_keys"), "x").unwrap();

    let mut lead = spec(&root.join("conf"));
    lead.workdir = None;
    lead.args = vec!["agents/lead.sh".into()];
    let guards = paths::guards(
        std::slice::from_ref(&lead),
        &[root.join("repo/tool.sh")],
        Some(&root.join("conf/up.json")),
        &places.exe,
        &[],
        Some(&root.join("home/alice")),
    );
    let sandbox = sandbox(HostPaths { guards, ..places }, false);
    let build = |agent: &AgentSpec| plan_in(agent, Some(&sandbox), &root);
    // Without a workdir, nothing of the configuration's folder is
    // writable, and the agent runs in its own empty home; of that folder
    // only the file its arguments name is bound, by itself.
    let mut named = lead.clone();
    named.args = vec![s(&root.join("conf/agents/lead.sh"))];
    let plan = build(&named).unwrap();
    let granted: Vec<(&Path, bool)> = plan
        .walls
        .as_ref()
        .unwrap()
        .mounts
        .iter()
        .filter_map(|m| match m {
            Mount::Granted { path, writable, .. } => Some((path.as_path(), *writable)),
            Mount::ReadOnly { .. }
            | Mount::Writable { .. }
            | Mount::Symlink { .. }
            | Mount::Tmpfs(_)
            | Mount::Scratch { .. }
            | Mount::Proc(_)
            | Mount::Dev(_)
            | Mount::ProxySocket
            | Mount::RemountRo(_) => None,
        })
        .collect();
    let config = root.join("work/team.json");
    assert_eq!(
        granted,
        [
            (root.join("conf/agents/lead.sh").as_path(), false),
            (config.as_path(), false)
        ]
    );
    assert_eq!(plan.cwd, Path::new(SANDBOX_HOME));
    for (key, path) in [
        ("workdir", root.join("conf")),
        ("workdir", root.join("conf/agents")),
        ("write", root.join("conf/agents/lead.sh")),
        ("write", root.join("conf/up.json")),
        ("workdir", root.clone()),
        ("write", root.join("repo")),
        ("write", root.join("home/alice/.bashrc")),
        ("write", root.join("home/alice/.ssh/authorized_keys")),
        ("write", root.join("home/alice/.config")),
        ("write", root.join("host/usr/bin")),
    ] {
        let mut agent = lead.clone();
        match key {
            "workdir" => agent.workdir = Some(path.clone()),
            _ => agent.write = vec![path.clone()],
        }
        assert_eq!(
            build(&agent).err(),
            Some(Refusal::UnsafePath),
            "{key} {path:?}"
        );
    }
    // A folder beside them is fine; read-only, the same paths are too.
    let mut agent = lead.clone();
    agent.workdir = Some(root.join("repo/src"));
    agent.read = vec![root.join("repo")];
    agent.write = vec![root.join("home/alice/.config/claude")];
    assert!(build(&agent).is_ok());
    // A symbolic link anywhere in a granted path is refused, not followed.
    std::os::unix::fs::symlink(root.join("home/alice"), root.join("repo/src/out")).unwrap();
    std::os::unix::fs::symlink(root.join("repo"), root.join("repo-link")).unwrap();
    for path in [root.join("repo/src/out"), root.join("repo-link/src")] {
        let mut agent = lead.clone();
        agent.write = vec![path.clone()];
        assert_eq!(build(&agent).err(), Some(Refusal::UnsafePath), "{path:?}");
    }
}

#[test]
fn only_a_proxied_agent_gets_the_proxy_socket_before_the_root_is_read_only() {
    let (_dir, root, places) = fake_host();
    let sandbox = sandbox(places, false);
    let socket = Path::new("/tmp/mosaic-up-proxy-x/lead-1.sock");
    let now = |proxy| LaunchValues {
        since: 1,
        cap_fd: 3,
        control_fd: Some(4),
        proxy,
        cgroup: &[],
    };
    let mut agent = spec(&root.join("work"));
    agent.network = Network::Proxy;
    let plan = plan_in(&agent, Some(&sandbox), &root).unwrap();
    let args = text(&plan.argv(&Launch::LaunchValues(now(Some(socket)))));
    let at = |words: &[&str]| args.windows(words.len()).position(|w| w == words);
    assert!(at(&["--unshare-net"]).is_some(), "{args:?}");
    let bound = at(&["--ro-bind", &s(socket), PROXY_SOCKET_TEXT])
        .unwrap_or_else(|| panic!("the proxy's socket in {args:?}"));
    let root_ro = at(&["--remount-ro", "/"]).expect("the root made read-only");
    assert!(bound < root_ro, "{args:?}");
    assert!(
        at(&["--proxy-socket", PROXY_SOCKET_TEXT]).is_some(),
        "{args:?}"
    );
    // With the host's network: no namespace, no socket, no bridge.
    agent.network = Network::Host;
    let plan = plan_in(&agent, Some(&sandbox), &root).unwrap();
    let args = text(&plan.argv(&Launch::LaunchValues(now(Some(socket)))));
    assert!(!args
        .iter()
        .any(|a| a == PROXY_SOCKET_TEXT || a == "--unshare-net" || a == "--proxy-socket"));
}

const PROXY_SOCKET_TEXT: &str = crate::commands::up::sandbox::network::PROXY_SOCKET;

/// A name of `up`'s environment the generated ones draw from: some the
/// allow-list passes, one the agent names, a service token's, others.
fn a_name() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(BASE_ENV.to_vec()).prop_map(str::to_owned),
        "LC_[A-Z]{1,8}",
        Just("LISTED".to_owned()),
        Just("TOKEN_VAR".to_owned()),
        Just("PATH".to_owned()),
        Just("MOSAIC_RUN_ID".to_owned()),
        "[A-Z][A-Z_]{0,10}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever `up`'s environment holds, an agent without a sandbox gets
    /// exactly the allow-list's variables of it with their values (but
    /// for what `up` sets itself), never a service token's, and the view
    /// holds none of its values.
    #[test]
    fn the_environment_is_the_allow_list_and_up_s_own(
        vars in proptest::collection::btree_map(a_name(), "v-[a-z0-9]{1,12}", 0..12)
    ) {
        let (_dir, root, _) = fake_host();
        let mut agent = spec(&root.join("work"));
        agent.env = vec!["LISTED".into(), "TOKEN_VAR".into()];
        let vars: Vec<(OsString, OsString)> =
            vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let (path, socket) = (path_of(&root), root.join("data/bus/bus.sock"));
        let run = RunId::parse("lead-0badc0de").unwrap();
        let plan = build(&Making {
            spec: &agent,
            run: &run,
            prepared: None,
            version: None,
            path: &path,
            vars: &vars,
            secret_env: &["TOKEN_VAR".to_owned()],
            socket: &socket,
            console: false,
            sandbox: None,
        })
        .unwrap();
        let env = pairs(&plan.environment(&Launch::Described));
        let own = ["GIT_AUTHOR_EMAIL", "GIT_AUTHOR_NAME", "GIT_COMMITTER_EMAIL",
                   "GIT_COMMITTER_NAME", "MOSAIC_BUS_CAP_FD", "MOSAIC_BUS_SINCE",
                   "MOSAIC_BUS_SOCKET", "MOSAIC_RUN_ID", "PATH"];
        let mut expected: std::collections::BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned()))
            .filter(|(k, _)| {
                (BASE_ENV.contains(&k.as_str()) || k == "LISTED")
                    && !own.contains(&k.as_str())
            })
            .collect();
        for name in own {
            let value = env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            prop_assert!(value.is_some(), "{name} is set by up");
            expected.insert(name.to_owned(), value.unwrap_or_default());
        }
        prop_assert_eq!(env, expected.into_iter().collect::<Vec<_>>());
        let view = serde_json::to_string(&plan.view()).unwrap();
        for (_, value) in &vars {
            let value = value.to_string_lossy();
            prop_assert!(!view.contains(&*value), "{} in {}", value, view);
        }
    }
}

/// `words` as text, for comparing with the view.
fn as_text(words: &[OsString]) -> Vec<&str> {
    words.iter().filter_map(|w| w.to_str()).collect()
}

/// The placeholders of the mandatory read-only paths in `grant`, a
/// writable folder that holds none of them.
fn placeholders(grant: &Path) -> Vec<String> {
    let folder = |name: &str| {
        let dest = s(&grant.join(name));
        owned(&["--tmpfs", &dest, "--remount-ro", &dest])
    };
    let file = |name: &str| owned(&["--ro-bind", "/dev/null", &s(&grant.join(name))]);
    let mut words = folder(".git");
    for name in [".gitmodules", ".envrc", ".npmrc", ".mcp.json"] {
        words.extend(file(name));
    }
    for name in [".vscode", ".idea", ".claude", ".pi"] {
        words.extend(folder(name));
    }
    words
}

#[test]
fn inside_a_writable_grant_git_s_configuration_and_start_up_files_stay_read_only() {
    let (_dir, root, places) = fake_host();
    let sandbox = sandbox(places, false);
    let work = root.join("work");
    std::fs::create_dir_all(work.join(".git/objects")).unwrap();
    std::fs::write(work.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(work.join(".bashrc"), "x").unwrap();
    std::fs::create_dir(work.join(".claude")).unwrap();
    let mut agent = spec(&work);
    agent.write = vec![root.join("other")];
    let plan = plan_in(&agent, Some(&sandbox), &root).unwrap();
    let argv = text(&plan.argv(&Launch::Described));
    let at = |words: &[String]| {
        argv.windows(words.len())
            .position(|w| w == words)
            .unwrap_or_else(|| panic!("{words:?} in {argv:?}"))
    };
    let grant = at(&owned(&["--bind-fd", "<fd>", &s(&work)]));
    // An existing one is bound from its descriptor; a missing one is a
    // placeholder; the rest of .git stays writable.
    let w = |name: &str| s(&work.join(name));
    let config = at(&owned(&["--ro-bind-fd", "<fd>", &w(".git/config")]));
    let hooks = at(&owned(&[
        "--tmpfs",
        &w(".git/hooks"),
        "--remount-ro",
        &w(".git/hooks"),
    ]));
    let bashrc = at(&owned(&["--ro-bind-fd", "<fd>", &w(".bashrc")]));
    let claude = at(&owned(&["--ro-bind-fd", "<fd>", &w(".claude")]));
    let npmrc = at(&owned(&["--ro-bind", "/dev/null", &w(".npmrc")]));
    for after in [config, hooks, bashrc, claude, npmrc] {
        assert!(after > grant, "{argv:?}");
    }
    for open in [".git", ".git/objects", ".profile", "CLAUDE.md"] {
        assert!(!argv.contains(&w(open)), "{open}: {argv:?}");
    }
    // The other writable grant has its own, a folder placeholder at .git.
    let other = root.join("other");
    at(&owned(&[
        "--tmpfs",
        &s(&other.join(".git")),
        "--remount-ro",
        &s(&other.join(".git")),
    ]));
    // A .git that is a file (a worktree's link) is itself read-only.
    std::fs::remove_dir_all(other.join(".git")).ok();
    std::fs::write(other.join(".git"), "gitdir: /elsewhere\n").unwrap();
    let argv = text(
        &plan_in(&agent, Some(&sandbox), &root)
            .unwrap()
            .argv(&Launch::Described),
    );
    let words = owned(&["--ro-bind-fd", "<fd>", &s(&other.join(".git"))]);
    assert!(argv.windows(3).any(|w| w == words), "{argv:?}");
    // A listed path that is a symbolic link is refused.
    std::os::unix::fs::symlink(root.join("home"), work.join(".npmrc")).unwrap();
    let refused = plan_in(&agent, Some(&sandbox), &root).map(|_| ());
    assert_eq!(refused, Err(Refusal::UnsafePath));
}

#[test]
fn a_hard_link_of_a_guarded_file_in_a_writable_path_is_refused_by_identity() {
    let (_dir, root, places) = fake_host();
    std::fs::create_dir_all(root.join("programs")).unwrap();
    std::fs::create_dir_all(root.join("work/deep")).unwrap();
    let program = root.join("programs/lead.sh");
    std::fs::write(&program, "x").unwrap();
    let agent = spec(&root.join("work"));
    let guards = paths::guards(
        &[],
        std::slice::from_ref(&program),
        None,
        &places.exe,
        &[],
        None,
    );
    let sandbox = sandbox(HostPaths { guards, ..places }, false);
    assert!(plan_in(&agent, Some(&sandbox), &root).is_ok());
    // A copy is another file; a hard link, however deep, is the same one.
    std::fs::copy(&program, root.join("work/copy.sh")).unwrap();
    assert!(plan_in(&agent, Some(&sandbox), &root).is_ok());
    std::fs::hard_link(&program, root.join("work/deep/link.sh")).unwrap();
    // The guards see the link count when they are made.
    let guards = paths::guards(&[], &[program], None, &sandbox.places.exe, &[], None);
    let places = HostPaths {
        guards,
        ..sandbox.places.clone()
    };
    let linked = self::sandbox(places, false);
    let refused = plan_in(&agent, Some(&linked), &root).map(|_| ());
    assert_eq!(refused, Err(Refusal::UnsafePath));
}

#[test]
fn two_writable_paths_overlap_when_one_is_holds_or_lies_in_the_other_by_identity() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    for d in ["a/b/c", "d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let p = |name: &str| root.join(name);
    assert!(paths::overlapping(&p("a"), &p("a")));
    assert!(paths::overlapping(&p("a"), &p("a/b/c")));
    assert!(paths::overlapping(&p("a/b/c"), &p("a")));
    assert!(!paths::overlapping(&p("a/b"), &p("d")));
    assert!(!paths::overlapping(&p("a/b/c"), &p("d")));
}
