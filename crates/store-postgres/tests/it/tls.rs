//! TLS to PostgreSQL (`sslmode`, `sslrootcert`): against a cluster of its own that accepts
//! TLS connections only (`hostssl` in its pg_hba.conf), with a certificate for `localhost`.

use std::{path::Path, process::Command};

use posture_store_postgres::{PgConfig, PgStore, migrations};
use posture_test_support::servers::PostgresServer;

struct TlsServer {
    server: PostgresServer,
    dir: std::path::PathBuf,
}

impl TlsServer {
    fn start() -> Self {
        let dir =
            std::env::temp_dir().join(format!("posture-pgtls-{}", uuid::Uuid::new_v4().simple()));
        let certs = dir.join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        write(&certs.join("server.crt"), &cert.cert.pem());
        write(&certs.join("server.key"), &cert.signing_key.serialize_pem());
        let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        write(&certs.join("other.crt"), &other.cert.pem());
        write(
            &certs.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        );
        std::fs::set_permissions(
            certs.join("server.key"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        if Command::new("id")
            .arg("-u")
            .output()
            .unwrap()
            .stdout
            .trim_ascii()
            == b"0"
        {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&certs)
                .status()
                .unwrap();
            assert!(status.success());
        }
        let settings = format!(
            "-c ssl=on -c ssl_cert_file={0}/server.crt -c ssl_key_file={0}/server.key \
             -c hba_file={0}/pg_hba.conf",
            certs.display()
        );
        let server = PostgresServer::start(&dir.join("cluster"), &settings).unwrap();
        Self { server, dir: certs }
    }

    fn url(&self, host: &str, query: &str) -> String {
        format!(
            "postgres://postgres@{host}:{}/postgres?{query}",
            self.server.port()
        )
    }

    fn root(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

async fn reachable(url: String) -> Result<(), String> {
    let mut config = PgConfig::new(url, posture_domain::clock::system());
    config.max_connections = 1;
    config.acquire_timeout = std::time::Duration::from_secs(5);
    let store = PgStore::new(&config).map_err(|e| e.to_string())?;
    store.ping().await.map_err(|e| format!("{e:?}"))
}

#[tokio::test]
async fn verify_full_connects_over_tls_with_the_servers_ca_and_migrates() {
    let server = TlsServer::start();
    let url = server.url(
        "localhost",
        &format!(
            "sslmode=verify-full&sslrootcert={}",
            server.root("server.crt")
        ),
    );
    reachable(url.clone()).await.unwrap();
    // The migration harness connects the same way (and `pending` reads without creating).
    assert!(!migrations::pending(&url).await.unwrap().is_empty());
    // The server takes TLS connections only: a plain one is refused.
    let plain = reachable(server.url("localhost", "sslmode=disable")).await;
    assert!(
        plain.is_err(),
        "the server accepted a connection without TLS"
    );
}

#[tokio::test]
async fn a_server_certificate_from_another_ca_is_refused() {
    let server = TlsServer::start();
    let url = server.url(
        "localhost",
        &format!(
            "sslmode=verify-full&sslrootcert={}",
            server.root("other.crt")
        ),
    );
    let error = reachable(url).await.unwrap_err();
    assert!(error.to_lowercase().contains("certificate"), "{error}");
}

#[tokio::test]
async fn require_verifies_the_server_name_too() {
    let server = TlsServer::start();
    // Right CA, but the certificate is for localhost, not for 127.0.0.1.
    let url = server.url(
        "127.0.0.1",
        &format!("sslmode=require&sslrootcert={}", server.root("server.crt")),
    );
    let error = reachable(url).await.unwrap_err();
    assert!(error.to_lowercase().contains("certificate"), "{error}");
}
