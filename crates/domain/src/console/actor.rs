//! Who did what a line of the customer's audit log records.

use std::net::IpAddr;

use crate::ids::KeyId;

/// Who did what an audit line records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    /// An admin signed in to the console, from the address of their request (when known).
    Admin {
        subject: String,
        name: String,
        from: Option<IpAddr>,
    },
    /// The platform operator, with `posture-api keys` and the other operator commands.
    Operator,
    /// A key or an OAuth client, acting by itself (its use), from its request's address.
    Credential {
        id: KeyId,
        name: String,
        from: Option<IpAddr>,
    },
    /// posture itself (a notice of inactivity).
    System,
}

impl Actor {
    /// The actor kind as the log stores it: `admin`, `operator`, `key` (a credential,
    /// SCIM's writes included) or `system`.
    pub fn kind(&self) -> &'static str {
        match self {
            Actor::Admin { .. } => "admin",
            Actor::Operator => "operator",
            Actor::Credential { .. } => "key",
            Actor::System => "system",
        }
    }

    pub fn subject(&self) -> String {
        match self {
            Actor::Admin { subject, .. } => subject.clone(),
            Actor::Operator => "operator".to_owned(),
            Actor::Credential { id, .. } => id.to_string(),
            Actor::System => "posture".to_owned(),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Actor::Admin { name, .. } | Actor::Credential { name, .. } => name,
            Actor::Operator => "posture operator",
            Actor::System => "posture",
        }
    }

    /// The address the action came from: an admin's or a credential's request's.
    pub fn source_ip(&self) -> Option<IpAddr> {
        match self {
            Actor::Admin { from, .. } | Actor::Credential { from, .. } => *from,
            Actor::Operator | Actor::System => None,
        }
    }

    /// The same actor, acting from `address`.
    pub fn from(self, address: IpAddr) -> Self {
        let from = Some(address.to_canonical());
        match self {
            Actor::Admin { subject, name, .. } => Actor::Admin {
                subject,
                name,
                from,
            },
            Actor::Credential { id, name, .. } => Actor::Credential { id, name, from },
            other => other,
        }
    }
}
