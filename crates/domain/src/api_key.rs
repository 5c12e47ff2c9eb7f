//! API keys, scopes and the authenticated principal.
//!
//! A key is `svc_` followed by 39 lowercase base32 characters encoding 20 random bytes
//! (160 bits, from the operating system's CSPRNG through `ring`) and a CRC32 of them. The
//! checksum is not a secret: it lets posture (and secret scanners) reject a mistyped or
//! made-up key without a database lookup. Only the SHA-256 of the whole key is stored,
//! with a short display prefix (`svc_` and 6 characters) for operators.

use std::{fmt, net::IpAddr, sync::LazyLock};

use chrono::{DateTime, Utc};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{
    allow_list::AllowList,
    error::Error,
    ids::{CustomerId, KeyId},
};

string_enum! {
    /// What a key may do. Bound at issue, immutable afterwards. Declared in the order every
    /// list of scopes shows them (docs/api.md's table): a key's scopes, the console's form,
    /// the contract.
    pub enum Scope ("scope") {
        /// List and inspect identities; also `GET /api/v1/tenants`.
        ReadIdentities = "read:identities",
        /// List, inspect and export findings.
        ReadFindings = "read:findings",
        /// Triage findings (`PATCH /api/v1/findings/{id}`, `POST /api/v1/findings/triage`;
        /// with `read:findings`, which reads them).
        WriteFindings = "write:findings",
        /// List right-sized role recommendations.
        ReadRoles = "read:roles",
        /// The three `/api/v1/upr` routes.
        ReadUpr = "read:upr",
        /// Every `/api/v1/webhooks` route (a redelivery and a recovery with `read:findings`).
        ManageWebhooks = "manage:webhooks",
        /// SCIM 2.0 provisioning under `/scim/v2`; nothing under `/api/v1`.
        ProvisionScim = "provision:scim",
        /// Read the customer's audit feed (`GET /api/v1/audit-events`).
        ReadAudit = "read:audit",
    }
}

impl Scope {
    const fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// What the scope lets a key do, for people choosing scopes (the console's form).
    pub fn grants(self) -> &'static str {
        match self {
            Scope::ReadIdentities => "list and inspect identities and the connected tenants",
            Scope::ReadFindings => "list, inspect and export findings",
            Scope::ReadRoles => "list right-sized role recommendations",
            Scope::ReadUpr => "read the risk roll-up, its principals and its trend",
            Scope::WriteFindings => {
                "triage findings: acknowledge, dismiss or accept their risk (together with \
                 read:findings, which reads them)"
            }
            Scope::ManageWebhooks => {
                "create, change and delete webhook subscriptions and read their deliveries \
                 (sending past deliveries again also needs read:findings)"
            }
            Scope::ProvisionScim => {
                "provision users and groups over SCIM 2.0 at /scim/v2 (the identity \
                 provider's secret token); reads nothing under /api/v1"
            }
            Scope::ReadAudit => {
                "read the audit feed: who issued, changed, revoked or used which credential, \
                 sign-ins, settings and provisioning changes (for a SIEM)"
            }
        }
    }
}

/// A non-empty set of scopes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ScopeSet(u8);

impl ScopeSet {
    pub fn contains(&self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    pub fn insert(&mut self, scope: Scope) {
        self.0 |= scope.bit();
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = Scope> + '_ {
        Scope::ALL.iter().copied().filter(|s| self.contains(*s))
    }

    /// The set as one byte (a bit per scope, in declaration order): what an access token
    /// carries.
    pub fn bits(&self) -> u8 {
        self.0
    }

    /// The set of `bits`, ignoring bits of no scope.
    pub fn from_bits(bits: u8) -> Self {
        Self(bits & Self::all().0)
    }

    /// The scopes of both sets.
    pub fn intersection(&self, other: ScopeSet) -> Self {
        Self(self.0 & other.0)
    }

    /// Whether every scope of `self` is in `other`.
    pub fn is_subset(&self, other: ScopeSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The scopes, space-separated (OAuth's `scope`).
    pub fn to_oauth(&self) -> String {
        self.iter().map(Scope::as_str).collect::<Vec<_>>().join(" ")
    }

    /// Every scope posture knows (what demo keys get).
    pub fn all() -> Self {
        Scope::ALL.iter().copied().collect()
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        let mut set = ScopeSet::default();
        for scope in iter {
            set.insert(scope);
        }
        set
    }
}

impl fmt::Debug for ScopeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(Scope::as_str))
            .finish()
    }
}

const KEY_PREFIX: &str = "svc_";
const RANDOM_BYTES: usize = 20;
const CHECKSUM_BYTES: usize = 4;
/// `svc_` + base32 of 24 bytes without padding.
const KEY_LEN: usize = KEY_PREFIX.len() + 39;
/// Characters of the key (after `svc_`) kept as its display prefix.
const DISPLAY_CHARS: usize = 6;
/// What every display prefix looks like (the contract states it): a key's `svc_`, an OAuth
/// client's `pci_`.
pub const DISPLAY_PREFIX_PATTERN: &str = "^(svc|pci)_[a-z2-7]{6}$";

pub(crate) static BASE32_LOWER: LazyLock<data_encoding::Encoding> = LazyLock::new(|| {
    let mut spec = data_encoding::Specification::new();
    spec.symbols.push_str("abcdefghijklmnopqrstuvwxyz234567");
    spec.encoding()
        .expect("a static, valid base32 specification")
});

/// Whether `presented` has the form and checksum of a key posture issues (decoded on the
/// stack: the check allocates nothing).
fn is_well_formed(presented: &str) -> bool {
    is_checksummed(KEY_PREFIX, presented)
}

/// Whether `presented` is `prefix` followed by the base32 of 20 random bytes and their
/// CRC32, as posture writes its keys and the secrets of its OAuth clients.
pub(crate) fn is_checksummed(prefix: &str, presented: &str) -> bool {
    let Some(body) = presented.strip_prefix(prefix) else {
        return false;
    };
    let mut bytes = [0u8; RANDOM_BYTES + CHECKSUM_BYTES];
    let fits = BASE32_LOWER
        .decode_len(body.len())
        .is_ok_and(|len| len == bytes.len());
    if presented.len() != prefix.len() + KEY_LEN - KEY_PREFIX.len() || !fits {
        return false;
    }
    if BASE32_LOWER
        .decode_mut(body.as_bytes(), &mut bytes)
        .is_err()
    {
        return false;
    }
    let (random, checksum) = bytes.split_at(RANDOM_BYTES);
    crc32fast::hash(random).to_be_bytes() == checksum
}

/// `prefix` followed by the base32 of 20 bytes from the operating system's CSPRNG and their
/// CRC32 (what [`is_checksummed`] accepts).
pub(crate) fn checksummed(prefix: &str) -> Result<String, Error> {
    let mut bytes = [0u8; RANDOM_BYTES + CHECKSUM_BYTES];
    SystemRandom::new()
        .fill(&mut bytes[..RANDOM_BYTES])
        .map_err(|_| Error::internal("the system CSPRNG failed"))?;
    let checksum = crc32fast::hash(&bytes[..RANDOM_BYTES]);
    bytes[RANDOM_BYTES..].copy_from_slice(&checksum.to_be_bytes());
    Ok(format!("{prefix}{}", BASE32_LOWER.encode(&bytes)))
}

/// A full API key. Shown once at issue; its `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeySecret(String);

impl ApiKeySecret {
    /// A new key from the operating system's CSPRNG.
    pub fn generate() -> Result<Self, Error> {
        checksummed(KEY_PREFIX).map(Self)
    }

    /// Checks the form and checksum of a presented key. `None` means it cannot be a key
    /// posture issued, so no lookup is needed.
    pub fn parse(presented: &str) -> Option<Self> {
        is_well_formed(presented).then(|| Self(presented.to_owned()))
    }

    /// The hash of a presented key of valid form, as [`parse`](Self::parse) then
    /// [`hash`](Self::hash) give it, without copying the key: what every request's key check
    /// needs, with no allocation.
    pub fn hash_presented(presented: &str) -> Option<KeyHash> {
        is_well_formed(presented).then(|| KeyHash(Sha256::digest(presented.as_bytes()).into()))
    }

    /// The SHA-256 of the key: what is stored and looked up.
    pub fn hash(&self) -> KeyHash {
        KeyHash(Sha256::digest(self.0.as_bytes()).into())
    }

    /// `svc_` and the first characters: enough for an operator to tell keys apart.
    pub fn display_prefix(&self) -> String {
        self.0[..KEY_PREFIX.len() + DISPLAY_CHARS].to_owned()
    }

    /// The key itself, for the one place that shows it (the issuing command's output).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKeySecret({}…)", self.display_prefix())
    }
}

/// SHA-256 of an API key.
#[derive(Clone, Copy)]
pub struct KeyHash(pub [u8; 32]);

impl KeyHash {
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// Constant-time, so even a comparison made in application code leaks nothing.
impl PartialEq for KeyHash {
    fn eq(&self, other: &Self) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl Eq for KeyHash {}

impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyHash(..)")
    }
}

/// An issued key as operators see it (never the key itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    pub id: KeyId,
    pub customer_id: CustomerId,
    pub name: String,
    pub prefix: String,
    pub scopes: ScopeSet,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    /// Where the last recorded use came from, and the client it named (`User-Agent`).
    pub last_used_from: Option<IpAddr>,
    pub last_used_user_agent: Option<String>,
    /// Who issued it: an admin's display name, or `posture operator`.
    pub created_by: String,
    /// Where it may be used from (empty: anywhere).
    pub allow_from: AllowList,
}

/// A key as the caller holding it sees it (`GET /api/v1/keys/current`): the key and the name
/// of the customer it belongs to.
#[derive(Clone, Debug)]
pub struct CurrentKey {
    pub key: ApiKey,
    pub customer_name: String,
}

/// What is stored when a key is issued.
#[derive(Clone, Debug)]
pub struct NewApiKey {
    pub id: KeyId,
    pub customer_id: CustomerId,
    pub name: String,
    pub prefix: String,
    pub hash: KeyHash,
    pub scopes: ScopeSet,
    pub expires_at: Option<DateTime<Utc>>,
    /// Where it may be used from (empty, as generated: anywhere).
    pub allow_from: AllowList,
}

/// Longest key name accepted.
pub const MAX_KEY_NAME_LEN: usize = 100;

/// Most keys a customer may hold at once, neither revoked nor expired, unless the operator
/// says otherwise (`POSTURE_MAX_ACTIVE_KEYS`): each key has the whole per-key request quota,
/// so the number of keys bounds what a customer's admins can multiply it by.
pub const DEFAULT_MAX_ACTIVE_KEYS: u32 = 50;

/// A key's or a client's name: 1 to [`MAX_KEY_NAME_LEN`] characters.
pub(crate) fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.chars().count() > MAX_KEY_NAME_LEN {
        return Err(Error::invalid(
            "name",
            format!("must be 1 to {MAX_KEY_NAME_LEN} characters"),
        ));
    }
    Ok(())
}

impl NewApiKey {
    /// Generates a key for `customer` and the row that stores it. The secret is returned
    /// once, here, and is not kept anywhere.
    pub fn generate(
        customer_id: CustomerId,
        name: String,
        scopes: ScopeSet,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<(Self, ApiKeySecret), Error> {
        if scopes.is_empty() {
            return Err(Error::invalid("scope", "a key needs at least one scope"));
        }
        check_name(&name)?;
        if expires_at.is_some_and(|at| at <= now) {
            return Err(Error::invalid(
                "expires",
                "the expiry must be in the future",
            ));
        }
        let secret = ApiKeySecret::generate()?;
        let key = NewApiKey {
            id: KeyId::generate(),
            customer_id,
            name,
            prefix: secret.display_prefix(),
            hash: secret.hash(),
            scopes,
            expires_at,
            allow_from: AllowList::default(),
        };
        Ok((key, secret))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_have_the_svc_prefix_and_parse_back() {
        let key = ApiKeySecret::generate().unwrap();
        assert!(key.expose().starts_with("svc_"));
        assert_eq!(key.expose().len(), KEY_LEN);
        assert_eq!(ApiKeySecret::parse(key.expose()), Some(key.clone()));
        let pattern = regex::Regex::new(DISPLAY_PREFIX_PATTERN).unwrap();
        assert!(
            pattern.is_match(&key.display_prefix()),
            "{}",
            key.display_prefix()
        );
    }

    #[test]
    fn generated_keys_carry_160_random_bits() {
        // 20 random bytes plus a 4-byte checksum: the key body decodes to 24 bytes.
        let key = ApiKeySecret::generate().unwrap();
        let body = BASE32_LOWER.decode(&key.expose().as_bytes()[4..]).unwrap();
        assert_eq!(body.len(), RANDOM_BYTES + CHECKSUM_BYTES);
        assert_eq!(RANDOM_BYTES * 8, 160);
        assert_ne!(ApiKeySecret::generate().unwrap(), key);
    }

    #[test]
    fn a_key_with_a_wrong_checksum_does_not_parse() {
        let key = ApiKeySecret::generate().unwrap();
        let mut chars: Vec<char> = key.expose().chars().collect();
        let i = 10;
        chars[i] = if chars[i] == 'a' { 'b' } else { 'a' };
        let tampered: String = chars.into_iter().collect();
        assert_eq!(ApiKeySecret::parse(&tampered), None);
        assert_eq!(ApiKeySecret::parse("svc_short"), None);
        assert_eq!(ApiKeySecret::parse(&key.expose().to_uppercase()), None);
    }

    #[test]
    fn a_presented_key_hashes_as_its_parsed_key_and_a_malformed_one_not_at_all() {
        let key = ApiKeySecret::generate().unwrap();
        assert_eq!(ApiKeySecret::hash_presented(key.expose()), Some(key.hash()));
        let tampered = format!("{}{}", &key.expose()[..KEY_LEN - 1], {
            if key.expose().ends_with('a') {
                'b'
            } else {
                'a'
            }
        });
        for malformed in [
            tampered.as_str(),
            "svc_short",
            "",
            &key.expose().to_uppercase(),
            &format!("{}a", key.expose()),
            &key.expose().replacen("svc_", "svk_", 1),
            // The right length, a character outside the alphabet.
            &format!("{}1", &key.expose()[..KEY_LEN - 1]),
        ] {
            assert_eq!(ApiKeySecret::hash_presented(malformed), None, "{malformed}");
            assert_eq!(ApiKeySecret::parse(malformed), None, "{malformed}");
        }
    }

    #[test]
    fn debug_output_never_contains_the_key() {
        let key = ApiKeySecret::generate().unwrap();
        let shown = format!("{key:?}");
        assert!(!shown.contains(key.expose()));
        assert!(shown.contains(&key.display_prefix()));
    }

    #[test]
    fn scopes_parse_from_their_wire_names() {
        for scope in Scope::ALL {
            assert_eq!(scope.as_str().parse::<Scope>().unwrap(), *scope);
        }
        assert!("admin".parse::<Scope>().is_err());
        assert_eq!(ScopeSet::all().iter().count(), 8);
    }

    #[test]
    fn a_key_without_scopes_is_refused() {
        let result = NewApiKey::generate(
            CustomerId::generate(),
            "k".into(),
            ScopeSet::default(),
            None,
            Utc::now(),
        );
        assert!(matches!(result, Err(Error::Invalid { .. })));
    }
}
