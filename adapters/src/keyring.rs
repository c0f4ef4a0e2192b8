//! The kernel's keyrings, for `up`'s sandbox: an agent must not share the
//! session keyring of whoever started `up` (it can hold the human's
//! tokens), so `sandbox-exec` joins a new anonymous one before it runs the
//! agent, and its seccomp filter then denies every key system call.

use std::io;

/// `KEYCTL_JOIN_SESSION_KEYRING`, from `<linux/keyctl.h>`.
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// Makes this process (and what it starts) the member of a new, empty,
/// anonymous session keyring, leaving the one it inherited: its serial.
///
/// # Errors
/// The kernel's, when it has no keyrings (`ENOSYS`) or refuses.
#[allow(unsafe_code)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_join_makes_a_new_session_keyring() {
        // This test process leaves the keyring it inherited: harmless, as
        // nothing in the test binary uses keys.
        let first = join_anonymous_session_keyring().expect("a keyring");
        let second = join_anonymous_session_keyring().expect("another");
        assert!(first > 0 && second > 0 && first != second);
    }
}
