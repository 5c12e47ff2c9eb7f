//! Where webhooks may not go: the address rules of the SSRF guard.
//!
//! A webhook target must be a globally reachable unicast address:
//!
//! * **IPv6** is an allow-list: only global unicast (`2000::/3`) is considered at all, so
//!   loopback, unspecified, IPv4-compatible (`::/96`), unique-local, link-local, site-local
//!   (`fec0::/10`), multicast, discard and every future allocation outside `2000::/3` are
//!   refused. Inside it, every range of IANA's IPv6 Special-Purpose Address Registry is
//!   refused too: Teredo (`2001::/32`) and 6to4 (`2002::/16`), which embed IPv4 addresses
//!   (private ones included), the rest of the IETF protocol block `2001::/23`, documentation
//!   (`2001:db8::/32`, `3fff::/20`), AS112 and the SRv6 SID block.
//! * **IPv4** is a deny-list: every range of IANA's IPv4 Special-Purpose Address Registry
//!   (private, shared address space with the cloud metadata endpoints, loopback,
//!   link-local, documentation, benchmarking, reserved, broadcast, the protocol and anycast
//!   assignments), and multicast.
//! * **IPv4 carried in IPv6** is judged as the IPv4 address: IPv4-mapped (`::ffff:0:0/96`,
//!   a dual-stack socket connects to the IPv4 address) and the well-known NAT64 prefix
//!   (`64:ff9b::/96`, what DNS64 resolvers of IPv6-only clusters answer for IPv4-only
//!   receivers). The local-use NAT64 prefix `64:ff9b:1::/48` is refused: where its IPv4
//!   address sits depends on the network.
//!
//! Creation refuses literal addresses in a URL by these rules; the delivery worker applies
//! them to every address a host name resolves to and connects only to an address it checked.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::LazyLock,
};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// IANA's IPv4 Special-Purpose Address Registry, and multicast.
pub const SPECIAL_V4: &[(&str, &str)] = &[
    ("0.0.0.0/8", "\"this network\""),
    ("10.0.0.0/8", "private use"),
    (
        "100.64.0.0/10",
        "shared address space (carrier-grade NAT, cloud metadata)",
    ),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("172.16.0.0/12", "private use"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.0.0/29", "IPv4 service continuity prefix"),
    ("192.0.0.8/32", "IPv4 dummy address"),
    ("192.0.0.9/32", "Port Control Protocol anycast"),
    ("192.0.0.10/32", "TURN anycast"),
    ("192.0.0.170/32", "NAT64/DNS64 discovery"),
    ("192.0.0.171/32", "NAT64/DNS64 discovery"),
    ("192.0.2.0/24", "documentation (TEST-NET-1)"),
    ("192.31.196.0/24", "AS112-v4"),
    ("192.52.193.0/24", "AMT"),
    ("192.88.99.0/24", "6to4 relay anycast (deprecated)"),
    ("192.88.99.2/32", "6a44 relay anycast"),
    ("192.168.0.0/16", "private use"),
    ("192.175.48.0/24", "direct delegation AS112 service"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation (TEST-NET-3)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("255.255.255.255/32", "limited broadcast"),
];

/// IANA's IPv6 Special-Purpose Address Registry, with the deprecated ranges and multicast.
/// Ranges outside `2000::/3` are refused by the allow-list already; they are listed so that
/// the table (and its test) covers the whole registry.
pub const SPECIAL_V6: &[(&str, &str)] = &[
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "IPv4-compatible (deprecated)"),
    ("::ffff:0:0/96", "IPv4-mapped (judged as IPv4)"),
    ("64:ff9b::/96", "NAT64 well-known prefix (judged as IPv4)"),
    ("64:ff9b:1::/48", "NAT64 local use"),
    ("100::/64", "discard-only"),
    ("100:0:0:1::/64", "dummy IPv6 prefix"),
    ("2001::/23", "IETF protocol assignments"),
    ("2001::/32", "Teredo (embeds IPv4)"),
    ("2001:1::1/128", "Port Control Protocol anycast"),
    ("2001:1::2/128", "TURN anycast"),
    ("2001:1::3/128", "DNS-SD service registration anycast"),
    ("2001:2::/48", "benchmarking"),
    ("2001:3::/32", "AMT"),
    ("2001:4:112::/48", "AS112-v6"),
    ("2001:10::/28", "ORCHID (deprecated)"),
    ("2001:20::/28", "ORCHIDv2"),
    ("2001:30::/28", "drone remote ID entity tags"),
    ("2001:db8::/32", "documentation"),
    ("2002::/16", "6to4 (embeds IPv4)"),
    ("2620:4f:8000::/48", "direct delegation AS112 service"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "SRv6 SIDs"),
    ("fc00::/7", "unique local (AWS metadata fd00:ec2::254)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local (deprecated)"),
    ("ff00::/8", "multicast"),
];

fn parse<N: std::str::FromStr>(table: &[(&str, &str)]) -> Vec<N> {
    table
        .iter()
        .filter_map(|(net, _)| net.parse().ok())
        .collect()
}

static FORBIDDEN_V4: LazyLock<Vec<Ipv4Net>> = LazyLock::new(|| parse(SPECIAL_V4));
static FORBIDDEN_V6: LazyLock<Vec<Ipv6Net>> = LazyLock::new(|| parse(SPECIAL_V6));

/// Global unicast: the only IPv6 addresses a webhook may reach (minus the special ranges).
const GLOBAL_UNICAST: Ipv6Net = match Ipv6Net::new(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3) {
    Ok(net) => net,
    Err(_) => panic!("2000::/3 is a network"),
};

/// The NAT64 well-known prefix `64:ff9b::/96`.
const NAT64: Ipv6Net = match Ipv6Net::new(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96) {
    Ok(net) => net,
    Err(_) => panic!("64:ff9b::/96 is a network"),
};

/// The IPv4 address a connection to `v6` reaches, when it is IPv4-mapped or NAT64.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    NAT64.contains(&v6).then(|| {
        let o = v6.octets();
        Ipv4Addr::new(o[12], o[13], o[14], o[15])
    })
}

/// Whether a webhook may be sent to `ip`.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !FORBIDDEN_V4.iter().any(|net| net.contains(&v4)),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => is_public(IpAddr::V4(v4)),
            None => {
                GLOBAL_UNICAST.contains(&v6) && !FORBIDDEN_V6.iter().any(|net| net.contains(&v6))
            }
        },
    }
}

/// Whether a webhook may be sent to `port`: 443, or an unprivileged port (1024 and up). The
/// privileged ports below 1024 other than 443 are services (SSH, SMTP, LDAP, SMB, ...), not
/// webhook receivers; refusing them keeps a receiver URL from probing them.
pub fn port_allowed(port: u16) -> bool {
    port == 443 || port >= 1024
}

/// Where an outbound client may connect: public addresses always; with `allow_private`
/// (development and tests) anything; otherwise also the networks an operator listed (an
/// identity provider inside the company's network).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    pub allow_private: bool,
    pub allowed_networks: Vec<IpNet>,
}

impl EgressPolicy {
    /// Public addresses only (webhook receivers in production).
    pub fn public_only() -> Self {
        Self::default()
    }

    /// Whether the client may connect to `ip`.
    pub fn permits(&self, ip: IpAddr) -> bool {
        self.allow_private
            || is_public(ip)
            || self.allowed_networks.iter().any(|net| net.contains(&ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(s: &str) -> bool {
        is_public(s.parse().unwrap())
    }

    /// The first, a middle and the last address of a network.
    fn samples(net: IpNet) -> Vec<IpAddr> {
        let first = net.network();
        let last = net.broadcast();
        let middle = match (first, last) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                IpAddr::V4(((u32::from(a) / 2) + (u32::from(b) / 2)).into())
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                IpAddr::V6(((u128::from(a) / 2) + (u128::from(b) / 2)).into())
            }
            _ => first,
        };
        vec![first, middle, last]
    }

    #[test]
    fn every_entry_of_the_special_purpose_registries_is_refused() {
        let judged_as_v4 = ["::ffff:0:0/96", "64:ff9b::/96"];
        let mut checked = 0;
        for (net, name) in SPECIAL_V4.iter().chain(SPECIAL_V6) {
            if judged_as_v4.contains(net) {
                continue;
            }
            let parsed: IpNet = net.parse().unwrap_or_else(|_| panic!("{net} parses"));
            for ip in samples(parsed) {
                assert!(!is_public(ip), "{ip} ({name}, {net}) must be refused");
                checked += 1;
            }
        }
        assert_eq!(
            FORBIDDEN_V4.len(),
            SPECIAL_V4.len(),
            "every v4 entry parses"
        );
        assert_eq!(
            FORBIDDEN_V6.len(),
            SPECIAL_V6.len(),
            "every v6 entry parses"
        );
        assert!(checked > 150, "{checked}");
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
    fn ipv4_hidden_in_ipv6_forms_is_refused() {
        for ip in [
            "::127.0.0.1",                          // IPv4-compatible
            "::7f00:1",                             // the same, written in hex
            "::a9fe:a9fe",                          // IPv4-compatible metadata
            "64:ff9b:1::a00:1",                     // local-use NAT64
            "fec0::1",                              // site-local
            "2002:a00:1::1",                        // 6to4 of 10.0.0.1
            "2002:7f00:1::1",                       // 6to4 of 127.0.0.1
            "2002:808:808::1", // 6to4 of a public address: the range is refused
            "2001:0:4136:e378:8000:63bf:f5ff:fffe", // Teredo of 10.0.0.1
        ] {
            assert!(!public(ip), "{ip} must be refused");
        }
    }

    #[test]
    fn ipv4_mapped_and_nat64_are_judged_as_the_ipv4_they_reach() {
        assert!(!public("::ffff:127.0.0.1"));
        assert!(!public("::ffff:169.254.169.254"));
        assert!(!public("64:ff9b::a9fe:a9fe"));
        assert!(!public("64:ff9b::a00:1"));
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
            "192.0.1.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:82b::200e",
            "2001:4860:4860::8888",
        ] {
            assert!(public(ip), "{ip} is public");
        }
    }

    #[test]
    fn nothing_outside_global_unicast_is_allowed() {
        for ip in ["4000::1", "6000::1", "e000::1", "1fff::1", "::2"] {
            assert!(!public(ip), "{ip} is outside 2000::/3");
        }
    }
}
