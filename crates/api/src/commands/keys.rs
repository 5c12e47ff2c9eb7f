//! `posture-api keys issue|list|revoke`.

use anyhow::Context as _;
use chrono::{DateTime, Duration, Utc};
use posture_domain::{
    ApiKey, KeyId, Scope, ScopeSet, allow_list::AllowList, api_key::NewApiKey, console::Actor,
    ports::ApiKeyRepository,
};
use serde_json::{Value, json};

use super::operator::{customer_scope, fail, store};
use crate::{
    cli::{AllowFromArgs, IssueKeyArgs, KeysCommand},
    output::{emit, table},
};

/// Why a lifetime cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LifetimeError {
    #[error("{0:?}: expected a positive number and a unit, e.g. 30d")]
    NotANumber(String),
    #[error("{0:?}: unit must be s, m, h, d or w")]
    Unit(String),
    #[error("{0:?}: too long")]
    TooLong(String),
}

/// Parses a lifetime such as `30d`, `12h`, `90m`, `45s` or `2w`.
pub fn parse_lifetime(text: &str) -> Result<Duration, LifetimeError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: i64 = number
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| LifetimeError::NotANumber(text.to_owned()))?;
    let seconds_per_unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(LifetimeError::Unit(text.to_owned())),
    };
    n.checked_mul(seconds_per_unit)
        .and_then(Duration::try_seconds)
        .ok_or_else(|| LifetimeError::TooLong(text.to_owned()))
}

fn scopes_json(scopes: ScopeSet) -> Vec<&'static str> {
    scopes.iter().map(Scope::as_str).collect()
}

fn key_json(k: &ApiKey) -> Value {
    json!({
        "id": k.id.to_string(),
        "customerId": k.customer_id.to_string(),
        "name": k.name,
        "prefix": k.prefix,
        "scopes": scopes_json(k.scopes),
        "createdAt": k.created_at,
        "expiresAt": k.expires_at,
        "revokedAt": k.revoked_at,
        "lastUsedAt": k.last_used_at,
        "lastUsedFrom": k.last_used_from.map(|ip| ip.to_string()),
        "lastUsedUserAgent": k.last_used_user_agent,
        "allowFrom": k.allow_from.to_strings(),
        "createdBy": k.created_by,
    })
}

/// The allow-list the operator typed (`--allow-from`, or `allow-from`'s networks).
pub(super) fn allow_list(networks: &[String]) -> anyhow::Result<AllowList> {
    AllowList::parse(networks)
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().replace("allowFrom", "--allow-from")))
}

/// Sets the allow-list of the key or client `id` (`what`: "key" or "client").
pub(super) async fn set_allow_list(
    args: &AllowFromArgs,
    id: KeyId,
    what: &str,
) -> anyhow::Result<ApiKey> {
    let list = match args.anywhere {
        true => AllowList::default(),
        false => allow_list(&args.networks)?,
    };
    store(&args.database)?
        .set_allow_list(None, id, list, &Actor::Operator)
        .await
        .map_err(|e| match e {
            posture_domain::Error::NotFound => {
                anyhow::anyhow!("no unrevoked {what} with id {}", args.credential)
            }
            other => fail("setting the allow-list", other),
        })
}

/// A time as the text tables show it (`-` for none).
pub(super) fn time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(
        || "-".to_owned(),
        |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

async fn issue(args: IssueKeyArgs, json: bool) -> anyhow::Result<()> {
    let scope = customer_scope(&args.customer)?;
    let scopes = args
        .scopes
        .iter()
        .map(|s| s.parse::<Scope>().context("--scope"))
        .collect::<anyhow::Result<ScopeSet>>()?;
    let now = Utc::now();
    let expires_at = match (&args.expires_in, &args.expires_at) {
        (Some(lifetime), _) => Some(now + parse_lifetime(lifetime).context("--expires-in")?),
        (None, Some(at)) => Some(
            DateTime::parse_from_rfc3339(at)
                .with_context(|| format!("--expires-at: {at:?} is not an RFC 3339 time"))?
                .with_timezone(&Utc),
        ),
        (None, None) => None,
    };
    let (mut new_key, secret) =
        NewApiKey::generate(scope.customer_id(), args.name, scopes, expires_at, now)
            .map_err(|e| fail("issuing the key", e))?;
    new_key.allow_from = allow_list(&args.allow_from)?;
    let key = store(&args.database)?
        .insert_key(new_key, &Actor::Operator)
        .await
        .map_err(|e| match e {
            posture_domain::Error::NotFound => {
                anyhow::anyhow!("no customer with id {}", args.customer)
            }
            other => fail("issuing the key", other),
        })?;
    let mut value = key_json(&key);
    value["key"] = Value::from(secret.expose());
    emit(json, &value, || {
        format!(
            "key id:  {}\nscopes:  {}\nexpires: {}\nallowed: {}\n\n{}\n\nThis is the only time the key is shown: store it now.",
            key.id,
            scopes_json(key.scopes).join(" "),
            time(key.expires_at),
            key.allow_from,
            secret.expose()
        )
    })
}

pub async fn run(command: KeysCommand, json: bool) -> anyhow::Result<()> {
    match command {
        KeysCommand::Issue(args) => issue(args, json).await,
        KeysCommand::List { database, customer } => {
            let scope = customer_scope(&customer)?;
            let keys = store(&database)?
                .list_keys(scope)
                .await
                .map_err(|e| fail("listing keys", e))?;
            let data: Vec<Value> = keys.iter().map(key_json).collect();
            emit(json, &json!({ "data": data }), || {
                table(
                    [
                        "ID",
                        "NAME",
                        "PREFIX",
                        "CREATED",
                        "EXPIRES",
                        "REVOKED",
                        "LAST USED",
                        "FROM",
                        "ALLOWED",
                        "SCOPES",
                    ],
                    &[],
                    keys.iter().map(|k| {
                        [
                            k.id.to_string(),
                            k.name.clone(),
                            k.prefix.clone(),
                            time(Some(k.created_at)),
                            time(k.expires_at),
                            time(k.revoked_at),
                            time(k.last_used_at),
                            k.last_used_from
                                .map_or_else(|| "-".to_owned(), |ip| ip.to_string()),
                            allowed(&k.allow_from),
                            scopes_json(k.scopes).join(","),
                        ]
                    }),
                )
            })
        }
        KeysCommand::Revoke { database, key_id } => {
            let id: KeyId = key_id
                .parse()
                .map_err(|_| anyhow::anyhow!("{key_id:?} is not a key id (a UUID)"))?;
            let (key, _) = store(&database)?
                .revoke_key(None, id, &Actor::Operator)
                .await
                .map_err(|e| match e {
                    posture_domain::Error::NotFound => anyhow::anyhow!("no key with id {key_id}"),
                    other => fail("revoking the key", other),
                })?;
            emit(
                json,
                &json!({ "id": key.id.to_string(), "revokedAt": key.revoked_at }),
                || format!("revoked key {} at {}", key.id, time(key.revoked_at)),
            )
        }
        KeysCommand::AllowFrom(args) => {
            let id: KeyId = args
                .credential
                .parse()
                .map_err(|_| anyhow::anyhow!("{:?} is not a key id (a UUID)", args.credential))?;
            let key = set_allow_list(&args, id, "key").await?;
            emit(json, &key_json(&key), || {
                format!("key {} may be used from {}", key.id, key.allow_from)
            })
        }
    }
}

/// An allow-list as the tables show it.
pub(super) fn allowed(list: &AllowList) -> String {
    match list.is_open() {
        true => "any".to_owned(),
        false => list.to_strings().join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_parse_with_units() {
        assert_eq!(parse_lifetime("30d").unwrap(), Duration::days(30));
        assert_eq!(parse_lifetime("12h").unwrap(), Duration::hours(12));
        assert_eq!(parse_lifetime("2w").unwrap(), Duration::weeks(2));
        assert_eq!(parse_lifetime("90m").unwrap(), Duration::minutes(90));
    }

    #[test]
    fn bad_lifetimes_are_refused() {
        assert!(parse_lifetime("30").is_err());
        assert!(parse_lifetime("d").is_err());
        assert!(parse_lifetime("0d").is_err());
        assert!(parse_lifetime("-1d").is_err());
        assert!(parse_lifetime("30y").is_err());
        assert!(parse_lifetime("99999999999999999w").is_err());
    }
}
