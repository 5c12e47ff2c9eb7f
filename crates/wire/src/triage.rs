//! Triage: the `triage` object of a finding, the body of `PATCH /findings/{id}`, and the
//! history of `GET /findings/{id}/triage`.

use chrono::{DateTime, Utc};
use posture_domain::triage::{
    COMMENT_PATTERN, MAX_COMMENT_CHARS, Triage, TriageActor, TriageReason, TriageRecord,
    TriageState,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who wrote a triage mark: the key, by id and by its name then.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriageActorResponse {
    pub key_id: String,
    pub name: String,
}

impl From<TriageActor> for TriageActorResponse {
    fn from(actor: TriageActor) -> Self {
        Self {
            key_id: actor.key_id.to_string(),
            name: actor.key_name,
        }
    }
}

/// The customer's triage of a finding, independent of the analyzer's `status`: a pass that
/// reports the finding again keeps it. A mark past its `expiresAt` reads as `untriaged` at
/// once (its `updatedAt` is then the expiry, `updatedBy` null).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriageResponse {
    #[schemars(schema_with = "crate::closed_set::<TriageState>")]
    pub state: TriageState,
    /// Why it was dismissed or its risk accepted; `null` for the other states.
    #[schemars(schema_with = "crate::nullable_closed_set::<TriageReason>")]
    pub reason: Option<TriageReason>,
    pub comment: Option<String>,
    /// When the mark ends by itself; `null` when it does not.
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When the mark was written (or expired); `null` for a finding never triaged.
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub updated_at: Option<DateTime<Utc>>,
    /// The key that wrote it; `null` when never triaged or expired.
    pub updated_by: Option<TriageActorResponse>,
}

impl From<Triage> for TriageResponse {
    fn from(t: Triage) -> Self {
        Self {
            state: t.state,
            reason: t.reason,
            comment: t.comment,
            expires_at: t.expires_at,
            updated_at: t.updated_at,
            updated_by: t.updated_by.map(Into::into),
        }
    }
}

/// A triage to write: the whole mark, replacing the one before.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(example = triage_request_example())]
pub struct TriageRequest {
    /// `untriaged` resets the finding (no reason, comment or expiry).
    #[schemars(schema_with = "crate::closed_set::<TriageState>")]
    #[schemars(example = &"dismissed")]
    pub state: String,
    /// Required for `dismissed` and `risk_accepted`, refused for the other states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::nullable_closed_set::<TriageReason>")]
    pub reason: Option<String>,
    /// Up to 2,000 characters; line breaks and tabs but no other control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_COMMENT_CHARS), pattern(COMMENT_PATTERN))]
    #[schemars(example = &"Break-glass account, reviewed quarterly")]
    pub comment: Option<String>,
    /// When the mark ends by itself: in the future, at most 366 days ahead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// A valid triage, whenever it is read: a dismissal without an expiry.
fn triage_request_example() -> TriageRequest {
    TriageRequest {
        state: TriageState::Dismissed.as_str().to_owned(),
        reason: Some(TriageReason::FalsePositive.as_str().to_owned()),
        comment: Some("Break-glass account, reviewed quarterly".to_owned()),
        expires_at: None,
    }
}

/// The body of `PATCH /findings/{id}`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchFindingRequest {
    pub triage: TriageRequest,
}

/// One change of a finding's triage.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriageRecordResponse {
    pub id: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub at: DateTime<Utc>,
    /// The key that wrote it; `null` when a mark expired by itself.
    pub by: Option<TriageActorResponse>,
    #[schemars(schema_with = "crate::closed_set::<TriageState>")]
    pub from: TriageState,
    #[schemars(schema_with = "crate::nullable_closed_set::<TriageReason>")]
    pub from_reason: Option<TriageReason>,
    #[schemars(schema_with = "crate::closed_set::<TriageState>")]
    pub to: TriageState,
    #[schemars(schema_with = "crate::nullable_closed_set::<TriageReason>")]
    pub to_reason: Option<TriageReason>,
    pub comment: Option<String>,
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl From<TriageRecord> for TriageRecordResponse {
    fn from(r: TriageRecord) -> Self {
        Self {
            id: r.id.to_string(),
            at: r.at,
            by: r.by.map(Into::into),
            from: r.from,
            from_reason: r.from_reason,
            to: r.to,
            to_reason: r.to_reason,
            comment: r.comment,
            expires_at: r.expires_at,
        }
    }
}
