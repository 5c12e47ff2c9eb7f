//! A row of `api_keys` (a key, or an OAuth client) and the values it stores.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use posture_domain::{
    ApiKey, CustomerId, Error, KeyId, Result, Scope, ScopeSet, allow_list::AllowList,
};
use uuid::Uuid;

use crate::{error::corrupt, schema::api_keys};

#[derive(Queryable, Selectable)]
#[diesel(table_name = api_keys, check_for_backend(diesel::pg::Pg))]
pub(crate) struct ApiKeyRow {
    pub(crate) id: Uuid,
    pub(crate) customer_id: Uuid,
    pub(crate) name: String,
    pub(crate) prefix: String,
    pub(crate) scopes: Vec<String>,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) expires_at: Option<DateTime<Utc>>,
    pub(crate) revoked_at: Option<DateTime<Utc>>,
    pub(crate) last_used_at: Option<DateTime<Utc>>,
    pub(crate) created_by: String,
    pub(crate) allow_from: Vec<String>,
    pub(crate) last_used_from: Option<String>,
    pub(crate) last_used_user_agent: Option<String>,
}

pub(crate) fn allow_list(stored: &[String]) -> Result<AllowList> {
    AllowList::from_stored(stored).map_err(|e| corrupt("allow-list", e))
}

pub(crate) fn scope_set(scopes: &[String]) -> Result<ScopeSet> {
    scopes
        .iter()
        .map(|s| s.parse::<Scope>().map_err(|e| corrupt("scope", e)))
        .collect()
}

impl TryFrom<ApiKeyRow> for ApiKey {
    type Error = Error;

    fn try_from(row: ApiKeyRow) -> Result<Self> {
        Ok(ApiKey {
            id: KeyId::from_uuid(row.id),
            customer_id: CustomerId::from_uuid(row.customer_id),
            name: row.name,
            prefix: row.prefix,
            scopes: scope_set(&row.scopes)?,
            created_at: row.created_at,
            expires_at: row.expires_at,
            revoked_at: row.revoked_at,
            last_used_at: row.last_used_at,
            last_used_from: row.last_used_from.and_then(|a| a.parse().ok()),
            last_used_user_agent: row.last_used_user_agent,
            created_by: row.created_by,
            allow_from: allow_list(&row.allow_from)?,
        })
    }
}
