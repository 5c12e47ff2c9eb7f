//! A subscription's row and how it becomes the domain's [`Subscription`].

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use posture_domain::{
    Error, Result, WebhookId,
    webhook::{EventType, Subscription, SubscriptionStatus},
};
use uuid::Uuid;

use crate::{error::corrupt, schema::webhook_subscriptions};

#[derive(Queryable, Selectable, QueryableByName)]
#[diesel(table_name = webhook_subscriptions, check_for_backend(diesel::pg::Pg))]
pub(crate) struct SubscriptionRow {
    id: Uuid,
    name: String,
    webhook_url: String,
    webhook_type: String,
    event_types: Vec<String>,
    active: bool,
    created_at: DateTime<Utc>,
    deactivated_at: Option<DateTime<Utc>>,
    paused_at: Option<DateTime<Utc>>,
    disabled_at: Option<DateTime<Utc>>,
    disabled_reason: Option<String>,
    previous_secret_expires_at: Option<DateTime<Utc>>,
    version: i32,
}

impl TryFrom<SubscriptionRow> for Subscription {
    type Error = Error;

    fn try_from(row: SubscriptionRow) -> Result<Self> {
        Ok(Subscription {
            id: WebhookId::from_uuid(row.id),
            name: row.name,
            webhook_url: row.webhook_url,
            webhook_type: row
                .webhook_type
                .parse()
                .map_err(|e| corrupt("webhook type", e))?,
            event_types: row
                .event_types
                .iter()
                .map(|e| {
                    e.parse::<EventType>()
                        .map_err(|err| corrupt("event type", err))
                })
                .collect::<Result<_>>()?,
            active: row.active,
            status: match (row.disabled_at, row.paused_at) {
                (Some(_), _) => SubscriptionStatus::Disabled,
                (None, Some(_)) => SubscriptionStatus::Paused,
                (None, None) => SubscriptionStatus::Active,
            },
            disabled_reason: row
                .disabled_reason
                .map(|r| r.parse().map_err(|e| corrupt("disabled reason", e)))
                .transpose()?,
            previous_secret_expires_at: row.previous_secret_expires_at,
            version: row.version.max(1) as u32,
            created_at: row.created_at,
            deactivated_at: row.deactivated_at,
        })
    }
}
