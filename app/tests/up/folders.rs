//! The folders `up` makes itself when it is given none: the data root and
//! the secrets folder, each private from its `mkdir` on.

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
