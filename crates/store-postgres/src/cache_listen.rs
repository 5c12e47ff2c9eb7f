//! The `LISTEN` connection that keeps the key cache exact: one per serving process, the
//! cache emptied on every notification and served only while the connection answers.

use std::{pin::pin, time::Instant};

use futures_util::{FutureExt as _, StreamExt as _};

use crate::{
    PgStore,
    caches::{
        APPLICATION_NAME, CHANNEL, DATA_CHANNEL, KeyCacheStats, PING_EVERY, PING_TIMEOUT,
        RECONNECT_AFTER,
    },
};

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

        let mut conn = self.listen.connect().await.map_err(ListenError::Connect)?;
        for channel in [CHANNEL, DATA_CHANNEL] {
            diesel::sql_query(format!("LISTEN {channel}"))
                .execute(&mut conn)
                .await
                .map_err(ListenError::Query)?;
        }
        // Operators can tell it apart in `pg_stat_activity`.
        diesel::sql_query(format!("SET application_name = '{APPLICATION_NAME}'"))
            .execute(&mut conn)
            .await
            .map_err(ListenError::Query)?;
        // Anything cached before this point may have missed a notification.
        self.key_cache.set_live(true);
        tracing::debug!("key cache live");
        let mut next_ping = Instant::now() + PING_EVERY;
        loop {
            {
                let mut notifications = pin!(conn.notifications_stream());
                loop {
                    match tokio::time::timeout_at(next_ping.into(), notifications.next()).await {
                        Err(_) => break,
                        Ok(Some(Ok(notification))) => self.handle(&notification),
                        Ok(Some(Err(e))) => return Err(ListenError::Query(e)),
                        Ok(None) => return Err(ListenError::Closed),
                    }
                }
            }
            let sent = Instant::now();
            tokio::time::timeout(
                PING_TIMEOUT,
                diesel::sql_query("SELECT 1").execute(&mut conn),
            )
            .await
            .map_err(|_| ListenError::Stalled)?
            .map_err(ListenError::Query)?;
            // The server sent what was pending before its answer; handle it before
            // vouching for the cache.
            {
                let mut notifications = pin!(conn.notifications_stream());
                while let Some(notification) = notifications.next().now_or_never().flatten() {
                    self.handle(&notification.map_err(ListenError::Query)?);
                }
            }
            self.key_cache.confirm(sent);
            next_ping = sent + PING_EVERY;
        }
    }

    /// A key changed (forget every key), or a customer's data did (forget its version).
    fn handle(&self, notification: &diesel::pg::PgNotification) {
        if notification.channel == DATA_CHANNEL {
            self.key_cache.data_changed(&notification.payload);
        } else {
            self.key_cache.invalidate();
        }
    }

    /// Hits and misses of the key cache.
    pub fn key_cache_stats(&self) -> KeyCacheStats {
        self.key_cache.stats()
    }
}
