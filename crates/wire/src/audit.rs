//! The audit feed: `GET /audit-events` (docs/audit.md).

use chrono::{DateTime, Utc};
use posture_domain::{
    audit::{AuditAction, AuditExportFormat},
    console::AuditEvent,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    paging::{CursorParam, Timestamp},
    query::{CommaList, Integer, Limit, OneOf},
};

/// Events per page unless `limit` says otherwise, and the most.
pub const DEFAULT_AUDIT_LIMIT: u32 = 100;
pub const MAX_AUDIT_LIMIT: u32 = 500;

/// One event of the customer's audit feed: who did what to which credential, setting,
/// session or provisioned user, when and from where.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEventResponse {
    /// The event's id: give the last one you read as `after` to read on from it.
    #[schemars(schema_with = "crate::uuid")]
    pub id: String,
    /// What happened (docs/audit.md lists every type with an example).
    #[serde(rename = "type")]
    #[schemars(schema_with = "crate::closed_set::<AuditAction>")]
    pub event_type: AuditAction,
    /// When it happened.
    #[serde(serialize_with = "crate::time::serialize")]
    pub occurred_at: DateTime<Utc>,
    pub actor: AuditActor,
    /// What it happened to: a key, an OAuth client, a SCIM user or group; `null` for a
    /// sign-in, a session or a setting of the customer's.
    pub target: Option<AuditTarget>,
    /// The address the action came from: the admin's, or the credential's (behind the
    /// operator's trusted proxies, the client's); `null` for an operator's command, posture's
    /// own events and SCIM's writes.
    #[schemars(example = &"203.0.113.7")]
    pub source_ip: Option<String>,
    /// What else the event says, for people (the issuer an `sso.set` set, the members a
    /// group change added or removed, an allow-list before and after).
    #[schemars(example = &"allowed from 198.51.100.0/24 (was any address)")]
    pub detail: Option<String>,
}

/// Who did it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditActor {
    /// `admin` (signed in to the console), `operator` (the platform's operator commands),
    /// `scim` (the identity provider's provisioning, by its key), `credential` (a key or an
    /// OAuth client, by its use), `system` (posture itself).
    #[schemars(schema_with = "actor_kind")]
    pub kind: &'static str,
    /// The admin's subject at their identity provider, the key's or client's id, or
    /// `operator` / `posture`.
    #[schemars(example = &"00u1abcd2EFGH3ijk4l5")]
    pub id: String,
    /// The admin's or the credential's name.
    #[schemars(example = &"Ada Admin")]
    pub name: String,
}

fn actor_kind(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["admin", "operator", "scim", "credential", "system"],
    })
}

fn target_kind(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["key", "client", "user", "group"]})
}

/// What it happened to.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditTarget {
    /// `key`, `client` (an OAuth client), `user` or `group` (provisioned by SCIM).
    #[schemars(schema_with = "target_kind")]
    pub kind: &'static str,
    #[schemars(schema_with = "crate::uuid")]
    pub id: String,
    /// Its name when the event happened.
    #[schemars(example = &"splunk-prod")]
    pub name: String,
    /// A key's or client's display prefix (`svc_...`, `pci_...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"svc_k3jx2a")]
    pub prefix: Option<String>,
}

impl AuditEventResponse {
    /// The event as the feed shows it; `None` for a line of a type this version does not
    /// know (written by a newer one during a rollout).
    pub fn of(event: AuditEvent) -> Option<Self> {
        let event_type: AuditAction = event.action.parse().ok()?;
        let by_scim = event.actor_kind == "key"
            && (event.action.starts_with("scim.") || event.action == "session.ended");
        let kind = match event.actor_kind.as_str() {
            "admin" => "admin",
            "operator" => "operator",
            "system" => "system",
            _ if by_scim => "scim",
            _ => "credential",
        };
        let target = if event_type.is_about_a_credential() {
            event.key.as_ref().map(|key| AuditTarget {
                kind: if key.prefix.starts_with("pci_") {
                    "client"
                } else {
                    "key"
                },
                id: key.id.to_string(),
                name: key.name.clone(),
                prefix: Some(key.prefix.clone()),
            })
        } else {
            event.target.as_ref().map(|(id, name)| AuditTarget {
                kind: if event.action.starts_with("scim.group.") {
                    "group"
                } else {
                    "user"
                },
                id: id.to_string(),
                name: name.clone(),
                prefix: None,
            })
        };
        Some(Self {
            id: event.id.to_string(),
            event_type,
            occurred_at: event.at,
            actor: AuditActor {
                kind,
                id: event.actor_subject,
                name: event.actor_name,
            },
            target,
            source_ip: event.source_ip.map(|ip| ip.to_string()),
            detail: event.detail,
        })
    }
}

/// A page of the audit feed, oldest first.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct AuditEventListResponse {
    pub data: Vec<AuditEventResponse>,
    pub meta: AuditListMeta,
}

/// Where the feed goes on from.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditListMeta {
    /// The page size applied (after clamping to 500).
    pub limit: u32,
    /// Where to read on from: the id of this page's last event, or, on an empty page, the
    /// `after` you sent (`null` when you sent none and there are no events). Pass it as
    /// `after` (with the same filters): the feed never ends, so keep it and come back.
    #[schemars(example = &"01a236f7-a281-7700-9019-c14596c0ab61")]
    pub next_cursor: Option<String>,
    /// Whether more events are there now: read on at once while true; when false, come
    /// back later.
    pub has_more: bool,
}

/// The parameters of `GET /audit-events`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEventsQuery {
    /// Only these event types, comma-separated (`type=key.issued,key.revoked`).
    #[serde(default, rename = "type")]
    pub event_type: CommaList<AuditAction>,
    /// Only events at or after this RFC 3339 time.
    pub since: Option<Timestamp>,
    /// Read on after this event: the id of the last event you read (or
    /// `meta.nextCursor`). An id that is no event of yours, or one past the retention, is
    /// 400: start again from `since`.
    pub after: Option<CursorParam>,
    /// Events per page: default 100; above 500 it is clamped to 500, never rejected.
    pub limit: Option<Limit>,
}

impl AuditEventsQuery {
    /// The page size asked for.
    pub fn limit(&self) -> u32 {
        self.limit
            .map(Integer::get)
            .map_or(DEFAULT_AUDIT_LIMIT, |l| {
                u32::try_from(l).unwrap_or(u32::MAX).min(MAX_AUDIT_LIMIT)
            })
    }
}

/// The format of `GET /audit-events/export`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct AuditExportQuery {
    /// `ndjson` (default): one JSON event per line, as `GET /audit-events` shows it. `ocsf`:
    /// one OCSF 1.8.0 event per line (Authentication 3002, Account Change 3001 or API
    /// Activity 6003; docs/audit.md maps each type).
    #[schemars(extend("default" = "ndjson"))]
    pub format: Option<OneOf<AuditExportFormat>>,
}

impl AuditExportQuery {
    pub fn format(&self) -> AuditExportFormat {
        self.format.map_or(AuditExportFormat::Ndjson, |f| f.0)
    }
}
