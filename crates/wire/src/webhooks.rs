//! Webhook subscriptions.

use chrono::{DateTime, Utc};
use posture_domain::{
    delivery::{ChangedField, DeliveryEvent, DeliveryTrigger, FindingChange},
    secrets::SECRET_PATTERN,
    webhook::{
        DisabledReason, EventType, MAX_NAME_LEN, MAX_URL_LEN, NAME_PATTERN, Subscription,
        SubscriptionRequest, SubscriptionStatus, URL_PATTERN, WebhookType,
    },
    webhook_change::{MAX_GRACE_SECS, PatchField, SubscriptionPatchRequest},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A webhook subscription (its signing secret is never shown again after creation).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookResponse {
    #[schemars(schema_with = "crate::uuid")]
    pub id: String,
    pub name: String,
    /// The receiver's URL.
    pub webhook_url: String,
    #[schemars(schema_with = "crate::closed_set::<WebhookType>")]
    pub webhook_type: WebhookType,
    /// The events delivered: new findings of these severities.
    #[schemars(schema_with = "crate::closed_set_list::<EventType>")]
    pub event_types: Vec<EventType>,
    /// True while deliveries are sent (`status` is `active`); false while it is paused or
    /// disabled. (Deleted subscriptions are not served.)
    pub active: bool,
    /// `active`; `paused` by you (new deliveries are held, up to 72 hours, and sent when you
    /// resume); or `disabled` by posture (see `disabledReason`: nothing is queued until you
    /// re-enable it with `PATCH {"active": true}`).
    #[schemars(schema_with = "crate::closed_set::<SubscriptionStatus>")]
    pub status: SubscriptionStatus,
    /// Why posture disabled it: `failing` (every attempt failed for days); `null` unless
    /// `status` is `disabled`.
    #[schemars(schema_with = "crate::nullable_closed_set::<DisabledReason>")]
    pub disabled_reason: Option<DisabledReason>,
    /// While a secret rotation's overlap lasts, when the previous secret stops signing;
    /// `null` otherwise.
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

impl From<Subscription> for WebhookResponse {
    fn from(s: Subscription) -> Self {
        Self {
            id: s.id.to_string(),
            name: s.name,
            webhook_url: s.webhook_url,
            webhook_type: s.webhook_type,
            event_types: s.event_types,
            active: s.active && s.status == SubscriptionStatus::Active,
            status: s.status,
            disabled_reason: s.disabled_reason,
            previous_secret_expires_at: s.previous_secret_expires_at,
            created_at: s.created_at,
        }
    }
}

/// The created subscription with its signing secret: the only response that shows it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedWebhookResponse {
    #[serde(flatten)]
    pub webhook: WebhookResponse,
    /// `whsec_` + base64 of 32 random bytes. Shown once: store it to verify
    /// `X-Service-Signature-256`. If it is lost, rotate it (`POST .../rotate-secret`).
    #[schemars(pattern(SECRET_PATTERN))]
    pub signing_secret: String,
}

/// The body of `POST /webhooks`.
// Deserialised as typed here; `SubscriptionRequest::validate` then checks the rules a type
// cannot state (a public https URL, no control characters).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateWebhookRequest {
    /// A label, 1 to 100 characters, not blank, without control characters.
    #[schemars(length(min = 1, max = MAX_NAME_LEN), pattern(NAME_PATTERN))]
    #[schemars(example = &"SOC critical findings")]
    pub name: String,
    /// An absolute https URL without credentials, at most 2,048 characters (also once
    /// normalised), to a public address on port 443 (the default) or 1024 to 65535. ASCII
    /// only: percent-encode spaces and `"` `'` `<` `>` `` ` `` `{` `}`, and give an
    /// internationalised host in its `xn--` form.
    #[schemars(length(min = 1, max = MAX_URL_LEN), url, pattern(URL_PATTERN))]
    pub webhook_url: String,
    #[schemars(schema_with = "crate::closed_set::<WebhookType>")]
    pub webhook_type: String,
    /// One or more event types; repeated values count once.
    #[schemars(schema_with = "crate::event_types_request")]
    pub event_types: Vec<String>,
}

impl From<CreateWebhookRequest> for SubscriptionRequest {
    fn from(r: CreateWebhookRequest) -> Self {
        Self {
            name: r.name,
            webhook_url: r.webhook_url,
            webhook_type: r.webhook_type,
            event_types: r.event_types,
        }
    }
}

/// A merge-patch field: absent, `null`, or a value.
fn patch_field<'de, D, T>(d: D) -> Result<PatchField<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(match Option::<T>::deserialize(d)? {
        None => PatchField::Null,
        Some(value) => PatchField::Value(value),
    })
}

fn name_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "minLength": 1, "maxLength": MAX_NAME_LEN,
                            "pattern": NAME_PATTERN})
}

fn url_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "minLength": 1, "maxLength": MAX_URL_LEN,
                            "format": "uri", "pattern": URL_PATTERN})
}

fn boolean_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "boolean"})
}

/// The body of `PATCH /webhooks/{id}` (a JSON merge patch): the fields to change, each
/// checked as at creation. `webhookType` and the signing secret cannot be changed.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PatchWebhookRequest {
    /// A new label.
    #[serde(
        default,
        deserialize_with = "patch_field",
        skip_serializing_if = "PatchField::is_absent"
    )]
    #[schemars(schema_with = "name_schema", example = &"SOC critical findings")]
    pub name: PatchField<String>,
    /// A new receiver URL (the same rules as at creation); pending deliveries go there.
    #[serde(
        default,
        deserialize_with = "patch_field",
        skip_serializing_if = "PatchField::is_absent"
    )]
    #[schemars(schema_with = "url_schema")]
    pub webhook_url: PatchField<String>,
    /// The event types, replacing the list.
    #[serde(
        default,
        deserialize_with = "patch_field",
        skip_serializing_if = "PatchField::is_absent"
    )]
    #[schemars(schema_with = "crate::event_types_request")]
    pub event_types: PatchField<Vec<String>>,
    /// `false` pauses the subscription (new deliveries are held, up to 72 hours); `true`
    /// resumes it (held deliveries are sent) or re-enables a disabled one.
    #[serde(
        default,
        deserialize_with = "patch_field",
        skip_serializing_if = "PatchField::is_absent"
    )]
    #[schemars(schema_with = "boolean_schema")]
    pub active: PatchField<bool>,
    /// Immutable: refused with 422 when given.
    #[serde(default, deserialize_with = "patch_field")]
    #[schemars(skip)]
    pub webhook_type: PatchField<serde_json::Value>,
    /// Immutable (rotate it instead): refused with 422 when given.
    #[serde(default, deserialize_with = "patch_field")]
    #[schemars(skip)]
    pub signing_secret: PatchField<serde_json::Value>,
}

impl From<PatchWebhookRequest> for SubscriptionPatchRequest {
    fn from(r: PatchWebhookRequest) -> Self {
        let mut immutable = Vec::new();
        if r.webhook_type != PatchField::Absent {
            immutable.push("webhookType");
        }
        if r.signing_secret != PatchField::Absent {
            immutable.push("signingSecret");
        }
        Self {
            name: r.name,
            webhook_url: r.webhook_url,
            event_types: r.event_types,
            active: r.active,
            immutable,
        }
    }
}

/// The body of `POST /webhooks/{id}/rotate-secret`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RotateSecretRequest {
    /// How long the previous secret keeps signing deliveries next to the new one, in
    /// seconds: 0 (a leaked secret: switch at once) to 604800 (a week); default 86400.
    #[schemars(range(max = MAX_GRACE_SECS), example = 86_400)]
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_seconds"
    )]
    pub grace_period_seconds: Option<u64>,
    /// Rotate even while an earlier rotation's overlap lasts (its previous secret then
    /// stops signing at once). Default false: such a rotation is 409.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// A number of seconds: JSON Schema's `integer` admits `60.0`, so a whole float is read as
/// its integer; a fraction or a negative number is refused.
fn whole_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error as _;
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(None),
        Some(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(f))
                    .map(|f| f as u64)
            })
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("must be a whole number of seconds, got {n}"))),
    }
}

/// The new signing secret: the only response that shows it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotatedSecretResponse {
    /// `whsec_` + base64 of 32 random bytes. Shown once.
    #[schemars(pattern(SECRET_PATTERN))]
    pub signing_secret: String,
    /// When the previous secret stops signing; `null` when it stopped at once.
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
}

/// The body of a `generic` delivery: new findings of one severity from one analyzer pass,
/// or a test (`"test": true`): a `ping` without findings, or one sample finding.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindingEventBody {
    /// The delivery's id, also sent as `X-Service-Delivery` and `webhook-id` (the same on
    /// every retry).
    #[schemars(schema_with = "crate::uuid")]
    pub id: String,
    /// The event type, also sent as `X-Service-Event`.
    #[serde(rename = "type")]
    #[schemars(schema_with = "crate::closed_set::<DeliveryEvent>")]
    pub event_type: DeliveryEvent,
    /// When the delivery was queued (the analyzer pass's commit), or the test was sent.
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// The analyzer pass that found them; for a triage event, the triage change that made
    /// it (absent from a test).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::uuid")]
    pub analyzer_pass_id: Option<String>,
    /// Present, and true, only on a test delivery (`POST /webhooks/{id}/test`): its
    /// findings are samples.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub test: bool,
    pub data: FindingEventData,
}

/// The findings of a delivery.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindingEventData {
    /// Up to 100 findings, in the same shape as `GET /findings`, ordered by id (none in a
    /// `ping`); in a lifecycle event, each with its `change`.
    pub findings: Vec<EventFinding>,
}

/// A finding of a delivery, as the API shows it now.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventFinding {
    /// The event of the feed (`GET /events/{id}`) this finding stands for here: after
    /// missed deliveries, read `GET /events?after=` the last one you received. Absent from
    /// a test, and from deliveries queued before the feed existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::uuid")]
    pub event_id: Option<String>,
    #[serde(flatten)]
    pub finding: crate::findings::FindingResponse,
    /// In a lifecycle event (`finding_resolved`, `finding_reopened`,
    /// `finding_severity_changed`, `finding_suppressed`): what the analyzer pass changed.
    /// Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<FindingChangeResponse>,
}

/// How a finding changed: `field` went from `from` to `to`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindingChangeResponse {
    /// `status` or `severity` (a lifecycle event), `triageState` (a triage event).
    #[schemars(schema_with = "crate::closed_set::<ChangedField>")]
    pub field: ChangedField,
    /// The value before the change (a status, a severity or a triage state).
    pub from: String,
    /// The value after it.
    pub to: String,
}

impl FindingEventBody {
    pub fn new(
        delivery: &posture_domain::delivery::Delivery,
        findings: Vec<crate::findings::FindingResponse>,
    ) -> Self {
        // `changes` follow `finding_ids`; findings are matched to them by id.
        let changes: std::collections::HashMap<String, &FindingChange> = delivery
            .finding_ids
            .iter()
            .map(ToString::to_string)
            .zip(&delivery.changes)
            .collect();
        // So do `event_ids`.
        let events: std::collections::HashMap<String, String> = delivery
            .finding_ids
            .iter()
            .map(ToString::to_string)
            .zip(delivery.event_ids.iter().map(ToString::to_string))
            .collect();
        Self {
            id: delivery.id.to_string(),
            event_type: delivery.event_type,
            created_at: delivery.created_at,
            analyzer_pass_id: delivery.pass_id.map(|p| p.to_string()),
            test: delivery.trigger == DeliveryTrigger::Test,
            data: FindingEventData {
                findings: findings
                    .into_iter()
                    .map(|finding| EventFinding {
                        event_id: events.get(&finding.id).cloned(),
                        change: changes.get(&finding.id).map(|c| FindingChangeResponse {
                            field: c.field,
                            from: c.from.clone(),
                            to: c.to.clone(),
                        }),
                        finding,
                    })
                    .collect(),
            },
        }
    }
}
