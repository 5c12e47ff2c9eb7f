//! How the PostgreSQL store is wired into the HTTP API's ports: one store behind every
//! port, the read replicas behind the read routes, and each HTTP worker's own pool.

use std::sync::Arc;

use posture_domain::rate_limit::RateLimiter;
use posture_http::{Ports, ReadReplicas, Reads};
use posture_store_postgres::{PgStore, Replicas};

/// The ports of one HTTP worker: `ports` with every port of the primary, and the reads of
/// every replica, on pools of the worker's own (`PgStore::for_worker`); the rate limiter
/// and the replicas' lag checks stay shared.
pub(super) fn for_worker(
    ports: &Ports,
    pools: &WorkerPools,
) -> Result<Ports, posture_domain::Error> {
    let store = pools.store.for_worker(pools.connections)?;
    let replicas = match &pools.replicas {
        None => ports.replicas.clone(),
        Some(replicas) => Some(replica_reads(
            replicas
                .stores()
                .map(|replica| {
                    let replica = replica.for_worker(pools.connections)?;
                    Ok(reads(&replica.with_primary(&store)))
                })
                .collect::<Result<_, _>>()?,
            replicas.clone(),
        )),
    };
    Ok(assemble(&store, replicas, ports.limiter.clone()))
}

/// The ports over a PostgreSQL store (every data port is the same store) and a rate limiter;
/// the read routes go to `replicas` while one keeps up.
pub fn ports(
    store: &PgStore,
    replicas: Option<Arc<Replicas>>,
    limiter: Arc<dyn RateLimiter>,
) -> Ports {
    let replicas =
        replicas.map(|replicas| replica_reads(replicas.stores().map(reads).collect(), replicas));
    assemble(store, replicas, limiter)
}

/// Every data port on `store`, but the reads `replicas` takes while one keeps up.
fn assemble(
    store: &PgStore,
    replicas: Option<Arc<dyn ReadReplicas>>,
    limiter: Arc<dyn RateLimiter>,
) -> Ports {
    let reads = reads(store);
    let store = Arc::new(store.clone());
    Ports {
        keys: store.clone(),
        clients: store.clone(),
        reads,
        replicas,
        webhooks: store.clone(),
        deliveries: store.clone(),
        events: store.clone(),
        idempotency: store.clone(),
        scim: store.clone(),
        audit: store.clone(),
        health: store,
        limiter,
    }
}

/// The replicas' reads (`reads` in the order of `replicas.stores()`).
fn replica_reads(reads: Vec<Reads>, replicas: Arc<Replicas>) -> Arc<dyn ReadReplicas> {
    Arc::new(ReplicaReads { replicas, reads })
}

/// The read routes' ports on one store.
fn reads(store: &PgStore) -> Reads {
    let store = Arc::new(store.clone());
    Reads {
        tenants: store.clone(),
        identities: store.clone(),
        findings: store.clone(),
        recommendations: store.clone(),
        upr: store.clone(),
        versions: store,
    }
}

/// The read ports of each replica, taken in turn while usable.
struct ReplicaReads {
    replicas: Arc<Replicas>,
    /// In the order of `replicas.stores()`.
    reads: Vec<Reads>,
}

impl ReadReplicas for ReplicaReads {
    fn pick(&self) -> Option<Reads> {
        self.replicas
            .pick()
            .and_then(|i| self.reads.get(i).cloned())
    }
}

/// Database connections of each HTTP worker, its own: `connections` of `store`'s and of
/// each replica's, opened by the worker itself so that their protocol tasks run on its
/// thread ([`PgStore::for_worker`]).
pub struct WorkerPools {
    pub store: PgStore,
    pub replicas: Option<Arc<Replicas>>,
    /// Connections of each worker, to the primary and to each replica (at least 1).
    pub connections: usize,
}

impl WorkerPools {
    /// `total` connections shared out among `workers` workers, each getting at least one.
    pub fn split(
        store: PgStore,
        replicas: Option<Arc<Replicas>>,
        total: usize,
        workers: usize,
    ) -> Self {
        Self {
            store,
            replicas,
            connections: (total / workers.max(1)).max(1),
        }
    }
}
