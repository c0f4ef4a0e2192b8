//! The `environment` line: what the figures of this run were measured on.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::output::Fields;

/// The fields of the `environment` line. Whatever cannot be found out is `null`.
pub fn fields(data_root: &Path, dir: &Path, quick: bool) -> Fields {
    let mount = mount_of(dir);
    vec![
        (
            "nproc",
            std::thread::available_parallelism().map_or(Value::Null, |n| Value::from(n.get())),
        ),
        (
            "data_root",
            path_value(&std::fs::canonicalize(data_root).unwrap_or_else(|_| data_root.to_owned())),
        ),
        ("bench_dir", path_value(dir)),
        (
            "filesystem",
            mount
                .as_ref()
                .map_or(Value::Null, |m| Value::from(m.fstype.clone())),
        ),
        (
            "device",
            mount
                .as_ref()
                .map_or(Value::Null, |m| Value::from(m.device.clone())),
        ),
        (
            "mount_point",
            mount
                .as_ref()
                .map_or(Value::Null, |m| Value::from(m.point.clone())),
        ),
        (
            "git_commit",
            git(&["rev-parse", "HEAD"]).map_or(Value::Null, Value::from),
        ),
        (
            "git_dirty",
            git(&["status", "--porcelain", "--untracked-files=no"])
                .map_or(Value::Null, |s| Value::from(!s.is_empty())),
        ),
        ("sqlite_version", Value::from(rusqlite::version())),
        (
            "profile",
            Value::from(if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }),
        ),
        ("quick", Value::from(quick)),
    ]
}

fn path_value(path: &Path) -> Value {
    Value::from(path.to_string_lossy().into_owned())
}

/// The trimmed output of `git ARGS` in this crate's repository, if git runs
/// and succeeds there.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// One line of `/proc/self/mounts`, parsed by hand: the `procfs` crate's
/// `mounts` undoes only some of the kernel's octal escapes (not `\040`, a
/// space), and its `mountinfo` none, so a mount point with a space in it
/// would not match its path.
struct Mount {
    device: String,
    point: String,
    fstype: String,
}

/// The mount that holds `path`: the longest mount point it lies under.
fn mount_of(path: &Path) -> Option<Mount> {
    let path = std::fs::canonicalize(path).ok()?;
    let table = std::fs::read_to_string("/proc/self/mounts").ok()?;
    table
        .lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let (device, point, fstype) = (f.next()?, f.next()?, f.next()?);
            Some(Mount {
                device: unescape(device),
                point: unescape(point),
                fstype: fstype.to_owned(),
            })
        })
        .filter(|m| path.starts_with(PathBuf::from(&m.point)))
        .max_by_key(|m| m.point.len())
}

/// Undoes the octal escapes (`\040` for a space) of `/proc/self/mounts`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let code = bytes
            .get(i + 1..i + 4)
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (bytes[i], code) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_are_unescaped() {
        assert_eq!(unescape(r"/mnt/my\040disk"), "/mnt/my disk");
        assert_eq!(unescape(r"/plain"), "/plain");
        assert_eq!(unescape(r"/odd\4"), r"/odd\4");
    }

    #[test]
    fn the_root_mount_holds_everything() {
        assert!(mount_of(Path::new("/")).is_some());
    }
}
