//! Where a credential (a key or an OAuth client) may be used from: its allow-list of IPv4
//! and IPv6 networks. Empty: from anywhere.
//!
//! Networks are kept in canonical form: the network's own address (`10.1.2.3/8` is
//! `10.0.0.0/8`), a single address as `/32` or `/128`, and an IPv4-mapped IPv6 network
//! (`::ffff:10.0.0.0/104`) as the IPv4 network it names. An address is compared the same
//! way ([`IpAddr::to_canonical`]): a client reaching a dual-stack listener as
//! `::ffff:203.0.113.7` is `203.0.113.7`, so neither spelling passes where the other is
//! refused.

use std::{fmt, net::IpAddr, sync::Arc};

use ipnet::{IpNet, Ipv4Net};

use crate::error::Error;

/// Most networks one credential's allow-list may hold.
pub const MAX_ALLOW_LIST_LEN: usize = 32;

/// The networks a credential may be used from; empty allows every address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList(Arc<[IpNet]>);

impl AllowList {
    /// Parses networks (`203.0.113.0/24`, `2001:db8::/32`) or single addresses, as an
    /// operator or an admin types them; duplicates are kept once, in order.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, Error> {
        let mut networks: Vec<IpNet> = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            if entry.is_empty() {
                continue;
            }
            let network = parse_network(entry)?;
            if !networks.contains(&network) {
                networks.push(network);
            }
        }
        if networks.len() > MAX_ALLOW_LIST_LEN {
            return Err(Error::invalid(
                "allowFrom",
                format!("at most {MAX_ALLOW_LIST_LEN} networks per credential"),
            ));
        }
        Ok(Self(networks.into()))
    }

    /// The list as stored: the canonical text of each network. Corrupt entries are an
    /// error of the store's, not the caller's.
    pub fn from_stored(entries: &[String]) -> Result<Self, Error> {
        Self::parse(entries)
    }

    /// Whether `address` may use the credential.
    pub fn permits(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.0.is_empty() || self.0.iter().any(|net| net.contains(&address))
    }

    /// Whether every address may use the credential.
    pub fn is_open(&self) -> bool {
        self.0.is_empty()
    }

    pub fn networks(&self) -> &[IpNet] {
        &self.0
    }

    /// Each network's canonical text, for storage and display.
    pub fn to_strings(&self) -> Vec<String> {
        self.0.iter().map(IpNet::to_string).collect()
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("any address");
        }
        for (i, net) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{net}")?;
        }
        Ok(())
    }
}

/// One network or address, in canonical form.
fn parse_network(entry: &str) -> Result<IpNet, Error> {
    let refuse = || {
        Error::invalid(
            "allowFrom",
            format!(
                "{:?} is not an IP address or CIDR network (e.g. 203.0.113.0/24, 2001:db8::/32)",
                crate::outside::one_line(entry, 64)
            ),
        )
    };
    let network = match entry.parse::<IpNet>() {
        Ok(network) => network,
        Err(_) => IpNet::from(entry.parse::<IpAddr>().map_err(|_| refuse())?),
    };
    Ok(canonical(network.trunc()))
}

/// An IPv4-mapped IPv6 network (`::ffff:0:0/96` and within) as the IPv4 network it names.
fn canonical(network: IpNet) -> IpNet {
    if let IpNet::V6(v6) = network
        && let Some(v4) = v6.addr().to_ipv4_mapped()
        && v6.prefix_len() >= 96
        && let Ok(mapped) = Ipv4Net::new(v4, v6.prefix_len() - 96)
    {
        return IpNet::V4(mapped.trunc());
    }
    network
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_empty_list_permits_every_address() {
        let open = AllowList::parse::<&str>(&[]).unwrap();
        assert!(open.is_open());
        assert!(open.permits(ip("198.51.100.1")));
        assert!(open.permits(ip("2001:db8::1")));
        assert_eq!(open.to_string(), "any address");
    }

    #[test]
    fn networks_and_addresses_are_kept_canonical() {
        let list = AllowList::parse(&[
            "203.0.113.77/24",
            " 198.51.100.7 ",
            "2001:db8:1::5/48",
            "::1",
            "203.0.113.0/24",
            "",
        ])
        .unwrap();
        assert_eq!(
            list.to_strings(),
            [
                "203.0.113.0/24",
                "198.51.100.7/32",
                "2001:db8:1::/48",
                "::1/128"
            ]
        );
        assert!(list.permits(ip("203.0.113.200")));
        assert!(list.permits(ip("198.51.100.7")));
        assert!(!list.permits(ip("198.51.100.8")));
        assert!(list.permits(ip("2001:db8:1:ffff::1")));
        assert!(!list.permits(ip("2001:db8:2::1")));
    }

    #[test]
    fn ipv4_mapped_ipv6_is_neither_a_bypass_nor_a_refusal() {
        let v4 = AllowList::parse(&["203.0.113.0/24"]).unwrap();
        assert!(v4.permits(ip("::ffff:203.0.113.9")));
        assert!(!v4.permits(ip("::ffff:198.51.100.9")));
        // A mapped network is the IPv4 network it names, whichever way the address comes.
        let mapped = AllowList::parse(&["::ffff:203.0.113.0/120"]).unwrap();
        assert_eq!(mapped.to_strings(), ["203.0.113.0/24"]);
        assert!(mapped.permits(ip("203.0.113.9")));
        assert!(mapped.permits(ip("::ffff:203.0.113.9")));
        assert!(!mapped.permits(ip("::ffff:198.51.100.9")));
        // The IPv4-compatible (deprecated) form names no IPv4 address and passes nothing.
        assert!(!v4.permits(ip("::203.0.113.9")));
    }

    #[test]
    fn bad_entries_and_long_lists_are_refused_with_the_field() {
        for bad in [
            "10.0.0.0/33",
            "example.com",
            "10.0.0",
            "10.0.0.0/8/8",
            "\u{202e}1.2.3.4",
        ] {
            let err = AllowList::parse(&[bad]).unwrap_err();
            assert!(err.to_string().contains("allowFrom"), "{bad}: {err}");
            assert!(!err.to_string().contains('\u{202e}'));
        }
        let many: Vec<String> = (0..=MAX_ALLOW_LIST_LEN)
            .map(|i| format!("10.0.{i}.0/24"))
            .collect();
        assert!(AllowList::parse(&many).is_err());
        assert!(AllowList::parse(&many[..MAX_ALLOW_LIST_LEN]).is_ok());
    }
}
