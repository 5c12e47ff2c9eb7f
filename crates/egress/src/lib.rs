//! The one way out to hosts that customers control — webhook receivers and the customers'
//! identity providers: every outbound client posture builds for them comes
//! from here.
//!
//! * Host names are resolved by [`GuardedResolver`], which keeps only the addresses the
//!   [`EgressPolicy`] permits (public ones, or an operator's listed networks) and fails when
//!   none is left; the connection is made to the addresses it returned — there is no second
//!   lookup for a DNS rebinding to exploit.
//! * Literal addresses in a URL do not go through a resolver: [`check_url`] checks them,
//!   with the scheme and the port.
//! * Redirects are never followed, proxies from the environment are ignored (they would
//!   resolve the name themselves), and every request has a timeout.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use posture_domain::egress::{EgressPolicy, port_allowed};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// A host none of whose addresses the policy permits.
#[derive(Debug, thiserror::Error)]
#[error("{0} resolves only to addresses posture may not connect to")]
pub struct RefusedTarget(String);

/// Resolves through the system resolver and keeps only the addresses the policy permits.
struct GuardedResolver(EgressPolicy);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|a| policy.permits(a.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(
                    Box::new(RefusedTarget(host)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// Why a URL is not requested.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlRefused {
    #[error("invalid URL: {0}")]
    Invalid(url::ParseError),
    #[error("refused: the URL does not use https")]
    NotHttps,
    #[error("refused: the URL's address is not one posture may connect to")]
    NotPermitted,
    #[error("refused: port {0} (443, or 1024 to 65535)")]
    Port(u16),
}

/// Checks what a resolver cannot: the scheme (https, unless `http` is allowed), the port,
/// and a literal address.
pub fn check_url(url: &str, policy: &EgressPolicy, http: bool) -> Result<Url, UrlRefused> {
    let url = Url::parse(url).map_err(UrlRefused::Invalid)?;
    if policy.allow_private {
        return Ok(url);
    }
    match url.scheme() {
        "https" => {}
        "http" if http => {}
        _ => return Err(UrlRefused::NotHttps),
    }
    if let Some(port) = url.port()
        && !port_allowed(port)
    {
        return Err(UrlRefused::Port(port));
    }
    let literal = match url.host() {
        Some(Host::Ipv4(ip)) => Some(ip.into()),
        Some(Host::Ipv6(ip)) => Some(ip.into()),
        _ => None,
    };
    if literal.is_some_and(|ip| !policy.permits(ip)) {
        return Err(UrlRefused::NotPermitted);
    }
    Ok(url)
}

/// A client that connects only where `policy` permits, follows no redirect, ignores the
/// environment's proxies and gives each request `timeout`.
pub fn client(
    policy: EgressPolicy,
    timeout: Duration,
    user_agent: &str,
) -> Result<reqwest::Client, reqwest::Error> {
    // reqwest is built without a default TLS crypto provider here: use ring's (installing
    // it again is a no-op).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver(policy)))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(user_agent)
        .build()
}

/// Whether the guard refused the request (a name resolving only to refused addresses).
pub fn is_refused(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if cause.downcast_ref::<RefusedTarget>().is_some() {
            return true;
        }
        source = cause.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_addresses_schemes_and_ports_are_checked_by_the_policy() {
        let strict = EgressPolicy::public_only();
        assert_eq!(
            check_url("https://127.0.0.1/x", &strict, false),
            Err(UrlRefused::NotPermitted)
        );
        assert_eq!(
            check_url("https://[::ffff:10.0.0.1]/x", &strict, false),
            Err(UrlRefused::NotPermitted)
        );
        assert_eq!(
            check_url("http://hooks.example.com/x", &strict, false),
            Err(UrlRefused::NotHttps)
        );
        assert_eq!(
            check_url("https://hooks.example.com:22/x", &strict, false),
            Err(UrlRefused::Port(22))
        );
        assert!(check_url("https://hooks.example.com:8443/x", &strict, false).is_ok());
        assert!(check_url("https://hooks.example.com/x", &strict, false).is_ok());
        let listed = EgressPolicy {
            allow_private: false,
            allowed_networks: vec!["10.1.0.0/16".parse().unwrap()],
        };
        assert!(check_url("https://10.1.2.3/x", &listed, false).is_ok());
        assert_eq!(
            check_url("https://10.2.0.1/x", &listed, false),
            Err(UrlRefused::NotPermitted)
        );
        let dev = EgressPolicy {
            allow_private: true,
            allowed_networks: Vec::new(),
        };
        assert!(check_url("http://127.0.0.1:9/x", &dev, false).is_ok());
    }

    #[tokio::test]
    async fn a_name_resolving_only_to_refused_addresses_is_refused_before_connecting() {
        let client = client(EgressPolicy::public_only(), Duration::from_secs(2), "test").unwrap();
        let error = client
            .get("https://localhost:8443/")
            .send()
            .await
            .unwrap_err();
        assert!(is_refused(&error), "{error:?}");
    }
}
