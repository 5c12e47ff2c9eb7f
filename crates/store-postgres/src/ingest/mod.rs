//! Analyzer passes: one `posture-api ingest` run is one transaction.
//!
//! The customer's row is locked first (`FOR UPDATE`), so passes of one customer run one
//! after the other and "new findings" (first reported by this pass) is well defined.
//! Records are validated line by line ([`PassState`]); data rows are buffered per kind,
//! de-duplicated by key (the last line wins) and written in batches with `unnest` arrays.
//! Identity references may point forward; they are resolved before commit. Totals used by
//! `meta.total` are recomputed at the end. Any error rolls the whole pass back. After the
//! commit, stale planner statistics for the customer are refreshed ([`statistics`]).

mod changes;
mod identities;
mod recent;
mod statistics;
mod writes;

pub use statistics::planned_rows;

use std::{collections::HashMap, hash::Hash};

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Error, FindingId, IdentityId, PassId, RecommendationId,
    finding::FindingUpsert,
    identity::IdentityUpsert,
    ingest::{
        IngestError, IngestItem, MAX_UNKNOWN_FIELD_NAMES, ParsedLine, PassCounts, PassState,
        PassSummary,
    },
    ports::IngestRepository,
    recommendation::RecommendationUpsert,
    upr::UprScoreUpsert,
};

use crate::{
    PgStore,
    error::db_error,
    schema::{analyzer_passes, customer_sync, findings, role_recommendations},
    tenants::{tenant_ids, upsert_tenant},
};

/// Rows buffered per kind before they are written.
const BATCH_ROWS: usize = 5_000;

#[async_trait]
impl IngestRepository for PgStore {
    async fn run_pass(
        &self,
        scope: CustomerScope,
        items: &mut (dyn Iterator<Item = Result<ParsedLine, IngestError>> + Send),
    ) -> Result<PassSummary, IngestError> {
        let mut conn = self.conn().await?;
        let pass_id = PassId::generate();
        let clock = &*self.clock;
        let summary = conn
            .transaction(async |conn| {
                let mut pass = PassRun::new(conn, scope, pass_id, clock);
                pass.run(items).await
            })
            .await
            .map_err(PassError::into_ingest)?;
        let counts = &summary.counts;
        statistics::refresh_after_pass(
            &mut conn,
            scope,
            counts.findings > 0,
            counts.identities > 0,
        )
        .await;
        Ok(summary)
    }
}

/// The pass's `modified_at`, as the lock query computes it.
#[derive(QueryableByName)]
struct PassClock {
    #[diesel(sql_type = diesel::sql_types::Timestamptz)]
    modified_at: DateTime<Utc>,
}

/// Errors inside the pass transaction (diesel needs `From<diesel::result::Error>`).
enum PassError {
    Ingest(IngestError),
    Db(diesel::result::Error),
}

impl From<diesel::result::Error> for PassError {
    fn from(e: diesel::result::Error) -> Self {
        PassError::Db(e)
    }
}

impl From<IngestError> for PassError {
    fn from(e: IngestError) -> Self {
        PassError::Ingest(e)
    }
}

impl PassError {
    fn into_ingest(self) -> IngestError {
        match self {
            PassError::Ingest(e) => e,
            PassError::Db(e) => IngestError::Store(db_error(e)),
        }
    }
}

/// Rows of one kind waiting to be written; a key seen again replaces its row.
struct Batch<K, T> {
    rows: Vec<T>,
    index: HashMap<K, usize>,
}

impl<K: Hash + Eq, T> Batch<K, T> {
    fn new() -> Self {
        Self {
            rows: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn push(&mut self, key: K, row: T) {
        match self.index.get(&key) {
            Some(&i) => self.rows[i] = row,
            None => {
                self.index.insert(key, self.rows.len());
                self.rows.push(row);
            }
        }
    }

    fn is_full(&self) -> bool {
        self.rows.len() >= BATCH_ROWS
    }

    fn take(&mut self) -> Vec<T> {
        self.index.clear();
        std::mem::take(&mut self.rows)
    }
}

struct PassRun<'c> {
    conn: &'c mut AsyncPgConnection,
    scope: CustomerScope,
    pass_id: PassId,
    /// The process's clock: when the pass started and finished (its statistics).
    clock: &'c dyn posture_domain::clock::Clock,
    started_at: DateTime<Utc>,
    /// The pass's time, from PostgreSQL's clock when the customer is locked: the
    /// `modified_at` of every row it changes, and the `updated_at` / `last_seen_at` of every
    /// row it reports, so that a row the pass reports has `updatedAt` no earlier than its
    /// `modifiedAt`. (A finding or recommendation the pass does not report, whose identity
    /// it modifies, is modified without being reported: `updatedAt` stays the last report.)
    modified_at: DateTime<Utc>,
    state: PassState,
    /// Whether the customer had findings when the pass began: without any, no finding can
    /// change, and the pass does not look for changes (a first pass of 200,000 findings
    /// would otherwise probe for each of them in a table it is filling).
    had_findings: bool,
    /// Whether the customer had findings or role recommendations when the pass began: rows
    /// that embed an identity the pass may modify.
    had_embedding_rows: bool,
    counts: PassCounts,
    /// Names of the fields no record type knows, as the summary lists them.
    unknown_field_names: std::collections::BTreeSet<String>,
    identities: Batch<IdentityId, IdentityUpsert>,
    findings: Batch<FindingId, FindingUpsert>,
    recommendations: Batch<RecommendationId, RecommendationUpsert>,
    upr_scores: Batch<(IdentityId, NaiveDate), UprScoreUpsert>,
    /// How the pass changes findings the customer had (its lifecycle events).
    changes: changes::NotedChanges,
    /// The identities whose served fields this pass set (new ones too, when the customer
    /// had findings): their findings and role recommendations are modified with them.
    modified_identities: Vec<String>,
}

impl<'c> PassRun<'c> {
    fn new(
        conn: &'c mut AsyncPgConnection,
        scope: CustomerScope,
        pass_id: PassId,
        clock: &'c dyn posture_domain::clock::Clock,
    ) -> Self {
        let started_at = clock.now();
        Self {
            conn,
            scope,
            pass_id,
            clock,
            started_at,
            modified_at: started_at,
            state: PassState::default(),
            had_findings: true,
            had_embedding_rows: true,
            counts: PassCounts::default(),
            unknown_field_names: std::collections::BTreeSet::new(),
            identities: Batch::new(),
            findings: Batch::new(),
            recommendations: Batch::new(),
            upr_scores: Batch::new(),
            changes: changes::NotedChanges::new(),
            modified_identities: Vec::new(),
        }
    }

    async fn run(
        &mut self,
        items: &mut (dyn Iterator<Item = Result<ParsedLine, IngestError>> + Send),
    ) -> Result<PassSummary, PassError> {
        self.lock_customer().await?;
        self.had_findings = diesel::select(diesel::dsl::exists(
            findings::table.filter(findings::customer_id.eq(self.scope.customer_id().as_uuid())),
        ))
        .get_result(self.conn)
        .await?;
        self.had_embedding_rows = self.had_findings
            || diesel::select(diesel::dsl::exists(role_recommendations::table.filter(
                role_recommendations::customer_id.eq(self.scope.customer_id().as_uuid()),
            )))
            .get_result(self.conn)
            .await?;
        self.state = PassState::new(tenant_ids(self.conn, self.scope).await?);
        for line in items {
            let ParsedLine {
                number,
                item,
                unknown_fields,
            } = line?;
            self.state.check(number, &item)?;
            self.count_unknown(unknown_fields);
            self.accept(number, item).await?;
        }
        self.flush_all().await?;
        self.resolve_references().await?;
        self.modify_rows_of_modified_identities().await?;
        self.finish().await
    }

    fn count_unknown(&mut self, fields: Vec<String>) {
        self.counts.unknown_fields += fields.len() as u64;
        for field in fields {
            if self.unknown_field_names.len() < MAX_UNKNOWN_FIELD_NAMES {
                self.unknown_field_names.insert(field);
            }
        }
    }

    /// Serialises passes of one customer and takes the pass's `modified_at`: later than the
    /// last committed pass's (whose lock this one waited for), so it never goes backwards;
    /// a missing customer fails the pass. The lock is the customer's row of `customer_sync`,
    /// colocated with its data (on Citus, `customers` is on every node: locking a row there
    /// would reach them all).
    async fn lock_customer(&mut self) -> Result<(), PassError> {
        let customer = self.scope.customer_id();
        let lock = || {
            diesel::sql_query(
                "SELECT greatest(clock_timestamp(), \
                                 coalesce(synced_through + interval '1 microsecond', \
                                          '-infinity')) AS modified_at \
                 FROM customer_sync WHERE customer_id = $1 FOR UPDATE",
            )
            .bind::<diesel::sql_types::Uuid, _>(customer.as_uuid())
        };
        let mut locked: Option<PassClock> = lock().get_result(self.conn).await.optional()?;
        if locked.is_none() {
            // The customer's first pass: its row is made (a missing customer fails the
            // foreign key), then locked.
            let made = diesel::insert_into(customer_sync::table)
                .values(customer_sync::customer_id.eq(customer.as_uuid()))
                .on_conflict_do_nothing()
                .execute(self.conn)
                .await;
            match made {
                Err(e) if crate::error::is_foreign_key_violation(&e) => {
                    return Err(IngestError::Store(Error::invalid(
                        "customer",
                        format!("no customer with id {customer}"),
                    ))
                    .into());
                }
                made => made?,
            };
            locked = lock().get_result(self.conn).await.optional()?;
        }
        let clock = locked.ok_or_else(|| {
            IngestError::Store(Error::invalid(
                "customer",
                format!("no customer with id {customer}"),
            ))
        })?;
        self.modified_at = clock.modified_at;
        Ok(())
    }

    async fn accept(&mut self, line: u64, item: IngestItem) -> Result<(), PassError> {
        match item {
            IngestItem::Tenant(tenant) => {
                if upsert_tenant(self.conn, self.scope, &tenant)
                    .await?
                    .is_none()
                {
                    return Err(IngestError::line(
                        line,
                        format!(
                            "tenant {} is connected to another customer",
                            tenant.cloud_tenant_id
                        ),
                    )
                    .into());
                }
                self.state.connect_tenant(tenant.cloud_tenant_id);
                self.counts.tenants += 1;
            }
            IngestItem::Identity(identity) => {
                self.counts.identities += 1;
                self.identities.push(identity.id.clone(), identity);
                if self.identities.is_full() {
                    self.flush_identities().await?;
                }
            }
            IngestItem::Finding(finding) => {
                self.counts.findings += 1;
                self.findings.push(finding.id.clone(), finding);
                if self.findings.is_full() {
                    self.flush_findings().await?;
                }
            }
            IngestItem::RoleRecommendation(rec) => {
                self.counts.role_recommendations += 1;
                self.recommendations.push(rec.id.clone(), rec);
                if self.recommendations.is_full() {
                    self.flush_recommendations().await?;
                }
            }
            IngestItem::UprScore(mut score) => {
                self.counts.upr_scores += 1;
                let recorded_at = *score.recorded_at.get_or_insert(self.modified_at);
                self.upr_scores
                    .push((score.identity_id.clone(), recorded_at.date_naive()), score);
                if self.upr_scores.is_full() {
                    self.flush_upr_scores().await?;
                }
            }
        }
        Ok(())
    }

    async fn flush_all(&mut self) -> Result<(), PassError> {
        // Identities first: the other kinds refer to them.
        self.flush_identities().await?;
        self.flush_findings().await?;
        self.flush_recommendations().await?;
        self.flush_upr_scores().await
    }

    /// Identities referenced but not given in this pass must exist already.
    async fn resolve_references(&mut self) -> Result<(), PassError> {
        let references = self.state.unresolved_references();
        if references.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = references.iter().map(|(id, _)| id.as_str()).collect();
        let missing = writes::missing_identities(self.conn, self.scope, &ids).await?;
        match references
            .iter()
            .find(|(id, _)| missing.contains(id.as_str()))
        {
            None => Ok(()),
            Some((id, line)) => Err(IngestError::line(
                *line,
                format!("identity {id} is not known for this customer (add an identity record)"),
            )
            .into()),
        }
    }

    async fn finish(&mut self) -> Result<PassSummary, PassError> {
        let customer = self.scope.customer_id().as_uuid();
        if self.counts.findings > 0 || self.counts.tenants > 0 {
            writes::recompute_finding_totals(self.conn, self.scope).await?;
        }
        if self.counts.identities > 0 || self.counts.tenants > 0 {
            writes::recompute_identity_totals(self.conn, self.scope).await?;
        }
        let new_findings: i64 = findings::table
            .filter(findings::customer_id.eq(customer))
            .filter(findings::first_pass_id.eq(self.pass_id.as_uuid()))
            .count()
            .get_result(self.conn)
            .await?;
        self.counts.new_findings = new_findings as u64;
        let fan_out_started = std::time::Instant::now();
        let pass = (customer, self.pass_id, self.modified_at);
        let last = crate::deliveries::last_event(self.conn, customer).await?;
        let lifecycle = changes::lifecycle_events(&self.changes);
        self.counts.events =
            crate::deliveries::record_events(self.conn, pass, last, &lifecycle).await? as u64;
        if self.counts.events > 0 {
            self.counts.deliveries =
                crate::deliveries::fan_out(self.conn, pass, last).await? as u64;
        }
        let fan_out = fan_out_started.elapsed();
        let finished_at = self.clock.now();
        let count = |n: u64| i32::try_from(n).unwrap_or(i32::MAX);
        diesel::insert_into(analyzer_passes::table)
            .values((
                analyzer_passes::customer_id.eq(customer),
                analyzer_passes::id.eq(self.pass_id.as_uuid()),
                analyzer_passes::started_at.eq(self.started_at),
                analyzer_passes::finished_at.eq(finished_at),
                analyzer_passes::tenants.eq(count(self.counts.tenants)),
                analyzer_passes::identities.eq(count(self.counts.identities)),
                analyzer_passes::findings.eq(count(self.counts.findings)),
                analyzer_passes::new_findings.eq(count(self.counts.new_findings)),
                analyzer_passes::role_recommendations.eq(count(self.counts.role_recommendations)),
                analyzer_passes::upr_scores.eq(count(self.counts.upr_scores)),
                analyzer_passes::modified_at.eq(self.modified_at),
            ))
            .execute(self.conn)
            .await?;
        diesel::update(customer_sync::table.find(customer))
            .set(customer_sync::synced_through.eq(self.modified_at))
            .execute(self.conn)
            .await?;
        // What the read routes show has changed: their ETags change with the version.
        diesel::sql_query("SELECT bump_data_version($1)")
            .bind::<diesel::sql_types::Uuid, _>(customer)
            .execute(self.conn)
            .await?;
        Ok(PassSummary {
            pass_id: self.pass_id,
            started_at: self.started_at,
            finished_at,
            counts: self.counts.clone(),
            fan_out,
            unknown_field_names: std::mem::take(&mut self.unknown_field_names)
                .into_iter()
                .collect(),
        })
    }
}
