//! The cgroup detection and a run's cgroup, against fake cgroupfs trees in
//! a temporary folder: v2 delegated, v2 shared with other processes, v1
//! (this CI host's layout) and none.

use std::fs;
use std::path::Path;

use super::*;

/// A pid no process has: above the kernel's largest `pid_max`.
const GONE: u32 = 4_000_000_000;
const PID: u32 = 4242;

fn file(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

/// Removes the files of each of `run`'s folders: a fake tree's folder is
/// removed only empty, where cgroupfs removes one with its files.
fn emptied(run: RunCgroup) -> Vec<PathBuf> {
    let dirs = run.dirs().to_vec();
    for dir in &dirs {
        for entry in fs::read_dir(dir).unwrap() {
            fs::remove_file(entry.unwrap().path()).unwrap();
        }
    }
    drop(run);
    dirs
}

/// This host's `/proc/self/cgroup`: v1 controllers, and a v2 tree at
/// `unified` with none.
const HYBRID: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/jobs/a\n1:cpu,cpuacct:/\n0::/\n";

fn hybrid(root: &Path) {
    file(&root.join("unified/cgroup.controllers"), "");
    file(&root.join("unified/cgroup.subtree_control"), "");
    file(&root.join("pids/cgroup.procs"), "1\n");
    file(&root.join("memory/jobs/a/cgroup.procs"), "");
    file(
        &root.join("memory/jobs/a/memory.limit_in_bytes"),
        "9223372036854771712\n",
    );
}

#[test]
fn the_places_of_a_process_are_read_from_its_cgroup_file() {
    let own = CgroupPaths::parse(HYBRID);
    assert_eq!(own.v2.as_deref(), Some("/"));
    assert_eq!(own.pids.as_deref(), Some("/"));
    assert_eq!(own.memory.as_deref(), Some("/jobs/a"));
    let outside = CgroupPaths::parse("0::/../elsewhere\n");
    assert_eq!(outside.v2, None);
}

#[test]
fn a_delegated_v2_cgroup_moves_up_into_a_leaf_and_caps_each_run() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let own = root.join("user.slice/up.scope");
    file(&root.join("cgroup.controllers"), "cpu io memory pids\n");
    file(&own.join("cgroup.controllers"), "memory pids\n");
    file(&own.join("cgroup.subtree_control"), "");
    file(&own.join("cgroup.procs"), &format!("{PID}\n"));
    let cgroups = Cgroups::open(root, "0::/user.slice/up.scope\n", PID);
    assert_eq!(
        cgroups.kind(),
        &Kind::V2 {
            parent: own.clone(),
            memory: true
        }
    );
    assert_eq!(
        read(&own.join(format!("mosaic-bus-{PID}-up/cgroup.procs"))),
        PID.to_string()
    );
    assert_eq!(read(&own.join("cgroup.subtree_control")), "+pids +memory");
    let run = cgroups.make("lead-0a1b2c3d", 64, 128).expect("a cgroup");
    let dir = own.join(format!("mosaic-bus-{PID}-lead-0a1b2c3d"));
    assert_eq!(run.dirs(), std::slice::from_ref(&dir));
    assert_eq!(read(&dir.join("pids.max")), "64");
    assert_eq!(read(&dir.join("memory.max")), (128u64 << 20).to_string());
    // Without swap accounting there is no such file, and none is made.
    assert!(!dir.join("memory.swap.max").exists());
    assert_eq!(emptied(run), std::slice::from_ref(&dir));
    assert!(!dir.exists(), "removed when dropped");
}

#[test]
fn a_v2_cgroup_with_controllers_already_enabled_is_used_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let own = root.join("svc");
    file(&root.join("cgroup.controllers"), "pids\n");
    file(&own.join("cgroup.controllers"), "pids\n");
    file(&own.join("cgroup.subtree_control"), "pids\n");
    file(&own.join("cgroup.procs"), "");
    let cgroups = Cgroups::open(root, "0::/svc\n", PID);
    assert_eq!(
        cgroups.kind(),
        &Kind::V2 {
            parent: own.clone(),
            memory: false
        }
    );
    assert!(!own.join(format!("mosaic-bus-{PID}-up")).exists());
    let run = cgroups.make("dev-00000000", 16, 64).expect("a cgroup");
    assert_eq!(read(&run.dirs()[0].join("pids.max")), "16");
    assert!(!run.dirs()[0].join("memory.max").exists());
    emptied(run);
}

#[test]
fn a_v2_cgroup_shared_with_other_processes_or_without_pids_is_left_alone() {
    for (controllers, procs) in [("memory pids", "1\n4242\n"), ("memory", "4242\n")] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let own = root.join("session.scope");
        file(&root.join("cgroup.controllers"), "memory pids\n");
        file(&own.join("cgroup.controllers"), controllers);
        file(&own.join("cgroup.subtree_control"), "");
        file(&own.join("cgroup.procs"), procs);
        let cgroups = Cgroups::open(root, "0::/session.scope\n", PID);
        assert_eq!(cgroups.kind(), &Kind::None, "{controllers} / {procs}");
        assert_eq!(read(&own.join("cgroup.subtree_control")), "");
        assert!(!own.join(format!("mosaic-bus-{PID}-up")).exists());
        assert!(cgroups.make("a-00000000", 16, 64).is_none());
    }
}

#[test]
fn v1_pids_and_memory_cap_each_run_where_v2_has_no_controllers() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    hybrid(root);
    let cgroups = Cgroups::open(root, HYBRID, PID);
    let memory = root.join("memory/jobs/a");
    assert_eq!(
        cgroups.kind(),
        &Kind::V1 {
            pids: root.join("pids"),
            memory: Some(memory.clone())
        }
    );
    assert_eq!(
        cgroups.kind().describe(),
        "cgroup v1 pids.max and memory.limit_in_bytes"
    );
    let run = cgroups.make("lead-12345678", 32, 4096).expect("a cgroup");
    let name = format!("mosaic-bus-{PID}-lead-12345678");
    let (pids_dir, memory_dir) = (root.join("pids").join(&name), memory.join(&name));
    assert_eq!(run.dirs(), [pids_dir.clone(), memory_dir.clone()]);
    assert_eq!(read(&pids_dir.join("pids.max")), "32");
    assert_eq!(
        read(&memory_dir.join("memory.limit_in_bytes")),
        (4096u64 << 20).to_string()
    );
    emptied(run);
    assert!(!pids_dir.exists() && !memory_dir.exists());
}

#[test]
fn v1_without_a_memory_hierarchy_caps_the_processes_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    hybrid(root);
    fs::remove_dir_all(root.join("memory")).unwrap();
    let cgroups = Cgroups::open(root, HYBRID, PID);
    let kind = Kind::V1 {
        pids: root.join("pids"),
        memory: None,
    };
    assert_eq!(cgroups.kind(), &kind);
    let run = cgroups.make("a-00000000", 16, 64).expect("a cgroup");
    assert_eq!(run.dirs().len(), 1);
    emptied(run);
}

#[test]
fn without_cgroups_the_cap_is_rlimit_nproc_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let cgroups = Cgroups::open(tmp.path(), HYBRID, PID);
    assert_eq!(cgroups.kind(), &Kind::None);
    assert_eq!(
        cgroups.kind().describe(),
        "RLIMIT_NPROC only (no delegated cgroup)"
    );
    assert!(cgroups.make("a-00000000", 16, 64).is_none());
}

#[test]
fn a_run_cgroup_that_cannot_be_made_is_none() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    hybrid(root);
    let cgroups = Cgroups::open(root, HYBRID, PID);
    // The hierarchy went away after the look.
    fs::remove_dir_all(root.join("pids")).unwrap();
    assert!(cgroups.make("a-00000000", 16, 64).is_none());
    assert!(cgroups.warned.get(), "warned once");
    assert!(cgroups.make("b-00000000", 16, 64).is_none());
}

#[test]
fn the_empty_leftovers_of_a_gone_up_are_removed_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    hybrid(root);
    let pids = root.join("pids");
    let gone = pids.join(format!("mosaic-bus-{GONE}-lead-00000000"));
    let gone_busy = pids.join(format!("mosaic-bus-{GONE}-dev-00000000"));
    let alive = pids.join("mosaic-bus-1-lead-00000000");
    let mine = pids.join(format!("mosaic-bus-{PID}-up"));
    let other = pids.join("someone-else");
    for dir in [&gone, &gone_busy, &alive, &mine, &other] {
        fs::create_dir(dir).unwrap();
    }
    // A folder with a file stands for a cgroup still holding a process.
    file(&gone_busy.join("cgroup.procs"), "77\n");
    let _cgroups = Cgroups::open(root, HYBRID, PID);
    assert!(!gone.exists());
    for kept in [&gone_busy, &alive, &mine, &other] {
        assert!(kept.exists(), "{}", kept.display());
    }
}
