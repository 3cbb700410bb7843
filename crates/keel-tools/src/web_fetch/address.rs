//! Which addresses `web_fetch` does not reach: every address that is not a public unicast
//! one (loopback, private, link-local, unique-local, shared CGNAT, multicast,
//! unspecified, broadcast, documentation and reserved ranges), IPv4 and IPv6 alike, with
//! an IPv4 address carried inside an IPv6 one (mapped, NAT64, 6to4) judged as that IPv4
//! address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    /// `0.0.0.0/8`, `::`: no host.
    Unspecified,
    /// `127.0.0.0/8`, `::1`: this machine.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`: a private network.
    Private,
    /// `100.64/10`: shared address space (carrier-grade NAT).
    SharedCgnat,
    /// `169.254/16`, `fe80::/10` (and the deprecated site-local `fec0::/10`): this link,
    /// cloud metadata services included.
    LinkLocal,
    /// `fc00::/7`: a private IPv6 network.
    UniqueLocal,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// Any other special-purpose or unassigned range (`240/4`, `198.18/15`,
    /// `192.0.0/24`, Teredo, IPv6 outside `2000::/3`, …).
    Reserved,
}

impl Blocked {
    /// What kind of address it is, for a message: "a loopback address".
    pub fn describe(self) -> &'static str {
        match self {
            Blocked::Unspecified => "an unspecified address",
            Blocked::Loopback => "a loopback address (this machine)",
            Blocked::Private => "a private network address",
            Blocked::SharedCgnat => "a shared (carrier-grade NAT) address",
            Blocked::LinkLocal => "a link-local address",
            Blocked::UniqueLocal => "a unique-local (private IPv6) address",
            Blocked::Multicast => "a multicast address",
            Blocked::Broadcast => "the broadcast address",
            Blocked::Documentation => "a documentation address",
            Blocked::Reserved => "a reserved address",
        }
    }
}

/// IPv4 ranges that are not reached, most specific first where they overlap.
const V4: &[(u32, u8, Blocked)] = &[
    (0x0000_0000, 8, Blocked::Unspecified),    // 0.0.0.0/8
    (0x0A00_0000, 8, Blocked::Private),        // 10.0.0.0/8
    (0x6440_0000, 10, Blocked::SharedCgnat),   // 100.64.0.0/10
    (0x7F00_0000, 8, Blocked::Loopback),       // 127.0.0.0/8
    (0xA9FE_0000, 16, Blocked::LinkLocal),     // 169.254.0.0/16
    (0xAC10_0000, 12, Blocked::Private),       // 172.16.0.0/12
    (0xC000_0000, 24, Blocked::Reserved),      // 192.0.0.0/24 (IETF protocol assignments)
    (0xC000_0200, 24, Blocked::Documentation), // 192.0.2.0/24
    (0xC058_6300, 24, Blocked::Reserved),      // 192.88.99.0/24 (6to4 relays)
    (0xC0A8_0000, 16, Blocked::Private),       // 192.168.0.0/16
    (0xC612_0000, 15, Blocked::Reserved),      // 198.18.0.0/15 (benchmarking)
    (0xC633_6400, 24, Blocked::Documentation), // 198.51.100.0/24
    (0xCB00_7100, 24, Blocked::Documentation), // 203.0.113.0/24
    (0xE000_0000, 4, Blocked::Multicast),      // 224.0.0.0/4
    (0xFFFF_FFFF, 32, Blocked::Broadcast),     // 255.255.255.255/32
    (0xF000_0000, 4, Blocked::Reserved),       // 240.0.0.0/4
];

/// Why `web_fetch` does not reach `ip`, or `None` for a public unicast address.
pub fn blocked(ip: IpAddr) -> Option<Blocked> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn in_range(value: u128, bits: u32, network: u128, prefix: u8) -> bool {
    let prefix = u32::from(prefix);
    prefix == 0 || (value >> (bits - prefix)) == (network >> (bits - prefix))
}

fn blocked_v4(ip: Ipv4Addr) -> Option<Blocked> {
    let value = u128::from(u32::from(ip));
    V4.iter()
        .find(|(network, prefix, _)| in_range(value, 32, u128::from(*network), *prefix))
        .map(|(_, _, why)| *why)
}

/// The IPv4 address an IPv6 address carries and stands for, if it is one of the forms
/// that do: IPv4-mapped (`::ffff:a.b.c.d`), the NAT64 well-known prefix
/// (`64:ff9b::a.b.c.d`, which a NAT64 gateway turns into the IPv4 address) and 6to4
/// (`2002:aabb:ccdd::/48`).
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let value = u128::from(ip);
    let low = Ipv4Addr::from((value & 0xFFFF_FFFF) as u32);
    if value >> 32 == 0xFFFF {
        return Some(low);
    }
    if value >> 32 == 0x0064_FF9B_0000_0000_0000_0000 {
        return Some(low);
    }
    if value >> 112 == 0x2002 {
        return Some(Ipv4Addr::from(((value >> 80) & 0xFFFF_FFFF) as u32));
    }
    None
}

/// IPv6 ranges that are not reached (the IPv4-carrying forms are judged before these).
const V6: &[(u128, u8, Blocked)] = &[
    (0, 128, Blocked::Unspecified),                      // ::
    (1, 128, Blocked::Loopback),                         // ::1
    (0xFE80u128 << 112, 10, Blocked::LinkLocal),         // fe80::/10
    (0xFEC0u128 << 112, 10, Blocked::LinkLocal),         // fec0::/10 (site-local)
    (0xFC00u128 << 112, 7, Blocked::UniqueLocal),        // fc00::/7
    (0xFF00u128 << 112, 8, Blocked::Multicast),          // ff00::/8
    (0x2001_0DB8u128 << 96, 32, Blocked::Documentation), // 2001:db8::/32
    (0x3FFFu128 << 112, 20, Blocked::Documentation),     // 3fff::/20
    (0x2001_0000u128 << 96, 32, Blocked::Reserved),      // 2001::/32 (Teredo)
    (0x2001_0002_0000u128 << 80, 48, Blocked::Reserved), // 2001:2::/48 (benchmarking)
    (0x2001_0010u128 << 96, 28, Blocked::Reserved),      // 2001:10::/28 (ORCHID)
    (0x2001_0020u128 << 96, 28, Blocked::Reserved),      // 2001:20::/28 (ORCHIDv2)
];

fn blocked_v6(ip: Ipv6Addr) -> Option<Blocked> {
    if let Some(v4) = embedded_v4(ip) {
        return blocked_v4(v4);
    }
    let value = u128::from(ip);
    if let Some((_, _, why)) = V6.iter().find(|(network, prefix, _)| in_range(value, 128, *network, *prefix))
    {
        return Some(*why);
    }
    // Global unicast is 2000::/3; the rest (IPv4-compatible `::a.b.c.d`, the NAT64
    // local-use prefix, discard-only `100::/64`, unassigned space) is not a public host.
    if value >> 125 != 0b001 {
        return Some(Blocked::Reserved);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(text: &str) -> Option<Blocked> {
        blocked(text.parse().unwrap())
    }

    #[test]
    fn every_class_of_address_is_named() {
        let cases: &[(&str, Option<Blocked>)] = &[
            ("0.0.0.0", Some(Blocked::Unspecified)),
            ("0.1.2.3", Some(Blocked::Unspecified)),
            ("10.0.0.1", Some(Blocked::Private)),
            ("10.255.255.255", Some(Blocked::Private)),
            ("100.64.0.1", Some(Blocked::SharedCgnat)),
            ("100.127.255.254", Some(Blocked::SharedCgnat)),
            ("127.0.0.1", Some(Blocked::Loopback)),
            ("127.255.255.254", Some(Blocked::Loopback)),
            ("169.254.169.254", Some(Blocked::LinkLocal)),
            ("172.16.0.1", Some(Blocked::Private)),
            ("172.31.255.255", Some(Blocked::Private)),
            ("192.0.0.170", Some(Blocked::Reserved)),
            ("192.0.2.1", Some(Blocked::Documentation)),
            ("192.88.99.1", Some(Blocked::Reserved)),
            ("192.168.1.1", Some(Blocked::Private)),
            ("198.18.0.1", Some(Blocked::Reserved)),
            ("198.19.255.255", Some(Blocked::Reserved)),
            ("198.51.100.7", Some(Blocked::Documentation)),
            ("203.0.113.9", Some(Blocked::Documentation)),
            ("224.0.0.1", Some(Blocked::Multicast)),
            ("239.255.255.250", Some(Blocked::Multicast)),
            ("240.0.0.1", Some(Blocked::Reserved)),
            ("255.255.255.255", Some(Blocked::Broadcast)),
            // Public IPv4, including the neighbours of blocked ranges.
            ("1.1.1.1", None),
            ("8.8.8.8", None),
            ("9.255.255.255", None),
            ("11.0.0.0", None),
            ("100.63.255.255", None),
            ("100.128.0.0", None),
            ("126.255.255.255", None),
            ("128.0.0.0", None),
            ("169.253.255.255", None),
            ("169.255.0.0", None),
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("192.167.255.255", None),
            ("192.169.0.0", None),
            ("198.17.255.255", None),
            ("198.20.0.0", None),
            ("223.255.255.255", None),
            // IPv6.
            ("::", Some(Blocked::Unspecified)),
            ("::1", Some(Blocked::Loopback)),
            ("fe80::1", Some(Blocked::LinkLocal)),
            ("febf:ffff::1", Some(Blocked::LinkLocal)),
            ("fec0::1", Some(Blocked::LinkLocal)),
            ("fc00::1", Some(Blocked::UniqueLocal)),
            ("fd12:3456:789a::1", Some(Blocked::UniqueLocal)),
            ("ff02::1", Some(Blocked::Multicast)),
            ("ff05::1:3", Some(Blocked::Multicast)),
            ("2001:db8::1", Some(Blocked::Documentation)),
            ("3fff::1", Some(Blocked::Documentation)),
            ("2001::1", Some(Blocked::Reserved)),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some(Blocked::Reserved)),
            ("2001:2::1", Some(Blocked::Reserved)),
            ("::2", Some(Blocked::Reserved)),
            ("::7f00:1", Some(Blocked::Reserved)),
            ("100::1", Some(Blocked::Reserved)),
            ("64:ff9b:1::1", Some(Blocked::Reserved)),
            ("4000::1", Some(Blocked::Reserved)),
            // IPv4 inside IPv6: judged as the IPv4 address.
            ("::ffff:127.0.0.1", Some(Blocked::Loopback)),
            ("::ffff:7f00:1", Some(Blocked::Loopback)),
            ("::ffff:10.1.2.3", Some(Blocked::Private)),
            ("::ffff:169.254.169.254", Some(Blocked::LinkLocal)),
            ("::ffff:0.0.0.0", Some(Blocked::Unspecified)),
            ("64:ff9b::127.0.0.1", Some(Blocked::Loopback)),
            ("64:ff9b::192.168.0.1", Some(Blocked::Private)),
            ("2002:7f00:1::1", Some(Blocked::Loopback)),
            ("2002:a9fe:a9fe::", Some(Blocked::LinkLocal)),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::8.8.8.8", None),
            ("2002:808:808::1", None),
            // Public IPv6.
            ("2606:4700:4700::1111", None),
            ("2a00:1450:4001:80b::200e", None),
            ("2001:4860:4860::8888", None),
            ("2001:db7:ffff::1", None),
            ("2001:db9::1", None),
        ];
        for (text, expected) in cases {
            assert_eq!(check(text), *expected, "{text}");
        }
    }

    #[test]
    fn messages_name_the_kind() {
        assert_eq!(Blocked::Loopback.describe(), "a loopback address (this machine)");
        assert_eq!(check("169.254.169.254").map(Blocked::describe), Some("a link-local address"));
    }

    proptest! {
        /// An IPv4 address gets the same verdict in every IPv6 form that carries it.
        #[test]
        fn ipv4_inside_ipv6_gets_the_ipv4_verdict(bits in any::<u32>(), tail in any::<u16>()) {
            let v4 = Ipv4Addr::from(bits);
            let verdict = blocked_v4(v4);
            let mapped = v4.to_ipv6_mapped();
            let nat64 = Ipv6Addr::from((0x0064_FF9Bu128 << 96) | u128::from(bits));
            let six_to_four = Ipv6Addr::from((0x2002u128 << 112) | (u128::from(bits) << 80) | u128::from(tail));
            prop_assert_eq!(blocked(IpAddr::V6(mapped)), verdict);
            prop_assert_eq!(blocked(IpAddr::V6(nat64)), verdict);
            prop_assert_eq!(blocked(IpAddr::V6(six_to_four)), verdict);
            prop_assert_eq!(embedded_v4(mapped), Some(v4));
        }

        /// Every address of a blocked IPv4 range is blocked, with the range's reason.
        #[test]
        fn every_address_of_a_blocked_ipv4_range_is_blocked(pick in 0..V4.len(), host in any::<u32>()) {
            let (network, prefix, why) = V4[pick];
            let mask = if prefix == 32 { 0 } else { u32::MAX >> prefix };
            let ip = Ipv4Addr::from(network | (host & mask));
            // 255.255.255.255 is inside 240/4 too: the more specific range names it.
            let verdict = blocked_v4(ip);
            prop_assert!(verdict.is_some());
            if why != Blocked::Reserved || ip != Ipv4Addr::BROADCAST {
                prop_assert_eq!(verdict, Some(why));
            }
        }

        /// Outside the blocked ranges, every IPv4 address is public.
        #[test]
        fn ipv4_outside_every_range_is_reached(bits in any::<u32>()) {
            let in_any = V4.iter().any(|(network, prefix, _)| {
                in_range(u128::from(bits), 32, u128::from(*network), *prefix)
            });
            prop_assert_eq!(blocked_v4(Ipv4Addr::from(bits)).is_some(), in_any);
        }

        /// Private, link-local and multicast IPv6 are blocked wherever in their range.
        #[test]
        fn local_ipv6_ranges_are_blocked(host in any::<u128>()) {
            let within = |network: u128, prefix: u32| Ipv6Addr::from(network | (host >> prefix));
            prop_assert_eq!(blocked_v6(within(0xFC00u128 << 112, 7)), Some(Blocked::UniqueLocal));
            prop_assert_eq!(blocked_v6(within(0xFE80u128 << 112, 10)), Some(Blocked::LinkLocal));
            prop_assert_eq!(blocked_v6(within(0xFF00u128 << 112, 8)), Some(Blocked::Multicast));
        }

        /// Global unicast IPv6 outside the special ranges is reached.
        #[test]
        fn global_ipv6_is_reached(host in any::<u128>()) {
            // 2400::/6 holds no special range.
            let ip = Ipv6Addr::from((0x2400u128 << 112) | (host >> 6));
            prop_assert_eq!(blocked_v6(ip), None);
        }
    }
}
