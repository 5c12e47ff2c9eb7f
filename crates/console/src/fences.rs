//! Where a key or an OAuth client may be used from (its allow-list), changed by an admin;
//! and the customer's inactivity rule (the settings page).
//!
//! Both go through the ports the operator's commands use, so a change applies on the API
//! exactly as `posture-api keys allow-from` and `customers inactivity` do: at once, on every
//! instance, in the audit log with the admin's name and address.

use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use maud::html;
use posture_domain::{
    KeyId,
    allow_list::AllowList,
    credential::{INACTIVITY_DAYS, inactive_at, inactivity_notice},
    oauth::parse_client_id,
};

use crate::{
    ConsoleError, ConsoleState, PREFIX,
    pages::{self, frame},
    session::{self, Signed},
};

/// Which kind of credential a page is about.
#[derive(Clone, Copy)]
enum Kind {
    Key,
    Client,
}

impl Kind {
    fn path(self) -> &'static str {
        match self {
            Kind::Key => "keys",
            Kind::Client => "clients",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Key => "key",
            Kind::Client => "OAuth client",
        }
    }
}

/// The credential `id` of the customer, with its name, prefix and list; `NotFound` for
/// another customer's, a revoked one, or one of the other kind.
async fn credential(
    state: &ConsoleState,
    signed: &Signed,
    kind: Kind,
    id: &str,
) -> Result<(KeyId, String, String, AllowList), ConsoleError> {
    let scope = signed.session.scope();
    match kind {
        Kind::Key => {
            let id: KeyId = id.parse().map_err(|_| ConsoleError::NotFound)?;
            let key = state
                .ports
                .keys
                .current_key(scope, id)
                .await
                .map_err(|e| match e {
                    posture_domain::Error::NotFound => ConsoleError::NotFound,
                    other => other.into(),
                })?
                .key;
            if key.revoked_at.is_some() || key.prefix.starts_with("pci_") {
                return Err(ConsoleError::NotFound);
            }
            Ok((key.id, key.name, key.prefix, key.allow_from))
        }
        Kind::Client => {
            let id = parse_client_id(id)
                .or_else(|| id.parse().ok())
                .ok_or(ConsoleError::NotFound)?;
            let client = state
                .ports
                .clients
                .find_client(Some(scope), id)
                .await
                .map_err(|e| match e {
                    posture_domain::Error::NotFound => ConsoleError::NotFound,
                    other => other.into(),
                })?;
            if client.revoked_at.is_some() {
                return Err(ConsoleError::NotFound);
            }
            let prefix = client.client_id();
            Ok((client.id, client.name, prefix, client.allow_from))
        }
    }
}

/// The allow-list form of a credential, with `error` when the last one was refused.
fn form_page(
    signed: &Signed,
    kind: Kind,
    (id, name, prefix, list): (KeyId, String, String, AllowList),
    typed: Option<&str>,
    error: Option<&str>,
) -> maud::Markup {
    let viewer = signed.viewer();
    let csrf = &signed.session.csrf_token;
    let text = typed.map_or_else(|| list.to_strings().join("\n"), str::to_owned);
    let action = format!(
        "{PREFIX}/{}/{}/{id}/allow-from",
        signed.customer_text,
        kind.path()
    );
    frame(
        "Where it may be used from",
        Some(&viewer),
        html! {
            section.card.narrow {
                h1 { "Where " (name) " may be used from" }
                p { "The " (kind.noun()) " " code { (prefix) } " works only from the networks listed here, one per line (IPv4 or IPv6, CIDR or single addresses, at most 32): a request from anywhere else is refused, and the refusal is in the audit log. Leave the list empty to allow every address." }
                p.muted { "Name the addresses your integration leaves from as the internet sees it: a NAT gateway's or a proxy's." }
                @if let Some(error) = error { p.error-text role="alert" id="form-error" { (error) } }
                form method="post" action=(action) {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="allow-from" { "Allowed networks" }
                    textarea id="allow-from" name="allow_from" rows="6" placeholder="203.0.113.0/24\n2001:db8::/48" { (text) }
                    button.primary type="submit" id="save-allow-list" { "Save" }
                    " "
                    a.button href={ (PREFIX) "/" (signed.customer_text) "/" (kind.path()) } { "Cancel" }
                }
            }
        },
    )
}

/// The networks of a form's textarea: one per line (commas separate too).
pub(crate) fn typed_networks(text: &str) -> Vec<&str> {
    text.split(['\n', '\r', ','])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The allow-list typed in a form, or the sentence saying why it cannot be used.
pub(crate) fn typed_allow_list(text: &str) -> Result<AllowList, String> {
    AllowList::parse(&typed_networks(text)).map_err(|e| match e {
        posture_domain::Error::Invalid { reason, .. } => format!("Allowed networks: {reason}."),
        other => other.to_string(),
    })
}

async fn show(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
    kind: Kind,
) -> Result<HttpResponse, ConsoleError> {
    let (_, id) = path.into_inner();
    let found = credential(&state, &signed, kind, &id).await?;
    Ok(pages::html_page(form_page(
        &signed, kind, found, None, None,
    )))
}

async fn save(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
    kind: Kind,
) -> Result<HttpResponse, ConsoleError> {
    let (customer, id) = path.into_inner();
    let fields = session::checked_form(&body, &signed)?;
    let found = credential(&state, &signed, kind, &id).await?;
    let typed = fields
        .iter()
        .find(|(k, _)| k == "allow_from")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let list = match typed_allow_list(&typed) {
        Ok(list) => list,
        Err(error) => {
            let page = form_page(&signed, kind, found, Some(&typed), Some(&error));
            return Ok(HttpResponse::UnprocessableEntity()
                .content_type("text/html; charset=utf-8")
                .body(page.into_string()));
        }
    };
    let credential_id = found.0;
    state
        .ports
        .keys
        .set_allow_list(
            Some(signed.session.scope()),
            credential_id,
            list,
            &signed.actor(),
        )
        .await?;
    tracing::info!(customer = %signed.customer, key.id = %credential_id, subject = %signed.session.subject, "console: allow-list set");
    Ok(session::redirect(format!(
        "{PREFIX}/{customer}/{}",
        kind.path()
    )))
}

/// `GET keys/{key}/allow-from`.
pub async fn key_form(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ConsoleError> {
    show(signed, state, path, Kind::Key).await
}

/// `POST keys/{key}/allow-from`.
pub async fn key_save(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    save(signed, state, path, body, Kind::Key).await
}

/// `GET clients/{client}/allow-from`.
pub async fn client_form(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ConsoleError> {
    show(signed, state, path, Kind::Client).await
}

/// `POST clients/{client}/allow-from`.
pub async fn client_save(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    save(signed, state, path, body, Kind::Client).await
}

/// The settings page: the inactivity rule, with `error` or `notice`.
fn settings_page(
    signed: &Signed,
    days: Option<u32>,
    typed: Option<&str>,
    error: Option<&str>,
    notice: Option<&str>,
) -> maud::Markup {
    let viewer = signed.viewer();
    let value = typed.map_or_else(
        || days.map_or_else(String::new, |d| d.to_string()),
        str::to_owned,
    );
    frame(
        "Settings",
        Some(&viewer),
        html! {
            h1 { "Settings" }
            @if let Some(notice) = notice { p.notice role="status" { (notice) } }
            section.card.narrow {
                h2 { "Inactivity" }
                p { "Keys and OAuth clients unused for this many days stop working (a request gets 401 saying why); the audit log has a notice a week before, and the key and client pages show it. Leave it empty for credentials never to stop for inactivity." }
                p id="inactivity-now" { @match days {
                    Some(days) => { "Now: credentials stop working after " strong { (days) } " days unused." }
                    None => { "Now: credentials never stop working for inactivity." }
                } }
                @if let Some(error) = error { p.error-text role="alert" id="form-error" { (error) } }
                form method="post" action={ (PREFIX) "/" (signed.customer_text) "/settings" } {
                    input type="hidden" name="csrf" value=(signed.session.csrf_token);
                    label for="inactivity-days" { "Days unused (" (INACTIVITY_DAYS.start()) " to " (INACTIVITY_DAYS.end()) ")" }
                    input id="inactivity-days" name="inactivity_days" type="number"
                        min=(INACTIVITY_DAYS.start()) max=(INACTIVITY_DAYS.end()) value=(value) placeholder="e.g. 90";
                    button.primary type="submit" id="save-inactivity" { "Save" }
                }
            }
        },
    )
}

/// `GET settings`.
pub async fn settings(
    signed: Signed,
    state: web::Data<ConsoleState>,
) -> Result<HttpResponse, ConsoleError> {
    let days = state.ports.audit.inactivity(signed.session.scope()).await?;
    Ok(pages::html_page(settings_page(
        &signed, days, None, None, None,
    )))
}

/// `POST settings`: sets or clears the inactivity rule.
pub async fn save_settings(
    signed: Signed,
    state: web::Data<ConsoleState>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let fields = session::checked_form(&body, &signed)?;
    let typed = fields
        .iter()
        .find(|(k, _)| k == "inactivity_days")
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    let days = match typed.as_str() {
        "" => None,
        text => match text
            .parse::<u32>()
            .ok()
            .filter(|d| INACTIVITY_DAYS.contains(d))
        {
            Some(days) => Some(days),
            None => {
                let current = state.ports.audit.inactivity(signed.session.scope()).await?;
                let error = format!(
                    "Give the days as a whole number from {} to {}, or leave it empty.",
                    INACTIVITY_DAYS.start(),
                    INACTIVITY_DAYS.end()
                );
                let page = settings_page(&signed, current, Some(&typed), Some(&error), None);
                return Ok(HttpResponse::UnprocessableEntity()
                    .content_type("text/html; charset=utf-8")
                    .body(page.into_string()));
            }
        },
    };
    state
        .ports
        .audit
        .set_inactivity(signed.session.scope(), days, &signed.actor())
        .await?;
    tracing::info!(customer = %signed.customer, subject = %signed.session.subject, ?days, "console: inactivity rule set");
    let notice = match days {
        Some(days) => format!("Saved: credentials stop working after {days} days unused."),
        None => "Saved: credentials never stop working for inactivity.".to_owned(),
    };
    Ok(pages::html_page(settings_page(
        &signed,
        days,
        None,
        None,
        Some(&notice),
    )))
}

/// The banner of a page of credentials: those of `used` (name, last use or issue) that stop
/// working for inactivity within a week of `now`.
pub(crate) fn lapsing_soon<'a>(
    days: Option<u32>,
    now: DateTime<Utc>,
    used: impl Iterator<Item = (&'a str, DateTime<Utc>)>,
) -> Option<String> {
    let mut names: Vec<&str> = used
        .filter(|(_, at)| {
            inactive_at(*at, days).is_some_and(|lapses| {
                lapses > now && lapses <= now + inactivity_notice(days.unwrap_or_default())
            })
        })
        .map(|(name, _)| name)
        .collect();
    if names.is_empty() {
        return None;
    }
    names.sort_unstable();
    Some(format!(
        "Unused for almost {} days, these stop working within a week unless used: {}.",
        days.unwrap_or_default(),
        names.join(", ")
    ))
}
