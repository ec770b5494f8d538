//! Which addresses a request may reach without the operator naming them:
//! public unicast only. Loopback, private, link-local, shared, reserved,
//! multicast and unspecified addresses (also when wrapped in an IPv6
//! address) are reached only through a grant that names the address, or
//! one that says `private = true`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The kind of network an address is on, when it is not the public
/// internet.
pub fn restricted_kind(addr: IpAddr) -> Option<&'static str> {
    match addr {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

fn v4_kind(a: Ipv4Addr) -> Option<&'static str> {
    let [b0, b1, ..] = a.octets();
    Some(if a.is_loopback() {
        "loopback"
    } else if a.is_private() {
        "private"
    } else if a.is_link_local() {
        "link-local"
    } else if a.is_unspecified() || b0 == 0 {
        "unspecified"
    } else if b0 == 100 && (64..128).contains(&b1) {
        "shared (carrier-grade NAT)"
    } else if a.is_multicast() || a.is_broadcast() || b0 >= 240 {
        "multicast or reserved"
    } else if b0 == 198 && (b1 == 18 || b1 == 19) {
        "benchmarking"
    } else if b0 == 192 && b1 == 0 && a.octets()[2] == 0 {
        "IETF protocol assignments"
    } else {
        return None;
    })
}

fn v6_kind(a: Ipv6Addr) -> Option<&'static str> {
    // An IPv4 address inside an IPv6 one reaches the IPv4 address.
    if let Some(v4) = a.to_ipv4_mapped() {
        return v4_kind(v4);
    }
    let seg = a.segments();
    // NAT64 (64:ff9b::/96) and IPv4-compatible (::a.b.c.d) forms.
    if (seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0; 4])
        || (seg[..6] == [0; 6] && seg[6] != 0)
    {
        let v4 = Ipv4Addr::new(
            (seg[6] >> 8) as u8,
            seg[6] as u8,
            (seg[7] >> 8) as u8,
            seg[7] as u8,
        );
        return v4_kind(v4).or(Some("IPv4-embedded"));
    }
    Some(if a.is_loopback() {
        "loopback"
    } else if a.is_unspecified() {
        "unspecified"
    } else if seg[0] & 0xfe00 == 0xfc00 {
        "private (unique local)"
    } else if seg[0] & 0xffc0 == 0xfe80 || seg[0] & 0xffc0 == 0xfec0 {
        "link-local"
    } else if a.is_multicast() {
        "multicast"
    } else if seg[0] == 0x2002 {
        // 6to4 embeds an IPv4 address in the next 32 bits.
        let v4 = Ipv4Addr::new(
            (seg[1] >> 8) as u8,
            seg[1] as u8,
            (seg[2] >> 8) as u8,
            seg[2] as u8,
        );
        return v4_kind(v4);
    } else if seg[0] == 0x2001 && seg[1] == 0x0db8 {
        "documentation"
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> Option<&'static str> {
        restricted_kind(text.parse().unwrap())
    }

    #[test]
    fn public_addresses_are_not_restricted() {
        for a in ["140.82.112.6", "8.8.8.8", "2606:4700::1111", "1.1.1.1"] {
            assert_eq!(kind(a), None, "{a}");
        }
    }

    #[test]
    fn every_way_back_to_the_machine_or_its_network_is_restricted() {
        for a in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            assert!(kind(a).is_some(), "{a} must be restricted");
        }
    }
}
