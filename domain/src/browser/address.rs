//! Where the human's browser may be sent: never wider than an agent's own
//! network. A URL's host is read as a browser reads it (the WHATWG URL
//! rules: a host that ends in a number is an IPv4 address in decimal,
//! octal or hexadecimal parts, `localhost` and every `*.localhost` are the
//! loopback), and a loopback, private, link-local, unspecified or other
//! non-public address, in either family or carried inside IPv6, is refused
//! unless the broker's browser configuration names that host and port
//! ([`AddressPolicy`]). A host the rules cannot read is refused too.
//!
//! A name that only resolves to such an address is not refused here: the
//! browser resolves it, and no answer the broker got would bind it.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::BTreeSet;

use crate::Refusal;

/// A URL's host as a browser reads it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// A DNS name, in lowercase, without a trailing dot.
    Name(String),
    /// An IPv4 address, whatever form it was written in.
    V4(Ipv4Addr),
    /// An IPv6 address (written in brackets).
    V6(Ipv6Addr),
}

impl Host {
    /// Reads a host as a browser does. `host` is a URL's host as written:
    /// an IPv6 literal in brackets, else letters, digits, `-`, `_` and `.`.
    ///
    /// # Errors
    /// `bad-parameters` for a host a browser would not read: a bracketed
    /// literal that is no IPv6 address, a host that ends in a number but is
    /// no IPv4 address in any form, an empty one.
    pub fn read(host: &str) -> Result<Self, Refusal> {
        if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .map(Host::V6)
                .map_err(|_| Refusal::BadParameters);
        }
        let lower = host.to_ascii_lowercase();
        let parts: Vec<&str> = lower.split('.').collect();
        // A trailing dot leaves an empty last label, which names nothing.
        let last = match parts.as_slice() {
            [.., last, ""] => *last,
            [.., last] => *last,
            [] => "",
        };
        if last.is_empty() {
            return Err(Refusal::BadParameters);
        }
        let ends_in_number = last.bytes().all(|b| b.is_ascii_digit()) || number(last).is_some();
        if ends_in_number {
            return ipv4(&parts).map(Host::V4).ok_or(Refusal::BadParameters);
        }
        let name = lower.strip_suffix('.').unwrap_or(&lower);
        Ok(Host::Name(name.to_owned()))
    }

    /// Whether the human's browser may not be sent here without the
    /// configuration naming it: the loopback names, and every address that
    /// is not on the public internet.
    pub fn is_private(&self) -> bool {
        match self {
            Host::Name(name) => name == "localhost" || name.ends_with(".localhost"),
            Host::V4(v4) => !is_public_address(IpAddr::V4(*v4)),
            Host::V6(v6) => !is_public_address(IpAddr::V6(*v6)),
        }
    }
}

/// Whether `address` is on the public internet, in either family or
/// carried inside IPv6 ([`carried_v4`]): the one rule for every place
/// that admits addresses, the human's browser and an agent's proxy.
pub fn is_public_address(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => carried_v4(v6).map_or_else(|| public_v6(v6), public_v4),
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::V4(v4) => write!(f, "{v4}"),
            Host::V6(v6) => write!(f, "[{v6}]"),
        }
    }
}

/// One part of an IPv4 address as the WHATWG rules read it: `0x` or `0X`
/// then hexadecimal digits (none is 0), a leading `0` then octal digits,
/// or decimal digits.
fn number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or(part.strip_prefix("0X")) {
        (hex, 16)
    } else if let Some(octal) = part.strip_prefix('0') {
        // A lone `0` reads as octal with no digits: 0 either way.
        (octal, 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        return Some(0);
    }
    if !digits.bytes().all(|b| char::from(b).is_digit(radix)) {
        return None;
    }
    // More digits than any part may have make the host no address at all.
    u64::from_str_radix(digits, radix).ok()
}

/// The WHATWG IPv4 parser over a host's labels: at most four parts (a
/// trailing empty one dropped), each a [`number`], all but the last under
/// 256, the last filling the bytes left.
fn ipv4(parts: &[&str]) -> Option<Ipv4Addr> {
    let parts = match parts {
        [rest @ .., ""] => rest,
        all => all,
    };
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let numbers = parts
        .iter()
        .map(|p| number(p))
        .collect::<Option<Vec<u64>>>()?;
    let (last, first) = numbers.split_last()?;
    if first.iter().any(|&n| n > 255) {
        return None;
    }
    let room = 8 * (5 - u32::try_from(numbers.len()).ok()?);
    if *last >= 1_u64 << room {
        return None;
    }
    let mut address = *last;
    for (i, n) in first.iter().enumerate() {
        address += n << (8 * (3 - i));
    }
    u32::try_from(address).ok().map(Ipv4Addr::from)
}

/// Whether `v4` is on the public internet: not "this network", private,
/// shared (CGNAT), loopback, link-local, the IETF's own block,
/// benchmarking, multicast or reserved.
fn public_v4(v4: Ipv4Addr) -> bool {
    let [a, b, c, _] = v4.octets();
    !(a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (18..20).contains(&b))
        || a >= 224)
}

/// Whether `v6` is on the public internet: not unique local, link-local,
/// site-local, the local NAT64 block or multicast. It carries no IPv4
/// address ([`carried_v4`]), so it is neither `::` nor `::1`, which read
/// as `0.0.0.0` and `0.0.0.1`.
fn public_v6(v6: Ipv6Addr) -> bool {
    let s = v6.segments();
    !((s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1)
        || (s[0] & 0xff00) == 0xff00)
}

/// The IPv4 address an IPv6 one carries, where it carries one: mapped
/// (`::ffff:a.b.c.d`), translated (`::ffff:0:a.b.c.d`), compatible
/// (`::a.b.c.d`; `::` and `::1` read as `0.0.0.0` and `0.0.0.1`, private
/// as they are), NAT64 (`64:ff9b::a.b.c.d`) and 6to4 (`2002:aabb:ccdd::`),
/// so one rule reads every spelling.
pub fn carried_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = |hi: u16, lo: u16| {
        let ([a, b], [c, d]) = (hi.to_be_bytes(), lo.to_be_bytes());
        Ipv4Addr::new(a, b, c, d)
    };
    match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo]
        | [0, 0, 0, 0, 0xffff, 0, hi, lo]
        | [0, 0, 0, 0, 0, 0, hi, lo]
        | [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(tail(hi, lo)),
        [0x2002, hi, lo, ..] => Some(tail(hi, lo)),
        [..] => None,
    }
}

/// A host and port the configuration lets the human's browser reach
/// although its host is private: `"host:port"`, the host as a URL writes
/// it (a name, an IPv4 address, an IPv6 one in brackets).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllowedAddress {
    host: Host,
    port: u16,
}

impl AllowedAddress {
    /// The address `host:port`.
    pub fn new(host: Host, port: u16) -> Self {
        Self { host, port }
    }

    /// Parses `host:port`, the port from 1 to 65535.
    ///
    /// # Errors
    /// `bad-config` for anything else.
    pub fn parse(text: &str) -> Result<Self, Refusal> {
        let (host, port) = text.rsplit_once(':').ok_or(Refusal::BadConfig)?;
        let port = super::parse_port(port).ok_or(Refusal::BadConfig)?;
        let host_ok = !host.is_empty()
            && (host.starts_with('[')
                || host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')));
        if !host_ok {
            return Err(Refusal::BadConfig);
        }
        let host = Host::read(host).map_err(|_| Refusal::BadConfig)?;
        Ok(Self { host, port })
    }
}

impl std::fmt::Display for AllowedAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Which private hosts the human's browser may be sent to: only those the
/// configuration names, with their port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    allowed: BTreeSet<AllowedAddress>,
}

impl AddressPolicy {
    /// A policy that allows `allowed` and no other private address.
    pub fn new(allowed: impl IntoIterator<Item = AllowedAddress>) -> Self {
        Self {
            allowed: allowed.into_iter().collect(),
        }
    }

    /// Also allows `address`.
    pub fn allow(&mut self, address: AllowedAddress) {
        self.allowed.insert(address);
    }

    /// What the policy allows, for the pane, which checks the same.
    pub fn allowed(&self) -> impl Iterator<Item = &AllowedAddress> {
        self.allowed.iter()
    }

    /// Whether the browser may be sent to `url`.
    ///
    /// # Errors
    /// `browser-address-refused` for a private host the policy does not
    /// name with that port.
    pub fn check(&self, url: &super::HttpUrl) -> Result<(), Refusal> {
        let host = url.host();
        if !host.is_private() {
            return Ok(());
        }
        let address = AllowedAddress {
            host: host.clone(),
            port: url.port(),
        };
        if self.allowed.contains(&address) {
            Ok(())
        } else {
            Err(Refusal::BrowserAddressRefused)
        }
    }
}
