//! The body of an export: one page in memory, the next read while the current one renders,
//! and a watchdog that ends the export when its client stops taking it.
//!
//! The stream hands a chunk to actix and records the time; actix asks for the next one
//! when the socket can take more. If it has not asked within the stall bound, the client
//! is not reading: the watchdog drops the export — its database connection (and snapshot)
//! and its slot go back at once — and the next poll, if one comes, aborts the transfer so
//! the client sees it truncated, never complete.

use std::{
    sync::{
        Arc, Weak,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use actix_web::web::Bytes;
use futures_util::Stream;
use posture_domain::{
    finding::{ExportFormat, Finding},
    ports::FindingBatches,
};

use super::Served as _;
use crate::{error::ApiError, export_slots::ExportSlot};

/// The export's state: the cursor, the page read ahead, the slot it holds.
struct Export {
    cursor: Box<dyn FindingBatches>,
    format: ExportFormat,
    /// The next page, read while the previous one was rendered.
    ahead: Option<posture_domain::Result<Option<Vec<Finding>>>>,
    _slot: ExportSlot,
}

/// A chunk of the body, or why the transfer is aborted.
type Chunk = Result<Bytes, actix_web::Error>;

impl Export {
    /// The next chunk of the body and the export to go on with, or `None` at the end.
    async fn next_chunk(mut self) -> Option<(Chunk, Option<Self>)> {
        let page = match self.ahead.take() {
            Some(page) => page,
            None => self.cursor.next_batch().await,
        };
        match page {
            Ok(Some(batch)) => {
                let format = self.format;
                let render = async move {
                    // Let the read of the next page go out before rendering this one.
                    tokio::task::yield_now().await;
                    format.render(batch)
                };
                let (bytes, ahead) =
                    futures_util::future::join(render, self.cursor.next_batch()).await;
                match bytes {
                    Ok(bytes) => {
                        self.ahead = Some(ahead);
                        Some((Ok(bytes), Some(self)))
                    }
                    Err(e) => {
                        // A line that cannot be rendered ends the export as a database
                        // error does: truncated, never silently short.
                        tracing::error!(error = %e, "rendering an export line failed");
                        Some((Err(ApiError::Internal.into()), None))
                    }
                }
            }
            Ok(None) => None,
            Err(e) => {
                // The status is sent already: abort the response so the client sees a
                // truncated transfer, not a complete but partial export.
                tracing::error!(error = %e, "export failed mid-stream");
                Some((Err(ApiError::Internal.into()), None))
            }
        }
    }
}

/// The export as the stream and its watchdog share it.
struct Shared {
    export: tokio::sync::Mutex<Option<Export>>,
    started: Instant,
    /// Milliseconds after `started` of the last chunk handed over.
    progress_ms: AtomicU64,
}

impl Shared {
    fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.progress_ms.store(ms, Ordering::Release);
    }

    fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.progress_ms.load(Ordering::Acquire));
        self.started.elapsed().saturating_sub(last)
    }
}

/// Ends the export once its client has taken nothing for `stall`.
async fn watchdog(shared: Weak<Shared>, stall: Duration) {
    let tick = (stall / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        let Some(shared) = shared.upgrade() else {
            return; // the export ended
        };
        if shared.idle() < stall {
            continue;
        }
        // Busy reading the database: that is the database's time, bounded by its own
        // statement timeout, not the client's.
        let Ok(mut export) = shared.export.try_lock() else {
            continue;
        };
        if export.take().is_some() {
            metrics::counter!("posture_export_stalls_total").increment(1);
            tracing::info!(
                stall_secs = stall.as_secs_f64(),
                "export ended: its client took nothing for the stall bound"
            );
        }
        return;
    }
}

/// The body of an export over `cursor`, holding `slot` until it ends.
pub(super) fn body(
    cursor: Box<dyn FindingBatches>,
    format: ExportFormat,
    slot: ExportSlot,
    stall: Duration,
) -> impl Stream<Item = Chunk> {
    let shared = Arc::new(Shared {
        export: tokio::sync::Mutex::new(Some(Export {
            cursor,
            format,
            ahead: None,
            _slot: slot,
        })),
        started: Instant::now(),
        progress_ms: AtomicU64::new(0),
    });
    tokio::spawn(watchdog(Arc::downgrade(&shared), stall));
    futures_util::stream::unfold(Some(shared), |shared| async move {
        let shared = shared?;
        let mut slot = shared.export.lock().await;
        let Some(export) = slot.take() else {
            // Ended by the watchdog: abort, so the client cannot take it for complete.
            return Some((
                Err(ApiError::Busy("the export was ended: its client stalled").into()),
                None,
            ));
        };
        let (chunk, rest) = export.next_chunk().await?;
        let more = rest.is_some();
        *slot = rest;
        drop(slot);
        shared.touch();
        Some((chunk, more.then_some(shared)))
    })
}
