//! The folders `up` makes itself when it is given none, and those it is
//! given that do not exist yet: the data root and the secrets folder, each
//! private from its `mkdir` on; and one it leaves to the user, saying how.

use super::*;

#[test]
fn the_data_root_and_the_secrets_folder_up_makes_are_private() {
    let dir = tempfile::tempdir().expect("dir");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "command": ["sh", "-c", "read _"]}]),
    );
    // No --data-root and no --secrets-dir: `up` makes both.
    let up = Up::start(
        &["--config".as_ref(), config.as_os_str(), "--stay".as_ref()],
        None,
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line");
    let data_root = PathBuf::from(summary["dataRoot"].as_str().expect("dataRoot"));
    let reader_cap = PathBuf::from(summary["readerCap"].as_str().expect("readerCap"));
    let secrets = reader_cap
        .parent()
        .expect("the secrets folder")
        .to_path_buf();
    assert!(!secrets.starts_with(&data_root), "{summary}");
    for folder in [&data_root, &secrets] {
        let mode = std::fs::metadata(folder)
            .expect("the folder")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{}", folder.display());
    }
    up.signal(rustix::process::Signal::TERM);
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    std::fs::remove_dir_all(&data_root).expect("remove the data root");
}

#[test]
fn a_missing_data_root_and_secrets_folder_under_a_private_parent_are_made_private() {
    let dir = tempfile::tempdir().expect("dir");
    // Beside the data root, not holding it: a sandbox binds its folder.
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).expect("mkdir conf");
    let config = config_file(
        &conf,
        json!([{"role": "a", "harness": "pi", "command": ["sh", "-c", "read _"]}]),
    );
    let (root, secrets) = (dir.path().join("data"), dir.path().join("secrets"));
    let up = Up::start(
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--data-root".as_ref(),
            root.as_os_str(),
            "--secrets-dir".as_ref(),
            secrets.as_os_str(),
        ],
        None,
    );
    let summary: Value = serde_json::from_str(&up.line()).expect("the first line");
    assert_eq!(
        summary["dataRoot"],
        root.to_string_lossy().as_ref(),
        "{summary}"
    );
    let (status, _, stderr) = up.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    for folder in [&root, &secrets] {
        let mode = std::fs::metadata(folder)
            .expect("the folder")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o700, "{}", folder.display());
    }
    assert!(root.join("bus/bus.sqlite").is_file(), "the broker used it");
}

#[test]
fn a_missing_data_root_under_a_folder_others_may_write_is_left_to_the_user() {
    let dir = tempfile::tempdir().expect("dir");
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let config = config_file(
        dir.path(),
        json!([{"role": "a", "harness": "pi", "command": ["true"]}]),
    );
    let root = shared.join("data");
    let (status, stdout, _) = run_to_end(&config, &root);
    assert_eq!(status.code(), Some(2));
    let shown = root.to_string_lossy();
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).expect("one line"),
        json!({"ok": false, "error": "unsafe-path",
               "why": format!("--data-root {shown} does not exist, and others may write the \
                               folder it would be in, so up does not make it: make it yourself \
                               with `mkdir -p -m 700 {shown}`, or name a folder under one only \
                               you can write")})
    );
    assert!(!root.exists());
}
