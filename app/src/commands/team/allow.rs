//! One entry of an agent's `"allow"` list, the `host:port` names the
//! forward proxy of `up` admits for it: an exact name, a `*.domain` or an
//! exact address, each with a port. The configuration parses and checks
//! them here; `up`'s proxy asks each entry whether it admits a request's
//! target. The `host:port` syntax is read in one place for both
//! ([`split_port`], [`dns_name`]).

use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// One entry of an agent's `"allow"` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allow {
    host: Pattern,
    port: u16,
}

/// The host part of an [`Allow`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// This name exactly (lowercase, no trailing dot).
    Name(String),
    /// Any name ending in `.` and this domain (`*.example.com` admits
    /// `api.example.com` and `a.b.example.com`, not `example.com`).
    Below(String),
    /// This address exactly: the one way to admit a loopback, link-local
    /// or private address.
    Address(IpAddr),
}

impl Allow {
    /// Parses `host:port`, `*.domain:port`, `1.2.3.4:port` or
    /// `[::1]:port`; `None` for anything else (a missing or zero port, a
    /// wildcard anywhere but a whole first label, a bad name).
    pub fn parse(text: &str) -> Option<Allow> {
        let (host, port) = split_port(text)?;
        if let Some(address) = address_literal(host) {
            return Some(Allow {
                host: Pattern::Address(address),
                port,
            });
        }
        let (below, name) = match host.strip_prefix("*.") {
            Some(domain) => (true, domain),
            None => (false, host),
        };
        let name = dns_name(name)?;
        let host = if below {
            Pattern::Below(name)
        } else {
            Pattern::Name(name)
        };
        Some(Allow { host, port })
    }

    /// Whether it admits the name `name` (checked, lowercase) with `port`:
    /// its exact name, or a name below its `*.domain`.
    pub(crate) fn admits_name(&self, name: &str, port: u16) -> bool {
        self.port == port
            && match &self.host {
                Pattern::Name(exact) => exact == name,
                Pattern::Below(domain) => name
                    .strip_suffix(domain.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                Pattern::Address(_) => false,
            }
    }

    /// The address it names exactly, with its port; `None` for a name.
    pub(crate) fn address(&self) -> Option<SocketAddr> {
        match self.host {
            Pattern::Address(address) => Some(SocketAddr::new(address, self.port)),
            Pattern::Name(_) | Pattern::Below(_) => None,
        }
    }
}

impl fmt::Display for Allow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Pattern::Name(name) => write!(f, "{name}:{}", self.port),
            Pattern::Below(domain) => write!(f, "*.{domain}:{}", self.port),
            Pattern::Address(address) => write!(f, "{}", SocketAddr::new(*address, self.port)),
        }
    }
}

/// `host` and a non-zero port from `host:port` or `[v6]:port`.
pub(crate) fn split_port(text: &str) -> Option<(&str, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let port: u16 = port.parse().ok().filter(|&p| p != 0)?;
    let host = match host.strip_prefix('[') {
        // Brackets hold an IPv6 literal and nothing else.
        Some(v6) => v6
            .strip_suffix(']')
            .filter(|v6| v6.parse::<Ipv6Addr>().is_ok())?,
        None if host.contains(':') => return None,
        None => host,
    };
    Some((host, port))
}

/// An IPv4 or IPv6 literal, as Rust reads one.
pub(crate) fn address_literal(host: &str) -> Option<IpAddr> {
    host.parse().ok()
}

/// A DNS name, lowercase, without its trailing dot: labels of 1 to 63
/// letters, digits and `-`, 253 bytes at most, and a last label that is
/// not numeric (resolvers read `127.1` or `0x7f.1` as addresses).
pub(crate) fn dns_name(host: &str) -> Option<String> {
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let labels_ok = name.split('.').all(|label| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    });
    let last = name.rsplit('.').next().unwrap_or_default();
    let numeric =
        last.bytes().all(|b| b.is_ascii_digit()) || (last.starts_with("0x") && last.len() > 2);
    (labels_ok && name.len() <= 253 && !numeric).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_entries_parse_strictly() {
        for good in [
            "example.com:443",
            "*.example.com:443",
            "127.0.0.1:8080",
            "[::1]:8080",
            "API.Example.COM.:443",
        ] {
            assert!(Allow::parse(good).is_some(), "{good}");
        }
        assert_eq!(
            Allow::parse("API.Example.COM.:443").unwrap().to_string(),
            "api.example.com:443"
        );
        assert_eq!(Allow::parse("[::1]:80").unwrap().to_string(), "[::1]:80");
        for bad in [
            "example.com",
            "example.com:",
            "example.com:0",
            "example.com:65536",
            "example.com:+1",
            "*:443",
            "*.*.example.com:443",
            "a.*.example.com:443",
            "exa mple.com:443",
            "-x.example.com:443",
            "::1:80",
            "[example.com]:80",
            "127.1:80",
            "0x7f.1:80",
            "",
            ":443",
        ] {
            assert_eq!(Allow::parse(bad), None, "{bad}");
        }
    }
}
