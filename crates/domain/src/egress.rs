//! Where webhooks may not go: the address rules of the SSRF guard.
//!
//! A webhook target must be a public unicast address. Refused: loopback, unspecified,
//! private (RFC 1918, unique-local), link-local (which holds the cloud metadata endpoints
//! 169.254.169.254 and fd00:ec2::254), shared address space (100.64.0.0/10, holding
//! 100.100.100.200), multicast, broadcast, documentation, benchmarking, reserved and
//! IETF-protocol ranges. IPv4 embedded in IPv6 (mapped `::ffff:0:0/96`, NAT64
//! `64:ff9b::/96`) is judged as the IPv4 address. Creation refuses literal addresses in a
//! URL; the delivery worker applies the same rule to every address a host name resolves to.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::LazyLock,
};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

static FORBIDDEN_V4: LazyLock<Vec<Ipv4Net>> = LazyLock::new(|| {
    [
        "0.0.0.0/8",       // "this network"
        "10.0.0.0/8",      // private
        "100.64.0.0/10",   // shared address space (carrier-grade NAT, cloud metadata)
        "127.0.0.0/8",     // loopback
        "169.254.0.0/16",  // link-local, cloud metadata
        "172.16.0.0/12",   // private
        "192.0.0.0/24",    // IETF protocol assignments
        "192.0.2.0/24",    // documentation
        "192.88.99.0/24",  // 6to4 relay anycast
        "192.168.0.0/16",  // private
        "198.18.0.0/15",   // benchmarking
        "198.51.100.0/24", // documentation
        "203.0.113.0/24",  // documentation
        "224.0.0.0/4",     // multicast
        "240.0.0.0/4",     // reserved, broadcast
    ]
    .iter()
    .filter_map(|n| n.parse().ok())
    .collect()
});

static FORBIDDEN_V6: LazyLock<Vec<Ipv6Net>> = LazyLock::new(|| {
    [
        "::/128",        // unspecified
        "::1/128",       // loopback
        "100::/64",      // discard
        "2001::/23",     // IETF protocol assignments
        "2001:db8::/32", // documentation
        "2002::/16",     // 6to4
        "fc00::/7",      // unique local (private, AWS metadata fd00:ec2::254)
        "fe80::/10",     // link-local
        "ff00::/8",      // multicast
    ]
    .iter()
    .filter_map(|n| n.parse().ok())
    .collect()
});

static NAT64: LazyLock<Option<Ipv6Net>> = LazyLock::new(|| "64:ff9b::/96".parse().ok());

/// The IPv4 address embedded in an IPv4-mapped or NAT64 IPv6 address.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    if NAT64.as_ref().is_some_and(|net| net.contains(&v6)) {
        let octets = v6.octets();
        return Some(Ipv4Addr::new(
            octets[12], octets[13], octets[14], octets[15],
        ));
    }
    None
}

/// Whether a webhook may be sent to `ip`.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !FORBIDDEN_V4.iter().any(|net| net.contains(&v4)),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => is_public(IpAddr::V4(v4)),
            None => !FORBIDDEN_V6.iter().any(|net| net.contains(&v6)),
        },
    }
}

/// Every forbidden network, for documentation and error messages.
pub fn forbidden_networks() -> Vec<IpNet> {
    FORBIDDEN_V4
        .iter()
        .map(|n| IpNet::V4(*n))
        .chain(FORBIDDEN_V6.iter().map(|n| IpNet::V6(*n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(s: &str) -> bool {
        is_public(s.parse().unwrap())
    }

    #[test]
    fn loopback_private_link_local_and_metadata_addresses_are_refused() {
        for ip in [
            "127.0.0.1",
            "127.1.2.3",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "ff02::1",
            "2001:db8::1",
        ] {
            assert!(!public(ip), "{ip} must be refused");
        }
    }

    #[test]
    fn ipv4_embedded_in_ipv6_is_judged_as_ipv4() {
        assert!(!public("::ffff:127.0.0.1"));
        assert!(!public("::ffff:169.254.169.254"));
        assert!(!public("64:ff9b::a9fe:a9fe"));
        assert!(public("::ffff:8.8.8.8"));
        assert!(public("64:ff9b::808:808"));
    }

    #[test]
    fn public_unicast_addresses_are_allowed() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
        ] {
            assert!(public(ip), "{ip} is public");
        }
    }
}
