//! Where an error becomes a wire code. The code is all a client hears; the
//! cause, with its whole chain of sources, goes to the log for the
//! operator, as one `tracing` error event:
//! the message says what failed, the fields are `code` (the static code),
//! `what` and `cause` (the error and each of its sources, joined by `: `;
//! an OS or driver message, which never holds a capability or a service
//! token, but may quote what it failed on, a path or a value an agent
//! wrote: so it is neutralised, each control or format character a visible
//! token, as every log field that may carry such text is). The runtime and
//! the adapters call [`logged`] (or [`log`], for an error they keep) at
//! that point, and nowhere else.

use std::error::Error;

use mosaic_domain::{text, Refusal};

/// Maps an error to `code`, logging `what` failed and its cause.
pub fn logged<E: Error>(code: Refusal, what: &'static str) -> impl FnOnce(E) -> Refusal {
    move |error| {
        log(code, what, &error);
        code
    }
}

/// Logs that `what` failed with `error`, which the client hears as `code`.
pub fn log(code: Refusal, what: &'static str, error: &dyn Error) {
    tracing::error!(
        code = code.code(),
        what,
        cause = &*text::neutralise(&chain(error)),
        "{what} failed"
    );
}

/// An error and each of its sources, joined by `: `.
fn chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_named_with_its_sources() {
        let io = std::io::Error::other("disk full");
        let store = mosaic_ports::StoreError::Unavailable(Box::new(io));
        assert_eq!(chain(&store), "store unavailable: disk full");
        let hostile = std::io::Error::other("no such file: x\u{1b}]0;pwned\u{7}");
        assert_eq!(
            text::neutralise(&chain(&hostile)),
            "no such file: x⟨ESC⟩]0;pwned⟨BEL⟩"
        );
        assert_eq!(
            logged(Refusal::StorageUnavailable, "commit")(store),
            Refusal::StorageUnavailable
        );
    }
}
