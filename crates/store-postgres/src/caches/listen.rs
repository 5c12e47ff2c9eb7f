//! The `LISTEN` connection that keeps the caches exact: one per serving process, the key
//! cache emptied on every notification and served only while the connection answers.

use std::{pin::pin, sync::Arc, time::Instant};

use futures_util::{FutureExt as _, StreamExt as _};

use super::{
    keys::{APPLICATION_NAME, CHANNEL, KeyCache, PING_EVERY, PING_TIMEOUT, RECONNECT_AFTER},
    versions::DATA_CHANNEL,
};
use crate::connect::Connector;

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

/// Follows key and data changes on a connection of `listen`'s for ever, reconnecting after
/// a failure; `cache` is served only while the connection answers.
pub(crate) fn follow_key_changes(
    listen: Connector,
    cache: Arc<KeyCache>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut warned = false;
        loop {
            match follow(&listen, &cache).await {
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
            cache.set_live(false);
            tokio::time::sleep(RECONNECT_AFTER).await;
        }
    })
}

/// Listens until the connection fails; the cache is live meanwhile.
async fn follow(listen: &Connector, cache: &KeyCache) -> Result<(), ListenError> {
    use diesel_async::RunQueryDsl as _;

    let mut conn = listen.connect().await.map_err(ListenError::Connect)?;
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
    cache.set_live(true);
    tracing::debug!("key cache live");
    let mut next_ping = Instant::now() + PING_EVERY;
    loop {
        {
            let mut notifications = pin!(conn.notifications_stream());
            loop {
                match tokio::time::timeout_at(next_ping.into(), notifications.next()).await {
                    Err(_) => break,
                    Ok(Some(Ok(notification))) => handle(cache, &notification),
                    Ok(Some(Err(e))) => return Err(ListenError::Query(e)),
                    Ok(None) => return Err(ListenError::Closed),
                }
            }
        }
        let sent = Instant::now();
        tokio::time::timeout(PING_TIMEOUT, crate::connect::probe(&mut conn))
            .await
            .map_err(|_| ListenError::Stalled)?
            .map_err(ListenError::Query)?;
        // The server sent what was pending before its answer; handle it before vouching
        // for the cache.
        {
            let mut notifications = pin!(conn.notifications_stream());
            while let Some(notification) = notifications.next().now_or_never().flatten() {
                handle(cache, &notification.map_err(ListenError::Query)?);
            }
        }
        cache.confirm(sent);
        next_ping = sent + PING_EVERY;
    }
}

/// A key changed (forget every key), or a customer's data did (forget its version).
fn handle(cache: &KeyCache, notification: &diesel::pg::PgNotification) {
    if notification.channel == DATA_CHANNEL {
        cache.data_changed(&notification.payload);
    } else {
        cache.invalidate();
    }
}
