//! The API keys settings: list, issue (the key shown once), revoke, and the audit log.
//!
//! Keys are issued and revoked through the same port as the operator's CLI, so a revocation
//! takes effect on the API exactly as `posture-api keys revoke` does (the key cache hears of
//! it by NOTIFY at once). The full key is in one response only, the one answering the issue
//! form, sent with `Cache-Control: no-store`; it is never logged.

use actix_web::{HttpResponse, web};
use chrono::{DateTime, Duration, NaiveDate, NaiveTime, Utc};
use posture_domain::{
    ApiKey, KeyId, Scope,
    api_key::{MAX_KEY_NAME_LEN, NewApiKey},
    secrets::Keyring,
};
use serde::Deserialize;

use crate::{
    ConsoleError, ConsoleState, PREFIX,
    pages::{self, EXPIRES_ON_A_DATE, EXPIRY_CHOICES, IssueForm},
    paging::{PAGE_SIZE, Paged},
    session::{self, Signed},
};

#[derive(Deserialize)]
pub struct ListQuery {
    revoked: Option<String>,
    /// The page starts after this key (the last of the page before).
    before: Option<String>,
}

/// A page link that names no row of this customer (malformed, or another customer's).
fn stale_page_link() -> ConsoleError {
    ConsoleError::BadRequest(
        "This page link is out of date or was changed: open the list again from the menu."
            .to_owned(),
    )
}

/// A page's read failing: its link names no row of the customer, or as usual.
fn page_error(e: posture_domain::Error) -> ConsoleError {
    match e {
        posture_domain::Error::NotFound => stale_page_link(),
        other => other.into(),
    }
}

/// The page of the customer's keys after `before` (the newest without).
async fn keys_page(
    state: &ConsoleState,
    signed: &Signed,
    before: Option<&str>,
) -> Result<Paged<ApiKey>, ConsoleError> {
    let before = before
        .map(|b| b.parse::<KeyId>().map_err(|_| stale_page_link()))
        .transpose()?;
    let rows = state
        .ports
        .keys
        .list_keys_page(signed.session.scope(), before, PAGE_SIZE + 1)
        .await
        .map_err(page_error)?;
    Ok(Paged::of(rows, before.is_some(), |k| k.id.to_string()))
}

/// The customer's key `id`, if it has one.
async fn find_key(
    state: &ConsoleState,
    signed: &Signed,
    id: KeyId,
) -> Result<Option<ApiKey>, ConsoleError> {
    match state
        .ports
        .keys
        .current_key(signed.session.scope(), id)
        .await
    {
        Ok(found) => Ok(Some(found.key)),
        Err(posture_domain::Error::NotFound) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `GET keys`: the customer's keys (newest first, a page at a time) and the issue form.
pub async fn list(
    signed: Signed,
    state: web::Data<ConsoleState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let page = keys_page(&state, &signed, query.before.as_deref()).await?;
    let revoked = match query.revoked.as_deref().map(str::parse::<KeyId>) {
        Some(Ok(id)) => find_key(&state, &signed, id).await?,
        _ => None,
    };
    let now = state.clock.now();
    let days = state.ports.audit.inactivity(signed.session.scope()).await?;
    let lapsing = crate::fences::lapsing_soon(
        days,
        now,
        page.rows
            .iter()
            .filter(|k| k.revoked_at.is_none())
            .map(|k| (k.name.as_str(), k.last_used_at.unwrap_or(k.created_at))),
    );
    let notice = revoked
        .filter(|k| k.revoked_at.is_some())
        .map(|k| format!("Key “{}” was revoked. It no longer works.", k.name))
        .or(lapsing);
    Ok(pages::html_page(pages::keys(
        &signed.viewer(),
        &page,
        &IssueForm::fresh(&state.keyring, &signed.session.csrf_token),
        notice.as_deref(),
        state.clock.now(),
    )))
}

/// What the issue form asked for.
struct Request {
    /// The id of the form's one-time token (absent, or a token posture did not make for this
    /// session: the form is not one posture rendered for it).
    key_id: Option<KeyId>,
    name: String,
    scopes: Vec<Scope>,
    expires: String,
    expires_on: String,
    /// The allowed networks as typed (one per line).
    allow_from: String,
}

fn read_issue_form(fields: &[(String, String)], keyring: &Keyring, csrf_token: &str) -> Request {
    let value = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let mut scopes: Vec<Scope> = fields
        .iter()
        .filter(|(k, _)| k == "scope")
        .filter_map(|(_, v)| v.parse().ok())
        .collect();
    scopes.dedup();
    Request {
        key_id: keyring
            .form_key()
            .issue_form_key(csrf_token, &value("key_id")),
        name: value("name").trim().to_owned(),
        scopes,
        expires: value("expires"),
        expires_on: value("expires_on").trim().to_owned(),
        allow_from: value("allow_from"),
    }
}

/// A form whose token posture did not make for this session.
const OUT_OF_DATE: &str = "This form is out of date: fill it in again.";

/// Why an issue form cannot be issued, in words.
fn refusal(request: &Request, now: DateTime<Utc>) -> Option<String> {
    if request.key_id.is_none() {
        return Some(OUT_OF_DATE.to_owned());
    }
    if request.name.is_empty() {
        return Some("Give the key a name, so you can tell it apart later.".to_owned());
    }
    if request.name.chars().count() > MAX_KEY_NAME_LEN {
        return Some(format!(
            "A key's name has at most {MAX_KEY_NAME_LEN} characters."
        ));
    }
    if request.name.chars().any(char::is_control) {
        return Some("A key's name cannot contain control characters.".to_owned());
    }
    if request.scopes.is_empty() {
        return Some("Choose at least one scope: a key holds one or more.".to_owned());
    }
    if let Err(error) = crate::fences::typed_allow_list(&request.allow_from) {
        return Some(error);
    }
    expiry(request, now).err()
}

/// Longest a key may be issued for on a date, in days.
const MAX_EXPIRY_DAYS: i64 = 5 * 366;

/// When the key the form asks for stops working (`None`: never), or why the form's choice
/// cannot be used.
fn expiry(request: &Request, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, String> {
    if request.expires == EXPIRES_ON_A_DATE {
        let day = NaiveDate::parse_from_str(&request.expires_on, "%Y-%m-%d")
            .map_err(|_| "Give the expiry date as a date (YYYY-MM-DD).".to_owned())?;
        let at = day.and_time(NaiveTime::MIN).and_utc();
        if at <= now {
            return Err("The expiry date must be after today.".to_owned());
        }
        if at > now + Duration::days(MAX_EXPIRY_DAYS) {
            return Err("A key may be issued for at most 5 years.".to_owned());
        }
        return Ok(Some(at));
    }
    match EXPIRY_CHOICES.iter().find(|(v, ..)| *v == request.expires) {
        Some((_, _, days)) => Ok(days.map(|d| now + Duration::days(d))),
        None => Err("Choose when the key expires.".to_owned()),
    }
}

/// `POST keys`: issues a key and shows it once.
pub async fn issue(
    signed: Signed,
    state: web::Data<ConsoleState>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let fields = session::checked_form(&body, &signed)?;
    let request = read_issue_form(&fields, &state.keyring, &signed.session.csrf_token);
    if let Some(error) = refusal(&request, state.clock.now()) {
        return refused(&state, &signed, &request, &error).await;
    }
    let key_id = request.key_id.unwrap_or_else(KeyId::generate);
    if let Some(page) = already_issued(&state, &signed, key_id).await? {
        return Ok(page);
    }
    let now = state.clock.now();
    let expires_at = expiry(&request, now).map_err(ConsoleError::BadRequest)?;
    let (mut new_key, secret) = NewApiKey::generate(
        signed.customer,
        request.name.clone(),
        request.scopes.iter().copied().collect(),
        expires_at,
        now,
    )?;
    new_key.id = key_id;
    new_key.allow_from =
        crate::fences::typed_allow_list(&request.allow_from).map_err(ConsoleError::BadRequest)?;
    let key = match state.ports.keys.insert_key(new_key, &signed.actor()).await {
        Ok(key) => key,
        // The same form posted twice at once: the other post issued it. (An id that is no
        // key of this customer's cannot be in a token posture made: it is answered as a
        // stale form, never as something that tells whose it is.)
        Err(posture_domain::Error::Conflict(_)) => {
            return match already_issued(&state, &signed, key_id).await? {
                Some(page) => Ok(page),
                None => refused(&state, &signed, &request, OUT_OF_DATE).await,
            };
        }
        Err(e) => return Err(e.into()),
    };
    tracing::info!(customer = %signed.customer, key.id = %key.id, subject = %signed.session.subject, "console: key issued");
    Ok(pages::html_page(pages::issued(
        &signed.viewer(),
        &key,
        secret.expose(),
    )))
}

/// The form again (a fresh token for the same session), saying why it was not issued: 422.
async fn refused(
    state: &ConsoleState,
    signed: &Signed,
    request: &Request,
    error: &str,
) -> Result<HttpResponse, ConsoleError> {
    let keys = keys_page(state, signed, None).await?;
    let form = IssueForm {
        key_id: state.keyring.form_key().issue_form_token(
            &signed.session.csrf_token,
            request.key_id.unwrap_or_else(KeyId::generate),
        ),
        name: &request.name,
        scopes: &request.scopes,
        expires: &request.expires,
        expires_on: &request.expires_on,
        allow_from: &request.allow_from,
        error: Some(error),
    };
    let page = pages::keys(&signed.viewer(), &keys, &form, None, state.clock.now()).into_string();
    Ok(HttpResponse::UnprocessableEntity()
        .content_type("text/html; charset=utf-8")
        .body(page))
}

/// The keys page saying so, when the form's key was issued already (a reload of the page
/// that showed it, or a second click): the key is never shown again, nor issued twice.
async fn already_issued(
    state: &ConsoleState,
    signed: &Signed,
    key_id: KeyId,
) -> Result<Option<HttpResponse>, ConsoleError> {
    let Some(key) = find_key(state, signed, key_id).await? else {
        return Ok(None);
    };
    let keys = keys_page(state, signed, None).await?;
    let notice = format!(
        "This form was already sent: it issued “{}”, listed below. Its secret was shown \
         once and cannot be shown again; if it was lost, revoke the key and issue a new one.",
        key.name
    );
    Ok(Some(pages::html_page(pages::keys(
        &signed.viewer(),
        &keys,
        &IssueForm::fresh(&state.keyring, &signed.session.csrf_token),
        Some(&notice),
        state.clock.now(),
    ))))
}

async fn key_of(
    state: &ConsoleState,
    signed: &Signed,
    key_path: &str,
) -> Result<ApiKey, ConsoleError> {
    let id: KeyId = key_path.parse().map_err(|_| ConsoleError::NotFound)?;
    find_key(state, signed, id)
        .await?
        .ok_or(ConsoleError::NotFound)
}

/// `GET keys/{key}/revoke`: asks first.
pub async fn confirm_revoke(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ConsoleError> {
    let (customer, key) = path.into_inner();
    let key = key_of(&state, &signed, &key).await?;
    if key.revoked_at.is_some() {
        return Ok(session::redirect(format!(
            "{PREFIX}/{customer}/keys?revoked={}",
            key.id
        )));
    }
    Ok(pages::html_page(pages::confirm_revoke(
        &signed.viewer(),
        &key,
    )))
}

/// `POST keys/{key}/revoke`: revokes at once.
pub async fn revoke(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let (customer, key) = path.into_inner();
    session::checked_form(&body, &signed)?;
    let id: KeyId = key.parse().map_err(|_| ConsoleError::NotFound)?;
    let (key, revoked_now) = state
        .ports
        .keys
        .revoke_key(Some(signed.session.scope()), id, &signed.actor())
        .await?;
    if revoked_now {
        tracing::info!(customer = %signed.customer, key.id = %key.id, subject = %signed.session.subject, "console: key revoked");
    }
    Ok(session::redirect(format!(
        "{PREFIX}/{customer}/keys?revoked={}",
        key.id
    )))
}

#[derive(Deserialize)]
pub struct AuditQuery {
    /// The page starts after this line (the last of the page before).
    before: Option<String>,
}

/// `GET audit`: who signed in and out, issued and revoked which key (newest first, a page
/// at a time).
pub async fn audit(
    signed: Signed,
    state: web::Data<ConsoleState>,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let before = query
        .before
        .as_deref()
        .map(|b| b.parse::<uuid::Uuid>().map_err(|_| stale_page_link()))
        .transpose()?;
    let events = state
        .ports
        .console
        .audit_log(signed.session.scope(), before, PAGE_SIZE + 1)
        .await
        .map_err(page_error)?;
    let page = Paged::of(events, before.is_some(), |e| e.id.to_string());
    Ok(pages::html_page(crate::audit_page::audit(
        &signed.viewer(),
        &page,
    )))
}
