//! The OAuth clients settings (docs/auth.md): list, issue (the secret shown once), rotate a
//! secret or a public key with an overlap, revoke.
//!
//! Clients are issued, rotated and revoked through the same port as the operator's CLI, so
//! a revocation reaches their tokens on the API as `posture-api clients revoke` does. A
//! secret is in one response only, the one answering the form that made it, sent with
//! `Cache-Control: no-store`; it is never logged. Each form's one-time token is the id of
//! what it makes (the client, or the rotation's credential), so a form sent twice makes one.

use actix_web::{HttpResponse, web};
use chrono::Duration;
use posture_domain::{
    KeyId, Scope,
    api_key::MAX_KEY_NAME_LEN,
    oauth::{ClientPublicKey, ClientSecretValue, NewClient, NewCredential, OAuthClient},
};

use crate::{
    ConsoleError, ConsoleState, PREFIX,
    client_pages::{self, ClientForm, OVERLAP_CHOICES, RotateForm},
    pages,
    session::{self, Signed},
};

/// A form value by name (empty when absent).
fn value(fields: &[(String, String)], name: &str) -> String {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// A form whose token posture did not make for this session.
const OUT_OF_DATE: &str = "This form is out of date: fill it in again.";

/// The public key a form pasted, if any, or why it cannot be used.
fn pasted_key(pem: &str) -> Result<Option<ClientPublicKey>, String> {
    if pem.trim().is_empty() {
        return Ok(None);
    }
    ClientPublicKey::from_pem(pem)
        .map(Some)
        .map_err(|e| format!("The public key cannot be used: {e}."))
}

async fn clients_page(
    state: &ConsoleState,
    signed: &Signed,
) -> Result<Vec<OAuthClient>, ConsoleError> {
    let mut clients = state
        .ports
        .clients
        .list_clients(signed.session.scope())
        .await?;
    clients.reverse();
    Ok(clients)
}

/// The list and the issue form (`form`, with `notice` above), with `status`.
async fn list_page(
    state: &ConsoleState,
    signed: &Signed,
    form: &ClientForm<'_>,
    notice: Option<&str>,
    status: actix_web::http::StatusCode,
) -> Result<HttpResponse, ConsoleError> {
    let clients = clients_page(state, signed).await?;
    let now = state.clock.now();
    let days = state.ports.audit.inactivity(signed.session.scope()).await?;
    let lapsing = crate::fences::lapsing_soon(
        days,
        now,
        clients
            .iter()
            .filter(|c| c.revoked_at.is_none())
            .map(|c| (c.name.as_str(), c.last_used_at.unwrap_or(c.created_at))),
    );
    let notice = notice.or(lapsing.as_deref());
    let page = client_pages::clients(&signed.viewer(), &clients, form, notice, now);
    Ok(HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(page.into_string()))
}

#[derive(serde::Deserialize)]
pub struct ListQuery {
    revoked: Option<String>,
}

/// `GET clients`: the customer's clients (newest first) and the issue form.
pub async fn list(
    signed: Signed,
    state: web::Data<ConsoleState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let revoked = match query.revoked.as_deref().map(str::parse::<KeyId>) {
        Some(Ok(id)) => find(&state, &signed, id).await?,
        _ => None,
    };
    let notice = revoked.filter(|c| c.revoked_at.is_some()).map(|c| {
        format!(
            "Client “{}” was revoked. Its tokens no longer work.",
            c.name
        )
    });
    let form = ClientForm::fresh(&state.keyring, &signed.session.csrf_token);
    list_page(
        &state,
        &signed,
        &form,
        notice.as_deref(),
        actix_web::http::StatusCode::OK,
    )
    .await
}

async fn find(
    state: &ConsoleState,
    signed: &Signed,
    id: KeyId,
) -> Result<Option<OAuthClient>, ConsoleError> {
    match state
        .ports
        .clients
        .find_client(Some(signed.session.scope()), id)
        .await
    {
        Ok(client) => Ok(Some(client)),
        Err(posture_domain::Error::NotFound) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn client_of(
    state: &ConsoleState,
    signed: &Signed,
    path: &str,
) -> Result<OAuthClient, ConsoleError> {
    let id: KeyId = path.parse().map_err(|_| ConsoleError::NotFound)?;
    find(state, signed, id).await?.ok_or(ConsoleError::NotFound)
}

/// Why the issue form cannot be used, in words.
fn issue_refusal(
    id: Option<KeyId>,
    name: &str,
    scopes: &[Scope],
    key: &Result<Option<ClientPublicKey>, String>,
) -> Option<String> {
    if id.is_none() {
        return Some(OUT_OF_DATE.to_owned());
    }
    if name.is_empty() {
        return Some("Give the client a name, so you can tell it apart later.".to_owned());
    }
    if name.chars().count() > MAX_KEY_NAME_LEN || name.chars().any(char::is_control) {
        return Some(format!(
            "A client's name has 1 to {MAX_KEY_NAME_LEN} characters, none of them control \
             characters."
        ));
    }
    if scopes.is_empty() {
        return Some("Choose at least one scope: a client holds one or more.".to_owned());
    }
    key.as_ref().err().cloned()
}

/// `POST clients`: issues a client and shows its secret once (or confirms its key).
pub async fn issue(
    signed: Signed,
    state: web::Data<ConsoleState>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let fields = session::checked_form(&body, &signed)?;
    let token = value(&fields, "client_id");
    let id = state
        .keyring
        .form_key()
        .issue_form_key(&signed.session.csrf_token, &token);
    let name = value(&fields, "name").trim().to_owned();
    let mut scopes: Vec<Scope> = fields
        .iter()
        .filter(|(k, _)| k == "scope")
        .filter_map(|(_, v)| v.parse().ok())
        .collect();
    scopes.dedup();
    let pem = value(&fields, "public_key");
    let key = pasted_key(&pem);
    let typed_networks = value(&fields, "allow_from");
    let allow_from = crate::fences::typed_allow_list(&typed_networks);
    let refusal = issue_refusal(id, &name, &scopes, &key).or_else(|| allow_from.clone().err());
    if let Some(error) = refusal {
        let form = ClientForm {
            token: state.keyring.form_key().issue_form_token(
                &signed.session.csrf_token,
                id.unwrap_or_else(KeyId::generate),
            ),
            name: &name,
            scopes: &scopes,
            public_key: &pem,
            allow_from: &typed_networks,
            error: Some(&error),
        };
        return list_page(
            &state,
            &signed,
            &form,
            None,
            actix_web::http::StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    let id = id.unwrap_or_else(KeyId::generate);
    let key = key.map_err(ConsoleError::BadRequest)?;
    let (mut new, secret) =
        NewClient::generate(signed.customer, name, scopes.iter().copied().collect(), key)?;
    new.id = id;
    new.allow_from = allow_from.map_err(ConsoleError::BadRequest)?;
    let client = match state
        .ports
        .clients
        .insert_client(new, &signed.actor())
        .await
    {
        Ok(client) => client,
        Err(posture_domain::Error::Conflict(reason)) => {
            return already_sent(&state, &signed, id, &reason).await;
        }
        Err(e) => return Err(e.into()),
    };
    tracing::info!(customer = %signed.customer, client.id = %client.id, subject = %signed.session.subject, "console: OAuth client issued");
    Ok(pages::html_page(client_pages::issued(
        &signed.viewer(),
        &client,
        secret.as_ref().map(ClientSecretValue::expose),
    )))
}

/// The list again, when the form was sent before (a reload of the page that showed the
/// secret) or the customer holds as many keys and clients as allowed: nothing is shown or
/// made twice.
async fn already_sent(
    state: &ConsoleState,
    signed: &Signed,
    id: KeyId,
    reason: &str,
) -> Result<HttpResponse, ConsoleError> {
    let notice = match find(state, signed, id).await? {
        Some(client) => format!(
            "This form was already sent: it issued “{}”, listed below. Its secret was shown \
             once and cannot be shown again; if it was lost, rotate it.",
            client.name
        ),
        None => format!("The client was not issued: {reason}."),
    };
    let form = ClientForm::fresh(&state.keyring, &signed.session.csrf_token);
    list_page(
        state,
        signed,
        &form,
        Some(&notice),
        actix_web::http::StatusCode::OK,
    )
    .await
}

/// `GET clients/{client}/rotate`: the rotation form.
pub async fn rotate_form(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ConsoleError> {
    let (_, client) = path.into_inner();
    let client = client_of(&state, &signed, &client).await?;
    let form = RotateForm::fresh(&state.keyring, &signed.session.csrf_token);
    Ok(pages::html_page(client_pages::rotate(
        &signed.viewer(),
        &client,
        &form,
    )))
}

/// `POST clients/{client}/rotate`: adds a secret (shown once) or a public key; the others
/// lapse when the form chose.
pub async fn rotate(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let (_, client) = path.into_inner();
    let fields = session::checked_form(&body, &signed)?;
    let client = client_of(&state, &signed, &client).await?;
    let token = value(&fields, "credential_id");
    let id = state
        .keyring
        .form_key()
        .issue_form_key(&signed.session.csrf_token, &token);
    let pem = value(&fields, "public_key");
    let overlap = value(&fields, "overlap");
    let minutes = OVERLAP_CHOICES
        .iter()
        .find(|(v, ..)| *v == overlap)
        .map(|(_, _, minutes)| *minutes);
    let key = pasted_key(&pem);
    let error = match (&id, &key, minutes) {
        (None, ..) => Some(OUT_OF_DATE.to_owned()),
        (_, Err(error), _) => Some(error.clone()),
        (_, _, None) => Some("Choose when the client's current credentials stop.".to_owned()),
        _ => None,
    };
    if let Some(error) = error {
        let form = RotateForm {
            token: state.keyring.form_key().issue_form_token(
                &signed.session.csrf_token,
                id.unwrap_or_else(KeyId::generate),
            ),
            public_key: &pem,
            overlap: &overlap,
            error: Some(&error),
        };
        let page = client_pages::rotate(&signed.viewer(), &client, &form).into_string();
        return Ok(HttpResponse::UnprocessableEntity()
            .content_type("text/html; charset=utf-8")
            .body(page));
    }
    let (credential, secret) = match key.map_err(ConsoleError::BadRequest)? {
        Some(key) => (NewCredential::public_key(key), None),
        None => {
            let (credential, secret) = NewCredential::secret()?;
            (credential, Some(secret))
        }
    };
    let credential = NewCredential {
        id: id.unwrap_or_else(KeyId::generate).as_uuid(),
        ..credential
    };
    let until = state.clock.now() + Duration::minutes(minutes.unwrap_or_default());
    let rotated = state
        .ports
        .clients
        .add_client_credential(
            Some(signed.session.scope()),
            client.id,
            credential,
            until,
            &signed.actor(),
        )
        .await;
    let rotated = match rotated {
        Ok(rotated) => rotated,
        Err(posture_domain::Error::Conflict(reason)) => {
            let notice = format!("Nothing was changed: {reason}.");
            let form = ClientForm::fresh(&state.keyring, &signed.session.csrf_token);
            return list_page(
                &state,
                &signed,
                &form,
                Some(&notice),
                actix_web::http::StatusCode::OK,
            )
            .await;
        }
        Err(e) => return Err(e.into()),
    };
    tracing::info!(customer = %signed.customer, client.id = %rotated.id, subject = %signed.session.subject, "console: OAuth client rotated");
    Ok(pages::html_page(client_pages::issued(
        &signed.viewer(),
        &rotated,
        secret.as_ref().map(ClientSecretValue::expose),
    )))
}

/// `GET clients/{client}/revoke`: asks first.
pub async fn confirm_revoke(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ConsoleError> {
    let (customer, client) = path.into_inner();
    let client = client_of(&state, &signed, &client).await?;
    if client.revoked_at.is_some() {
        return Ok(session::redirect(format!(
            "{PREFIX}/{customer}/clients?revoked={}",
            client.id
        )));
    }
    Ok(pages::html_page(client_pages::confirm_revoke(
        &signed.viewer(),
        &client,
    )))
}

/// `POST clients/{client}/revoke`: revokes at once, and its tokens with it.
pub async fn revoke(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let (customer, client) = path.into_inner();
    session::checked_form(&body, &signed)?;
    let id: KeyId = client.parse().map_err(|_| ConsoleError::NotFound)?;
    let (client, revoked_now) = state
        .ports
        .clients
        .revoke_client(Some(signed.session.scope()), id, &signed.actor())
        .await?;
    if revoked_now {
        tracing::info!(customer = %signed.customer, client.id = %client.id, subject = %signed.session.subject, "console: OAuth client revoked");
    }
    Ok(session::redirect(format!(
        "{PREFIX}/{customer}/clients?revoked={}",
        client.id
    )))
}
