//! `posture`, the customers' CLI, driven as a library against a served instance: its sync
//! into SQLite, its export and its forwarding of the events feed.

mod errors;
mod export;
mod listen;
mod oauth;
mod renames;
mod sync;
mod triage;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use posture_cli::client::{Api, Retries, Target};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::TestApp;

/// The CLI's client of `app` with `key`; what it says while it waits is kept.
fn cli(app: &TestApp, key: &str) -> (Api, Arc<Mutex<Vec<String>>>) {
    cli_at(&app.base, key)
}

/// The CLI's client of the service at `base`, retrying 4 times with short waits.
fn cli_at(base: &str, key: &str) -> (Api, Arc<Mutex<Vec<String>>>) {
    let said = Arc::new(Mutex::new(Vec::new()));
    let kept = said.clone();
    let retries = Retries {
        first_wait: Duration::from_millis(20),
        max_wait: Duration::from_millis(200),
        attempts: 4,
    };
    let target = Target::new(Some(base), Some(key)).unwrap();
    let api = Api::new(
        target,
        retries,
        Arc::new(move |text: &str| kept.lock().unwrap().push(text.to_owned())),
    )
    .unwrap();
    (api, said)
}

/// A SQLite file in the system's temporary directory, removed when dropped.
struct TempDb(std::path::PathBuf);

impl TempDb {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "posture-cli-it-{name}-{}-{}.db",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        Self(path)
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Every row of a list as the API serves it now, by id.
async fn server_rows(app: &TestApp, key: &str, list: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut url = format!("/api/v1/{list}?limit=500");
    loop {
        let body = app.get_json(&url, key, StatusCode::OK).await;
        rows.extend(body["data"].as_array().unwrap().iter().cloned());
        match body["meta"]["nextCursor"].as_str() {
            Some(cursor) => url = format!("/api/v1/{list}?limit=500&after={cursor}"),
            None => break,
        }
    }
    rows.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    rows
}
