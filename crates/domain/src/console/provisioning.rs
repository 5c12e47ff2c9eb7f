//! Provisioning required for a customer's console (docs/scim.md, "Requiring provisioning").
//!
//! When a customer requires it, who may sign in is what its identity provider provisioned
//! over SCIM: a sign-in is admitted only as an active provisioned user whose `userName`
//! equals a claim of the ID token (case-insensitively, as SCIM compares `userName`), and
//! only as an admin when that user is a member of the named admin group. The admin rule is
//! then not used. A SCIM change that takes a user out (deactivated, deleted, removed from
//! the group, the group renamed or deleted) ends that user's console sessions in its own
//! transaction.

use serde_json::Value;

use crate::{error::Error, scim};

/// Longest claim name.
pub const MAX_CLAIM_NAME_LEN: usize = 200;

/// What a customer that requires provisioning matches and admits by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provisioning {
    /// The ID token claim whose value is a provisioned user's `userName` (`email`,
    /// `preferred_username`, `upn`).
    pub claim: String,
    /// The `displayName` of the SCIM group whose members are admins.
    pub admin_group: String,
}

impl Provisioning {
    /// Checks both names are present and bounded, the group's as SCIM bounds a group name.
    pub fn validate(&self) -> Result<(), Error> {
        let claim = self.claim.as_str();
        if claim.is_empty()
            || claim.len() > MAX_CLAIM_NAME_LEN
            || claim.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(Error::invalid(
                "claim",
                format!("a claim name has 1 to {MAX_CLAIM_NAME_LEN} bytes and no blanks"),
            ));
        }
        let group = self.admin_group.as_str();
        if group.trim().is_empty()
            || group.chars().count() > scim::MAX_TEXT
            || group.chars().any(char::is_control)
        {
            return Err(Error::invalid(
                "adminGroup",
                format!(
                    "a group name has 1 to {} characters, no control characters",
                    scim::MAX_TEXT
                ),
            ));
        }
        Ok(())
    }

    /// What the sign-in is matched by: the claim's value, when it is a non-empty string of
    /// at most a `userName`'s length.
    pub fn user_name<'a>(&self, claims: &'a serde_json::Map<String, Value>) -> Option<&'a str> {
        claims
            .get(&self.claim)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty() && v.chars().count() <= scim::MAX_TEXT)
    }

    /// The admin group's name as stored for comparison ([`scim::group_name_key`]).
    pub fn admin_group_key(&self) -> String {
        scim::group_name_key(&self.admin_group)
    }

    /// What a sign-in with these ID token claims is matched and admitted by; `None` when
    /// the claim is missing or not a `userName` ([`Self::user_name`]).
    pub fn sign_in(&self, claims: &serde_json::Map<String, Value>) -> Option<ProvisionedSignIn> {
        self.user_name(claims).map(|user_name| ProvisionedSignIn {
            user_name_key: scim::user_name_key(user_name),
            admin_group_key: self.admin_group_key(),
        })
    }
}

/// The provisioned user a sign-in was matched to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProvisionedSignIn {
    /// The matched claim's value, lowercased as `userName`s are compared.
    pub user_name_key: String,
    /// The admin group's name, lowercased as group names are compared.
    pub admin_group_key: String,
}

/// Whether a provisioned sign-in may start a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// An active provisioned member of the admin group: the session was started.
    Admitted,
    /// No provisioned user has this `userName`.
    NotProvisioned,
    /// The provisioned user is deactivated (`active` false).
    Deactivated,
    /// The provisioned user is not a member of the admin group.
    NotAdmin,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn provisioning() -> Provisioning {
        Provisioning {
            claim: "email".to_owned(),
            admin_group: "Posture Admins".to_owned(),
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(provisioning().validate().is_ok());
        for (claim, group) in [
            ("", "g"),
            ("e mail", "g"),
            ("email", " "),
            ("email", "a\u{0}b"),
        ] {
            let p = Provisioning {
                claim: claim.to_owned(),
                admin_group: group.to_owned(),
            };
            assert!(p.validate().is_err(), "{claim:?} {group:?}");
        }
        let long = Provisioning {
            claim: "c".repeat(MAX_CLAIM_NAME_LEN + 1),
            ..provisioning()
        };
        assert!(long.validate().is_err());
    }

    #[test]
    fn the_claim_must_be_a_bounded_string() {
        let p = provisioning();
        let claims = |v: Value| json!({ "email": v }).as_object().cloned().unwrap();
        assert_eq!(
            p.user_name(&claims(json!("Ana@Contoso.example"))),
            Some("Ana@Contoso.example")
        );
        assert_eq!(p.user_name(&claims(json!(""))), None);
        assert_eq!(p.user_name(&claims(json!(["a@b"]))), None);
        assert_eq!(p.user_name(&claims(json!(true))), None);
        assert_eq!(p.user_name(&claims(json!("x".repeat(257)))), None);
        assert_eq!(p.user_name(&serde_json::Map::new()), None);
        assert_eq!(p.admin_group_key(), "posture admins");
        let matched = p.sign_in(&claims(json!("Ana@Contoso.example"))).unwrap();
        assert_eq!(matched.user_name_key, "ana@contoso.example");
        assert_eq!(matched.admin_group_key, "posture admins");
    }
}
