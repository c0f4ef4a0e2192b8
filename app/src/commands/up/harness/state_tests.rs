//! The state folder's tests: what is kept, what is removed, the modes
//! repaired, on real folders.

use std::os::unix::fs::PermissionsExt;

use super::*;

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
        own(&state, harness).unwrap();
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
        own(&state, harness).unwrap();
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
    own(&state, Harness::Pi).unwrap();
    let closed = state.join("sessions/closed");
    std::fs::create_dir_all(closed.join("deeper")).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o000)).unwrap();
    let junk = state.join("junk");
    std::fs::create_dir_all(junk.join("in")).unwrap();
    std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    own(&state, Harness::Pi).unwrap();
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
    assert_eq!(own(&state, Harness::Pi), Err(Refusal::UnsafePath));
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    assert_eq!(own(&file, Harness::Pi), Err(Refusal::UnsafePath));
}
