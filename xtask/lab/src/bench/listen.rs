//! A `LISTEN posture_data` of the bench's own: when each customer's data changed, as the
//! serving processes hear it (the events feed's commit-to-consumer times start there).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Instant,
};

use futures_util::StreamExt as _;

/// A `LISTEN` connection of the bench's own; closed when dropped.
pub(super) struct Listener {
    _client: tokio_postgres::Client,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// When the first data-change notification of each customer arrived.
pub(super) type Notified = Arc<Mutex<HashMap<String, Instant>>>;

/// `LISTEN posture_data` on a connection of the bench's own: records in `notified` the
/// instant the first notification naming each customer arrives.
pub(super) async fn listen(database_url: &str, notified: Notified) -> anyhow::Result<Listener> {
    let (client, mut connection) =
        tokio_postgres::connect(database_url, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = message {
                notified
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .entry(n.payload().to_owned())
                    .or_insert_with(Instant::now);
            }
        }
    });
    client.batch_execute("LISTEN posture_data").await?;
    Ok(Listener {
        _client: client,
        driver,
    })
}
