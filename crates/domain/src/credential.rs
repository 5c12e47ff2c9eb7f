//! A credential in use: the principal a verified key or token makes, where it may be used
//! from, how its use is recorded, and when it lapses for inactivity.

use std::net::IpAddr;

use chrono::{DateTime, Utc};

use crate::{
    allow_list::AllowList,
    api_key::{Scope, ScopeSet},
    customer::CustomerScope,
    ids::{CustomerId, KeyId},
    outside::{is_invisible, one_line},
};

/// The caller of a request, established from a verified, unrevoked, unexpired key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    key_id: KeyId,
    customer: CustomerId,
    scopes: ScopeSet,
    allowed: AllowList,
}

impl Principal {
    /// Made by the key store once the presented key's hash matched a usable key.
    pub fn verified(key_id: KeyId, customer: CustomerId, scopes: ScopeSet) -> Self {
        Self {
            key_id,
            customer,
            scopes,
            allowed: AllowList::default(),
        }
    }

    /// The principal, usable only from the addresses `allowed` permits.
    pub fn allowed_from(self, allowed: AllowList) -> Self {
        Self { allowed, ..self }
    }

    /// Whether the credential may be used from `address` (its allow-list); from an unknown
    /// address only when it may be used from anywhere.
    pub fn permits(&self, address: Option<IpAddr>) -> bool {
        match address {
            Some(address) => self.allowed.permits(address),
            None => self.allowed.is_open(),
        }
    }

    pub fn key_id(&self) -> KeyId {
        self.key_id
    }

    pub fn customer_id(&self) -> CustomerId {
        self.customer
    }

    pub fn has_scope(&self, scope: Scope) -> bool {
        self.scopes.contains(scope)
    }

    /// The customer scope for this caller's data queries.
    pub fn scope(&self) -> CustomerScope {
        CustomerScope::new(self.customer)
    }
}

/// The customer's inactivity rule: its credentials stop working once unused this many days
/// (7 to 3650; none by default).
pub const INACTIVITY_DAYS: std::ops::RangeInclusive<u32> = 7..=3650;

/// How long before a credential stops working for inactivity its customer is told: a week,
/// or half the rule's days when that is shorter.
pub fn inactivity_notice(days: u32) -> chrono::TimeDelta {
    chrono::TimeDelta::days(i64::from(days / 2).clamp(1, 7))
}

/// When a credential last used (or, never used, issued) at `used` stops working under an
/// inactivity rule of `days` (`None`: no rule, never).
pub fn inactive_at(used: DateTime<Utc>, days: Option<u32>) -> Option<DateTime<Utc>> {
    days.map(|days| used + chrono::TimeDelta::days(i64::from(days)))
}

/// Why a credential unused for `days` days is refused, for its holder.
pub fn inactive_reason(client: bool, days: u32) -> String {
    let what = if client { "OAuth client" } else { "API key" };
    format!(
        "this {what} has not been used for {days} days, the longest its customer allows: it \
         no longer works; an admin of the customer issues a new one"
    )
}

/// Longest `User-Agent` recorded as a credential's last use, in bytes.
pub const MAX_USER_AGENT_LEN: usize = 200;

/// A use of a credential as it is recorded: when, from where, and the client's
/// `User-Agent` made one line of at most [`MAX_USER_AGENT_LEN`] bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialUse {
    pub at: DateTime<Utc>,
    pub from: IpAddr,
    pub user_agent: Option<String>,
}

impl CredentialUse {
    pub fn new(at: DateTime<Utc>, from: IpAddr, user_agent: Option<&str>) -> Self {
        let user_agent = user_agent
            .map(|agent| {
                let visible: String = agent.chars().filter(|&c| !is_invisible(c)).collect();
                one_line(&visible, MAX_USER_AGENT_LEN)
            })
            .filter(|agent| !agent.is_empty());
        Self {
            at,
            from: from.to_canonical(),
            user_agent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_lapses_its_rules_days_after_its_last_use() {
        let used = DateTime::<Utc>::UNIX_EPOCH;
        assert_eq!(inactive_at(used, None), None);
        assert_eq!(
            inactive_at(used, Some(90)),
            Some(used + chrono::TimeDelta::days(90))
        );
        assert!(inactive_reason(true, 90).contains("OAuth client has not been used for 90 days"));
    }

    #[test]
    fn a_use_records_a_bounded_single_line_agent_and_the_canonical_address() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let hostile = format!("curl/8\r\n\u{202e}{}", "x".repeat(500));
        let used = CredentialUse::new(at, "::ffff:198.51.100.4".parse().unwrap(), Some(&hostile));
        assert_eq!(used.from.to_string(), "198.51.100.4");
        let agent = used.user_agent.unwrap();
        assert!(
            agent.len() <= MAX_USER_AGENT_LEN && agent.starts_with("curl/8 x"),
            "{agent}"
        );
        assert!(!agent.contains('\u{202e}'));
        assert_eq!(
            CredentialUse::new(at, used.from, Some(" \t")).user_agent,
            None
        );
    }
}
