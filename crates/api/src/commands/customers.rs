//! `posture-api customers create|list|usage|sso`.

use posture_domain::{
    Customer,
    console::Actor,
    console::{
        AdminRule, ClientSecret, Provisioning, SsoConfig, SsoSettings, validate_display_name,
        validate_issuer,
    },
    egress::EgressPolicy,
    ports::{AuditRepository, ConsoleRepository, CustomerRepository, UsageRepository},
    usage::{CustomerUsage, StorageCategory},
};
use posture_oidc::OidcSignIn;
use serde_json::{Value, json};

use super::operator::{customer_scope, fail, store};
use crate::{
    cli::{CustomersCommand, ProvisioningArgs, SetSsoArgs, SsoCommand},
    config::Networks,
    output::emit,
};

/// The redirect URI to register at the provider: whole when the public URL is known.
fn redirect_uri(sso: &SsoConfig, public_url: Option<&str>) -> String {
    let path = format!("/console/{}/callback", sso.customer_id);
    match public_url {
        Some(base) => format!("{base}{path}"),
        None => format!("<POSTURE_PUBLIC_URL>{path}"),
    }
}

fn sso_json(sso: &SsoConfig, public_url: Option<&str>) -> Value {
    json!({
        "redirectUri": public_url.map(|_| redirect_uri(sso, public_url)),
        "customerId": sso.customer_id.to_string(),
        "issuer": sso.issuer,
        "clientId": sso.client_id,
        "displayName": sso.display_name,
        "providerName": sso.provider_name(),
        "adminClaim": sso.admins.claim,
        "adminValues": sso.admins.values,
        "adminSubjects": sso.admins.subjects,
        "provisioning": sso.provisioning.as_ref().map(|p| json!({
            "matchClaim": p.claim,
            "adminGroup": p.admin_group,
        })),
        "redirectPath": format!("/console/{}/callback", sso.customer_id),
        "updatedAt": sso.updated_at,
    })
}

fn sso_text(sso: &SsoConfig, public_url: Option<&str>) -> String {
    let hint = if public_url.is_none() {
        " (set POSTURE_PUBLIC_URL, as serve has it, to see it whole)"
    } else {
        ""
    };
    let provisioning = match &sso.provisioning {
        Some(p) => format!(
            "required: the {:?} claim matched to userName; admins: members of SCIM group {:?} \
             (the admin rule is not used)",
            p.claim, p.admin_group
        ),
        None => "not required".to_owned(),
    };
    format!(
        "issuer:         {}\nclient id:      {}\nsign-in button: Sign in with {}\nadmin claim:    {}\nadmin values:   {}\nadmin subjects: {}\nprovisioning:   {provisioning}\nredirect URI:   {}{hint}",
        sso.issuer,
        sso.client_id,
        sso.provider_name(),
        sso.admins.claim.as_deref().unwrap_or("-"),
        sso.admins.values.join(", "),
        sso.admins.subjects.join(", "),
        redirect_uri(sso, public_url)
    )
}

/// Asks the issuer for its discovery document, as a sign-in would, before anything is saved.
async fn check_issuer(issuer: &str, networks: &Networks) -> anyhow::Result<()> {
    let client = OidcSignIn::new(EgressPolicy {
        allow_private: false,
        allowed_networks: networks.0.clone(),
    })
    .map_err(|e| anyhow::anyhow!("building the OpenID Connect client: {e}"))?;
    client.check_issuer(issuer).await.map_err(|e| {
        anyhow::anyhow!(
            "--issuer {issuer}: {e}. Nothing was saved. (A provider inside your network needs \
             POSTURE_SSO_ALLOWED_NETWORKS, as serve does; --no-check saves without asking it.)"
        )
    })
}

async fn set_sso(args: SetSsoArgs, json: bool) -> anyhow::Result<()> {
    let scope = customer_scope(&args.customer)?;
    validate_issuer(&args.issuer).map_err(|e| anyhow::anyhow!("--issuer: {e}"))?;
    let admins = AdminRule {
        claim: args.admin_claim,
        values: args.admin_values,
        subjects: args.admin_subjects,
    };
    admins
        .validate()
        .map_err(|e| anyhow::anyhow!("admins: {e}"))?;
    if args.client_id.is_empty()
        || args.client_id.len() > posture_domain::console::MAX_SSO_FIELD_LEN
    {
        anyhow::bail!("--client-id: 1 to 1024 bytes");
    }
    if let Some(name) = &args.display_name {
        validate_display_name(name).map_err(|e| anyhow::anyhow!("--display-name: {e}"))?;
    }
    let secret = args.client_secret.ok_or_else(|| {
        anyhow::anyhow!(
            "the client secret is missing: set POSTURE_SSO_CLIENT_SECRET (or pass \
             --client-secret, which other users can see in ps)"
        )
    })?;
    let secret = ClientSecret::new(secret)
        .map_err(|e| anyhow::anyhow!("POSTURE_SSO_CLIENT_SECRET / --client-secret: {e}"))?;
    if !args.no_check {
        check_issuer(&args.issuer, &args.sso_allowed_networks).await?;
    }
    let sealed = args
        .secrets
        .keyring()?
        .seal_client_secret(&secret, scope.customer_id())
        .map_err(|e| fail("sealing the client secret", e))?;
    let settings = SsoSettings {
        issuer: args.issuer.clone(),
        client_id: args.client_id,
        display_name: args.display_name.map(|n| n.trim().to_owned()),
        admins,
    };
    let change = store(&args.database)?
        .set_sso(scope, &settings, sealed)
        .await
        .map_err(|e| match e {
            posture_domain::Error::NotFound => {
                anyhow::anyhow!("no customer with id {}", args.customer)
            }
            other => fail("setting the identity provider", other),
        })?;
    let public_url = args.public_url.as_deref();
    let mut value = sso_json(&change.sso, public_url);
    value["sessionsEnded"] = json!(change.sessions_ended);
    emit(json, &value, || {
        let ended = match change.sessions_ended {
            0 => String::new(),
            n => format!("\n{n} console session(s) ended: who can be an admin changed"),
        };
        format!("{}{ended}", sso_text(&change.sso, public_url))
    })
}

async fn set_provisioning(args: ProvisioningArgs, json: bool) -> anyhow::Result<()> {
    let scope = customer_scope(&args.customer)?;
    let provisioning = match (args.match_claim, args.admin_group) {
        (Some(claim), Some(admin_group)) => {
            let p = Provisioning {
                claim,
                admin_group: admin_group.trim().to_owned(),
            };
            p.validate()
                .map_err(|e| anyhow::anyhow!("--match-claim / --admin-group: {e}"))?;
            Some(p)
        }
        _ => None,
    };
    let change = store(&args.database)?
        .set_provisioning(scope, provisioning.as_ref())
        .await
        .map_err(|e| match e {
            posture_domain::Error::NotFound => anyhow::anyhow!(
                "customer {} has no identity provider (or does not exist): set one with \
                 `customers sso set` first",
                args.customer
            ),
            other => fail("setting provisioning", other),
        })?;
    let mut value = sso_json(&change.sso, None);
    value["sessionsEnded"] = json!(change.sessions_ended);
    emit(json, &value, || {
        let what = match &change.sso.provisioning {
            Some(p) => format!(
                "provisioning required: the {:?} claim is matched to a provisioned userName; \
                 admins are the members of SCIM group {:?}",
                p.claim, p.admin_group
            ),
            None => "provisioning not required: the admin rule applies".to_owned(),
        };
        format!("{what}\n{} console session(s) ended", change.sessions_ended)
    })
}

async fn run_sso(command: SsoCommand, json: bool) -> anyhow::Result<()> {
    match command {
        SsoCommand::Set(args) => set_sso(*args, json).await,
        SsoCommand::Provisioning(args) => set_provisioning(args, json).await,
        SsoCommand::Show {
            database,
            customer,
            public_url,
        } => {
            let scope = customer_scope(&customer)?;
            let setup = store(&database)?
                .console_setup(scope)
                .await
                .map_err(|e| fail("reading the identity provider", e))?
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "customer {customer} has no identity provider (or does not exist)"
                    )
                })?;
            let public_url = public_url.as_deref();
            emit(json, &sso_json(&setup.sso, public_url), || {
                sso_text(&setup.sso, public_url)
            })
        }
        SsoCommand::Clear { database, customer } => {
            let scope = customer_scope(&customer)?;
            let store = store(&database)?;
            // The provisioning requirement lives with the provider: it goes too, and is said.
            let required = store
                .console_setup(scope)
                .await
                .map_err(|e| fail("reading the identity provider", e))?
                .and_then(|setup| setup.sso.provisioning);
            let ended = store
                .clear_sso(scope)
                .await
                .map_err(|e| fail("removing the identity provider", e))?;
            let removed = required.filter(|_| ended.is_some());
            let value = json!({
                "removed": ended.is_some(),
                "sessionsEnded": ended.unwrap_or(0),
                "provisioningRemoved": removed.as_ref().map(|p| json!({
                    "matchClaim": p.claim, "adminGroup": p.admin_group,
                })),
            });
            emit(json, &value, || match (ended, &removed) {
                (Some(n), None) => format!(
                    "identity provider removed; {n} console session(s) of the customer ended"
                ),
                (Some(n), Some(p)) => format!(
                    "identity provider removed; {n} console session(s) of the customer ended; \
                     SCIM provisioning was required ({:?} claim, admin group {:?}) and that \
                     requirement is removed with it: after the next `sso set`, set it again \
                     with `sso provisioning`",
                    p.claim, p.admin_group
                ),
                (None, _) => "the customer had no identity provider".to_owned(),
            })
        }
    }
}

fn to_json(c: &Customer) -> Value {
    json!({ "id": c.id.to_string(), "name": c.name, "createdAt": c.created_at })
}

pub async fn run(command: CustomersCommand, json: bool) -> anyhow::Result<()> {
    match command {
        CustomersCommand::Create { database, name } => {
            let customer = store(&database)?
                .create_customer(&name)
                .await
                .map_err(|e| fail("creating the customer", e))?;
            emit(json, &to_json(&customer), || customer.id.to_string())
        }
        CustomersCommand::List { database } => {
            let customers = store(&database)?
                .list_customers()
                .await
                .map_err(|e| fail("listing customers", e))?;
            let data: Vec<Value> = customers.iter().map(to_json).collect();
            emit(json, &json!({ "data": data }), || {
                customers
                    .iter()
                    .map(|c| format!("{}  {}  {}", c.id, c.created_at.to_rfc3339(), c.name))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
        }
        CustomersCommand::Inactivity {
            database,
            customer,
            days,
            off,
        } => {
            let scope = customer_scope(&customer)?;
            let store = store(&database)?;
            if days.is_some() || off {
                store
                    .set_inactivity(scope, days, &Actor::Operator)
                    .await
                    .map_err(|e| match e {
                        posture_domain::Error::NotFound => {
                            anyhow::anyhow!("no customer with id {customer}")
                        }
                        other => fail("setting the inactivity rule", other),
                    })?;
            }
            let days = store.inactivity(scope).await.map_err(|e| match e {
                posture_domain::Error::NotFound => {
                    anyhow::anyhow!("no customer with id {customer}")
                }
                other => fail("reading the inactivity rule", other),
            })?;
            emit(
                json,
                &json!({ "customerId": customer, "inactivityDays": days }),
                || match days {
                    Some(days) => format!(
                        "credentials of customer {customer} stop working after {days} days unused"
                    ),
                    None => format!(
                        "credentials of customer {customer} never stop working for inactivity"
                    ),
                },
            )
        }
        CustomersCommand::Usage { database, customer } => {
            let only = customer
                .as_deref()
                .map(customer_scope)
                .transpose()?
                .map(|scope| scope.customer_id());
            let store = store(&database)?;
            let names: std::collections::HashMap<_, _> = store
                .list_customers()
                .await
                .map_err(|e| fail("listing customers", e))?
                .into_iter()
                .map(|c| (c.id, c.name))
                .collect();
            let usages = store
                .storage_usage(only)
                .await
                .map_err(|e| fail("measuring the customers' data", e))?;
            let data: Vec<Value> = usages
                .iter()
                .map(|u| usage_json(u, names.get(&u.customer).map(String::as_str)))
                .collect();
            emit(json, &json!({ "data": data }), || {
                usage_text(&usages, &names)
            })
        }
        CustomersCommand::Sso(command) => run_sso(command, json).await,
    }
}

fn usage_json(usage: &CustomerUsage, name: Option<&str>) -> Value {
    let categories: serde_json::Map<String, Value> = usage
        .categories
        .iter()
        .map(|(category, u)| {
            (
                category.as_str().to_owned(),
                json!({ "rows": u.rows, "bytes": u.bytes }),
            )
        })
        .collect();
    json!({
        "customerId": usage.customer.to_string(),
        "name": name,
        "totalBytes": usage.total_bytes(),
        "categories": categories,
    })
}

/// Bytes for people: `812 B`, `4.2 KiB`, `37.5 MiB`, `1.2 GiB`.
fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn usage_text(
    usages: &[CustomerUsage],
    names: &std::collections::HashMap<posture_domain::CustomerId, String>,
) -> String {
    let mut lines = vec![format!(
        "{:<36}  {:>10}  {}",
        "customer",
        "total",
        StorageCategory::ALL
            .iter()
            .map(|c| format!("{:>10}", c.as_str()))
            .collect::<Vec<_>>()
            .join("  ")
    )];
    for usage in usages {
        let columns: Vec<String> = StorageCategory::ALL
            .iter()
            .map(|c| format!("{:>10}", bytes_text(usage.bytes_of(*c))))
            .collect();
        lines.push(format!(
            "{:<36}  {:>10}  {}  {}",
            usage.customer,
            bytes_text(usage.total_bytes()),
            columns.join("  "),
            names.get(&usage.customer).map_or("", String::as_str)
        ));
    }
    lines.join("\n")
}
