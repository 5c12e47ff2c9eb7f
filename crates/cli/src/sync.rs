//! `posture sync`: the loop of docs/api.md "Keeping in sync", into a [`Mirror`].
//!
//! Pages are read while the previous ones are written: a blocking task owns the SQLite
//! connection and writes each page with the cursor that follows it. Stopping at any moment (Ctrl-C, a
//! network cut that outlasts the retries, a kill) loses at most the pages not yet written;
//! the next run starts after the last one that was.

use std::{path::PathBuf, time::Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::{
    client::{Api, ApiError},
    mirror::{Mirror, MirrorError, Page, Resource, Written},
    whoami::{self, KeyInfo},
};

/// Rows per request: the most the API serves in a page.
pub const PAGE_SIZE: u32 = 500;

pub use crate::progress::{Progress, Quiet};

/// What one list's sync did.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ListReport {
    pub list: &'static str,
    pub new: u64,
    pub changed: u64,
    pub pages: u64,
    /// Where the next sync starts (`syncedThrough`).
    pub synced_through: Option<String>,
}

/// What a sync did.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    pub customer: String,
    pub lists: Vec<ListReport>,
    /// Lists the key may not read (no scope), left as they were.
    pub skipped: Vec<&'static str>,
    pub seconds: f64,
}

impl SyncReport {
    pub fn new_rows(&self) -> u64 {
        self.lists.iter().map(|l| l.new).sum()
    }

    pub fn changed_rows(&self) -> u64 {
        self.lists.iter().map(|l| l.changed).sum()
    }
}

/// Why a sync stopped.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    #[error("the key may read none of findings, identities and role recommendations")]
    NothingToRead,
    #[error(
        "interrupted while reading {list} ({rows} rows of it written): run the same command \
         to go on from the last page written"
    )]
    Interrupted { list: &'static str, rows: u64 },
}

#[derive(Deserialize)]
struct ListBody {
    data: Vec<Value>,
    meta: ListMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    total: u64,
    next_cursor: Option<String>,
    synced_through: Option<String>,
}

/// How a sync reads, and when it stops early.
#[derive(Clone, Debug)]
pub struct SyncOptions {
    /// Rows per request (tests use small pages to have many).
    pub page_size: u32,
    /// Set to `true` to stop: the sync stops reading, writes what it has read, and returns
    /// [`SyncError::Interrupted`] (Ctrl-C).
    pub stop: watch::Receiver<bool>,
}

impl Default for SyncOptions {
    fn default() -> Self {
        Self {
            page_size: PAGE_SIZE,
            stop: watch::channel(false).1,
        }
    }
}

/// Mirrors every list the key may read into the file at `into`.
pub async fn sync(
    api: &Api,
    into: PathBuf,
    progress: &dyn Progress,
    options: &SyncOptions,
) -> Result<SyncReport, SyncError> {
    let page_size = options.page_size.to_string();
    let started = Instant::now();
    let key = whoami::fetch(api).await?.key;
    let (lists, skipped): (Vec<Resource>, Vec<Resource>) = Resource::ALL
        .into_iter()
        .partition(|r| key.scopes.iter().any(|s| s == r.scope()));
    if lists.is_empty() {
        return Err(SyncError::NothingToRead);
    }
    let mut mirror = open(into, &key, api.target().base.as_str()).await?;
    let mut reports = Vec::new();
    for resource in lists {
        let read = (&page_size[..], options.stop.clone());
        let (back, report) = sync_list(api, mirror, resource, progress, read).await?;
        mirror = back;
        reports.push(report);
    }
    Ok(SyncReport {
        customer: key.customer.name,
        lists: reports,
        skipped: skipped.into_iter().map(Resource::path).collect(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

async fn open(into: PathBuf, key: &KeyInfo, url: &str) -> Result<Mirror, MirrorError> {
    let (id, name, url) = (
        key.customer.id.clone(),
        key.customer.name.clone(),
        url.to_owned(),
    );
    blocking(move || {
        let mirror = Mirror::open(&into)?;
        mirror.bind(&id, &name, &url)?;
        Ok(mirror)
    })
    .await
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, MirrorError> + Send + 'static,
) -> Result<T, MirrorError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// One list: reads pages while a thread writes the ones read; returns the mirror.
async fn sync_list(
    api: &Api,
    mirror: Mirror,
    resource: Resource,
    progress: &dyn Progress,
    (page_size, stop): (&str, watch::Receiver<bool>),
) -> Result<(Mirror, ListReport), SyncError> {
    let (state, mut mirror) = blocking(move || Ok((mirror.state(resource)?, mirror))).await?;
    // Two pages in flight at most: one being written, one waiting.
    let (pages, mut to_write) = mpsc::channel::<Page>(2);
    let writer = tokio::task::spawn_blocking(move || {
        let mut written = Written::default();
        let mut count = 0;
        while let Some(page) = to_write.blocking_recv() {
            let w = mirror.write(&page)?;
            written.new += w.new;
            written.changed += w.changed;
            count += 1;
        }
        Ok::<_, MirrorError>((mirror, written, count))
    });
    let from = (state.watermark, state.pending);
    let read = read_pages(
        api,
        resource,
        from,
        &pages,
        progress,
        (page_size, stop.clone()),
    )
    .await;
    drop(pages);
    progress.end();
    let (mut mirror, written, pages) = match writer.await {
        Ok(result) => result?,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    let synced_through = match read {
        Ok(through) => through,
        Err(ReadError::RefusedCursor) => {
            // The saved cursor is no longer the server's (its secret was rotated): start
            // this list again from its watermark; rows read twice are written twice, alike.
            mirror = blocking(move || {
                mirror.drop_pending(resource)?;
                Ok(mirror)
            })
            .await?;
            return Box::pin(sync_list(
                api,
                mirror,
                resource,
                progress,
                (page_size, stop),
            ))
            .await;
        }
        Err(ReadError::Api(e)) => return Err(e.into()),
        Err(ReadError::Stopped) => {
            return Err(SyncError::Interrupted {
                list: resource.path(),
                rows: written.new + written.changed,
            });
        }
    };
    let report = ListReport {
        list: resource.path(),
        new: written.new,
        changed: written.changed,
        pages,
        synced_through,
    };
    Ok((mirror, report))
}

/// Resolves when the stop is set; never when nobody can set it.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

enum ReadError {
    RefusedCursor,
    Stopped,
    Api(ApiError),
}

/// Reads a list from where its sync stands, handing each page to the writer; returns the
/// `syncedThrough` the pages were read up to.
async fn read_pages(
    api: &Api,
    resource: Resource,
    (watermark, pending): (Option<String>, Option<crate::mirror::Pending>),
    pages: &mpsc::Sender<Page>,
    progress: &dyn Progress,
    (page_size, mut stop): (&str, watch::Receiver<bool>),
) -> Result<Option<String>, ReadError> {
    let (since, mut cursor) = match pending {
        Some(p) => (p.since, Some(p.cursor)),
        None => (watermark, None),
    };
    let mut began = false;
    loop {
        let mut query = vec![("limit", page_size)];
        match &since {
            Some(since) => query.push(("modifiedSince", since.as_str())),
            None => query.push(("order", "modified")),
        }
        if let Some(cursor) = &cursor {
            query.push(("after", cursor.as_str()));
        }
        let read = tokio::select! {
            read = api.get_json(resource.path(), &query) => read,
            () = stopped(&mut stop) => return Err(ReadError::Stopped),
        };
        let body: ListBody = match read {
            Ok((body, _)) => body,
            // Only the saved cursor (the first request) restarts the list: one the service
            // has just issued and refuses is an error, never a loop.
            Err(e) if cursor.is_some() && !began && e.is_refused_cursor() => {
                return Err(ReadError::RefusedCursor);
            }
            Err(e) => return Err(ReadError::Api(e)),
        };
        if !began {
            progress.begin(resource.path(), body.meta.total);
            began = true;
        }
        progress.advance(body.data.len() as u64);
        let last = body.meta.next_cursor.is_none();
        let page = Page {
            resource,
            rows: body.data,
            since: since.clone(),
            next_cursor: body.meta.next_cursor.clone(),
            synced_through: body.meta.synced_through.clone(),
        };
        if pages.send(page).await.is_err() {
            // The writer stopped: its error is what the caller reports.
            return Ok(None);
        }
        if last {
            return Ok(body.meta.synced_through.or(since));
        }
        cursor = body.meta.next_cursor;
    }
}
