//! The local mirror: one SQLite file per customer holding findings, identities and role
//! recommendations as the API serves them, and where each list's sync stands.
//!
//! Every row keeps the API's JSON whole (`data`), so fields a newer service adds are kept
//! too; the columns people query are generated from it by SQLite. A page and the position
//! after it are written in one transaction: a sync stopped at any moment resumes from the
//! last page written, and a page written twice changes nothing.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension as _, params};
use serde_json::Value;

/// The lists a sync mirrors, with their API path and their table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Findings,
    Identities,
    Roles,
}

impl Resource {
    pub const ALL: [Resource; 3] = [Resource::Findings, Resource::Identities, Resource::Roles];

    /// The API path and the name the CLI shows.
    pub fn path(self) -> &'static str {
        match self {
            Resource::Findings => "findings",
            Resource::Identities => "identities",
            Resource::Roles => "roles",
        }
    }

    /// The SQLite table.
    pub fn table(self) -> &'static str {
        match self {
            Resource::Findings => "findings",
            Resource::Identities => "identities",
            Resource::Roles => "role_recommendations",
        }
    }

    /// The scope a key needs to read it.
    pub fn scope(self) -> &'static str {
        match self {
            Resource::Findings => "read:findings",
            Resource::Identities => "read:identities",
            Resource::Roles => "read:roles",
        }
    }
}

/// The schema, version 1 (`PRAGMA user_version`); docs/cli.md documents it.
const SCHEMA: &str = r#"
CREATE TABLE mirror (
  key   TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
);
CREATE TABLE sync_state (
  resource       TEXT PRIMARY KEY NOT NULL,
  watermark      TEXT,
  pending_since  TEXT,
  pending_cursor TEXT,
  synced_at      TEXT
);
CREATE TABLE findings (
  id              TEXT PRIMARY KEY NOT NULL,
  data            TEXT NOT NULL,
  cloud_tenant_id TEXT GENERATED ALWAYS AS (data ->> '$.cloudTenantId') VIRTUAL,
  finding_type    TEXT GENERATED ALWAYS AS (data ->> '$.findingType') VIRTUAL,
  severity        TEXT GENERATED ALWAYS AS (data ->> '$.severity') VIRTUAL,
  status          TEXT GENERATED ALWAYS AS (data ->> '$.status') VIRTUAL,
  title           TEXT GENERATED ALWAYS AS (data ->> '$.title') VIRTUAL,
  identity_id     TEXT GENERATED ALWAYS AS (data ->> '$.identity.id') VIRTUAL,
  detected_at     TEXT GENERATED ALWAYS AS (data ->> '$.detectedAt') VIRTUAL,
  updated_at      TEXT GENERATED ALWAYS AS (data ->> '$.updatedAt') VIRTUAL,
  modified_at     TEXT GENERATED ALWAYS AS (data ->> '$.modifiedAt') VIRTUAL
);
CREATE TABLE identities (
  id              TEXT PRIMARY KEY NOT NULL,
  data            TEXT NOT NULL,
  cloud_tenant_id TEXT GENERATED ALWAYS AS (data ->> '$.cloudTenantId') VIRTUAL,
  kind            TEXT GENERATED ALWAYS AS (data ->> '$.kind') VIRTUAL,
  display_name    TEXT GENERATED ALWAYS AS (data ->> '$.displayName') VIRTUAL,
  principal_name  TEXT GENERATED ALWAYS AS (data ->> '$.principalName') VIRTUAL,
  first_seen_at   TEXT GENERATED ALWAYS AS (data ->> '$.firstSeenAt') VIRTUAL,
  last_seen_at    TEXT GENERATED ALWAYS AS (data ->> '$.lastSeenAt') VIRTUAL,
  modified_at     TEXT GENERATED ALWAYS AS (data ->> '$.modifiedAt') VIRTUAL
);
CREATE TABLE role_recommendations (
  id               TEXT PRIMARY KEY NOT NULL,
  data             TEXT NOT NULL,
  cloud_tenant_id  TEXT GENERATED ALWAYS AS (data ->> '$.cloudTenantId') VIRTUAL,
  identity_id      TEXT GENERATED ALWAYS AS (data ->> '$.identity.id') VIRTUAL,
  recommended_role TEXT GENERATED ALWAYS AS (data ->> '$.recommendedRole.name') VIRTUAL,
  updated_at       TEXT GENERATED ALWAYS AS (data ->> '$.updatedAt') VIRTUAL,
  modified_at      TEXT GENERATED ALWAYS AS (data ->> '$.modifiedAt') VIRTUAL
);
PRAGMA user_version = 1;
"#;

/// Why a mirror cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// SQLite's words once: `cause` is no error source, so a report of the whole chain
    /// (`posture: {e:#}`) does not say them again after the path.
    #[error("{path}: {cause}")]
    Sqlite {
        path: String,
        cause: rusqlite::Error,
    },
    #[error(
        "{path} mirrors customer {theirs}, and this key belongs to {ours}: use another file \
         (a mirror holds one customer)"
    )]
    OtherCustomer {
        path: String,
        theirs: String,
        ours: String,
    },
    #[error(
        "{path} was written by a newer posture CLI (schema {found}; this one knows {known}): \
         update the CLI"
    )]
    Newer {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("a row without an id in {0}")]
    NoId(&'static str),
}

/// Where one list's sync stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncState {
    /// The `syncedThrough` of the last complete sync: the next sync asks what changed since.
    pub watermark: Option<String>,
    /// A sync in progress: what it asked since, and the cursor of its next page.
    pub pending: Option<Pending>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub since: Option<String>,
    pub cursor: String,
}

/// One page of a list as read, and what comes after it.
#[derive(Debug)]
pub struct Page {
    pub resource: Resource,
    pub rows: Vec<Value>,
    /// The `modifiedSince` the sync asked with (`None`: everything).
    pub since: Option<String>,
    /// `meta.nextCursor`: `None` on the last page.
    pub next_cursor: Option<String>,
    /// `meta.syncedThrough`: the watermark once the last page is written.
    pub synced_through: Option<String>,
}

/// What writing a page did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub new: u64,
    pub changed: u64,
}

pub struct Mirror {
    conn: Connection,
    path: String,
}

impl Mirror {
    /// Opens (or creates) a mirror file.
    pub fn open(path: &Path) -> Result<Self, MirrorError> {
        let shown = path.display().to_string();
        let sqlite = |cause| MirrorError::Sqlite {
            path: shown.clone(),
            cause,
        };
        let conn = Connection::open(path).map_err(sqlite)?;
        // WAL: readers (a notebook, `sqlite3`) are not blocked while a sync writes; NORMAL:
        // a power cut may lose the last transactions, never corrupt the file.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sqlite)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sqlite)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(sqlite)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(sqlite)?;
        match version {
            0 => conn
                .execute_batch(&format!("BEGIN;{SCHEMA}COMMIT;"))
                .map_err(sqlite)?,
            1 => {}
            found => {
                return Err(MirrorError::Newer {
                    path: shown,
                    found,
                    known: 1,
                });
            }
        }
        Ok(Self { conn, path: shown })
    }

    fn sqlite(&self) -> impl Fn(rusqlite::Error) -> MirrorError + '_ {
        |cause| MirrorError::Sqlite {
            path: self.path.clone(),
            cause,
        }
    }

    /// Binds the file to a customer on first use; refuses another customer's key after.
    pub fn bind(
        &self,
        customer_id: &str,
        customer_name: &str,
        url: &str,
    ) -> Result<(), MirrorError> {
        let theirs: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM mirror WHERE key = 'customer_id'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.sqlite())?;
        if let Some(theirs) = theirs
            && theirs != customer_id
        {
            return Err(MirrorError::OtherCustomer {
                path: self.path.clone(),
                theirs,
                ours: customer_id.to_owned(),
            });
        }
        let mut upsert = self
            .conn
            .prepare("INSERT INTO mirror (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
            .map_err(self.sqlite())?;
        for (key, value) in [
            ("customer_id", customer_id),
            ("customer_name", customer_name),
            ("url", url),
        ] {
            upsert.execute(params![key, value]).map_err(self.sqlite())?;
        }
        Ok(())
    }

    /// Where a list's sync stands.
    pub fn state(&self, resource: Resource) -> Result<SyncState, MirrorError> {
        let row: Option<(Option<String>, Option<String>, Option<String>)> = self
            .conn
            .query_row(
                "SELECT watermark, pending_since, pending_cursor FROM sync_state WHERE resource = ?1",
                [resource.path()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(self.sqlite())?;
        let Some((watermark, since, cursor)) = row else {
            return Ok(SyncState::default());
        };
        Ok(SyncState {
            watermark,
            pending: cursor.map(|cursor| Pending { since, cursor }),
        })
    }

    /// Forgets a sync in progress (its cursor was refused): the next starts from the watermark.
    pub fn drop_pending(&self, resource: Resource) -> Result<(), MirrorError> {
        self.conn
            .execute(
                "UPDATE sync_state SET pending_since = NULL, pending_cursor = NULL WHERE resource = ?1",
                [resource.path()],
            )
            .map_err(self.sqlite())?;
        Ok(())
    }

    /// Writes a page and where the sync goes on from, in one transaction.
    pub fn write(&mut self, page: &Page) -> Result<Written, MirrorError> {
        let path = self.path.clone();
        let sqlite = |cause| MirrorError::Sqlite {
            path: path.clone(),
            cause,
        };
        let table = page.resource.table();
        let tx = self.conn.transaction().map_err(sqlite)?;
        let mut written = Written::default();
        {
            let mut insert = tx
                .prepare_cached(&format!(
                    "INSERT INTO {table} (id, data) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING"
                ))
                .map_err(sqlite)?;
            let mut update = tx
                .prepare_cached(&format!("UPDATE {table} SET data = ?2 WHERE id = ?1"))
                .map_err(sqlite)?;
            for row in &page.rows {
                let id = row["id"].as_str().ok_or(MirrorError::NoId(table))?;
                let data = row.to_string();
                if insert.execute(params![id, data]).map_err(sqlite)? == 1 {
                    written.new += 1;
                } else {
                    update.execute(params![id, data]).map_err(sqlite)?;
                    written.changed += 1;
                }
            }
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let mut state = tx
                .prepare_cached(
                    "INSERT INTO sync_state (resource, watermark, pending_since, pending_cursor, synced_at)
                     VALUES (?1, NULL, ?2, ?3, NULL)
                     ON CONFLICT (resource) DO UPDATE SET pending_since = ?2, pending_cursor = ?3",
                )
                .map_err(sqlite)?;
            match &page.next_cursor {
                Some(cursor) => {
                    state
                        .execute(params![page.resource.path(), page.since, cursor])
                        .map_err(sqlite)?;
                }
                None => {
                    state
                        .execute(params![
                            page.resource.path(),
                            None::<String>,
                            None::<String>
                        ])
                        .map_err(sqlite)?;
                    // The last page: what it was synced through is the next sync's start
                    // (kept when the customer has had no pass yet).
                    tx.execute(
                        "UPDATE sync_state SET watermark = coalesce(?2, watermark), synced_at = ?3
                         WHERE resource = ?1",
                        params![page.resource.path(), page.synced_through, now],
                    )
                    .map_err(sqlite)?;
                }
            }
        }
        tx.commit().map_err(sqlite)?;
        Ok(written)
    }

    /// The rows of a table, by id, as the API served them (for checks and tests).
    pub fn rows(&self, resource: Resource) -> Result<Vec<Value>, MirrorError> {
        let mut select = self
            .conn
            .prepare(&format!(
                "SELECT data FROM {} ORDER BY id",
                resource.table()
            ))
            .map_err(self.sqlite())?;
        let rows = select
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(self.sqlite())?
            .map(|data| {
                let data = data.map_err(self.sqlite())?;
                serde_json::from_str(&data).map_err(|e| MirrorError::Sqlite {
                    path: self.path.clone(),
                    cause: rusqlite::Error::ToSqlConversionFailure(Box::new(e)),
                })
            })
            .collect::<Result<Vec<Value>, _>>()?;
        Ok(rows)
    }

    /// The SQLite connection, for queries.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "posture-cli-{name}-{}-{}.db",
            std::process::id(),
            uuid_like()
        ));
        let _ = std::fs::remove_file(&path);
        path
    }

    fn uuid_like() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    }

    fn page(rows: Vec<Value>, next: Option<&str>, through: Option<&str>) -> Page {
        Page {
            resource: Resource::Findings,
            rows,
            since: None,
            next_cursor: next.map(str::to_owned),
            synced_through: through.map(str::to_owned),
        }
    }

    #[test]
    fn a_page_and_its_cursor_are_one_write_and_columns_come_from_the_json() {
        let path = temp("pages");
        let mut mirror = Mirror::open(&path).unwrap();
        let f = |id: &str, severity: &str| json!({"id": id, "severity": severity, "identity": {"id": "u1"}, "newField": [1]});
        let w = mirror
            .write(&page(
                vec![f("f1", "high"), f("f2", "low")],
                Some("c1"),
                Some("t1"),
            ))
            .unwrap();
        assert_eq!(w, Written { new: 2, changed: 0 });
        assert_eq!(
            mirror.state(Resource::Findings).unwrap(),
            SyncState {
                watermark: None,
                pending: Some(Pending {
                    since: None,
                    cursor: "c1".into()
                })
            }
        );
        let w = mirror
            .write(&page(
                vec![f("f2", "critical"), f("f3", "low")],
                None,
                Some("t1"),
            ))
            .unwrap();
        assert_eq!(w, Written { new: 1, changed: 1 });
        let state = mirror.state(Resource::Findings).unwrap();
        assert_eq!(state.watermark.as_deref(), Some("t1"));
        assert_eq!(state.pending, None);
        let severities: Vec<(String, String, String)> = mirror
            .connection()
            .prepare("SELECT id, severity, identity_id FROM findings ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(severities[1], ("f2".into(), "critical".into(), "u1".into()));
        assert_eq!(
            mirror.rows(Resource::Findings).unwrap()[0]["newField"],
            json!([1])
        );
        // A sync of a customer without passes keeps the watermark it had.
        mirror.write(&page(vec![], None, None)).unwrap();
        assert_eq!(
            mirror
                .state(Resource::Findings)
                .unwrap()
                .watermark
                .as_deref(),
            Some("t1")
        );
        drop(mirror);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_mirror_holds_one_customer_and_refuses_a_newer_schema() {
        let path = temp("bind");
        let mirror = Mirror::open(&path).unwrap();
        mirror.bind("c-1", "Contoso", "https://x/").unwrap();
        mirror.bind("c-1", "Contoso Ltd", "https://x/").unwrap();
        let err = mirror.bind("c-2", "Fabrikam", "https://x/").unwrap_err();
        assert!(matches!(err, MirrorError::OtherCustomer { .. }), "{err}");
        mirror
            .connection()
            .pragma_update(None, "user_version", 2)
            .unwrap();
        drop(mirror);
        let err = Mirror::open(&path).err().unwrap();
        assert!(err.to_string().contains("newer posture CLI"), "{err}");
        let _ = std::fs::remove_file(&path);
    }
}
