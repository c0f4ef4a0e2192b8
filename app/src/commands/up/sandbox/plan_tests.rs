//! The plan's tests: what it binds for the example configuration, exactly,
//! what it refuses, and how it renders to bwrap's arguments.

use super::*;
use crate::commands::team::UpConfig;
use crate::commands::up::sandbox::paths;
use mosaic_domain::evidence::Harness;
use mosaic_domain::RoleInstance;

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
        life: crate::commands::team::LifeSpec::defaults(false),
    }
}

/// A host of its own under `root`: merged `/usr` (`bin` a link), a `lib64`
/// folder, an `/etc` with a `shadow` the plan must leave out and a
/// `resolv.conf` link into `/run`, and the places of one `up`.
fn host(root: &Path) -> Places {
    for dir in [
        "host/usr/bin",
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
        "etc/passwd",
        "etc/shadow",
        "run/resolve/stub",
    ] {
        std::fs::write(root.join("host").join(file), "x").unwrap();
    }
    std::os::unix::fs::symlink(
        root.join("host/run/resolve/stub"),
        root.join("host/etc/resolv.conf"),
    )
    .unwrap();
    std::fs::write(root.join("work/team.json"), "{}").unwrap();
    Places {
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

fn ro(source: &Path, dest: &str) -> Mount {
    Mount::ReadOnly {
        source: source.to_path_buf(),
        dest: dest.into(),
    }
}

fn same(path: &Path, writable: bool) -> Mount {
    Mount::Granted {
        fd: -1,
        path: path.to_path_buf(),
        dest: path.to_path_buf(),
        writable,
    }
}

/// `mounts` with every descriptor number made -1: the rest is compared.
fn without_fds(mounts: &[Mount]) -> Vec<Mount> {
    mounts
        .iter()
        .cloned()
        .map(|mut mount| {
            if let Mount::Granted { fd, .. } = &mut mount {
                *fd = -1;
            }
            mount
        })
        .collect()
}

#[test]
fn the_plan_of_the_example_holds_exactly_the_expected_mounts() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let places = Places {
        config_file: None,
        ..host(&root)
    };
    let examples =
        std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")).unwrap();
    let file = examples.join("business.json");
    let config = UpConfig::load(&file).unwrap();
    let places = Places {
        config_file: Some(file.clone()),
        ..places
    };
    let sh = root.join("host/usr/bin/sh");
    for agent in &config.agents {
        let plan = build(agent, &places, &sh, None, true, Vec::new()).unwrap();
        let host = root.join("host");
        let expected = vec![
            ro(&host.join("usr"), "/usr"),
            Mount::Symlink {
                target: "usr/bin".into(),
                dest: "/bin".into(),
            },
            ro(&host.join("lib64"), "/lib64"),
            ro(&host.join("etc/passwd"), "/etc/passwd"),
            ro(&host.join("etc/resolv.conf"), "/etc/resolv.conf"),
            ro(&host.join("etc/ssl"), "/etc/ssl"),
            Mount::Proc("/proc".into()),
            Mount::Dev("/dev".into()),
            Mount::Scratch {
                dest: "/tmp".into(),
                bytes: 256 << 20,
            },
            Mount::Scratch {
                dest: SANDBOX_HOME.into(),
                bytes: 256 << 20,
            },
            ro(&places.exe, &places.exe.to_string_lossy()),
            // No workdir: the configuration's folder, read-only, is where
            // the agent runs.
            same(&examples, false),
            same(&file, false),
            Mount::Tmpfs(root.join("data")),
            ro(
                &root.join("data/bus/bus.sock"),
                &root.join("data/bus/bus.sock").to_string_lossy(),
            ),
            Mount::RemountRo(root.join("data")),
            Mount::RemountRo("/".into()),
        ];
        assert_eq!(
            without_fds(&plan.mounts),
            expected,
            "{}",
            agent.role.as_str()
        );
        // Each granted path is bound from the descriptor that was checked.
        for mount in &plan.mounts {
            if let Mount::Granted { fd, path, .. } = mount {
                let held = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
                assert_eq!(&held, path);
            }
        }
        assert_eq!(plan.chdir, examples);
        assert_eq!(plan.program, sh);
        assert_eq!(plan.network, agent.network);
        assert!(plan.landlock);
        assert_eq!(plan.processes, crate::commands::team::DEFAULT_PROCESSES);
        assert!(plan.seccomp.iter().any(|(name, _)| *name == "ptrace"));
    }
}

#[test]
fn the_environment_is_the_allow_list_with_a_home_and_tmp_of_its_own() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let places = host(&root);
    let env = vec![
        ("HOME".into(), "/home/alice".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TMPDIR".into(), "/var/tmp".into()),
    ];
    let plan = build(
        &spec(&root.join("work")),
        &places,
        &root.join("host/usr/bin/sh"),
        None,
        false,
        env,
    )
    .unwrap();
    let env: Vec<(String, String)> = plan
        .env
        .iter()
        .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
        .collect();
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    assert_eq!(
        env,
        pairs(&[
            ("LANG", "C.UTF-8"),
            ("HOME", SANDBOX_HOME),
            ("TMPDIR", "/tmp")
        ])
    );
}

#[test]
fn the_arguments_render_every_mount_in_order_after_the_namespaces() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let places = host(&root);
    let mut agent = spec(&root.join("work"));
    agent.read = vec![root.join("other")];
    // A program outside every bound folder gets a bind of its own.
    let tool = root.join("home/alice/tool/run");
    std::fs::write(&tool, "x").unwrap();
    let plan = build(&agent, &places, &tool, None, false, Vec::new()).unwrap();
    let text: Vec<String> = plan
        .bwrap_args(None)
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let at = |words: &[&str]| {
        text.windows(words.len())
            .position(|w| w == words)
            .unwrap_or_else(|| panic!("{words:?} in {text:?}"))
    };
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    let (work, data) = (s(root.join("work")), s(root.join("data")));
    let socket = s(root.join("data/bus/bus.sock"));
    let config = s(root.join("work/team.json"));
    let tool = s(tool);
    for flag in [
        "--unshare-user",
        "--unshare-pid",
        "--disable-userns",
        "--new-session",
        "--die-with-parent",
    ] {
        at(&[flag]);
    }
    assert!(!text.iter().any(|a| a == "--unshare-net"));
    at(&["--uid", "1000", "--gid", "1000"]);
    at(&["--size", "4194304", "--tmpfs", "/tmp"]);
    at(&["--size", "4194304", "--tmpfs", SANDBOX_HOME]);
    let usr = at(&["--ro-bind", &s(root.join("host/usr")), "/usr"]);
    at(&["--symlink", "usr/bin", "/bin"]);
    assert!(!text.iter().any(|a| a.ends_with("shadow")), "{text:?}");
    at(&["--ro-bind", &tool, &tool]);
    let granted = |writable: bool, path: &str| -> Vec<String> {
        let fd = plan
            .mounts
            .iter()
            .find_map(|m| {
                let Mount::Granted {
                    fd,
                    dest,
                    writable: w,
                    ..
                } = m
                else {
                    return None;
                };
                (dest == Path::new(path) && *w == writable).then_some(*fd)
            })
            .unwrap_or_else(|| panic!("{path} granted"));
        let how = if writable {
            "--bind-fd"
        } else {
            "--ro-bind-fd"
        };
        vec![how.to_owned(), fd.to_string(), path.to_owned()]
    };
    at(&words(&granted(false, &s(root.join("other")))));
    let workdir = at(&words(&granted(true, &work)));
    let config_ro = at(&words(&granted(false, &config)));
    let tmpfs_data = at(&["--tmpfs", &data]);
    let socket_ro = at(&["--ro-bind", &socket, &socket]);
    let data_ro = at(&["--remount-ro", &data]);
    let root_ro = at(&["--remount-ro", "/"]);
    assert!(usr < workdir && workdir < config_ro && config_ro < tmpfs_data);
    assert!(tmpfs_data < socket_ro && socket_ro < data_ro && data_ro < root_ro);
    at(&["--chdir", &work]);
    assert_eq!(text.last().map(String::as_str), Some("--"));
    // Nothing of the human's home, the secrets or /run is named.
    for hidden in [s(root.join("secrets")), s(root.join("home"))] {
        assert!(!text.contains(&hidden), "{hidden}: {text:?}");
    }
    agent.network = Network::None;
    let plan = build(
        &agent,
        &places,
        &root.join("host/usr/bin/sh"),
        None,
        false,
        Vec::new(),
    )
    .unwrap();
    assert!(plan.bwrap_args(None).iter().any(|a| a == "--unshare-net"));
    // A program in a system folder needs no bind of its own.
    assert!(!plan.mounts.iter().any(|m| matches!(
        m,
        Mount::ReadOnly { dest, .. } if dest.ends_with("sh")
    )));
}

#[test]
fn a_bind_that_shows_the_data_root_the_secrets_the_home_or_a_credential_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let places = host(root);
    let sh = root.join("host/usr/bin/sh");
    let refused = |agent: &AgentSpec, places: &Places| {
        build(agent, places, &sh, None, false, Vec::new()).err()
    };
    for (field, path) in [
        ("workdir", root.to_path_buf()),
        ("workdir", root.join("data")),
        ("read", root.join("data/bus")),
        ("write", root.join("secrets")),
        ("read", root.to_path_buf()),
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
    // A service credential's file in a bound folder, the system's too.
    let agent = spec(&root.join("work"));
    for file in ["home/alice/tool/gitea.token", "host/usr/vikunja.token"] {
        std::fs::write(root.join(file), "t").unwrap();
        let with = Places {
            credentials: vec![root.join(file)],
            ..places.clone()
        };
        let mut reader = agent.clone();
        reader.read = vec![root.join("home/alice/tool")];
        assert_eq!(refused(&reader, &with), Some(Refusal::UnsafePath), "{file}");
    }
}

fn words(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn a_writable_path_may_not_touch_what_is_later_run_or_read_as_configuration() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
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
    let places = host(&root);
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
    let places = Places { guards, ..places };
    let sh = root.join("host/usr/bin/sh");
    // Without a workdir, nothing of the configuration's folder is
    // writable, and the agent runs there.
    let plan = build(&lead, &places, &sh, None, false, Vec::new()).unwrap();
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::Granted { writable: true, .. })));
    assert_eq!(plan.chdir, root.join("conf"));
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
            build(&agent, &places, &sh, None, false, Vec::new()).err(),
            Some(Refusal::UnsafePath),
            "{key} {path:?}"
        );
    }
    // A folder beside them is fine; read-only, the same paths are too.
    let mut agent = lead.clone();
    agent.workdir = Some(root.join("repo/src"));
    agent.read = vec![root.join("repo")];
    agent.write = vec![root.join("home/alice/.config/claude")];
    assert!(build(&agent, &places, &sh, None, false, Vec::new()).is_ok());
    // A symbolic link anywhere in a granted path is refused, not followed.
    std::os::unix::fs::symlink(root.join("home/alice"), root.join("repo/src/out")).unwrap();
    std::os::unix::fs::symlink(root.join("repo"), root.join("repo-link")).unwrap();
    for path in [root.join("repo/src/out"), root.join("repo-link/src")] {
        let mut agent = lead.clone();
        agent.write = vec![path.clone()];
        assert_eq!(
            build(&agent, &places, &sh, None, false, Vec::new()).err(),
            Some(Refusal::UnsafePath),
            "{path:?}"
        );
    }
}

#[test]
fn a_proxied_agent_gets_loopback_only_and_its_proxy_socket_before_the_root_is_read_only() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let places = host(&root);
    let sh = root.join("host/usr/bin/sh");
    let socket = Path::new("/tmp/mosaic-up-proxy-x/lead-1.sock");
    let text = |agent: &AgentSpec| -> Vec<String> {
        build(agent, &places, &sh, None, false, Vec::new())
            .unwrap()
            .bwrap_args(Some(socket))
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    };
    let mut agent = spec(&root.join("work"));
    agent.network = Network::Proxy;
    let args = text(&agent);
    let at = |words: &[&str]| args.windows(words.len()).position(|w| w == words);
    assert!(at(&["--unshare-net"]).is_some(), "{args:?}");
    let bound = at(&["--ro-bind", &socket.to_string_lossy(), PROXY_SOCKET])
        .unwrap_or_else(|| panic!("the proxy's socket in {args:?}"));
    let root_ro = at(&["--remount-ro", "/"]).expect("the root made read-only");
    assert!(bound < root_ro, "{args:?}");
    // With the host's network: no namespace, and no socket even if one is
    // given.
    agent.network = Network::Host;
    let args = text(&agent);
    assert!(!args
        .iter()
        .any(|a| a == PROXY_SOCKET || a == "--unshare-net"));
}
