//! The events feed: `GET /events` and `GET /events/{id}`.

use chrono::{DateTime, Utc};
use posture_domain::{
    EventId,
    event::{DEFAULT_EVENTS_LIMIT, FindingEvent, MAX_EVENTS_LIMIT},
    webhook::EventType,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    findings::FindingResponse,
    paging::Timestamp,
    query::{CommaList, Integer, Limit, Wait},
    webhooks::FindingChangeResponse,
};

/// One finding event: a finding and what happened to it in one analyzer pass. Webhook
/// deliveries announce the same events (each finding of a delivery names its `eventId`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventResponse {
    /// The event's id: give the last one you read as `after` to read on from it.
    #[schemars(schema_with = "crate::uuid")]
    pub id: String,
    /// What happened: a new finding of a severity (`finding_critical` ... `finding_low`),
    /// a known finding resolved, suppressed, reopened or changed in severity by a pass, or
    /// its triage written by a key (`finding_triaged`) or expired
    /// (`finding_triage_expired`).
    #[serde(rename = "type")]
    #[schemars(schema_with = "crate::closed_set::<EventType>")]
    pub event_type: EventType,
    /// When the analyzer pass that found it committed.
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// The analyzer pass that made the event; for `finding_triaged` and
    /// `finding_triage_expired`, which no pass makes, the triage change that did (the write's
    /// entry in `GET /findings/{id}/triage`, or a round of the expiry sweep).
    #[schemars(schema_with = "crate::uuid")]
    pub analyzer_pass_id: String,
    /// The finding as the API shows it now (as `GET /findings/{id}`, and as a webhook body
    /// shows it when sent).
    pub finding: FindingResponse,
    /// For `finding_resolved`, `finding_suppressed`, `finding_reopened` and
    /// `finding_severity_changed`: what the pass changed; for `finding_triaged` and
    /// `finding_triage_expired`: the triage's state before and after. Absent for a new
    /// finding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<FindingChangeResponse>,
}

impl From<FindingEvent> for EventResponse {
    fn from(e: FindingEvent) -> Self {
        Self {
            id: e.id.to_string(),
            event_type: e.event_type,
            created_at: e.created_at,
            analyzer_pass_id: e.pass_id.to_string(),
            finding: FindingResponse::from(e.finding),
            change: e.change.map(|c| FindingChangeResponse {
                field: c.field,
                from: c.from,
                to: c.to,
            }),
        }
    }
}

/// A page of the feed.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventListResponse {
    /// Events, oldest first.
    pub data: Vec<EventResponse>,
    pub meta: EventListMeta,
}

/// Where the feed goes on from.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventListMeta {
    /// The page size applied (after clamping to 500).
    pub limit: u32,
    /// Where to read on from: the id of this page's last event, or, on an empty page, the
    /// `after` you sent (`null` when you sent none and there are no events). Pass it as
    /// `after` (with the same filters): the feed never ends, so keep it and come back.
    pub next_cursor: Option<String>,
    /// Whether more events are there now: read on at once while true; when false, come back
    /// later (or ask with `wait` to be answered as soon as the next event exists).
    pub has_more: bool,
}

/// The parameters of `GET /events`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsQuery {
    /// Only these event types, comma-separated (`type=finding_critical,finding_resolved`).
    #[serde(default, rename = "type")]
    pub event_type: CommaList<EventType>,
    /// Only events created at or after this RFC 3339 time.
    pub created_since: Option<Timestamp>,
    /// Read on after this event: the id of the last event you read (an event's `id`, a
    /// webhook delivery's `eventId`, or `meta.nextCursor`). An id that is no event of
    /// yours, or one older than the retention period, is 400: start again from
    /// `createdSince`.
    pub after: Option<EventIdParam>,
    /// Events per page: default 100; above 500 it is clamped to 500, never rejected.
    pub limit: Option<Limit>,
    /// Seconds to wait for the next events when there are none yet after `after`: the
    /// answer comes as soon as one exists, or empty at the end of the wait. 0 (the default)
    /// answers at once; above 30 it is clamped to 30. A waiting request counts once against
    /// the rate limit.
    pub wait: Option<Wait>,
}

impl EventsQuery {
    /// The page size asked for.
    pub fn limit(&self) -> u32 {
        self.limit
            .map(Integer::get)
            .map_or(DEFAULT_EVENTS_LIMIT, |l| {
                u32::try_from(l).unwrap_or(u32::MAX).min(MAX_EVENTS_LIMIT)
            })
    }

    /// The seconds to wait (0: none).
    pub fn wait_secs(&self) -> u64 {
        self.wait.map(Integer::get).unwrap_or(0)
    }
}

/// `after` of the feed: an event id, shaped as every cursor is (bounded, base64url
/// alphabet); whether it names an event is the feed's to say.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct EventIdParam(pub crate::paging::CursorParam);

impl EventIdParam {
    /// The event it names, if it has an event id's form.
    pub fn event_id(&self) -> Option<EventId> {
        self.0.0.parse().ok()
    }
}

impl JsonSchema for EventIdParam {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("EventCursor")
    }

    /// A cursor's schema: an event id is the feed's cursor (`meta.nextCursor`).
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::paging::CursorParam::json_schema(generator)
    }
}
