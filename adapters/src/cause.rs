//! Where an error becomes a wire code. The code is all a client hears; the
//! cause, with its whole chain of sources, is written to stderr as one line
//! for the operator: what failed, and why (an OS or driver message, which
//! never holds a capability or a service token). The runtime and the
//! adapters call [`logged`] at that point, and nowhere else.

use std::error::Error;

use mosaic_domain::Refusal;

/// Maps an error to `code`, writing `what` failed and its cause to stderr.
pub fn logged<E: Error>(code: Refusal, what: &'static str) -> impl FnOnce(E) -> Refusal {
    move |error| {
        eprintln!("mosaic-bus: {}: {what}: {}", code.code(), chain(&error));
        code
    }
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
        assert_eq!(
            logged(Refusal::StorageUnavailable, "commit")(store),
            Refusal::StorageUnavailable
        );
    }
}
