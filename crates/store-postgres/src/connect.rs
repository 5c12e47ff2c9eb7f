//! Opening connections to PostgreSQL, with TLS (rustls) when the URL asks for it.
//!
//! `sslmode` takes libpq's values, but posture never encrypts without verifying: `disable`,
//! `allow` and `prefer` (the default) connect without TLS; `require`, `verify-ca` and
//! `verify-full` all require TLS and verify the server's certificate chain and its name
//! (the host of the URL). The roots are `sslrootcert` (a PEM file) when given, else the
//! system's (`sslrootcert=system`; `SSL_CERT_FILE` overrides them). Client certificates
//! (`sslcert`, `sslkey`) are refused rather than ignored.

use std::{path::Path, sync::Arc};

use diesel::{ConnectionError, ConnectionResult};
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection as _};
use posture_domain::Error;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, pem::PemObject as _};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How to reach PostgreSQL: the URL as tokio-postgres reads it, and the TLS settings.
#[derive(Clone)]
pub(crate) struct Connector {
    url: String,
    tls: Option<MakeRustlsConnect>,
}

impl Connector {
    /// Reads `sslmode` and `sslrootcert` from `url` (a `postgres://` URL) and loads the
    /// roots. A value posture does not support is an error here, at start-up.
    pub(crate) fn new(url: &str) -> Result<Self, Error> {
        let invalid = |reason: String| Error::invalid("DATABASE_URL", reason);
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            // A key=value connection string: tokio-postgres reads it as it is (no TLS).
            return Ok(Self {
                url: url.to_owned(),
                tls: None,
            });
        }
        // The query is read here, not by a URL parser: a URL listing several hosts
        // (`postgres://h1:5432,h2:5432/db?target_session_attrs=read-write`, for a failover
        // pair) is no URL to `url::Url` (its port would be `5432,h2:5432`), but tokio-postgres
        // reads it. The other parameters are kept byte for byte (re-encoding them would turn
        // a space written `%20` in `options=-c%20search_path=x` into `+`, which
        // tokio-postgres keeps).
        let (base, raw_query) = url.split_once('?').unwrap_or((url, ""));
        let mut mode = None;
        let mut root_cert = None;
        let mut kept: Vec<String> = Vec::new();
        for (raw, (key, value)) in raw_query
            .split('&')
            .filter(|p| !p.is_empty())
            .zip(url::form_urlencoded::parse(raw_query.as_bytes()))
        {
            match &*key {
                "sslmode" => mode = Some(value.into_owned()),
                "sslrootcert" => root_cert = Some(value.into_owned()),
                "sslcert" | "sslkey" | "sslpassword" => {
                    return Err(invalid(format!(
                        "{key}: client certificates are not supported; authenticate with a \
                         password over TLS"
                    )));
                }
                _ => kept.push(raw.to_owned()),
            }
        }
        let verify = match mode.as_deref() {
            None | Some("disable" | "allow" | "prefer") => false,
            Some("require" | "verify-ca" | "verify-full") => true,
            Some(other) => {
                return Err(invalid(format!(
                    "sslmode={other:?} is not one of disable, allow, prefer, require, \
                     verify-ca, verify-full"
                )));
            }
        };
        if !verify && root_cert.is_some() {
            return Err(invalid(
                "sslrootcert is given but sslmode does not ask for TLS: add sslmode=verify-full"
                    .to_owned(),
            ));
        }
        kept.push(format!(
            "sslmode={}",
            if verify { "require" } else { "disable" }
        ));
        let tls = if verify {
            let roots = roots(root_cert.as_deref())?;
            let config = ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(Error::internal)?
            .with_root_certificates(roots)
            .with_no_client_auth();
            Some(MakeRustlsConnect::new(config))
        } else {
            None
        };
        Ok(Self {
            url: format!("{base}?{}", kept.join("&")),
            tls,
        })
    }

    /// A new connection.
    pub(crate) async fn connect(&self) -> ConnectionResult<AsyncPgConnection> {
        // With its causes: "error performing TLS handshake" alone does not say why.
        let failed = |e: tokio_postgres::Error| {
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                message.push_str(": ");
                message.push_str(&cause.to_string());
                source = cause.source();
            }
            ConnectionError::BadConnection(message)
        };
        match &self.tls {
            None => {
                let (client, connection) =
                    tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
                        .await
                        .map_err(failed)?;
                AsyncPgConnection::try_from_client_and_connection(client, connection).await
            }
            Some(tls) => {
                let (client, connection) = tokio_postgres::connect(&self.url, tls.clone())
                    .await
                    .map_err(failed)?;
                AsyncPgConnection::try_from_client_and_connection(client, connection).await
            }
        }
    }
}

/// The trusted roots: the PEM file `path`, or the system's when none (or `system`) is given.
fn roots(path: Option<&str>) -> Result<RootCertStore, Error> {
    let mut roots = RootCertStore::empty();
    match path {
        Some(path) if path != "system" => {
            let certificates = CertificateDer::pem_file_iter(Path::new(path))
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|e| Error::invalid("DATABASE_URL", format!("sslrootcert={path}: {e}")))?;
            let (added, _) = roots.add_parsable_certificates(certificates);
            if added == 0 {
                return Err(Error::invalid(
                    "DATABASE_URL",
                    format!("sslrootcert={path}: no certificate in the file"),
                ));
            }
        }
        _ => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(Error::invalid(
                    "DATABASE_URL",
                    "sslmode asks for TLS but the system has no root certificates: give \
                     sslrootcert=/path/to/ca.pem"
                        .to_owned(),
                ));
            }
        }
    }
    Ok(roots)
}

/// Whether `conn` answers: the liveness probe of the pool's recycling, readiness and the
/// `LISTEN` connection. A simple query (`sql_query` would prepare a named statement each
/// time, a round trip more, and close it again).
pub(crate) async fn probe(conn: &mut AsyncPgConnection) -> diesel::QueryResult<()> {
    conn.batch_execute("SELECT 1").await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept_url(url: &str) -> String {
        Connector::new(url).map(|c| c.url).unwrap()
    }

    #[test]
    fn without_sslmode_the_connection_is_plain_and_the_url_is_kept() {
        let url = "postgres://u:p@db:5432/posture?application_name=x";
        assert_eq!(
            kept_url(url),
            "postgres://u:p@db:5432/posture?application_name=x&sslmode=disable"
        );
        assert!(Connector::new(url).unwrap().tls.is_none());
    }

    #[test]
    fn other_parameters_are_kept_byte_for_byte() {
        assert_eq!(
            kept_url("postgres://db/p?options=-c%20search_path%3Dposture&sslmode=disable"),
            "postgres://db/p?options=-c%20search_path%3Dposture&sslmode=disable"
        );
    }

    #[test]
    fn a_url_listing_several_hosts_keeps_its_hosts_and_its_tls() {
        let url = "postgres://u:p@db1:5432,db2:5433/posture?target_session_attrs=read-write&sslmode=verify-full";
        let connector = Connector::new(url).unwrap();
        assert_eq!(
            connector.url,
            "postgres://u:p@db1:5432,db2:5433/posture?target_session_attrs=read-write&sslmode=require"
        );
        assert!(connector.tls.is_some(), "TLS is kept for every host");
        // tokio-postgres reads it: both hosts, and the session attribute.
        let config: tokio_postgres::Config = connector.url.parse().unwrap();
        assert_eq!(config.get_hosts().len(), 2);
        assert_eq!(config.get_ports(), [5432, 5433]);
        assert_eq!(
            config.get_target_session_attrs(),
            tokio_postgres::config::TargetSessionAttrs::ReadWrite
        );
        assert_eq!(
            kept_url("postgresql://db1,db2/p"),
            "postgresql://db1,db2/p?sslmode=disable"
        );
    }

    #[test]
    fn prefer_does_not_encrypt_without_verifying() {
        assert!(
            Connector::new("postgres://db/p?sslmode=prefer")
                .unwrap()
                .tls
                .is_none()
        );
    }

    #[test]
    fn an_unknown_sslmode_or_a_client_certificate_is_refused_with_its_name() {
        for (url, expected) in [
            (
                "postgres://db/p?sslmode=verify_full",
                "sslmode=\"verify_full\"",
            ),
            ("postgres://db/p?sslmode=require&sslcert=/c.pem", "sslcert"),
            (
                "postgres://db/p?sslrootcert=/ca.pem",
                "sslrootcert is given",
            ),
            (
                "postgres://db/p?sslmode=verify-full&sslrootcert=/nonexistent.pem",
                "/nonexistent.pem",
            ),
        ] {
            let error = Connector::new(url).err().unwrap().to_string();
            assert!(error.contains(expected), "{url}: {error}");
        }
    }
}
