//! A customer's identity provider as the operator sets it: the issuer, the client, the name
//! the sign-in button shows, and the rule that says who is an admin.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::Provisioning;
use crate::{error::Error, ids::CustomerId};

/// Longest issuer URL, client id or claim value accepted in a configuration.
pub const MAX_SSO_FIELD_LEN: usize = 1024;

/// Most admin values or subjects in one rule.
pub const MAX_ADMIN_ENTRIES: usize = 100;

/// Who among the provider's users is an admin of the customer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AdminRule {
    /// A claim of the ID token (e.g. `groups`, `roles`) ...
    pub claim: Option<String>,
    /// ... holding one of these values (the claim may be a string or an array of strings).
    pub values: Vec<String>,
    /// Subjects (`sub`) who are admins whatever their claims.
    pub subjects: Vec<String>,
}

impl AdminRule {
    /// Checks the rule admits someone and its entries are bounded.
    pub fn validate(&self) -> Result<(), Error> {
        if self.values.is_empty() && self.subjects.is_empty() {
            return Err(Error::invalid(
                "admins",
                "name the admins: an admin claim with its values, or admin subjects",
            ));
        }
        if self.claim.is_some() == self.values.is_empty() {
            return Err(Error::invalid(
                "adminClaim",
                "an admin claim needs at least one admin value, and values need a claim",
            ));
        }
        if self.values.len() > MAX_ADMIN_ENTRIES || self.subjects.len() > MAX_ADMIN_ENTRIES {
            return Err(Error::invalid(
                "admins",
                format!(
                    "at most {MAX_ADMIN_ENTRIES} admin values and {MAX_ADMIN_ENTRIES} subjects"
                ),
            ));
        }
        let fields = self.claim.iter().chain(&self.values).chain(&self.subjects);
        for field in fields {
            if field.is_empty() || field.len() > MAX_SSO_FIELD_LEN {
                return Err(Error::invalid(
                    "admins",
                    format!(
                        "admin claims, values and subjects have 1 to {MAX_SSO_FIELD_LEN} bytes"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether the user with this subject and these ID token claims is an admin.
    pub fn admits(&self, subject: &str, claims: &serde_json::Map<String, Value>) -> bool {
        if self.subjects.iter().any(|s| s == subject) {
            return true;
        }
        let Some(claim) = &self.claim else {
            return false;
        };
        let held = |v: &Value| {
            v.as_str()
                .is_some_and(|v| self.values.iter().any(|a| a == v))
        };
        match claims.get(claim) {
            Some(Value::Array(items)) => items.iter().any(held),
            Some(value) => held(value),
            None => false,
        }
    }
}

/// A customer's identity provider, as the operator configured it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SsoConfig {
    pub customer_id: CustomerId,
    /// The issuer URL (discovery is `<issuer>/.well-known/openid-configuration`).
    pub issuer: String,
    pub client_id: String,
    /// What the sign-in button calls the provider ("Contoso Entra ID"); `None`: the
    /// issuer's host.
    pub display_name: Option<String>,
    /// Who may sign in when the admin rule is not used: provisioned users (and admins by
    /// group) only. `None`: provisioning is not required.
    pub provisioning: Option<Provisioning>,
    pub admins: AdminRule,
    pub updated_at: DateTime<Utc>,
}

/// Longest provider display name, in characters.
pub const MAX_DISPLAY_NAME_CHARS: usize = 100;

impl SsoConfig {
    /// The provider as people see it named: its display name, else the issuer's host (and
    /// port).
    pub fn provider_name(&self) -> String {
        match &self.display_name {
            Some(name) => name.clone(),
            None => issuer_host(&self.issuer),
        }
    }
}

/// The host (and port, when not the scheme's default) of an issuer URL; the URL itself
/// when it has none.
pub fn issuer_host(issuer: &str) -> String {
    match url::Url::parse(issuer) {
        Ok(url) => match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => issuer.to_owned(),
        },
        Err(_) => issuer.to_owned(),
    }
}

/// Checks a provider display name: 1 to [`MAX_DISPLAY_NAME_CHARS`] characters, no control
/// characters, not only blanks.
pub fn validate_display_name(name: &str) -> Result<(), Error> {
    let invalid = |reason: String| Err(Error::invalid("displayName", reason));
    if name.trim().is_empty() {
        return invalid("a display name is not blank".to_owned());
    }
    if name.chars().count() > MAX_DISPLAY_NAME_CHARS {
        return invalid(format!("at most {MAX_DISPLAY_NAME_CHARS} characters"));
    }
    if name.chars().any(char::is_control) {
        return invalid("no control characters".to_owned());
    }
    Ok(())
}

/// What an operator sets as a customer's identity provider (the sealed client secret apart).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SsoSettings {
    pub issuer: String,
    pub client_id: String,
    pub display_name: Option<String>,
    pub admins: AdminRule,
}

/// Checks an issuer URL: `https`, or `http` on a loopback address (a development
/// provider); no query or fragment (OpenID Connect Discovery 1.0, section 2).
pub fn validate_issuer(issuer: &str) -> Result<(), Error> {
    let invalid = |reason: &str| Err(Error::invalid("issuer", reason.to_owned()));
    if issuer.len() > MAX_SSO_FIELD_LEN {
        return invalid("too long");
    }
    let Ok(url) = url::Url::parse(issuer) else {
        return invalid("not a URL");
    };
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return invalid("an issuer has no query, fragment or credentials");
    }
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => invalid("must be https (http only on a loopback address, for development)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> serde_json::Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    fn rule() -> AdminRule {
        AdminRule {
            claim: Some("groups".into()),
            values: vec!["posture-admins".into()],
            subjects: vec!["root-subject".into()],
        }
    }

    #[test]
    fn an_admin_holds_an_admin_value_in_the_claim_array() {
        let c = claims(json!({"groups": ["staff", "posture-admins"]}));
        assert!(rule().admits("alice", &c));
    }

    #[test]
    fn a_string_claim_is_one_value() {
        assert!(rule().admits("alice", &claims(json!({"groups": "posture-admins"}))));
    }

    #[test]
    fn a_user_without_the_value_is_not_an_admin() {
        assert!(!rule().admits("bob", &claims(json!({"groups": ["staff"]}))));
        assert!(!rule().admits("bob", &claims(json!({}))));
        assert!(!rule().admits("bob", &claims(json!({"groups": [{"v": "posture-admins"}]}))));
        assert!(!rule().admits("bob", &claims(json!({"roles": ["posture-admins"]}))));
    }

    #[test]
    fn a_listed_subject_is_an_admin_without_the_claim() {
        assert!(rule().admits("root-subject", &claims(json!({}))));
    }

    #[test]
    fn a_rule_must_name_someone() {
        assert!(AdminRule::default().validate().is_err());
        let values_without_claim = AdminRule {
            claim: None,
            values: vec!["x".into()],
            subjects: vec![],
        };
        assert!(values_without_claim.validate().is_err());
        assert!(rule().validate().is_ok());
    }

    #[test]
    fn issuers_are_https_or_loopback_http() {
        assert!(validate_issuer("https://login.example.com/tenant/v2.0").is_ok());
        assert!(validate_issuer("http://127.0.0.1:9000").is_ok());
        assert!(validate_issuer("http://localhost:9000/").is_ok());
        assert!(validate_issuer("http://idp.example.com").is_err());
        assert!(validate_issuer("https://idp.example.com/?a=b").is_err());
        assert!(validate_issuer("not a url").is_err());
    }

    #[test]
    fn a_provider_is_named_by_its_display_name_else_its_issuers_host() {
        let sso = |display_name: Option<&str>, issuer: &str| SsoConfig {
            customer_id: CustomerId::from_uuid(uuid::Uuid::nil()),
            issuer: issuer.to_owned(),
            client_id: "posture".to_owned(),
            display_name: display_name.map(str::to_owned),
            provisioning: None,
            admins: AdminRule {
                claim: None,
                values: vec![],
                subjects: vec!["root".to_owned()],
            },
            updated_at: DateTime::<Utc>::UNIX_EPOCH,
        };
        let entra = "https://login.microsoftonline.com/contoso/v2.0";
        assert_eq!(
            sso(None, entra).provider_name(),
            "login.microsoftonline.com"
        );
        assert_eq!(
            sso(None, "http://127.0.0.1:59450").provider_name(),
            "127.0.0.1:59450"
        );
        assert_eq!(
            sso(None, "https://[::1]:8443/").provider_name(),
            "[::1]:8443"
        );
        assert_eq!(
            sso(Some("Contoso Entra ID"), entra).provider_name(),
            "Contoso Entra ID"
        );
    }

    #[test]
    fn display_names_are_bounded_and_printable() {
        assert!(validate_display_name("Contoso Entra ID").is_ok());
        assert!(validate_display_name(&"é".repeat(MAX_DISPLAY_NAME_CHARS)).is_ok());
        for bad in [
            "",
            "  ",
            "a\nb",
            "tab\there",
            &"x".repeat(MAX_DISPLAY_NAME_CHARS + 1),
        ] {
            assert!(validate_display_name(bad).is_err(), "{bad:?}");
        }
    }
}
