//! `posture-api clients issue|list|rotate|revoke`: OAuth 2.0 clients (docs/auth.md).

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use posture_domain::{
    KeyId, Scope, ScopeSet,
    console::Actor,
    oauth::{
        ClientCredential, ClientPublicKey, ClientSecretValue, NewClient, NewCredential,
        OAuthClient, parse_client_id,
    },
    ports::ClientRepository,
};
use serde_json::{Value, json};

use super::{
    keys::{allow_list, allowed, parse_lifetime, set_allow_list, time},
    operator::{customer_scope, fail, store},
};
use crate::{
    cli::{ClientsCommand, IssueClientArgs, RotateClientArgs},
    output::{emit, table},
};

fn credential_json(c: &ClientCredential) -> Value {
    json!({
        "id": c.id.to_string(),
        "credential": c.describe(),
        "createdAt": c.created_at,
        "expiresAt": c.expires_at,
    })
}

fn client_json(c: &OAuthClient) -> Value {
    json!({
        "id": c.id.to_string(),
        "clientId": c.client_id(),
        "customerId": c.customer_id.to_string(),
        "name": c.name,
        "scopes": c.scopes.iter().map(Scope::as_str).collect::<Vec<_>>(),
        "createdAt": c.created_at,
        "revokedAt": c.revoked_at,
        "lastUsedAt": c.last_used_at,
        "lastUsedFrom": c.last_used_from.map(|ip| ip.to_string()),
        "lastUsedUserAgent": c.last_used_user_agent,
        "allowFrom": c.allow_from.to_strings(),
        "createdBy": c.created_by,
        "credentials": c.credentials.iter().map(credential_json).collect::<Vec<_>>(),
    })
}

/// A client named by its id (a UUID) or its clientId (`pci_...`).
fn client_id(text: &str) -> anyhow::Result<KeyId> {
    parse_client_id(text)
        .or_else(|| text.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("{text:?} is neither a client's id nor its clientId"))
}

fn public_key(path: Option<&std::path::Path>) -> anyhow::Result<Option<ClientPublicKey>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let pem = std::fs::read_to_string(path)
        .with_context(|| format!("--public-key: cannot read {}", path.display()))?;
    ClientPublicKey::from_pem(&pem)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("--public-key {}: {e}", path.display()))
}

/// What the issuing and rotating commands print: the client, and its new secret once.
fn emit_client(
    json: bool,
    client: &OAuthClient,
    secret: Option<&ClientSecretValue>,
) -> anyhow::Result<()> {
    let mut value = client_json(client);
    if let Some(secret) = secret {
        value["clientSecret"] = Value::from(secret.expose());
    }
    emit(json, &value, || {
        let mut text = format!(
            "client id:  {}\nclientId:   {}\nscopes:     {}\nallowed:    {}\n",
            client.id,
            client.client_id(),
            client.scopes.to_oauth(),
            client.allow_from
        );
        for credential in &client.credentials {
            text.push_str(&format!(
                "credential: {} (lapses {})\n",
                credential.describe(),
                time(credential.expires_at)
            ));
        }
        if let Some(secret) = secret {
            text.push_str(&format!(
                "\n{}\n\nThis is the only time the client secret is shown: store it now.",
                secret.expose()
            ));
        }
        text
    })
}

async fn issue(args: IssueClientArgs, json: bool) -> anyhow::Result<()> {
    let scope = customer_scope(&args.customer)?;
    let scopes = args
        .scopes
        .iter()
        .map(|s| s.parse::<Scope>().context("--scope"))
        .collect::<anyhow::Result<ScopeSet>>()?;
    let key = public_key(args.public_key.as_deref())?;
    let (mut new, secret) = NewClient::generate(scope.customer_id(), args.name, scopes, key)
        .map_err(|e| fail("issuing the client", e))?;
    new.allow_from = allow_list(&args.allow_from)?;
    let client = store(&args.database)?
        .insert_client(new, &Actor::Operator)
        .await
        .map_err(|e| match e {
            posture_domain::Error::NotFound => {
                anyhow::anyhow!("no customer with id {}", args.customer)
            }
            other => fail("issuing the client", other),
        })?;
    emit_client(json, &client, secret.as_ref())
}

async fn rotate(args: RotateClientArgs, json: bool) -> anyhow::Result<()> {
    let id = client_id(&args.client)?;
    let now = Utc::now();
    let until = match args.old_valid_until.as_deref() {
        None => now,
        Some(text) => match DateTime::parse_from_rfc3339(text) {
            Ok(at) => at.with_timezone(&Utc),
            Err(_) => {
                now + parse_lifetime(text).with_context(|| {
                    format!(
                        "--old-valid-until: {text:?} is neither an RFC 3339 time nor a lifetime"
                    )
                })?
            }
        },
    };
    let store = store(&args.database)?;
    let (credential, secret) = match public_key(args.public_key.as_deref())? {
        Some(key) => (NewCredential::public_key(key), None),
        None if !args.secret && signs_with_keys_only(&store, id).await? => {
            anyhow::bail!(
                "client {} signs with a key: rotate it with --public-key FILE, or pass --secret \
                 to give it a secret instead",
                args.client
            );
        }
        None => {
            let (credential, secret) = NewCredential::secret().map_err(|e| fail("rotating", e))?;
            (credential, Some(secret))
        }
    };
    let client = store
        .add_client_credential(None, id, credential, until.max(now), &Actor::Operator)
        .await
        .map_err(|e| match e {
            posture_domain::Error::NotFound => anyhow::anyhow!("no client {}", args.client),
            other => fail("rotating the client's credentials", other),
        })?;
    emit_client(json, &client, secret.as_ref())
}

/// Whether the client's credentials valid now are public keys only (a `private_key_jwt`
/// client).
async fn signs_with_keys_only(
    store: &posture_store_postgres::PgStore,
    id: KeyId,
) -> anyhow::Result<bool> {
    let client = store.find_client(None, id).await.map_err(|e| match e {
        posture_domain::Error::NotFound => anyhow::anyhow!("no client {id}"),
        other => fail("reading the client", other),
    })?;
    let now = Utc::now();
    let mut valid = client
        .credentials
        .iter()
        .filter(|c| c.valid_at(now))
        .peekable();
    Ok(valid.peek().is_some()
        && valid.all(|c| matches!(c.kind, posture_domain::oauth::CredentialKind::PublicKey(_))))
}

pub async fn run(command: ClientsCommand, json: bool) -> anyhow::Result<()> {
    match command {
        ClientsCommand::Issue(args) => issue(args, json).await,
        ClientsCommand::Rotate(args) => rotate(args, json).await,
        ClientsCommand::List { database, customer } => {
            let scope = customer_scope(&customer)?;
            let clients = store(&database)?
                .list_clients(scope)
                .await
                .map_err(|e| fail("listing clients", e))?;
            let data: Vec<Value> = clients.iter().map(client_json).collect();
            emit(json, &json!({ "data": data }), || {
                table(
                    [
                        "ID",
                        "CLIENT ID",
                        "NAME",
                        "CREATED",
                        "REVOKED",
                        "LAST USED",
                        "FROM",
                        "ALLOWED",
                        "SCOPES",
                        "CREDENTIALS",
                    ],
                    &[],
                    clients.iter().map(|c| {
                        let now = Utc::now();
                        let valid: Vec<String> = c
                            .credentials
                            .iter()
                            .filter(|cred| cred.valid_at(now))
                            .map(ClientCredential::describe)
                            .collect();
                        [
                            c.id.to_string(),
                            c.client_id(),
                            c.name.clone(),
                            time(Some(c.created_at)),
                            time(c.revoked_at),
                            time(c.last_used_at),
                            c.last_used_from
                                .map_or_else(|| "-".to_owned(), |ip| ip.to_string()),
                            allowed(&c.allow_from),
                            c.scopes
                                .iter()
                                .map(Scope::as_str)
                                .collect::<Vec<_>>()
                                .join(","),
                            valid.join("; "),
                        ]
                    }),
                )
            })
        }
        ClientsCommand::Revoke { database, client } => {
            let id = client_id(&client)?;
            let (revoked, _) = store(&database)?
                .revoke_client(None, id, &Actor::Operator)
                .await
                .map_err(|e| match e {
                    posture_domain::Error::NotFound => anyhow::anyhow!("no client {client}"),
                    other => fail("revoking the client", other),
                })?;
            emit(
                json,
                &json!({ "id": revoked.id.to_string(), "clientId": revoked.client_id(), "revokedAt": revoked.revoked_at }),
                || {
                    format!(
                        "revoked client {} at {}",
                        revoked.client_id(),
                        time(revoked.revoked_at)
                    )
                },
            )
        }
        ClientsCommand::AllowFrom(args) => {
            let id = client_id(&args.credential)?;
            set_allow_list(&args, id, "client").await?;
            let client = store(&args.database)?
                .find_client(None, id)
                .await
                .map_err(|e| fail("reading the client", e))?;
            emit(json, &client_json(&client), || {
                format!(
                    "client {} may be used from {}",
                    client.client_id(),
                    client.allow_from
                )
            })
        }
    }
}
