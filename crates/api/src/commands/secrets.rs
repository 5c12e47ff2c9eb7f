//! `posture-api secrets reseal`: the second step of rotating `POSTURE_SECRET_KEY`.
//!
//! Every subscription's signing secret, and every customer console's OpenID Connect client
//! secret, is opened with whichever key of the ring sealed it and sealed again with the
//! current key, row by row with a compare-and-swap, so it is safe to run while the API and
//! the workers serve (and to run again after a failure).

use anyhow::Context as _;
use std::collections::BTreeMap;

use posture_domain::{
    console::client_secret_context,
    ports::{ConsoleRepository, SecretRotationRepository},
    secrets::Keyring,
    webhook::secret_context,
};
use serde_json::json;

use super::operator::store;
use crate::{cli::SecretsCommand, output::emit};

/// Secrets read per round trip.
const BATCH: u32 = 500;

pub async fn run(command: SecretsCommand, json: bool) -> anyhow::Result<()> {
    let SecretsCommand::Reseal { database, secrets } = command;
    let keyring = secrets.keyring()?;
    let store = store(&database)?;
    let mut report = reseal(&store, &keyring).await?;
    reseal_client_secrets(&store, &keyring, &mut report).await?;
    let unopened: usize = report.unopened.values().sum();
    emit(
        json,
        &json!({
            "currentKeyId": keyring.current_key_id(),
            "resealed": report.resealed,
            "clientSecretsResealed": report.client_secrets,
            "unopened": report.unopened,
        }),
        || {
            format!(
                "{} signing secret(s) and {} console client secret(s) sealed again with key {}",
                report.resealed,
                report.client_secrets,
                keyring.current_key_id()
            )
        },
    )?;
    if unopened > 0 {
        let ids: Vec<&str> = report.unopened.keys().map(String::as_str).collect();
        anyhow::bail!(
            "{unopened} sealed secret(s) could not be opened: they are sealed with key(s) {} \
             (add those keys to POSTURE_SECRET_KEYS_PREVIOUS and run again; do not retire them yet)",
            ids.join(", ")
        );
    }
    Ok(())
}

struct Report {
    resealed: u64,
    client_secrets: u64,
    /// Secrets that no key of the ring opens, by the id of the key that sealed them.
    unopened: BTreeMap<String, usize>,
}

async fn reseal(store: &dyn SecretRotationRepository, keyring: &Keyring) -> anyhow::Result<Report> {
    let mut report = Report {
        resealed: 0,
        client_secrets: 0,
        unopened: BTreeMap::new(),
    };
    // The current secrets, then those a rotation replaced (still signing).
    for previous in [false, true] {
        reseal_slot(store, keyring, previous, &mut report).await?;
    }
    Ok(report)
}

async fn reseal_slot(
    store: &dyn SecretRotationRepository,
    keyring: &Keyring,
    previous: bool,
    report: &mut Report,
) -> anyhow::Result<()> {
    let mut after = None;
    loop {
        let batch = store
            .secrets_sealed_with_other_keys(keyring.current_key_id(), previous, after, BATCH)
            .await
            .context("reading sealed secrets failed")?;
        let Some(last) = batch.last() else { break };
        after = Some((last.customer, last.subscription));
        for stored in &batch {
            let context = secret_context(stored.customer, stored.subscription);
            let Ok(resealed) = keyring.reseal(&stored.sealed, &context) else {
                *report
                    .unopened
                    .entry(stored.sealed.key_id.clone())
                    .or_default() += 1;
                continue;
            };
            // `false`: the row changed meanwhile (it was resealed by a concurrent run).
            if store
                .replace_sealed_secret(stored, &resealed)
                .await
                .context("storing a resealed secret failed")?
            {
                report.resealed += 1;
            }
        }
    }
    Ok(())
}

/// The console's client secrets (one per customer with a console: few, read at once).
async fn reseal_client_secrets(
    store: &dyn ConsoleRepository,
    keyring: &Keyring,
    report: &mut Report,
) -> anyhow::Result<()> {
    let stored = store
        .client_secrets_sealed_with_other_keys(keyring.current_key_id())
        .await
        .context("reading sealed client secrets failed")?;
    for (customer, sealed) in stored {
        let Ok(resealed) = keyring.reseal(&sealed, &client_secret_context(customer)) else {
            *report.unopened.entry(sealed.key_id.clone()).or_default() += 1;
            continue;
        };
        if store
            .replace_client_secret(customer, &sealed, &resealed)
            .await
            .context("storing a resealed client secret failed")?
        {
            report.client_secrets += 1;
        }
    }
    Ok(())
}
