//! Where the human's browser may go (`browser::address`): a host is read
//! as a browser reads it, every spelling of an address is that address,
//! and a private one is refused unless the policy names it with its port.

use std::net::{Ipv4Addr, Ipv6Addr};

use mosaic_domain::browser::{AddressPolicy, AllowedAddress, Host, HttpUrl};
use mosaic_domain::Refusal;
use proptest::prelude::*;

/// How one part of an IPv4 address is written.
#[derive(Debug, Clone, Copy)]
enum Radix {
    Decimal,
    Octal,
    Hex,
    HexUpper,
}

fn radix() -> impl Strategy<Value = Radix> {
    prop_oneof![
        Just(Radix::Decimal),
        Just(Radix::Octal),
        Just(Radix::Hex),
        Just(Radix::HexUpper),
    ]
}

fn write(n: u64, radix: Radix) -> String {
    match radix {
        Radix::Decimal => n.to_string(),
        Radix::Octal => format!("0{n:o}"),
        Radix::Hex => format!("0x{n:x}"),
        Radix::HexUpper => format!("0X{n:X}"),
    }
}

/// `address` written in `parts` parts (1 to 4: the last fills the bytes
/// left), each in its radix, perhaps with a trailing dot.
fn spelled(address: Ipv4Addr, parts: usize, radixes: &[Radix], dot: bool) -> String {
    let bits = u64::from(u32::from(address));
    let octets = address.octets();
    let mut written: Vec<String> = (0..parts - 1)
        .map(|i| write(u64::from(octets[i]), radixes[i]))
        .collect();
    let rest_bits = 8 * (5 - parts) as u32;
    let last = bits & ((1_u64 << rest_bits) - 1);
    written.push(write(last, radixes[parts - 1]));
    let mut host = written.join(".");
    if dot {
        host.push('.');
    }
    host
}

/// The ranges the broker refuses, as a table of (first, last) addresses.
const PRIVATE_V4: &[([u8; 4], [u8; 4])] = &[
    ([0, 0, 0, 0], [0, 255, 255, 255]),
    ([10, 0, 0, 0], [10, 255, 255, 255]),
    ([100, 64, 0, 0], [100, 127, 255, 255]),
    ([127, 0, 0, 0], [127, 255, 255, 255]),
    ([169, 254, 0, 0], [169, 254, 255, 255]),
    ([172, 16, 0, 0], [172, 31, 255, 255]),
    ([192, 0, 0, 0], [192, 0, 0, 255]),
    ([192, 168, 0, 0], [192, 168, 255, 255]),
    ([198, 18, 0, 0], [198, 19, 255, 255]),
    ([224, 0, 0, 0], [255, 255, 255, 255]),
];

fn in_table(address: Ipv4Addr) -> bool {
    let n = u32::from(address);
    PRIVATE_V4
        .iter()
        .any(|(first, last)| (u32::from_be_bytes(*first)..=u32::from_be_bytes(*last)).contains(&n))
}

/// The IPv6 spellings that carry `v4`, in brackets.
fn carriers(v4: Ipv4Addr) -> Vec<String> {
    let [a, b, c, d] = v4.octets();
    let hi = u16::from_be_bytes([a, b]);
    let lo = u16::from_be_bytes([c, d]);
    let mut all = vec![
        format!("[::ffff:{v4}]"),
        format!("[::ffff:{hi:x}:{lo:x}]"),
        format!("[0:0:0:0:0:FFFF:{hi:X}:{lo:X}]"),
        format!("[::ffff:0:{v4}]"),
        format!("[64:ff9b::{v4}]"),
        format!("[2002:{hi:x}:{lo:x}::1]"),
    ];
    // `::` and `::1` are themselves, not carriers.
    if u32::from(v4) > 1 {
        all.push(format!("[::{v4}]"));
    }
    all
}

proptest! {
    /// Every spelling of an IPv4 address (one to four parts, each decimal,
    /// octal or hexadecimal, a trailing dot or not) reads as that address.
    #[test]
    fn every_spelling_of_an_ipv4_address_is_that_address(
        bits in any::<u32>(),
        parts in 1_usize..=4,
        radixes in proptest::collection::vec(radix(), 4),
        dot in any::<bool>(),
    ) {
        let address = Ipv4Addr::from(bits);
        let host = spelled(address, parts, &radixes, dot);
        prop_assert_eq!(Host::read(&host), Ok(Host::V4(address)), "{}", host);
        let url = HttpUrl::parse(&format!("http://{host}:8080/x")).expect("a URL");
        prop_assert_eq!(url.host(), &Host::V4(address));
        prop_assert_eq!(url.port(), 8080);
    }

    /// An IPv4 address is refused exactly when it lies in a private,
    /// loopback, link-local, unspecified or other non-public range, and so
    /// is every IPv6 spelling that carries it.
    #[test]
    fn an_address_is_private_by_its_range_in_every_family(bits in any::<u32>()) {
        let address = Ipv4Addr::from(bits);
        let private = in_table(address);
        prop_assert_eq!(Host::V4(address).is_private(), private, "{}", address);
        for carrier in carriers(address) {
            let host = Host::read(&carrier).expect("an IPv6 literal");
            prop_assert_eq!(host.is_private(), private, "{}", carrier);
        }
    }

    /// A host that ends in a number but is no address in any form is no
    /// host a browser would go to: refused as a bad parameter.
    #[test]
    fn a_host_ending_in_a_number_that_is_no_address_is_refused(
        label in "[a-z][a-z0-9-]{0,10}",
        number in 0_u32..100_000,
        extra in 5_usize..8,
    ) {
        let named = format!("{label}.{number}");
        prop_assert_eq!(Host::read(&named), Err(Refusal::BadParameters), "{}", named);
        let long = vec!["1"; extra].join(".");
        prop_assert_eq!(Host::read(&long), Err(Refusal::BadParameters), "{}", long);
        let url = format!("http://{named}/");
        prop_assert_eq!(HttpUrl::parse(&url).map(|_| ()), Err(Refusal::BadParameters));
    }

    /// `localhost` and every name below it are the loopback, in any case
    /// and with a trailing dot; a name that only contains the word is not.
    #[test]
    fn localhost_and_every_name_below_it_are_the_loopback(
        labels in proptest::collection::vec("[a-zA-Z0-9-]{1,8}", 0..3),
        upper in proptest::collection::vec(any::<bool>(), 9),
        dot in any::<bool>(),
    ) {
        let word: String = "localhost"
            .chars()
            .zip(&upper)
            .map(|(c, up)| if *up { c.to_ascii_uppercase() } else { c })
            .collect();
        let mut host = labels.iter().map(|l| format!("{l}.")).collect::<String>() + &word;
        if dot {
            host.push('.');
        }
        let read = Host::read(&host).expect("a name");
        prop_assert!(read.is_private(), "{}", host);
        let beside = format!("{word}.example.com");
        prop_assert!(!Host::read(&beside).expect("a name").is_private());
        let inside = format!("my{word}");
        prop_assert!(!Host::read(&inside).expect("a name").is_private());
    }

    /// A private host passes only when the policy names it with its port,
    /// whichever spelling either side uses.
    #[test]
    fn a_private_host_passes_only_when_named_with_its_port(
        range in 0..PRIVATE_V4.len(),
        offset in any::<u32>(),
        port in 1_u16..,
        other in 1_u16..,
        radixes in proptest::collection::vec(radix(), 4),
        parts in 1_usize..=4,
    ) {
        prop_assume!(port != other);
        let (first, last) = PRIVATE_V4[range];
        let (first, last) = (u32::from_be_bytes(first), u32::from_be_bytes(last));
        let address = Ipv4Addr::from(first + offset % (last - first + 1).max(1));
        prop_assert!(in_table(address));
        let allowed = AllowedAddress::parse(&format!("{}:{port}", spelled(address, parts, &radixes, false)))
            .expect("an allowed address");
        let policy = AddressPolicy::new([allowed]);
        for carrier in std::iter::once(address.to_string()).chain(carriers(address)) {
            let at = |p: u16| HttpUrl::parse(&format!("http://{carrier}:{p}/")).expect("a URL");
            let same_address = Host::read(&carrier) == Ok(Host::V4(address));
            let expected = if same_address { Ok(()) } else { Err(Refusal::BrowserAddressRefused) };
            prop_assert_eq!(policy.check(&at(port)), expected, "{}", carrier);
            prop_assert_eq!(policy.check(&at(other)), Err(Refusal::BrowserAddressRefused));
            prop_assert_eq!(
                AddressPolicy::default().check(&at(port)),
                Err(Refusal::BrowserAddressRefused)
            );
        }
    }
}

#[test]
fn the_edges_of_the_private_ranges() {
    for (host, private) in [
        ("9.255.255.255", false),
        ("10.0.0.0", true),
        ("11.0.0.0", false),
        ("100.63.255.255", false),
        ("100.64.0.0", true),
        ("100.128.0.0", false),
        ("126.255.255.255", false),
        ("127.0.0.1", true),
        ("128.0.0.0", false),
        ("169.253.255.255", false),
        ("169.254.169.254", true),
        ("172.15.255.255", false),
        ("172.16.0.0", true),
        ("172.31.255.255", true),
        ("172.32.0.0", false),
        ("192.167.255.255", false),
        ("192.168.1.1", true),
        ("192.169.0.0", false),
        ("198.17.255.255", false),
        ("198.18.0.1", true),
        ("198.20.0.0", false),
        ("223.255.255.255", false),
        ("224.0.0.1", true),
        ("255.255.255.255", true),
        ("0", true),
        ("2130706433", true),
        ("017700000001", true),
        ("0x7f000001", true),
        ("[::]", true),
        ("[::1]", true),
        ("[fc00::1]", true),
        ("[fdff:ffff::1]", true),
        ("[fe80::1]", true),
        ("[febf::1]", true),
        ("[fec0::1]", true),
        ("[ff02::1]", true),
        ("[64:ff9b:1::1]", true),
        // Beside the local NAT64 block, each of its three segments alone.
        ("[64::1]", false),
        ("[64:ff9b:2::1]", false),
        ("[2607:ff9b:1::1]", false),
        ("[2607:f8b0:1::1]", false),
        ("[2001:db8::1]", false),
        ("[2606:4700::1111]", false),
        ("[64:ff9b::808:808]", false),
        ("[2002:808:808::]", false),
        ("example.com", false),
        ("localhost", true),
        ("a.b.localhost.", true),
        // Not a number: a name, as a browser reads it.
        ("0x1g", false),
    ] {
        let read = Host::read(host).unwrap_or_else(|e| panic!("{host}: {e}"));
        assert_eq!(read.is_private(), private, "{host}");
    }
    for bad in [
        "[::g]",
        "[1.2.3.4]",
        "",
        ".",
        "256.1.1.1",
        "1.2.3.256",
        "08",
    ] {
        assert_eq!(Host::read(bad), Err(Refusal::BadParameters), "{bad:?}");
    }
    assert_eq!(Host::read("[::1]"), Ok(Host::V6(Ipv6Addr::LOCALHOST)));
}

#[test]
fn allowed_addresses_parse_strictly_and_print_as_read() {
    for (text, shown) in [
        ("localhost:3000", "localhost:3000"),
        ("LOCALHOST.:3000", "localhost:3000"),
        ("127.1:80", "127.0.0.1:80"),
        ("[::FFFF:7f00:1]:8080", "[::ffff:127.0.0.1]:8080"),
        ("nas.lan:443", "nas.lan:443"),
    ] {
        let allowed = AllowedAddress::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(allowed.to_string(), shown);
        assert_eq!(AllowedAddress::parse(shown), Ok(allowed));
    }
    for bad in [
        "localhost",
        "localhost:",
        "localhost:0",
        "localhost:65536",
        ":80",
        "a b:80",
        "[::g]:80",
        "host:8o",
        "a/b:80",
        "1.2.3.4.5:80",
    ] {
        assert_eq!(
            AllowedAddress::parse(bad),
            Err(Refusal::BadConfig),
            "{bad:?}"
        );
    }
}

#[test]
fn a_public_url_passes_any_policy_and_the_default_port_is_the_schemes() {
    let url = HttpUrl::parse("https://example.com/a?b#c").expect("a URL");
    assert_eq!(url.port(), 443);
    assert_eq!(AddressPolicy::default().check(&url), Ok(()));
    let local = HttpUrl::parse("http://localhost/").expect("a URL");
    assert_eq!(local.port(), 80);
    let allowed = AddressPolicy::new([AllowedAddress::parse("localhost:80").expect("allowed")]);
    assert_eq!(allowed.check(&local), Ok(()));
    assert_eq!(
        AddressPolicy::default().check(&local),
        Err(Refusal::BrowserAddressRefused)
    );
}

#[test]
fn a_policy_allows_what_it_was_given_and_says_so_to_the_pane() {
    let local = HttpUrl::parse("http://127.0.0.1:8080/").expect("a URL");
    let mut policy = AddressPolicy::default();
    assert_eq!(policy.check(&local), Err(Refusal::BrowserAddressRefused));
    assert_eq!(policy.allowed().count(), 0);
    let address = AllowedAddress::parse("127.0.0.1:8080").expect("allowed");
    policy.allow(address.clone());
    assert_eq!(policy.check(&local), Ok(()));
    assert_eq!(policy.allowed().collect::<Vec<_>>(), [&address]);
    // Another port of the same host is still refused.
    let other = HttpUrl::parse("http://127.0.0.1:8081/").expect("a URL");
    assert_eq!(policy.check(&other), Err(Refusal::BrowserAddressRefused));
}
