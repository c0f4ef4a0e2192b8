//! What the proxy admits of a request: its target checked against the
//! agent's `"allow"` list (the configuration's [`Allow`] entries: exact
//! names, `*.domain` and exact addresses, each with a port), and which
//! addresses a name may lead to. Pure functions, so every rule is tested
//! without a socket.

use std::net::{IpAddr, SocketAddr};

use mosaic_domain::browser::{carried_v4, is_public_address};

use crate::commands::team::allow::{address_literal, dns_name, split_port};
use crate::commands::team::Allow;

/// Where a request asks to go: its host as a checked name or an address
/// literal, and its port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) host: Host,
    pub(super) port: u16,
}

/// A request's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Host {
    /// A DNS name of letters, digits, `-` and `.`, lowercase.
    Name(String),
    /// An IPv4 or IPv6 literal.
    Address(IpAddr),
}

/// Why the proxy refused a request: a static reason, logged and sent back
/// in the refusal's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reason {
    /// Not a request the proxy understands: no `CONNECT host:port` or
    /// `http://` absolute form, or a bad host or port.
    BadRequest,
    /// The request's head grew past the cap.
    HeadTooLarge,
    /// The request's head did not arrive before the deadline.
    HeadTimeout,
    /// The agent already has the most connections the proxy carries for it.
    TooManyConnections,
    /// A name the `"allow"` list does not admit.
    NotAllowed,
    /// An address literal the `"allow"` list does not name exactly.
    AddressLiteral,
    /// The name resolves only to loopback, link-local or private addresses
    /// that the `"allow"` list does not name exactly.
    PrivateAddress,
    /// The name does not resolve.
    Unresolved,
    /// No admitted address accepted the connection.
    ConnectFailed,
}

impl Reason {
    /// Its name in the log and in the refusal's body.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Reason::BadRequest => "bad-request",
            Reason::HeadTooLarge => "head-too-large",
            Reason::HeadTimeout => "head-timeout",
            Reason::TooManyConnections => "too-many-connections",
            Reason::NotAllowed => "not-allowed",
            Reason::AddressLiteral => "address-literal",
            Reason::PrivateAddress => "private-address",
            Reason::Unresolved => "unresolved",
            Reason::ConnectFailed => "connect-failed",
        }
    }

    /// The HTTP status line the client gets.
    pub(super) fn status(self) -> &'static str {
        match self {
            Reason::BadRequest => "400 Bad Request",
            Reason::HeadTooLarge => "431 Request Header Fields Too Large",
            Reason::HeadTimeout => "408 Request Timeout",
            Reason::TooManyConnections => "503 Service Unavailable",
            Reason::NotAllowed | Reason::AddressLiteral | Reason::PrivateAddress => "403 Forbidden",
            Reason::Unresolved | Reason::ConnectFailed => "502 Bad Gateway",
        }
    }
}

impl Target {
    /// Parses a request's `host:port` (a `CONNECT` target, or the
    /// authority of an `http://` URL with `default_port`).
    pub(super) fn parse(authority: &str, default_port: Option<u16>) -> Option<Target> {
        let (host, port) = match (split_port(authority), default_port) {
            (Some(split), _) => split,
            (None, Some(port)) => (authority, port),
            (None, None) => return None,
        };
        let host = match address_literal(host) {
            Some(address) => Host::Address(address),
            None => Host::Name(dns_name(host)?),
        };
        Some(Target { host, port })
    }

    /// Its host as the log shows it: checked, so it holds no control
    /// character.
    pub(super) fn host_text(&self) -> String {
        match &self.host {
            Host::Name(name) => name.clone(),
            Host::Address(address) => address.to_string(),
        }
    }
}

/// What an agent's `"allow"` list admits.
#[derive(Debug, Clone, Default)]
pub(super) struct Policy {
    rules: Vec<Allow>,
}

impl Policy {
    pub(super) fn new(rules: Vec<Allow>) -> Self {
        Policy { rules }
    }

    /// Whether `name` with `port` matches an exact name or a `*.domain`.
    pub(super) fn admits_name(&self, name: &str, port: u16) -> bool {
        self.rules.iter().any(|rule| rule.admits_name(name, port))
    }

    /// Whether `address` is listed exactly, with its port.
    fn lists(&self, address: SocketAddr) -> bool {
        let address = SocketAddr::new(canonical(address.ip()), address.port());
        self.rules.iter().any(|rule| {
            rule.address().is_some_and(|listed| {
                SocketAddr::new(canonical(listed.ip()), listed.port()) == address
            })
        })
    }

    /// The check before any resolution: an address literal is admitted only
    /// when listed exactly (then `Some` of it), a name only when a rule
    /// admits it (then `None`: it must be resolved, and its addresses go
    /// through [`Policy::addresses`]).
    pub(super) fn check(&self, target: &Target) -> Result<Option<SocketAddr>, Reason> {
        match &target.host {
            Host::Address(address) => {
                let address = SocketAddr::new(*address, target.port);
                if self.lists(address) {
                    Ok(Some(address))
                } else {
                    Err(Reason::AddressLiteral)
                }
            }
            Host::Name(name) if self.admits_name(name, target.port) => Ok(None),
            Host::Name(_) => Err(Reason::NotAllowed),
        }
    }

    /// Of the addresses an admitted name resolved to, the ones the proxy
    /// may connect to: public ones, and the others only when listed
    /// exactly. The proxy connects to these, never to a name again.
    pub(super) fn addresses(
        &self,
        resolved: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, Reason> {
        let admitted: Vec<SocketAddr> = resolved
            .into_iter()
            .filter(|a| is_public(a.ip()) || self.lists(*a))
            .collect();
        if admitted.is_empty() {
            Err(Reason::PrivateAddress)
        } else {
            Ok(admitted)
        }
    }
}

/// An IPv4 address carried in an IPv6 one as the IPv4 address, so a
/// listed address matches in every spelling; `::` and `::1` stay
/// themselves, so that listing one never lists `0.0.0.0` or `0.0.0.1`.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) if !v6.is_unspecified() && !v6.is_loopback() => {
            carried_v4(v6).map_or(address, IpAddr::V4)
        }
        IpAddr::V4(_) | IpAddr::V6(_) => address,
    }
}

/// Whether `address` is on the public internet: the broker's one rule for
/// every place that admits addresses.
pub(super) fn is_public(address: IpAddr) -> bool {
    is_public_address(address)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(rules: &[&str]) -> Policy {
        Policy::new(rules.iter().map(|r| Allow::parse(r).unwrap()).collect())
    }

    fn target(text: &str) -> Target {
        Target::parse(text, None).unwrap()
    }

    #[test]
    fn names_match_exactly_or_below_a_domain_with_their_port() {
        let p = policy(&["api.example.com:443", "*.example.org:443"]);
        assert!(p.admits_name("api.example.com", 443));
        assert!(!p.admits_name("api.example.com", 80));
        assert!(!p.admits_name("x.api.example.com", 443));
        assert!(!p.admits_name("example.com", 443));
        assert!(p.admits_name("a.example.org", 443));
        assert!(p.admits_name("a.b.example.org", 443));
        assert!(!p.admits_name("example.org", 443));
        assert!(!p.admits_name("badexample.org", 443));
        assert!(!p.admits_name("a.example.org.evil.com", 443));
        // A request's name is lowercased and loses its trailing dot first.
        assert_eq!(p.check(&target("API.Example.com.:443")), Ok(None));
        assert_eq!(p.check(&target("other.com:443")), Err(Reason::NotAllowed));
    }

    #[test]
    fn address_literals_pass_only_when_listed_exactly() {
        let p = policy(&["127.0.0.1:8080", "*.example.org:443"]);
        let listed: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(p.check(&target("127.0.0.1:8080")), Ok(Some(listed)));
        assert_eq!(
            p.check(&target("127.0.0.1:8081")),
            Err(Reason::AddressLiteral)
        );
        assert_eq!(
            p.check(&target("127.0.0.2:8080")),
            Err(Reason::AddressLiteral)
        );
        // A public address literal is refused too: the list names hosts.
        assert_eq!(
            p.check(&target("93.184.216.34:443")),
            Err(Reason::AddressLiteral)
        );
        assert_eq!(p.check(&target("[::1]:8080")), Err(Reason::AddressLiteral));
        // The mapped spelling of a listed address is that address.
        assert!(p.check(&target("[::ffff:127.0.0.1]:8080")).is_ok());
    }

    #[test]
    fn a_name_leads_only_to_public_addresses_or_listed_ones() {
        let p = policy(&["localhost:8080", "127.0.0.1:9090"]);
        let at = |text: &str| text.parse::<SocketAddr>().unwrap();
        assert_eq!(
            p.addresses([at("127.0.0.1:8080"), at("[::1]:8080")]),
            Err(Reason::PrivateAddress)
        );
        assert_eq!(
            p.addresses([at("10.0.0.1:443"), at("93.184.216.34:443")]),
            Ok(vec![at("93.184.216.34:443")])
        );
        assert_eq!(
            p.addresses([at("127.0.0.1:9090")]),
            Ok(vec![at("127.0.0.1:9090")])
        );
        assert_eq!(p.addresses([]), Err(Reason::PrivateAddress));
        // A translated IPv4 address and the local NAT64 block are as
        // private as the address they carry.
        for carried in ["[::ffff:0:127.0.0.1]:443", "[64:ff9b:1::a00:1]:443"] {
            assert_eq!(
                p.addresses([at(carried)]),
                Err(Reason::PrivateAddress),
                "{carried}"
            );
        }
        // Listing ::1 lists neither 0.0.0.1 nor 127.0.0.1.
        let loopback = policy(&["[::1]:8080"]);
        assert_eq!(
            loopback.addresses([at("0.0.0.1:8080"), at("127.0.0.1:8080")]),
            Err(Reason::PrivateAddress)
        );
        assert!(loopback.addresses([at("[::1]:8080")]).is_ok());
    }

    #[test]
    fn the_address_rules_know_every_non_public_range() {
        for private in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "192.0.0.8",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            // Translated IPv4 and the local NAT64 block.
            "::ffff:0:127.0.0.1",
            "::ffff:0:10.0.0.1",
            "64:ff9b:1::a9fe:a9fe",
            "64:ff9b:1:2::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "1.1.1.1",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn request_targets_parse_with_a_default_port() {
        assert_eq!(
            Target::parse("example.com", Some(80)),
            Some(Target {
                host: Host::Name("example.com".into()),
                port: 80
            })
        );
        assert_eq!(Target::parse("example.com", None), None);
        assert_eq!(Target::parse("ex\u{1b}ample.com:80", None), None);
        assert_eq!(Target::parse("[::1]", Some(80)), None);
        assert_eq!(
            target("[::1]:80").host,
            Host::Address("::1".parse().unwrap())
        );
    }
}
