//! Receiver URLs (docs/webhooks.md): any text is accepted or refused naming `webhookUrl`;
//! what is accepted is bounded, matches the contract's pattern, is its own normal form, and
//! never names a non-public address; ordinary public https URLs are accepted.

use std::{net::IpAddr, sync::LazyLock};

use ipnet::IpNet;
use posture_domain::{
    Error,
    webhook::{MAX_STORED_URL_LEN, TargetPolicy, URL_PATTERN, validate_url},
};
use proptest::prelude::*;
use regex::Regex;
use url::{Host, Url};

const STRICT: TargetPolicy = TargetPolicy {
    allow_private: false,
};

static PATTERN: LazyLock<Regex> = LazyLock::new(|| Regex::new(URL_PATTERN).unwrap());

/// Ranges no receiver may be in, written out here independently of `egress.rs`: loopback,
/// RFC 1918, link-local, CGNAT, "this network", multicast, reserved, broadcast, and their
/// IPv6 counterparts (with the IPv4-mapped and NAT64 forms of the IPv4 ones).
static NEVER: LazyLock<Vec<IpNet>> = LazyLock::new(|| {
    [
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "::ffff:0:0/96",
        "64:ff9b::/96",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    ]
    .iter()
    .map(|net| net.parse().unwrap())
    .collect()
});

fn host_ip(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        Host::Ipv4(ip) => Some(ip.into()),
        Host::Ipv6(ip) => Some(ip.into()),
        Host::Domain(_) => None,
    }
}

fn url_like() -> impl Strategy<Value = String> {
    let host = prop_oneof![
        "[a-zA-Z0-9.-]{0,30}",
        any::<[u8; 4]>().prop_map(|b| format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])),
        any::<u128>().prop_map(|n| format!("[{}]", std::net::Ipv6Addr::from(n))),
        "[0-9a-fA-Fx.:\\[\\]%]{0,30}",
        "\\PC{0,12}",
    ];
    (
        prop::sample::select(vec!["https://", "http://", "ftp://", "https:", "//", ""]),
        prop::option::of("[a-z:]{0,6}@"),
        host,
        prop::option::of(":[0-9]{0,6}"),
        "[ -~]{0,40}",
    )
        .prop_map(|(scheme, user, host, port, rest)| {
            format!(
                "{scheme}{}{host}{}{rest}",
                user.unwrap_or_default(),
                port.unwrap_or_default()
            )
        })
}

proptest! {
    #[test]
    fn any_text_is_accepted_or_refused_naming_webhook_url(
        text in prop_oneof![url_like(), any::<String>(), "[ -~]{2040,2060}"],
    ) {
        match validate_url(&text, STRICT) {
            Err(Error::Invalid { field, reason, .. }) => {
                prop_assert_eq!(field, "webhookUrl");
                prop_assert!(!reason.is_empty());
            }
            Err(other) => prop_assert!(false, "{text:?}: {other}"),
            Ok(stored) => {
                prop_assert!(stored.chars().count() <= MAX_STORED_URL_LEN);
                prop_assert!(PATTERN.is_match(&text), "{text:?} passed without the pattern");
                prop_assert!(stored.starts_with("https://"), "{stored}");
                let url = Url::parse(&stored).unwrap();
                prop_assert!(url.username().is_empty() && url.password().is_none());
                let port = url.port_or_known_default().unwrap_or(443);
                prop_assert!(port == 443 || port >= 1024, "{text:?} uses port {port}");
                if let Some(ip) = host_ip(&url) {
                    prop_assert!(
                        !NEVER.iter().any(|net| net.contains(&ip)),
                        "{text:?} reaches {ip}"
                    );
                }
                let again = validate_url(&stored, STRICT).ok();
                prop_assert_eq!(again, Some(stored), "the stored form is its own normal form");
            }
        }
    }

    #[test]
    fn a_public_https_url_with_a_dns_host_is_accepted_as_written(
        labels in prop::collection::vec("[a-z][a-z0-9-]{0,15}", 1..4),
        tld in "[a-z]{2,8}",
        // 443 (written out) or an unprivileged port: the ports a webhook may use.
        port in prop::option::of(prop_oneof![Just(443u16), 1024u16..]),
        path in prop::collection::vec("[A-Za-z0-9._~!$&()*+,;=:@-]{0,12}", 1..5),
        query in prop::option::of("[A-Za-z0-9._~=&-]{0,20}"),
    ) {
        // `localhost` is refused by name, and an `xn--` label must be valid Punycode.
        prop_assume!(tld != "localhost" && !labels.iter().any(|l| l.starts_with("xn--")));
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        let query = query.map(|q| format!("?{q}")).unwrap_or_default();
        let text = format!("https://{}.{tld}{port}/{}{query}", labels.join("."), path.join("/"));
        let stored = validate_url(&text, STRICT)
            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        // The WHATWG parser drops a default port and resolves `.` and `..` segments.
        let expected = Url::parse(&text).unwrap().to_string();
        prop_assert_eq!(stored, expected);
    }

    #[test]
    fn an_address_literal_is_accepted_exactly_when_it_is_public(octets in any::<[u8; 4]>()) {
        let ip = IpAddr::from(octets);
        let accepted = validate_url(&format!("https://{ip}/hook"), STRICT).is_ok();
        if NEVER.iter().any(|net| net.contains(&ip)) {
            prop_assert!(!accepted, "{ip} was accepted");
        }
        prop_assert_eq!(accepted, posture_domain::egress::is_public(ip));
    }
}
