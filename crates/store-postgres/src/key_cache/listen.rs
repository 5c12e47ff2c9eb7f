//! The `LISTEN` connection that keeps the key cache exact: one per serving process, the
//! cache emptied on every notification and served only while the connection is up.

use std::pin::pin;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use futures_util::StreamExt as _;

use super::{CHANNEL, KeyCacheStats, PING_EVERY, RECONNECT_AFTER};
use crate::PgStore;

/// Why the `LISTEN` connection of the key cache ended.
#[derive(Debug, thiserror::Error)]
enum ListenError {
    #[error("cannot connect")]
    Connect(#[source] diesel::ConnectionError),
    #[error("the connection failed")]
    Query(#[source] diesel::result::Error),
    #[error("the LISTEN connection closed")]
    Closed,
    #[error("the LISTEN connection stopped answering")]
    Stalled,
}

impl PgStore {
    /// Starts serving authenticated keys from memory, invalidated through `LISTEN` (call
    /// once per serving process, inside its runtime). Without it every request reads the
    /// key from the database.
    pub fn start_key_cache(&self) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        tokio::spawn(async move {
            let mut warned = false;
            loop {
                match store.follow_key_changes().await {
                    Ok(()) => {}
                    Err(e) if !warned => {
                        tracing::warn!(
                            error = &e as &dyn std::error::Error,
                            "the key cache is off until PostgreSQL answers its LISTEN connection"
                        );
                        warned = true;
                    }
                    Err(_) => {}
                }
                store.key_cache.set_live(false);
                tokio::time::sleep(RECONNECT_AFTER).await;
            }
        })
    }

    /// Listens until the connection fails; the cache is live meanwhile.
    async fn follow_key_changes(&self) -> Result<(), ListenError> {
        use diesel_async::RunQueryDsl as _;

        let mut conn = AsyncPgConnection::establish(&self.url)
            .await
            .map_err(ListenError::Connect)?;
        diesel::sql_query(format!("LISTEN {CHANNEL}"))
            .execute(&mut conn)
            .await
            .map_err(ListenError::Query)?;
        // Anything cached before this point may have missed a notification.
        self.key_cache.set_live(true);
        tracing::debug!("key cache live");
        loop {
            let quiet = {
                let mut notifications = pin!(conn.notifications_stream());
                match tokio::time::timeout(PING_EVERY, notifications.next()).await {
                    Err(_) => true,
                    Ok(Some(Ok(_))) => {
                        self.key_cache.invalidate();
                        false
                    }
                    Ok(Some(Err(e))) => return Err(ListenError::Query(e)),
                    Ok(None) => return Err(ListenError::Closed),
                }
            };
            if quiet {
                tokio::time::timeout(PING_EVERY, diesel::sql_query("SELECT 1").execute(&mut conn))
                    .await
                    .map_err(|_| ListenError::Stalled)?
                    .map_err(ListenError::Query)?;
            }
        }
    }

    /// Hits and misses of the key cache.
    pub fn key_cache_stats(&self) -> KeyCacheStats {
        self.key_cache.stats()
    }
}
