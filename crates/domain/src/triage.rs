//! Triage: the customer's own decision about a finding (acknowledged, dismissed, risk
//! accepted), written by its tools with a `write:findings` key and independent of the
//! analyzer's `status`: a pass that reports the finding again keeps it. A mark may expire;
//! an expired mark reads as `untriaged` at once.

use chrono::{DateTime, Duration, Utc};

use crate::{
    error::{Error, Refusal},
    ids::KeyId,
};

string_enum! {
    /// Where the customer's triage of a finding stands.
    pub enum TriageState ("triage state") {
        /// Nobody has decided anything (or the last mark expired or was reset).
        Untriaged = "untriaged",
        /// Seen, and someone works on it; the finding still counts.
        Acknowledged = "acknowledged",
        /// Not a problem for this customer (needs a reason).
        Dismissed = "dismissed",
        /// A real problem the customer accepts, usually until a date (needs a reason).
        RiskAccepted = "risk_accepted",
    }
}

string_enum! {
    /// Why a finding was dismissed or its risk accepted.
    pub enum TriageReason ("triage reason") {
        /// The analyzer is wrong about it.
        FalsePositive = "false_positive",
        /// True, but does not apply here (a break-glass account, a lab tenant).
        NotApplicable = "not_applicable",
        /// Another control covers the risk (e.g. a conditional-access policy).
        CompensatingControl = "compensating_control",
        /// Another finding or ticket tracks the same thing.
        Duplicate = "duplicate",
        /// Known and left as it is on purpose.
        WontFix = "wont_fix",
        /// Anything else; say what in the comment.
        Other = "other",
    }
}

/// Longest comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 2_000;
/// A comment as a regular expression (for the contract): no control character but line feed
/// and tab — what [`TriageChange::new`] checks.
pub const COMMENT_PATTERN: &str = "^[^\\u0000-\\u0008\\u000B-\\u001F\\u007F-\\u009F]*$";

/// Furthest expiry, from now.
pub const MAX_EXPIRY_DAYS: i64 = 366;

/// Who wrote a mark: the key, by id and by the name it had then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriageActor {
    pub key_id: KeyId,
    pub key_name: String,
}

/// A change of triage as asked (`PATCH /findings/{id}`), checked by [`TriageChange::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriageChange {
    pub state: TriageState,
    pub reason: Option<TriageReason>,
    pub comment: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

impl TriageChange {
    /// A change that keeps the rules: a reason exactly for `dismissed` and `risk_accepted`;
    /// no comment or expiry on `untriaged` (a reset); an expiry in the future and at most
    /// [`MAX_EXPIRY_DAYS`] ahead; a comment of at most [`MAX_COMMENT_CHARS`] characters
    /// without control characters but line breaks and tabs (an empty one is none).
    pub fn new(
        state: TriageState,
        reason: Option<TriageReason>,
        comment: Option<String>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<Self, Error> {
        let needs_reason = matches!(state, TriageState::Dismissed | TriageState::RiskAccepted);
        match (needs_reason, reason) {
            (true, None) => {
                return Err(Error::refused(
                    Refusal::Missing,
                    "triage.reason",
                    format!(
                        "required when state is {}; allowed: {}",
                        state,
                        TriageReason::allowed().join(", ")
                    ),
                ));
            }
            (false, Some(_)) => {
                return Err(Error::invalid(
                    "triage.reason",
                    format!("only dismissed and risk_accepted take a reason, not {state}"),
                ));
            }
            _ => {}
        }
        let comment = comment.filter(|c| !c.trim().is_empty());
        if let Some(comment) = &comment {
            if comment.chars().count() > MAX_COMMENT_CHARS {
                return Err(Error::refused(
                    Refusal::OutOfRange,
                    "triage.comment",
                    format!("at most {MAX_COMMENT_CHARS} characters"),
                ));
            }
            if comment
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
            {
                return Err(Error::invalid(
                    "triage.comment",
                    "control characters other than line breaks and tabs are not allowed",
                ));
            }
        }
        if state == TriageState::Untriaged && (comment.is_some() || expires_at.is_some()) {
            return Err(Error::invalid(
                "triage",
                "untriaged (a reset) takes no comment and no expiresAt",
            ));
        }
        if let Some(at) = expires_at {
            if at <= now {
                return Err(Error::invalid("triage.expiresAt", "must be in the future"));
            }
            if at > now + Duration::days(MAX_EXPIRY_DAYS) {
                return Err(Error::refused(
                    Refusal::OutOfRange,
                    "triage.expiresAt",
                    format!("at most {MAX_EXPIRY_DAYS} days ahead"),
                ));
            }
        }
        Ok(Self {
            state,
            reason,
            comment,
            expires_at,
        })
    }
}

/// A finding's triage as stored: the last mark written, whether or not it has expired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Triage {
    pub state: TriageState,
    pub reason: Option<TriageReason>,
    pub comment: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    /// When the mark was written (none for a finding never triaged).
    pub updated_at: Option<DateTime<Utc>>,
    pub updated_by: Option<TriageActor>,
}

#[expect(
    clippy::derivable_impls,
    reason = "string_enum! derives the enum; its default is stated here"
)]
impl Default for TriageState {
    fn default() -> Self {
        TriageState::Untriaged
    }
}

impl Triage {
    /// Whether the mark has expired at `now`.
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.state != TriageState::Untriaged && self.expires_at.is_some_and(|at| at <= now)
    }

    /// The triage as it reads at `now`: an expired mark is `untriaged` from its expiry on
    /// (its `updatedAt` is the expiry; nobody wrote it).
    pub fn effective(self, now: DateTime<Utc>) -> Triage {
        if self.is_expired(now) {
            Triage {
                updated_at: self.expires_at,
                ..Triage::default()
            }
        } else {
            self
        }
    }
}

/// One change of a finding's triage, for its history (`GET /findings/{id}/triage`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriageRecord {
    pub id: uuid::Uuid,
    pub at: DateTime<Utc>,
    /// Who wrote it; none when a mark expired by itself.
    pub by: Option<TriageActor>,
    pub from: TriageState,
    pub from_reason: Option<TriageReason>,
    pub to: TriageState,
    pub to_reason: Option<TriageReason>,
    pub comment: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// Most findings of one bulk triage (`POST /findings/triage`).
pub const MAX_BULK: usize = 500;

/// Triage writes a customer's keys may make together, a PATCH or a bulk counting once: the
/// write budget (429 with `Retry-After` beyond it).
pub const WRITE_RATE: crate::rate_limit::RatePolicy = crate::rate_limit::RatePolicy {
    limit: 120,
    window_secs: 60,
};

/// What a customer's triage writes may add to storage together, in bytes, per hour: 32 MiB
/// (each write costing [`stored_cost`]). Sixty-four of the largest bulks an hour (500 findings and a
/// comment of 2,000 four-byte characters), 32,000 findings an hour with short comments.
pub const BYTES_RATE: crate::rate_limit::RatePolicy = crate::rate_limit::RatePolicy {
    limit: 32 << 20,
    window_secs: 3600,
};

/// What one finding written costs the byte budget, besides the comment: its history record,
/// its event, its share of the deliveries of up to 25 subscriptions and of the kept answer,
/// as measured (docs/operations.md, "Fair shares").
pub const STORED_PER_FINDING: u32 = 1024;

/// What a triage write of `findings` findings with `comment` adds to storage, as the byte
/// budget counts it: the comment once (it is kept once per write) and
/// [`STORED_PER_FINDING`] per finding.
pub fn stored_cost(findings: usize, comment: Option<&str>) -> u32 {
    let per_finding = u64::try_from(findings)
        .unwrap_or(u64::MAX)
        .saturating_mul(u64::from(STORED_PER_FINDING));
    let comment = comment.map_or(0, |c| c.len() as u64);
    u32::try_from(per_finding.saturating_add(comment)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-27T12:00:00Z")
            .unwrap()
            .to_utc()
    }

    fn change(
        state: TriageState,
        reason: Option<TriageReason>,
        comment: Option<&str>,
        expires_in_days: Option<i64>,
    ) -> Result<TriageChange, Error> {
        TriageChange::new(
            state,
            reason,
            comment.map(str::to_owned),
            expires_in_days.map(|d| now() + Duration::days(d)),
            now(),
        )
    }

    #[test]
    fn dismissing_and_accepting_need_a_reason_and_nothing_else_takes_one() {
        use TriageReason::FalsePositive;
        use TriageState::*;
        assert!(change(Dismissed, None, None, None).is_err());
        assert!(change(RiskAccepted, None, None, Some(30)).is_err());
        assert!(change(Dismissed, Some(FalsePositive), None, None).is_ok());
        assert!(change(Acknowledged, Some(FalsePositive), None, None).is_err());
        assert!(change(Untriaged, Some(FalsePositive), None, None).is_err());
        assert!(change(Acknowledged, None, Some("on it"), Some(7)).is_ok());
    }

    #[test]
    fn a_reset_takes_no_comment_or_expiry() {
        assert!(change(TriageState::Untriaged, None, None, None).is_ok());
        assert!(change(TriageState::Untriaged, None, Some("x"), None).is_err());
        assert!(change(TriageState::Untriaged, None, None, Some(1)).is_err());
    }

    #[test]
    fn expiries_are_in_the_future_and_within_a_year() {
        let accept = |days| {
            change(
                TriageState::RiskAccepted,
                Some(TriageReason::CompensatingControl),
                None,
                Some(days),
            )
        };
        assert!(accept(0).is_err());
        assert!(accept(-1).is_err());
        assert!(accept(MAX_EXPIRY_DAYS).is_ok());
        assert!(accept(MAX_EXPIRY_DAYS + 1).is_err());
        assert!(accept(365 * 30).is_err());
    }

    #[test]
    fn comments_are_bounded_and_free_of_control_characters() {
        let ack = |c: &str| change(TriageState::Acknowledged, None, Some(c), None);
        assert!(ack("line one\nline two\twith a tab").is_ok());
        assert!(ack("bell \u{7}").is_err());
        assert!(ack("escape \u{1b}[31m").is_err());
        assert!(ack(&"é".repeat(MAX_COMMENT_CHARS)).is_ok());
        assert!(ack(&"a".repeat(MAX_COMMENT_CHARS + 1)).is_err());
        assert_eq!(ack("   ").unwrap().comment, None, "blank is none");
    }

    #[test]
    fn the_contracts_comment_pattern_is_the_rule() {
        let pattern = regex::Regex::new(COMMENT_PATTERN).unwrap();
        for c in (0u32..0x300).filter_map(char::from_u32) {
            let text = format!("a{c}b");
            let accepted = change(TriageState::Acknowledged, None, Some(&text), None).is_ok();
            assert_eq!(pattern.is_match(&text), accepted, "{c:?}");
        }
    }

    #[test]
    fn the_largest_bulk_costs_about_half_a_mebibyte_of_the_hours_32() {
        let comment = "𝒜".repeat(MAX_COMMENT_CHARS);
        let largest = stored_cost(MAX_BULK, Some(&comment));
        assert_eq!(largest, 500 * 1024 + 8000);
        assert_eq!(BYTES_RATE.limit / largest, 64, "the largest bulks an hour");
        assert_eq!(stored_cost(1, None), 1024);
        assert_eq!(stored_cost(usize::MAX, None), u32::MAX);
    }

    #[test]
    fn an_expired_mark_reads_as_untriaged_from_its_expiry() {
        let mark = Triage {
            state: TriageState::RiskAccepted,
            reason: Some(TriageReason::WontFix),
            comment: Some("until the migration".into()),
            expires_at: Some(now() + Duration::days(1)),
            updated_at: Some(now()),
            updated_by: None,
        };
        assert_eq!(mark.clone().effective(now()), mark);
        let later = mark.clone().effective(now() + Duration::days(1));
        assert_eq!(later.state, TriageState::Untriaged);
        assert_eq!(later.updated_at, mark.expires_at);
        assert_eq!(later.reason, None);
    }
}
