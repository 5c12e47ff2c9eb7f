//! The credentials `cargo xtask clients` gives its suites and the documentation's examples:
//! keys of each scope the suites need, customers of their own for the sync suites, and OAuth
//! clients (a secret one and a `private_key_jwt` one), as environment variables.

use std::path::Path;

use anyhow::Context as _;

use crate::binaries::{api_json, create_customer, every_scope, issue_key, p256_key_pair};

/// The suites' keys and customers, as the environment variables they read: keys of
/// `customer` (every scope, one scope, one for the rate limit's test), and customers of
/// their own for the sync suites, whose passes they commit themselves.
pub fn suite_keys(
    bin: &Path,
    env: &[(&str, &str)],
    customer: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let every = every_scope();
    let mut keys: Vec<(String, String)> = Vec::new();
    for (name, scopes) in [
        ("PYTHON_KEY", &every[..]),
        ("PYTHON_FINDINGS_KEY", &["read:findings"][..]),
        ("PYTHON_RATE_KEY", &["read:identities"][..]),
        ("TS_KEY", &every[..]),
        ("TS_FINDINGS_KEY", &["read:findings"][..]),
        ("TS_RATE_KEY", &["read:identities"][..]),
    ] {
        let key = issue_key(bin, env, customer, "clients", scopes)?;
        keys.push((name.to_owned(), key));
    }

    for (customer_name, key_name) in [
        ("PYTHON_SYNC_CUSTOMER", "PYTHON_SYNC_KEY"),
        ("PYTHON_WORKED_CUSTOMER", "PYTHON_WORKED_KEY"),
        ("PYTHON_EVENTS_CUSTOMER", "PYTHON_EVENTS_KEY"),
        ("PYTHON_STREAM_CUSTOMER", "PYTHON_STREAM_KEY"),
        ("TS_SYNC_CUSTOMER", "TS_SYNC_KEY"),
    ] {
        let id = create_customer(bin, env, customer_name)?;
        let key = issue_key(bin, env, &id, "clients-sync", &["read:findings"])?;
        keys.push((customer_name.to_owned(), id));
        keys.push((key_name.to_owned(), key));
    }
    Ok(keys)
}

/// The suites' OAuth clients of `customer`, as the environment variables docs/auth.md's
/// examples and the suites read: a secret client holding every scope (`CLIENT_ID`,
/// `CLIENT_SECRET`), and a `private_key_jwt` client (`KEY_CLIENT_ID`) whose P-256 pair
/// OpenSSL makes in `dir` (`CLIENT_KEY_FILE`, `CLIENT_PUBLIC_KEY_FILE`). Not the names the
/// customers' CLI reads (`POSTURE_CLIENT_ID`...): its examples run with `POSTURE_API_KEY`
/// set, and the CLI refuses both at once.
pub fn suite_clients(
    bin: &Path,
    env: &[(&str, &str)],
    customer: &str,
    dir: &Path,
) -> anyhow::Result<Vec<(String, String)>> {
    let every = every_scope();
    let issue = |name: &str, extra: &[&str]| -> anyhow::Result<serde_json::Value> {
        let mut args = vec!["clients", "issue", "--customer", customer, "--name", name];
        for scope in &every {
            args.extend(["--scope", scope]);
        }
        args.extend(extra);
        api_json(bin, env, &args)
    };
    let secret = issue("clients-oauth", &[])?;
    let (private, public) = p256_key_pair(dir)?;
    let public_text = public.display().to_string();
    let keyed = issue("clients-oauth-key", &["--public-key", &public_text])?;
    let text = |value: &serde_json::Value, field: &str| -> anyhow::Result<String> {
        Ok(value[field]
            .as_str()
            .context("the client's fields")?
            .to_owned())
    };
    Ok(vec![
        ("CLIENT_ID".to_owned(), text(&secret, "clientId")?),
        ("CLIENT_SECRET".to_owned(), text(&secret, "clientSecret")?),
        ("KEY_CLIENT_ID".to_owned(), text(&keyed, "clientId")?),
        ("CLIENT_KEY_FILE".to_owned(), private.display().to_string()),
        ("CLIENT_PUBLIC_KEY_FILE".to_owned(), public_text),
    ])
}
