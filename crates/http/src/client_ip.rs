//! The client address of a request, for the per-address rate limit.
//!
//! The TCP peer is the client unless it is one of the configured trusted proxies
//! (`POSTURE_TRUSTED_PROXIES`). Then `X-Forwarded-For` is read from the right, skipping
//! trusted proxies: the first address that is not one is the client (addresses further left
//! were written by the client itself and cannot be trusted). IPv6 clients are grouped by
//! their /64, the unit one subscriber usually holds.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv6Net};

/// A trusted proxy that is neither an address nor a network.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not an IP address or CIDR network")]
pub struct NotANetwork(String);

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(networks: Vec<IpNet>) -> Self {
        Self(networks)
    }

    /// Parses `10.0.0.0/8,192.168.1.7` (single addresses are /32 or /128).
    pub fn parse(list: &str) -> Result<Self, NotANetwork> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| NotANetwork(s.to_owned()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Whether a request from `ip` came through one of these proxies, so its forwarding
    /// headers (`X-Forwarded-*`, `Forwarded`) may be believed.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request from `peer` carrying these `X-Forwarded-For` values.
    pub fn client(&self, peer: IpAddr, forwarded_for: &[&str]) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        for entry in forwarded_for
            .iter()
            .rev()
            .flat_map(|value| value.rsplit(','))
        {
            // An address, or an address with its port (`198.51.100.20:4711`,
            // `[2001:db8::1]:4711`), as some proxies write it.
            let entry = entry.trim();
            let parsed = entry.parse::<IpAddr>().or_else(|_| {
                entry
                    .parse::<std::net::SocketAddr>()
                    .map(|address| address.ip())
            });
            match parsed {
                Ok(ip) => {
                    client = ip.to_canonical();
                    if !self.trusts(client) {
                        return client;
                    }
                }
                // A malformed entry: stop at the last address we could read.
                Err(_) => return client,
            }
        }
        client
    }
}

/// The scheme and host (with port) the client used to reach the service: what a trusted
/// proxy forwarded (`Forwarded`, `X-Forwarded-Proto`, `X-Forwarded-Host`) when the request
/// came through one, else the connection's own (TLS or not, the `Host` header). From anyone
/// else forwarding headers are the client's own words and are not believed.
pub fn request_origin(req: &actix_web::HttpRequest, proxies: &TrustedProxies) -> (String, String) {
    if req
        .peer_addr()
        .is_some_and(|peer| proxies.trusts(peer.ip()))
    {
        let info = req.connection_info();
        return (info.scheme().to_owned(), info.host().to_owned());
    }
    let scheme = if req.app_config().secure() {
        "https"
    } else {
        "http"
    };
    let host = req
        .headers()
        .get(actix_web::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_else(|| req.app_config().host().to_owned());
    (scheme.to_owned(), host)
}

/// The address of a request's client: its peer, or behind the trusted proxies the one
/// `X-Forwarded-For` gives; `None` without a peer address (a test's request).
pub fn request_client(req: &actix_web::HttpRequest, proxies: &TrustedProxies) -> Option<IpAddr> {
    let peer = req.peer_addr()?.ip();
    if !proxies.trusts(peer) {
        return Some(peer.to_canonical());
    }
    let forwarded: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .collect();
    Some(proxies.client(peer, &forwarded))
}

/// The rate-limit bucket name of a request's client: its address behind the trusted proxies
/// (from `X-Forwarded-For`), or `unknown` without a peer address.
pub fn request_bucket_name(req: &actix_web::HttpRequest, proxies: &TrustedProxies) -> String {
    request_client(req, proxies).map_or_else(|| "unknown".to_owned(), bucket_name)
}

/// The rate-limit bucket name of a client address: IPv4 as is, IPv6 by its /64.
pub fn bucket_name(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            Ipv6Net::new(v6, 64).map_or_else(|_| v6.to_string(), |n| n.trunc().to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client_whatever_the_headers_say() {
        let proxies = TrustedProxies::default();
        assert_eq!(
            proxies.client(ip("203.0.113.9"), &["198.51.100.1"]),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn behind_a_trusted_proxy_the_rightmost_untrusted_address_is_the_client() {
        let proxies = TrustedProxies::parse("10.0.0.0/8, 192.168.1.7").unwrap();
        // The client claims 1.1.1.1; the proxy appended the real address.
        assert_eq!(
            proxies.client(ip("10.0.0.5"), &["1.1.1.1, 198.51.100.20"]),
            ip("198.51.100.20")
        );
        // Two trusted hops.
        assert_eq!(
            proxies.client(ip("10.0.0.5"), &["198.51.100.20, 192.168.1.7"]),
            ip("198.51.100.20")
        );
        // Several headers count as one list, in order.
        assert_eq!(
            proxies.client(ip("10.0.0.5"), &["198.51.100.20", "10.1.1.1"]),
            ip("198.51.100.20")
        );
        // An entry with its port names its address.
        assert_eq!(
            proxies.client(ip("10.0.0.5"), &["198.51.100.20:4711"]),
            ip("198.51.100.20")
        );
        assert_eq!(
            proxies.client(ip("10.0.0.5"), &["[2001:db8::1]:4711, 10.1.1.1:80"]),
            ip("2001:db8::1")
        );
    }

    #[test]
    fn a_trusted_proxy_without_the_header_is_itself_the_client() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert_eq!(proxies.client(ip("10.0.0.5"), &[]), ip("10.0.0.5"));
        assert_eq!(proxies.client(ip("10.0.0.5"), &["garbage"]), ip("10.0.0.5"));
    }

    #[test]
    fn ipv6_clients_share_a_bucket_per_64_and_mapped_ipv4_is_ipv4() {
        assert_eq!(bucket_name(ip("2001:db8:1:2:aaaa::1")), "2001:db8:1:2::/64");
        assert_eq!(bucket_name(ip("2001:db8:1:2:bbbb::9")), "2001:db8:1:2::/64");
        let proxies = TrustedProxies::default();
        assert_eq!(proxies.client(ip("::ffff:192.0.2.1"), &[]), ip("192.0.2.1"));
    }

    #[test]
    fn bad_proxy_lists_are_refused() {
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("proxy.internal").is_err());
        assert!(TrustedProxies::parse("").unwrap().0.is_empty());
    }
}
