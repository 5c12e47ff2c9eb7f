//! Identifiers.
//!
//! Ids posture creates (customers, keys, analyzer passes) are UUIDv7: unguessable enough,
//! time-ordered for index locality. Ids of analyzer data (identities, findings,
//! recommendations) are the analyzer's own strings, validated by [`valid_external_id`]
//! so they are safe in URL paths and logs. Cloud tenant ids are GUIDs, normalised to
//! lowercase hyphenated form.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Refusal};

macro_rules! uuid_id {
    ($(#[$meta:meta])* $name:ident, $field:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new, time-ordered id.
            pub fn generate() -> Self {
                Self(Uuid::now_v7())
            }

            pub const fn from_uuid(id: Uuid) -> Self {
                Self(id)
            }

            pub const fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = Error;

            fn from_str(s: &str) -> Result<Self, Error> {
                Uuid::parse_str(s)
                    .map(Self)
                    .map_err(|_| Error::refused(Refusal::Malformed, $field, format!("{s:?} is not a UUID")))
            }
        }
    };
}

uuid_id!(
    /// A customer (the owner of keys, tenants and all analyzer data).
    CustomerId,
    "customer"
);
uuid_id!(
    /// An API key's public id (names its rate-limit bucket; never secret).
    KeyId,
    "key"
);
uuid_id!(
    /// One analyzer pass (one `posture-api ingest` run).
    PassId,
    "pass"
);

uuid_id!(
    /// A webhook subscription.
    WebhookId,
    "id"
);
uuid_id!(
    /// One webhook delivery (the same on every retry: `X-Service-Delivery`).
    DeliveryId,
    "id"
);
uuid_id!(
    /// One finding event of the events feed (also named by the deliveries announcing it).
    EventId,
    "id"
);

uuid_id!(
    /// A user provisioned over SCIM (its `id`).
    ScimUserId,
    "id"
);
uuid_id!(
    /// A group provisioned over SCIM (its `id`).
    ScimGroupId,
    "id"
);

/// A connected cloud directory tenant's id: a GUID, shown lowercase and hyphenated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct CloudTenantId(Uuid);

impl Serialize for CloudTenantId {
    /// The hyphenated lowercase form, written without an allocation (every finding,
    /// identity and recommendation on the wire carries one).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.hyphenated().encode_lower(&mut Uuid::encode_buffer()))
    }
}

impl CloudTenantId {
    pub const fn from_uuid(id: Uuid) -> Self {
        Self(id)
    }

    pub const fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl fmt::Display for CloudTenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for CloudTenantId {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        // Only the hyphenated 36-character form: the one Entra ID and the docs show.
        if s.len() != 36 {
            return Err(Error::refused(
                Refusal::Malformed,
                "cloudTenantId",
                format!("{s:?} is not a GUID"),
            ));
        }
        Uuid::parse_str(s).map(Self).map_err(|_| {
            Error::refused(
                Refusal::Malformed,
                "cloudTenantId",
                format!("{s:?} is not a GUID"),
            )
        })
    }
}

impl TryFrom<String> for CloudTenantId {
    type Error = Error;

    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

impl From<CloudTenantId> for String {
    fn from(id: CloudTenantId) -> String {
        id.to_string()
    }
}

/// Longest analyzer id accepted.
pub const MAX_EXTERNAL_ID_LEN: usize = 128;
/// The characters of an analyzer id, as a regular expression (for the contract): the rule
/// [`valid_external_id`] checks, apart from the length.
pub const EXTERNAL_ID_PATTERN: &str = "^[A-Za-z0-9._~:@-]+$";

/// Whether `s` is acceptable as an analyzer id: 1 to 128 characters of ASCII letters,
/// digits and `-._~:@` (safe unescaped in a URL path segment and in a log line).
pub fn valid_external_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_EXTERNAL_ID_LEN
        && s.bytes().all(|b| EXTERNAL_ID_BYTES[usize::from(b)])
}

/// Which bytes an analyzer id may hold, by value: one lookup a byte (every id read back from
/// the database is checked again, a hundred or more a page).
static EXTERNAL_ID_BYTES: [bool; 256] = {
    let mut allowed = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        allowed[b] =
            c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b':' | b'@');
        b += 1;
    }
    allowed
};

macro_rules! external_id {
    ($(#[$meta:meta])* $name:ident, $field:literal) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name(String);

        impl Serialize for $name {
            /// The id's text, borrowed (`into = "String"` would clone it per value written).
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;

            fn try_from(s: String) -> Result<Self, Error> {
                if valid_external_id(&s) {
                    Ok(Self(s))
                } else {
                    Err(Error::invalid(
                        $field,
                        format!(
                            "{s:?} is not a valid id (1 to {MAX_EXTERNAL_ID_LEN} characters of \
                             letters, digits and -._~:@)"
                        ),
                    ))
                }
            }
        }

        impl FromStr for $name {
            type Err = Error;

            fn from_str(s: &str) -> Result<Self, Error> {
                Self::try_from(s.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

external_id!(
    /// An identity's id as the analyzer reports it.
    IdentityId,
    "identityId"
);
external_id!(
    /// A finding's id as the analyzer reports it.
    FindingId,
    "id"
);
external_id!(
    /// A role recommendation's id as the analyzer reports it.
    RecommendationId,
    "id"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_tenant_id_is_normalised_to_lowercase() {
        let id: CloudTenantId = "8F6E2C1A-3B4D-4E5F-9A0B-1C2D3E4F5A6B".parse().unwrap();
        assert_eq!(id.to_string(), "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b");
    }

    #[test]
    fn cloud_tenant_id_serialises_as_its_display_form() {
        let id: CloudTenantId = "8F6E2C1A-3B4D-4E5F-9A0B-1C2D3E4F5A6B".parse().unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{id}\""));
        let back: CloudTenantId =
            serde_json::from_str(&serde_json::to_string(&id).unwrap()).unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn cloud_tenant_id_rejects_non_guid_forms() {
        assert!(
            "8f6e2c1a3b4d4e5f9a0b1c2d3e4f5a6b"
                .parse::<CloudTenantId>()
                .is_err()
        );
        assert!("contoso".parse::<CloudTenantId>().is_err());
    }

    #[test]
    fn external_ids_serialise_as_their_text_and_read_back() {
        let id: FindingId = "f-0001:a@b".parse().unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"f-0001:a@b\"");
        let back: FindingId = serde_json::from_str("\"f-0001:a@b\"").unwrap();
        assert_eq!(back, id);
        assert!(serde_json::from_str::<IdentityId>("\"a/b\"").is_err());
    }

    #[test]
    fn external_ids_reject_path_and_control_characters() {
        assert!("f-0001".parse::<FindingId>().is_ok());
        assert!("a/b".parse::<FindingId>().is_err());
        assert!("".parse::<FindingId>().is_err());
        assert!("line\nbreak".parse::<FindingId>().is_err());
        assert!("x".repeat(129).parse::<FindingId>().is_err());
    }

    #[test]
    fn the_byte_table_allows_exactly_the_patterns_characters() {
        let allowed: Vec<u8> = (0..=255u8)
            .filter(|&b| EXTERNAL_ID_BYTES[usize::from(b)])
            .collect();
        let expected: Vec<u8> = (b'0'..=b'9')
            .chain(b'A'..=b'Z')
            .chain(b'a'..=b'z')
            .chain(*b"-._~:@")
            .collect::<std::collections::BTreeSet<u8>>()
            .into_iter()
            .collect();
        assert_eq!(allowed, expected);
        assert_eq!(EXTERNAL_ID_PATTERN, "^[A-Za-z0-9._~:@-]+$");
    }
}
