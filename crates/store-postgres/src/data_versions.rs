//! Customers' data versions (the `ETag` of conditional reads) and pass bounds, from the
//! primary's cache (`caches/versions.rs`) or read from the database.
//!
//! A triage mark reads `untriaged` from its `expiresAt` on (on the store's clock), before
//! the worker's sweep records it with a change: so each version is read with the customer's
//! earliest expiry not recorded yet, and once that has passed, the latest expiry passed is
//! read with every version (one probe of the partial index of marks with an expiry) and
//! tags the reads with it, until the sweep records them.
//!
//! A read replica answers from the primary's cache too, for the versions whose WAL position
//! it has replayed (as last measured: by its lag check, or by its own last version read). On
//! a miss it reads its own database, as it always did, and asks the primary for the version
//! in the background, so that its next requests find it: a replica's request never waits
//! for the primary.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Result,
    ports::{DataVersion, DataVersionRepository},
};
use uuid::Uuid;

use crate::{
    PgStore,
    caches::{KeyCache, ReadVersion, Reader},
    error::db_error,
    replay::ReplayState,
    store::ReplicaLink,
};

/// The node's WAL position as a number: on the primary, its insert position (at or past
/// the commit record of every transaction a statement's snapshot sees, even with
/// `synchronous_commit = off`); on a standby, the position it has replayed.
pub(crate) const WAL_POSITION: &str = "(coalesce(CASE WHEN pg_is_in_recovery() \
     THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END, '0/0') \
     - '0/0'::pg_lsn)::int8";

/// Tells the serving processes that these customers' data changed, when the caller's
/// transaction commits (`NOTIFY posture_data`).
///
/// The data-version triggers of `tenants` and `webhook_subscriptions` notify too, but on
/// Citus they run on the worker node that holds the row, and a notification there never
/// reaches the `LISTEN` on the coordinator: every change of posture's to those tables calls
/// this as well, on the coordinator. On one node both arrive in one transaction, and
/// PostgreSQL delivers the same notification once.
pub(crate) async fn notify_data_changed(
    conn: &mut AsyncPgConnection,
    customers: &[Uuid],
) -> QueryResult<()> {
    if customers.is_empty() {
        return Ok(());
    }
    diesel::sql_query(format!(
        "SELECT pg_notify('{}', c::text) FROM unnest($1::uuid[]) AS c",
        crate::caches::DATA_CHANNEL
    ))
    .bind::<diesel::sql_types::Array<diesel::sql_types::Uuid>, _>(customers)
    .execute(conn)
    .await
    .map(drop)
}

/// Customers whose version a replica's background reads of the primary fetch at once, at
/// most (more misses meanwhile read the replica alone).
const MAX_FILLING: usize = 256;

impl PgStore {
    /// A store on the replica behind `self`'s pool whose versions come from `primary`'s
    /// cache, the position it has replayed recorded in `state`.
    pub(crate) fn replica_of(self, primary: &PgStore, state: Arc<ReplayState>) -> Self {
        let mut store = self;
        store.replica = Some(Arc::new(ReplicaLink {
            primary: primary.clone(),
            state,
        }));
        store
    }

    /// The same replica's store, filling the cache through `primary` (an HTTP worker's own
    /// store of the primary, [`PgStore::for_worker`]); a store of the primary is returned
    /// as it is.
    pub fn with_primary(&self, primary: &PgStore) -> Self {
        match &self.replica {
            Some(link) => self.clone().replica_of(primary, link.state.clone()),
            None => self.clone(),
        }
    }

    /// The cache of the versions this store serves, and who it is to that cache.
    pub(crate) fn version_cache(&self) -> (&KeyCache, Reader) {
        match &self.replica {
            None => (&self.key_cache, Reader::Primary),
            Some(link) => (
                &link.primary.key_cache,
                Reader::Replica {
                    replayed: link.state.position(),
                },
            ),
        }
    }

    /// The customer's cached pass bound, if this store may take it (see
    /// [`PgStore::version_cache`]).
    pub(crate) fn cached_synced_through(&self, customer: Uuid) -> Option<Option<DateTime<Utc>>> {
        let (cache, reader) = self.version_cache();
        cache.synced_through(customer, reader)
    }

    /// Reads the customer's version into the primary's cache, in the background, unless a
    /// read is already under way or the cache is not served.
    fn fill_later(link: &ReplicaLink, customer: Uuid) {
        if !link.primary.key_cache.is_live() {
            return;
        }
        {
            let mut filling = link
                .state
                .filling
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if filling.len() >= MAX_FILLING || !filling.insert(customer) {
                return;
            }
        }
        let link = link.clone();
        tokio::spawn(async move {
            if let Err(e) = link.primary.read_and_cache(customer).await {
                tracing::debug!(error = %e, "reading a data version from the primary failed");
            }
            link.state
                .filling
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .remove(&customer);
        });
    }

    /// Reads the customer's version on this store's node and caches it (the primary's).
    async fn read_and_cache(&self, customer: Uuid) -> Result<ReadVersion> {
        let generation = self.key_cache.data_generation();
        let mut conn = self.conn().await?;
        let read = read_version(&mut conn, customer).await.map_err(db_error)?;
        self.key_cache
            .insert_data_version(customer, read, generation);
        Ok(read)
    }

    /// The customer's version and earliest unrecorded triage expiry: cached, or read.
    async fn version_and_expiry(&self, customer: Uuid) -> Result<(u64, Option<DateTime<Utc>>)> {
        let (cache, reader) = self.version_cache();
        if let Some(cached) = cache.data_version(customer, reader) {
            return Ok(cached);
        }
        let read = match &self.replica {
            None => self.read_and_cache(customer).await?,
            Some(link) => {
                Self::fill_later(link, customer);
                let mut conn = self.conn().await?;
                let read = read_version(&mut conn, customer).await.map_err(db_error)?;
                link.state.replayed(read.position);
                read
            }
        };
        Ok((read.version, read.next_expiry))
    }
}

/// The customer's version and pass bound on the node of `conn`, with the node's
/// [`WAL_POSITION`] read in the same statement.
async fn read_version(conn: &mut AsyncPgConnection, customer: Uuid) -> QueryResult<ReadVersion> {
    // With the pass bound, which the lists report: cached together (caches/versions.rs).
    // Every row read is the customer's, each table filtered by it (on Citus colocated:
    // one node answers the statement).
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
        version: Option<i64>,
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>)]
        synced_through: Option<DateTime<Utc>>,
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>)]
        next_expiry: Option<DateTime<Utc>>,
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        position: i64,
    }
    let Row {
        version,
        synced_through,
        next_expiry,
        position,
    } = diesel::sql_query(format!(
        "SELECT v.version, s.synced_through, \
         (SELECT min(f.triage_expires_at) FROM findings f \
          WHERE f.customer_id = $1 AND f.triage_expires_at IS NOT NULL) \
           AS next_expiry, \
         {WAL_POSITION} AS position \
         FROM customer_sync s \
         LEFT JOIN customer_data_versions v ON v.customer_id = s.customer_id \
         WHERE s.customer_id = $1"
    ))
    .bind::<diesel::sql_types::Uuid, _>(customer)
    .get_result(conn)
    .await
    .optional()?
    // No row: no pass and no change yet (a version comes with the customer's row of
    // customer_sync: bump_data_version makes it), and nothing to wait for.
    .unwrap_or(Row {
        version: None,
        synced_through: None,
        next_expiry: None,
        position: 0,
    });
    Ok(ReadVersion {
        // No version row: nothing has changed since the customer was created.
        version: version.unwrap_or(0).max(0) as u64,
        synced_through,
        next_expiry,
        position: position.max(0) as u64,
    })
}

/// The customer's latest triage expiry at or before `now` that the sweep has not recorded.
async fn expired_through(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    now: DateTime<Utc>,
) -> QueryResult<Option<DateTime<Utc>>> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>)]
        through: Option<DateTime<Utc>>,
    }
    diesel::sql_query(
        "SELECT max(triage_expires_at) AS through FROM findings \
         WHERE customer_id = $1 AND triage_expires_at <= $2",
    )
    .bind::<diesel::sql_types::Uuid, _>(customer)
    .bind::<diesel::sql_types::Timestamptz, _>(now)
    .get_result::<Row>(conn)
    .await
    .map(|row| row.through)
}

#[async_trait]
impl DataVersionRepository for PgStore {
    async fn data_version(&self, scope: CustomerScope) -> Result<DataVersion> {
        let customer = scope.customer_id().as_uuid();
        let (changes, next_expiry) = self.version_and_expiry(customer).await?;
        // Reads judge an expiry on the store's clock: so does the tag.
        let now = self.clock.now();
        let expired_through = match next_expiry {
            Some(next) if next <= now => {
                let mut conn = self.conn().await?;
                expired_through(&mut conn, customer, now)
                    .await
                    .map_err(db_error)?
            }
            _ => None,
        };
        Ok(DataVersion {
            changes,
            expired_through,
        })
    }
}
