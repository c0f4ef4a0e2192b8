//! The state folder's tests: what is kept, what is removed, the modes
//! repaired, on real folders.

use std::os::unix::fs::PermissionsExt;

use super::*;

const CAP: Cap = Cap {
    bytes: 64 << 20,
    files: STATE_FILES,
};

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn only_the_sessions_are_kept_and_a_planted_extension_or_hook_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("mine"), "x").unwrap();
    for (harness, session, planted) in [
        (Harness::Pi, "sessions", "extensions/planted.ts"),
        (
            Harness::ClaudeCode,
            "projects",
            "plugins/p/hooks/hooks.json",
        ),
    ] {
        let state = dir.path().join(harness.as_str());
        own(&state, harness, CAP).unwrap();
        assert_eq!(mode(&state), 0o700);
        std::fs::create_dir_all(state.join(session).join("a")).unwrap();
        std::fs::write(state.join(session).join("a/s.jsonl"), "{}").unwrap();
        let planted = state.join(planted);
        std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
        std::fs::write(&planted, "planted").unwrap();
        std::fs::write(state.join("settings.json"), r#"{"hooks":{}}"#).unwrap();
        // A link named as a session folder is not one: removed, not
        // followed.
        let other = keep(harness).get(1).copied().unwrap_or("sessions-link");
        std::os::unix::fs::symlink(&outside, state.join(other)).unwrap();
        own(&state, harness, CAP).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&state)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [session], "{harness:?}");
        assert!(state.join(session).join("a/s.jsonl").is_file());
        assert_eq!(std::fs::read_to_string(outside.join("mine")).unwrap(), "x");
    }
}

#[test]
fn modes_an_agent_changed_are_repaired_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("pi");
    own(&state, Harness::Pi, CAP).unwrap();
    let closed = state.join("sessions/closed");
    std::fs::create_dir_all(closed.join("deeper")).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o000)).unwrap();
    let junk = state.join("junk");
    std::fs::create_dir_all(junk.join("in")).unwrap();
    std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    own(&state, Harness::Pi, CAP).unwrap();
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&closed) & 0o700, 0o700);
    assert!(closed.join("deeper").is_dir());
    assert!(!junk.exists());
}

#[test]
fn a_state_folder_that_is_not_a_folder_of_ours_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let state = dir.path().join("pi");
    std::os::unix::fs::symlink(&target, &state).unwrap();
    assert_eq!(own(&state, Harness::Pi, CAP), Err(Refusal::UnsafePath));
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    assert_eq!(own(&file, Harness::Pi, CAP), Err(Refusal::UnsafePath));
}

#[test]
fn sessions_past_the_cap_are_removed_at_the_next_launch_and_within_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("pi");
    let cap = Cap {
        bytes: 1 << 20,
        files: 8,
    };
    own(&state, Harness::Pi, cap).unwrap();
    std::fs::create_dir(state.join("sessions")).unwrap();
    std::fs::write(state.join("sessions/small"), "x").unwrap();
    own(&state, Harness::Pi, cap).unwrap();
    assert!(state.join("sessions/small").is_file());
    // Past the bytes.
    std::fs::write(state.join("sessions/big"), vec![7u8; 2 << 20]).unwrap();
    assert!(cap.reached(measure(&state, cap)));
    own(&state, Harness::Pi, cap).unwrap();
    assert!(!state.join("sessions").exists());
    assert_eq!(measure(&state, cap).files, 1);
    // Past the files.
    std::fs::create_dir(state.join("sessions")).unwrap();
    for n in 0..8 {
        std::fs::write(state.join(format!("sessions/{n}")), "").unwrap();
    }
    assert!(cap.reached(measure(&state, cap)));
    own(&state, Harness::Pi, cap).unwrap();
    assert!(!state.join("sessions").exists());
}

proptest::proptest! {
    #[test]
    fn a_measure_counts_every_file_and_stops_at_the_cap(files in 0u64..40, stop in 1u64..50) {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..files {
            std::fs::write(dir.path().join(n.to_string()), "").unwrap();
        }
        let cap = Cap { bytes: u64::MAX, files: stop };
        let used = measure(dir.path(), cap);
        // The folder and its files, or as far as the cap.
        proptest::prop_assert_eq!(used.files, (files + 1).min(stop));
        proptest::prop_assert_eq!(cap.reached(used), files + 1 >= stop);
    }
}
