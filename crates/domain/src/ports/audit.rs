//! The customer's audit feed and its retention, and the customer's inactivity rule.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::{
    audit::{AuditFilter, AuditPage},
    console::Actor,
    customer::CustomerScope,
    error::Result,
};

/// The customer's audit feed (`GET /api/v1/audit-events`), and its retention.
#[async_trait]
pub trait AuditRepository: Send + Sync {
    /// A page of the customer's feed, oldest first: the events `filter` asks for, written
    /// before `settled`. `NotFound` when `filter.after` names no event of the customer.
    async fn audit_feed(
        &self,
        scope: CustomerScope,
        filter: &AuditFilter,
        settled: DateTime<Utc>,
    ) -> Result<AuditPage>;
    /// Deletes at most `batch` lines (of any customer) older than `before`; how many.
    async fn sweep_audit(&self, before: DateTime<Utc>, batch: u32) -> Result<u64>;
    /// Writes `key.inactive_soon` / `client.inactive_soon` for each credential that stops
    /// working for inactivity within 7 days of `now` (once per credential and last use);
    /// how many were written.
    async fn notice_inactive_soon(&self, now: DateTime<Utc>) -> Result<u64>;
    /// The customer's inactivity rule: days unused after which its credentials stop working
    /// (`None`: never).
    async fn inactivity(&self, scope: CustomerScope) -> Result<Option<u32>>;
    /// Sets (or with `None` clears) the customer's inactivity rule, at once on every
    /// instance, with `inactivity.set` in its audit log (nothing when unchanged).
    /// `NotFound` for an unknown customer.
    async fn set_inactivity(
        &self,
        scope: CustomerScope,
        days: Option<u32>,
        by: &Actor,
    ) -> Result<()>;
}
