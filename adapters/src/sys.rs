//! The calls into the kernel and the C library that have no safe form,
//! and the workspace's only `unsafe` code, each use with the checks that
//! make it sound:
//!
//! - what a process of `up`'s sandbox inherited across `exec` and sheds
//!   before it runs anything of the agent's: the session keyring of
//!   whoever started `up`, which can hold the human's tokens
//!   ([`join_anonymous_session_keyring`], a raw `keyctl` call), and the
//!   descriptors its parent left open ([`take_inherited`]: taking a
//!   descriptor by its number asserts that nothing in the process owns it
//!   yet), and a client's inherited connector ([`take_inherited_fd`]);
//! - the terminal's width of a character ([`terminal_width`]: the C
//!   library's `wcwidth` in a UTF-8 locale), against which the tests prove
//!   the width table of `mosaic_domain::text`.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

/// `KEYCTL_JOIN_SESSION_KEYRING`, from `<linux/keyctl.h>`.
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// Makes this process (and what it starts) the member of a new, empty,
/// anonymous session keyring, leaving the one it inherited: its serial.
///
/// # Errors
/// The kernel's, when it has no keyrings (`ENOSYS`) or refuses.
pub fn join_anonymous_session_keyring() -> io::Result<i64> {
    // SAFETY: keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL) takes a null name
    // (an anonymous keyring) and no other pointer; it touches no memory
    // of ours.
    let serial = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    if serial < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(serial)
    }
}

/// Takes the descriptors above standard error that this process inherited
/// across `exec`, each now owned by the caller: dropping one closes it.
///
/// A descriptor counts as inherited when its close-on-exec flag is clear,
/// which every descriptor that survived the `exec` has, and none that the
/// standard library, rustix or tokio open here has (they all set it).
/// The process must have one thread, so that no descriptor is opened or
/// closed between the listing and the taking.
///
/// # Errors
/// When `/proc/self` cannot be read, or the process has more than one
/// thread.
pub fn take_inherited() -> io::Result<Vec<OwnedFd>> {
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::other(
            "inherited descriptors are taken while the process has one thread",
        ));
    }
    // Listed first and examined after: the listing's own descriptor is
    // closed by then (and a number it frees is reused only by this
    // function's own reads, which set close-on-exec).
    let listed: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    let mut taken = Vec::with_capacity(listed.len());
    for fd in listed {
        let info = match std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) {
            Ok(info) => info,
            // The listing's own descriptor, closed since.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if close_on_exec(&info)? {
            continue;
        }
        // SAFETY: `fd` is open (its fdinfo was just read, and with one
        // thread nothing closed it since) and its close-on-exec flag is
        // clear, so it came across `exec`: no object of this process owns
        // it, and it is taken once, here.
        taken.push(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    Ok(taken)
}

/// Takes the one descriptor `fd` that this process inherited across
/// `exec` (a client inside `up`'s sandbox: its connector), now owned by
/// the caller, with the same checks as [`take_inherited`]: the process
/// has one thread, `fd` is open, above standard error, and its
/// close-on-exec flag is clear. The caller takes each number once.
///
/// # Errors
/// When `fd` is not such a descriptor, or `/proc/self` cannot be read.
pub fn take_inherited_fd(fd: RawFd) -> io::Result<OwnedFd> {
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::other(
            "an inherited descriptor is taken while the process has one thread",
        ));
    }
    if fd <= 2 {
        return Err(io::Error::other("standard input and output are not taken"));
    }
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))?;
    if close_on_exec(&info)? {
        return Err(io::Error::other("the descriptor was not inherited"));
    }
    // SAFETY: `fd` is open (its fdinfo was just read, and with one thread
    // nothing closed it since) and its close-on-exec flag is clear, so it
    // came across `exec`: no object of this process owns it, and the
    // caller takes it once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether the `flags:` line of a `/proc/self/fdinfo` entry has
/// `O_CLOEXEC`, which the kernel shows for the descriptor's close-on-exec
/// flag.
fn close_on_exec(info: &str) -> io::Result<bool> {
    let flags = info
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|octal| i64::from_str_radix(octal.trim(), 8).ok())
        .ok_or_else(|| io::Error::other("an fdinfo entry without its flags"))?;
    Ok(flags & i64::from(libc::O_CLOEXEC) != 0)
}

extern "C" {
    fn wcwidth(c: libc::wchar_t) -> libc::c_int;
}

/// The `C.UTF-8` locale, made once and kept for the process's life.
struct Utf8Locale(libc::locale_t);

// SAFETY: a `locale_t` made by `newlocale` is never changed after; glibc
// lets any thread use it.
unsafe impl Send for Utf8Locale {}
// SAFETY: as above: shared use of an unchanging locale object.
unsafe impl Sync for Utf8Locale {}

/// The width a terminal gives `c`: the C library's `wcwidth` in the
/// `C.UTF-8` locale, set for the calling thread only and restored, so no
/// other code of the process sees a changed locale. `None` for a character
/// `wcwidth` calls unprintable (-1).
///
/// # Errors
/// When this machine has no `C.UTF-8` locale.
pub fn terminal_width(c: char) -> io::Result<Option<usize>> {
    static LOCALE: OnceLock<Option<Utf8Locale>> = OnceLock::new();
    let locale = LOCALE.get_or_init(|| {
        // SAFETY: the name is a NUL-terminated literal and the base locale
        // is none (0): newlocale allocates a new object or returns null.
        let made = unsafe {
            libc::newlocale(
                libc::LC_CTYPE_MASK,
                c"C.UTF-8".as_ptr(),
                std::ptr::null_mut(),
            )
        };
        (!made.is_null()).then_some(Utf8Locale(made))
    });
    let Some(Utf8Locale(locale)) = locale else {
        return Err(io::Error::other("this machine has no C.UTF-8 locale"));
    };
    let wide = libc::wchar_t::try_from(u32::from(c))
        .map_err(|_| io::Error::other("a code point beyond wchar_t"))?;
    // SAFETY: `locale` is a valid locale object for the process's life;
    // uselocale sets it for this thread only and returns the one to
    // restore; wcwidth reads its integer argument and the thread's locale.
    let width = unsafe {
        let before = libc::uselocale(*locale);
        let width = wcwidth(wide);
        libc::uselocale(before);
        width
    };
    Ok(usize::try_from(width).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terminal_widths_of_a_letter_a_wide_character_a_mark_and_a_control() {
        assert_eq!(terminal_width('a').expect("C.UTF-8"), Some(1));
        assert_eq!(terminal_width('\u{4E00}').expect("C.UTF-8"), Some(2));
        assert_eq!(terminal_width('\u{0301}').expect("C.UTF-8"), Some(0));
        assert_eq!(terminal_width('\u{1B}').expect("C.UTF-8"), None);
    }

    #[test]
    fn each_join_makes_a_new_session_keyring() {
        // This test process leaves the keyring it inherited: harmless, as
        // nothing in the test binary uses keys.
        let first = join_anonymous_session_keyring().expect("a keyring");
        let second = join_anonymous_session_keyring().expect("another");
        assert!(first > 0 && second > 0 && first != second);
    }

    #[test]
    fn fdinfo_flags_say_close_on_exec() {
        let info = |flags: &str| format!("pos:\t0\nflags:\t{flags}\nmnt_id:\t25\nino:\t7\n");
        assert!(close_on_exec(&info("02100002")).expect("flags"));
        assert!(!close_on_exec(&info("0100002")).expect("flags"));
        assert!(!close_on_exec(&info("00")).expect("flags"));
        assert!(close_on_exec("pos:\t0\n").is_err());
        assert!(close_on_exec(&info("0x12")).is_err());
    }

    #[test]
    fn a_process_with_threads_takes_nothing() {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || wait.recv());
        let refused = take_inherited().expect_err("more than one thread");
        assert_eq!(refused.kind(), io::ErrorKind::Other);
        drop(done);
        assert!(other.join().expect("the thread").is_err());
    }
}
