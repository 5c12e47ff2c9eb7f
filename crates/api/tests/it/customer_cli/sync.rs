//! `posture sync`: exactly once while passes commit, resumable, equal to the server.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use posture_cli::{
    mirror::{Mirror, Resource},
    progress::{Progress, Quiet},
    sync::{SyncError, SyncOptions, sync},
};
use posture_domain::Scope;
use posture_test_support::fixtures::{finding, identity, recommendation};
use serde_json::{Value, json};

use super::{TempDb, cli, cli_at, server_rows};
use crate::support::TestApp;

fn pages(page_size: u32) -> SyncOptions {
    SyncOptions {
        page_size,
        ..SyncOptions::default()
    }
}

/// A row without the times a pass moves without modifying the row (`updatedAt`,
/// `lastSeenAt`): a sync reads what was modified, so those are as of the last change.
fn modified_part(row: &Value) -> String {
    let mut row = row.clone();
    for moved in ["updatedAt", "lastSeenAt"] {
        row.as_object_mut().unwrap().remove(moved);
    }
    row.to_string()
}

/// The mirror holds what the server serves, row for row, in the API's bytes.
pub(super) async fn assert_mirror_is_the_server(app: &TestApp, key: &str, db: &TempDb) {
    let mirror = Mirror::open(&db.0).unwrap();
    for resource in Resource::ALL {
        let served: Vec<String> = server_rows(app, key, resource.path())
            .await
            .iter()
            .map(modified_part)
            .collect();
        let mirrored: Vec<String> = mirror
            .rows(resource)
            .unwrap()
            .iter()
            .map(modified_part)
            .collect();
        assert_eq!(mirrored.len(), served.len(), "{}", resource.path());
        for (m, s) in mirrored.iter().zip(&served) {
            assert_eq!(m, s, "{}", resource.path());
        }
    }
}

#[tokio::test]
async fn a_sync_while_passes_commit_writes_each_change_once_and_ends_equal_to_the_server() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    const PASSES: usize = 20;
    const FINDINGS: usize = 40 + PASSES - 1;
    // Passes keep the version they last gave each finding, so "unchanged" is unchanged;
    // each pass adds one finding and changes about a fifth of the others.
    let mut versions = vec![0usize; FINDINGS];
    let mut passes = Vec::new();
    for version in 0..PASSES {
        let mut records = vec![identity("u1", &t, "Ada"), recommendation("r1", &t, "u1")];
        for (i, v) in versions.iter_mut().enumerate().take(40 + version) {
            if (i * 7 + version) % 5 == 0 {
                *v = version;
            }
            let mut f = finding(&format!("f{i:02}"), &t, "low", "open", "u1");
            f["title"] = json!(format!("f{i:02} v{v}"));
            records.push(f);
        }
        passes.push(records);
    }
    let db = TempDb::new("race");
    let (api, _) = cli(&app, &key);
    let done = AtomicBool::new(false);
    let writer = async {
        for records in &passes {
            app.ingest(customer, records).await;
            tokio::task::yield_now().await;
        }
        done.store(true, Ordering::SeqCst);
    };
    let reader = async {
        let (mut syncs, mut new, mut changed) = (0, 0, 0);
        loop {
            let report = sync(&api, db.0.clone(), &Quiet, &pages(7)).await.unwrap();
            syncs += 1;
            let findings = &report.lists[0];
            assert_eq!(findings.list, "findings");
            new += findings.new;
            changed += findings.changed;
            if done.load(Ordering::SeqCst) {
                return (syncs, new, changed);
            }
        }
    };
    let ((), (syncs, new, changed)) = tokio::join!(writer, reader);
    assert!(syncs > 3, "{syncs} syncs while the passes ran");
    // One last sync after the passes.
    let last = sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap();
    let (new, changed) = (new + last.lists[0].new, changed + last.lists[0].changed);
    assert_eq!(new, FINDINGS as u64, "each finding inserted once");
    assert!(changed > 0, "changed findings were read again");
    // Read nothing twice: a sync reads a finding again only when a pass changed it since, so
    // the rewrites are at most the changes the passes made.
    let changes: u64 = (0..PASSES)
        .map(|v| {
            (0..(40 + v).min(FINDINGS))
                .filter(|i| (i * 7 + v) % 5 == 0 && v > 0)
                .count() as u64
        })
        .sum::<u64>()
        + (PASSES as u64 - 1);
    assert!(
        changed <= changes,
        "{changed} rewrites for {changes} changes"
    );
    let again = sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (again.new_rows(), again.changed_rows()),
        (0, 0),
        "a sync with nothing new writes nothing"
    );
    assert_mirror_is_the_server(&app, &key, &db).await;
}

/// Does `then` (stop the sync as Ctrl-C does, cut its network) once `after` rows were read.
struct AfterRows<F: Fn() + Send + Sync> {
    rows: AtomicU64,
    after: u64,
    then: F,
}

impl<F: Fn() + Send + Sync> AfterRows<F> {
    fn new(after: u64, then: F) -> Self {
        Self {
            rows: AtomicU64::new(0),
            after,
            then,
        }
    }
}

impl<F: Fn() + Send + Sync> Progress for AfterRows<F> {
    fn begin(&self, _: &str, _: u64) {}
    fn advance(&self, rows: u64) {
        if self.rows.fetch_add(rows, Ordering::SeqCst) + rows >= self.after {
            (self.then)();
        }
    }
    fn end(&self) {}
    fn say(&self, _: &str) {}
}

#[tokio::test]
async fn a_sync_stopped_midway_goes_on_from_the_last_page_written() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let mut records = vec![identity("u1", &t, "Ada")];
    for i in 0..600 {
        records.push(finding(&format!("f{i:04}"), &t, "medium", "open", "u1"));
    }
    app.ingest(customer, &records).await;
    let db = TempDb::new("resume");
    let (api, _) = cli(&app, &key);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let stopper = AfterRows::new(250, move || {
        let _ = stop.send(true);
    });
    let options = SyncOptions {
        page_size: 50,
        stop: stopped,
    };
    let err = sync(&api, db.0.clone(), &stopper, &options)
        .await
        .unwrap_err();
    let SyncError::Interrupted { list, rows } = err else {
        panic!("{err}");
    };
    assert_eq!(list, "findings");
    assert!((250..600).contains(&rows), "stopped midway: {rows} written");
    // What was read was written, with the cursor after it.
    let mirror = Mirror::open(&db.0).unwrap();
    assert_eq!(mirror.rows(Resource::Findings).unwrap().len() as u64, rows);
    assert!(mirror.state(Resource::Findings).unwrap().pending.is_some());
    drop(mirror);
    let written = rows;
    // A pass commits meanwhile: the resumed sync still ends equal to the server.
    records[1]["title"] = json!("f0000 renamed");
    app.ingest(customer, &records).await;
    let resumed = sync(&api, db.0.clone(), &Quiet, &pages(50)).await.unwrap();
    let findings = &resumed.lists[0];
    assert_eq!(
        findings.new,
        600 - written,
        "the resumed sync reads on from the last page written, not from the start"
    );
    assert_eq!(
        findings.changed, 0,
        "a resumed sync stays within the first page's syncedThrough"
    );
    // The rename of f0000 comes with the next sync (after the resumed one's watermark).
    let next = sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap();
    assert_eq!((next.lists[0].new, next.lists[0].changed), (0, 1));
    assert_mirror_is_the_server(&app, &key, &db).await;
}

#[tokio::test]
async fn a_refused_cursor_restarts_the_list_and_a_key_without_scopes_says_so_in_words() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    app.ingest(
        customer,
        &[
            identity("u1", &t, "Ada"),
            finding("f1", &t, "high", "open", "u1"),
            finding("f2", &t, "low", "open", "u1"),
        ],
    )
    .await;
    let db = TempDb::new("cursor");
    let (api, _) = cli(&app, &key);
    sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap();
    // A first sync stopped midway left a cursor the server no longer accepts (as after a
    // rotation of its secret): the next sync starts that list again from its watermark
    // (none: from the start) instead of failing.
    let conn = rusqlite::Connection::open(&db.0).unwrap();
    conn.execute(
        "UPDATE sync_state SET pending_cursor = 'AAAA', pending_since = NULL, watermark = NULL \
         WHERE resource = 'findings'",
        [],
    )
    .unwrap();
    drop(conn);
    let report = sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap();
    assert_eq!((report.lists[0].new, report.lists[0].changed), (0, 2));
    assert_mirror_is_the_server(&app, &key, &db).await;

    // Only the lists the key may read, and the others named.
    let (_, findings_only) = app.key(customer, &[Scope::ReadFindings]).await;
    let (api, _) = cli(&app, &findings_only);
    let report = sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap();
    assert_eq!(report.lists.len(), 1);
    assert_eq!(report.skipped, ["identities", "roles"]);
    let (_, webhooks_only) = app.key(customer, &[Scope::ManageWebhooks]).await;
    let (api, _) = cli(&app, &webhooks_only);
    let err = sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, SyncError::NothingToRead), "{err}");

    // Another customer's key may not write into this customer's file.
    let (other, _) = app.customer("B").await;
    let other_key = app.key_with_every_scope(other).await;
    let (api, _) = cli(&app, &other_key);
    let err = sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("a mirror holds one customer"),
        "{err}"
    );

    // A key that is not (or no longer) accepted: said in words, nothing written.
    let (api, _) = cli(&app, "svc_not_a_key_at_all");
    let err = sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the key was not accepted: revoked, expired or mistyped (check POSTURE_API_KEY, or \
         POSTURE_CLIENT_ID; `posture whoami` shows what the service knows of a key)"
    );
}

/// The SQL block of docs/cli.md marked for this test.
fn documented_queries() -> String {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md"),
    )
    .unwrap();
    let marker = "<!-- doc-check: test the_documented_queries_run_on_a_synced_file -->\n```sql\n";
    let start = doc.find(marker).expect("the marked block") + marker.len();
    doc[start..start + doc[start..].find("```").unwrap()].to_owned()
}

#[tokio::test]
async fn the_documented_queries_run_on_a_synced_file() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    app.ingest(
        customer,
        &[
            identity("u1", &t, "Ada"),
            identity("u2", &t, "Grace"),
            finding("f1", &t, "critical", "open", "u1"),
            finding("f2", &t, "high", "open", "u1"),
            finding("f3", &t, "high", "open", "u2"),
            finding("f4", &t, "low", "resolved", "u2"),
        ],
    )
    .await;
    let db = TempDb::new("docs");
    let (api, _) = cli(&app, &key);
    sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&db.0).unwrap();
    let mut results: Vec<Vec<(String, i64)>> = Vec::new();
    for statement in documented_queries().split(';').map(str::trim) {
        if statement.is_empty() {
            continue;
        }
        let mut prepared = conn.prepare(statement).unwrap();
        let rows = prepared
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
        // CREATE INDEX returns no columns; the queries return (name, count).
        results.push(rows.unwrap_or_default());
    }
    assert_eq!(
        results,
        [
            vec![],
            vec![("high".into(), 2), ("critical".into(), 1)],
            vec![("Ada".into(), 2), ("Grace".into(), 1)],
        ]
    );
}

/// A TCP relay to the service whose connections can be cut: while cut, every connection
/// (open or new) is dropped, as when the network goes away.
struct Relay {
    base: String,
    cut: Arc<AtomicBool>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn to(app: &TestApp) -> Self {
        let upstream = app.base.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let cut = Arc::new(AtomicBool::new(false));
        let flag = cut.clone();
        let accepting = tokio::spawn(async move {
            let mut open = tokio::task::JoinSet::new();
            let mut watch = tokio::time::interval(std::time::Duration::from_millis(5));
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((mut client, _)) = accepted else { continue };
                        if flag.load(Ordering::SeqCst) {
                            continue; // dropped: the connection is reset
                        }
                        let upstream = upstream.clone();
                        open.spawn(async move {
                            let mut server = tokio::net::TcpStream::connect(upstream).await.unwrap();
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        });
                    }
                    _ = watch.tick() => {
                        if flag.load(Ordering::SeqCst) {
                            open.abort_all();
                        }
                    }
                }
            }
        });
        Self {
            base,
            cut,
            accepting,
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

#[tokio::test]
async fn a_sync_cut_off_by_the_network_goes_on_from_the_last_page_written() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let mut records = vec![identity("u1", &t, "Ada")];
    for i in 0..400 {
        records.push(finding(&format!("f{i:04}"), &t, "medium", "open", "u1"));
    }
    app.ingest(customer, &records).await;
    let relay = Relay::to(&app).await;
    let db = TempDb::new("cut");
    let (api, said) = cli_at(&relay.base, &key);
    let cut = relay.cut.clone();
    let cutter = AfterRows::new(150, move || cut.store(true, Ordering::SeqCst));
    let err = sync(&api, db.0.clone(), &cutter, &pages(50))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("could not reach http://127.0.0.1:")
            && err.to_string().contains("after 4 attempts"),
        "{err}"
    );
    assert_eq!(
        said.lock().unwrap().len(),
        3,
        "each retry said: {:?}",
        said.lock().unwrap()
    );
    let written = Mirror::open(&db.0)
        .unwrap()
        .rows(Resource::Findings)
        .unwrap()
        .len() as u64;
    assert!(
        (150..400).contains(&written),
        "{written} written before the cut"
    );
    // The network is back: the same command goes on from the last page written.
    relay.cut.store(false, Ordering::SeqCst);
    let resumed = sync(&api, db.0.clone(), &Quiet, &pages(50)).await.unwrap();
    assert_eq!(
        (resumed.lists[0].new, resumed.lists[0].changed),
        (400 - written, 0)
    );
    assert_mirror_is_the_server(&app, &key, &db).await;
}
