//! Where the service is and the credential to show it: `POSTURE_URL`, and `POSTURE_API_KEY`
//! or an OAuth client (`POSTURE_CLIENT_ID` with `POSTURE_CLIENT_SECRET` or
//! `POSTURE_CLIENT_KEY_FILE`, whose tokens `tokens.rs` fetches); https but for a loopback
//! host.

use std::net::IpAddr;

use url::Url;

pub use crate::credential::{Credential, Proof, SigningKey};

/// Where the service is and the credential to show it.
#[derive(Clone)]
pub struct Target {
    /// The service's base URL, ending in `/`.
    pub base: Url,
    pub(crate) credential: Credential,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// Why `POSTURE_URL` or `POSTURE_API_KEY` cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("POSTURE_URL is not set: export POSTURE_URL=https://posture.example.com")]
    NoUrl,
    #[error("POSTURE_URL is not a URL ({0}): it looks like https://posture.example.com")]
    BadUrl(String),
    #[error(
        "POSTURE_URL must be https:// (plain http is accepted only for localhost, where no \
         network sees the key)"
    )]
    NotHttps,
    #[error(
        "POSTURE_API_KEY is not set: export it in your shell (a key is never a flag, which \
         would stay in the shell's history)"
    )]
    NoKey,
    #[error("POSTURE_API_KEY is not a posture key: keys begin with svc_")]
    BadKey,
    #[error(
        "both POSTURE_API_KEY and POSTURE_CLIENT_ID are set: unset one (a key, or an OAuth \
         client)"
    )]
    Both,
    #[error("POSTURE_CLIENT_ID is not a posture client id: client ids begin with pci_")]
    BadClientId,
    #[error(
        "POSTURE_CLIENT_ID is set without its proof: export POSTURE_CLIENT_SECRET, or \
         POSTURE_CLIENT_KEY_FILE naming its private key's PEM file (not both)"
    )]
    NoProof,
    #[error("POSTURE_CLIENT_SECRET is not a posture client secret: secrets begin with pcs_")]
    BadSecret,
    #[error("POSTURE_CLIENT_KEY_FILE: {0}")]
    BadKeyFile(String),
}

impl Target {
    /// Checks a base URL and a key: https (or http to a loopback host), a `svc_` key.
    pub fn new(url: Option<&str>, key: Option<&str>) -> Result<Self, TargetError> {
        let url = url
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .ok_or(TargetError::NoUrl)?;
        let mut base = Url::parse(url).map_err(|e| TargetError::BadUrl(e.to_string()))?;
        let loopback = match base.host() {
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
            None => return Err(TargetError::BadUrl("no host".into())),
        };
        match base.scheme() {
            "https" => {}
            "http" if loopback => {}
            "http" => return Err(TargetError::NotHttps),
            other => return Err(TargetError::BadUrl(format!("scheme {other}"))),
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        base.set_query(None);
        base.set_fragment(None);
        let key = key
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or(TargetError::NoKey)?;
        if !well_formed(key, "svc_") {
            return Err(TargetError::BadKey);
        }
        Ok(Self {
            base,
            credential: Credential::Key(key.to_owned()),
        })
    }

    /// A target reached with an OAuth client's tokens.
    pub fn with_client(url: Option<&str>, id: &str, proof: Proof) -> Result<Self, TargetError> {
        let mut target = Self::new(url, Some("svc_placeholder"))?;
        if !well_formed(id.trim(), "pci_") {
            return Err(TargetError::BadClientId);
        }
        if let Proof::Secret(secret) = &proof
            && !well_formed(secret, "pcs_")
        {
            return Err(TargetError::BadSecret);
        }
        target.credential = Credential::Client {
            id: id.trim().to_owned(),
            proof,
        };
        Ok(target)
    }

    /// From the environment: `POSTURE_URL`, and `POSTURE_API_KEY` or `POSTURE_CLIENT_ID`
    /// with `POSTURE_CLIENT_SECRET` or `POSTURE_CLIENT_KEY_FILE`.
    pub fn from_env() -> Result<Self, TargetError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let url = var("POSTURE_URL");
        let Some(client) = var("POSTURE_CLIENT_ID") else {
            return Self::new(url.as_deref(), var("POSTURE_API_KEY").as_deref());
        };
        if var("POSTURE_API_KEY").is_some() {
            return Err(TargetError::Both);
        }
        let proof = match (var("POSTURE_CLIENT_SECRET"), var("POSTURE_CLIENT_KEY_FILE")) {
            (Some(secret), None) => Proof::Secret(secret.trim().to_owned()),
            (None, Some(file)) => {
                let pem = std::fs::read_to_string(file.trim())
                    .map_err(|e| TargetError::BadKeyFile(format!("cannot read {file}: {e}")))?;
                Proof::PrivateKey(SigningKey::from_pem(&pem).map_err(TargetError::BadKeyFile)?)
            }
            _ => return Err(TargetError::NoProof),
        };
        Self::with_client(url.as_deref(), &client, proof)
    }

    /// The token endpoint (`<base>oauth/token`).
    pub fn token_url(&self) -> Url {
        let mut url = self.base.clone();
        url.set_path(&format!("{}oauth/token", self.base.path()));
        url
    }

    /// The URL of an API path (`findings` → `<base>/api/v1/findings`).
    pub fn api_url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        url.set_path(&format!("{}api/v1/{path}", self.base.path()));
        url
    }
}

/// Whether `text` has `prefix`, is at most 256 printable characters, and has no space.
fn well_formed(text: &str, prefix: &str) -> bool {
    text.starts_with(prefix) && text.len() <= 256 && text.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_must_be_https_but_for_loopback_and_the_key_a_posture_key() {
        let ok = |url: &str| Target::new(Some(url), Some("svc_abc")).map(|t| t.base.to_string());
        assert_eq!(
            ok("https://posture.example.com").unwrap(),
            "https://posture.example.com/"
        );
        assert_eq!(
            ok("https://example.com/posture?x=1").unwrap(),
            "https://example.com/posture/"
        );
        assert!(ok("http://127.0.0.1:8080").is_ok());
        assert!(ok("http://[::1]:8080").is_ok());
        assert!(ok("http://LOCALHOST:8080").is_ok());
        assert_eq!(ok("http://posture.example.com"), Err(TargetError::NotHttps));
        assert_eq!(ok("http://10.0.0.1"), Err(TargetError::NotHttps));
        assert!(matches!(ok("ftp://x"), Err(TargetError::BadUrl(_))));
        assert!(matches!(
            ok("posture.example.com"),
            Err(TargetError::BadUrl(_))
        ));
        assert_eq!(ok("  ").map(|_| ()), Err(TargetError::NoUrl));
        let key = |k: Option<&str>| Target::new(Some("https://x"), k).map(|_| ());
        assert_eq!(key(None), Err(TargetError::NoKey));
        assert_eq!(key(Some("")), Err(TargetError::NoKey));
        assert_eq!(key(Some("sk_live_x")), Err(TargetError::BadKey));
        assert_eq!(key(Some("svc_a b")), Err(TargetError::BadKey));
    }

    #[test]
    fn a_client_needs_a_client_id_and_a_secret_of_their_forms() {
        let client = |id: &str, secret: &str| {
            Target::with_client(Some("https://x"), id, Proof::Secret(secret.into())).map(|_| ())
        };
        assert_eq!(client("pci_abc", "pcs_def"), Ok(()));
        assert_eq!(client("svc_abc", "pcs_def"), Err(TargetError::BadClientId));
        assert_eq!(client("pci_abc", "svc_def"), Err(TargetError::BadSecret));
        assert_eq!(client("pci_abc", "pcs_a b"), Err(TargetError::BadSecret));
    }

    #[test]
    fn api_paths_are_under_the_base_and_the_key_is_never_shown() {
        let target = Target::new(Some("https://example.com/posture"), Some("svc_secret")).unwrap();
        assert_eq!(
            target.api_url("findings").as_str(),
            "https://example.com/posture/api/v1/findings"
        );
        assert_eq!(
            target.token_url().as_str(),
            "https://example.com/posture/oauth/token"
        );
        assert!(!format!("{target:?}").contains("svc_secret"));
    }
}
