//! The OAuth clients pages: maud templates, in the frame every console page shares.

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use posture_domain::{
    KeyId, Scope, ScopeSet,
    oauth::{OAuthClient, client_display_prefix},
};

use crate::{
    PREFIX,
    pages::{Viewer, allow_from_field, allowed_from, frame, last_use, scope_choices, time},
};

/// When a rotation's old credentials stop: value, words, minutes from now.
pub const OVERLAP_CHOICES: &[(&str, &str, i64)] = &[
    ("now", "At once (a leak)", 0),
    ("1h", "In 1 hour", 60),
    ("1d", "In 1 day", 24 * 60),
    ("7d", "In 7 days", 7 * 24 * 60),
];

/// The issue form, with the values to show again after a mistake.
pub struct ClientForm<'a> {
    /// The form's one-time token: the id the client will have.
    pub token: String,
    pub name: &'a str,
    pub scopes: &'a [Scope],
    pub public_key: &'a str,
    /// The allowed networks as typed.
    pub allow_from: &'a str,
    pub error: Option<&'a str>,
}

impl ClientForm<'_> {
    pub fn fresh(
        keyring: &posture_domain::secrets::Keyring,
        csrf_token: &str,
    ) -> ClientForm<'static> {
        ClientForm {
            token: keyring
                .form_key()
                .issue_form_token(csrf_token, KeyId::generate()),
            name: "",
            scopes: &[],
            public_key: "",
            allow_from: "",
            error: None,
        }
    }
}

/// The rotation form.
pub struct RotateForm<'a> {
    /// The form's one-time token: the id the new credential will have.
    pub token: String,
    pub public_key: &'a str,
    pub overlap: &'a str,
    pub error: Option<&'a str>,
}

impl RotateForm<'_> {
    pub fn fresh(
        keyring: &posture_domain::secrets::Keyring,
        csrf_token: &str,
    ) -> RotateForm<'static> {
        RotateForm {
            token: keyring
                .form_key()
                .issue_form_token(csrf_token, KeyId::generate()),
            public_key: "",
            overlap: "1h",
            error: None,
        }
    }
}

fn scope_list(scopes: ScopeSet) -> Markup {
    html! {
        ul.scopes { @for scope in scopes.iter() { li { code { (scope.as_str()) } } } }
    }
}

/// The credentials of a client valid at `now`, each on a line.
fn credentials(client: &OAuthClient, now: DateTime<Utc>) -> Markup {
    html! {
        ul.scopes.credentials {
            @for credential in client.credentials.iter().filter(|c| c.valid_at(now)) {
                li {
                    code { (credential.describe()) }
                    @if let Some(at) = credential.expires_at {
                        " " span.muted { "until " (time(at)) }
                    }
                }
            }
        }
    }
}

fn issue_form(viewer: &Viewer<'_>, form: &ClientForm<'_>) -> Markup {
    let csrf = viewer.admin.map_or("", |(_, csrf)| csrf);
    html! {
        section.card id="issue" {
            h2 { "Issue a client" }
            @if let Some(error) = form.error {
                p.error-text role="alert" id="form-error" { (error) }
            }
            form method="post" action={ (PREFIX) "/" (viewer.customer_id) "/clients" } {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="client_id" value=(form.token);
                label for="name" { "Name" }
                input id="name" name="name" type="text" required maxlength="100" value=(form.name)
                    placeholder="e.g. SOAR playbooks (production)";
                (scope_choices(form.scopes))
                label for="public-key" {
                    "Public key " span.muted { "(optional: PEM, RSA 2048+ or P-256. With one, the client signs its token requests with its private key and gets no secret; without, it gets a secret.)" }
                }
                textarea id="public-key" name="public_key" rows="6"
                    placeholder="-----BEGIN PUBLIC KEY-----" { (form.public_key) }
                (allow_from_field(form.allow_from))
                button.primary type="submit" id="issue-client" { "Issue client" }
            }
        }
    }
}

/// The OAuth clients settings: the customer's clients (newest first) and the issue form.
pub fn clients(
    viewer: &Viewer<'_>,
    clients: &[OAuthClient],
    form: &ClientForm<'_>,
    notice: Option<&str>,
    now: DateTime<Utc>,
) -> Markup {
    let base = format!("{PREFIX}/{}/clients", viewer.customer_id);
    frame(
        "OAuth clients",
        Some(viewer),
        html! {
            h1 { "OAuth clients" }
            @if let Some(notice) = notice { p.notice role="status" { (notice) } }
            section.card {
                p { "A client gets short-lived access tokens at " code { "POST /oauth/token" } " (OAuth 2.0 client credentials) with a secret, or with a JWT signed by its private key, and uses them as a key is used. Revoking it ends its tokens at once." }
                @if clients.is_empty() {
                    p.muted { "No clients yet. Issue the first one below." }
                } @else {
                    div.table-scroll { table.clients {
                        thead { tr {
                            th { "Name" } th { "Client ID" } th { "Scopes" } th { "Credentials" }
                            th { "Created by" } th { "Last used" } th { "Allowed from" } th { "Status" } th {}
                        } }
                        tbody {
                            @for client in clients {
                                tr data-client-id=(client.id.to_string()) {
                                    td { (client.name) }
                                    td { code { (client.client_id()) } }
                                    td { (scope_list(client.scopes)) }
                                    td { (credentials(client, now)) }
                                    td { (client.created_by) }
                                    td { (last_use(client.last_used_at, client.last_used_from, client.last_used_user_agent.as_deref())) }
                                    td.allowed { (allowed_from(&client.allow_from)) }
                                    td {
                                        @if let Some(at) = client.revoked_at {
                                            span.badge.revoked { "Revoked" } " " (time(at))
                                        } @else {
                                            span.badge.active { "Active" }
                                        }
                                    }
                                    td {
                                        @if client.revoked_at.is_none() {
                                            a href={ (base) "/" (client.id.to_string()) "/allow-from" } { "Allowed from…" }
                                            " "
                                            a href={ (base) "/" (client.id.to_string()) "/rotate" } { "Rotate…" }
                                            " "
                                            a.danger href={ (base) "/" (client.id.to_string()) "/revoke" } { "Revoke…" }
                                        }
                                    }
                                }
                            }
                        }
                    } }
                }
            }
            (issue_form(viewer, form))
        },
    )
}

/// The one page that shows a new secret (or confirms a new key).
pub fn issued(viewer: &Viewer<'_>, client: &OAuthClient, secret: Option<&str>) -> Markup {
    frame(
        "Client",
        Some(viewer),
        html! {
            section.card.narrow {
                h1 { "Client: " (client.name) }
                p { "Client ID: " code id="client-id" { (client.client_id()) } }
                @if let Some(secret) = secret {
                    p.warning role="alert" { strong { "Copy this client secret now." } " It will not be shown again: posture keeps only its hash. If you lose it, rotate it." }
                    div.secret {
                        code id="new-secret" { (secret) }
                        button.copy type="button" data-copy="new-secret" hidden { "Copy" }
                    }
                } @else {
                    p { "The client signs its token requests with the private key of the public key you gave (" code { "private_key_jwt" } "); it has no secret." }
                }
                (scope_list(client.scopes))
                a.button href={ (PREFIX) "/" (viewer.customer_id) "/clients" } id="done" { "Done" }
            }
        },
    )
}

/// The rotation form of a client.
pub fn rotate(viewer: &Viewer<'_>, client: &OAuthClient, form: &RotateForm<'_>) -> Markup {
    let csrf = viewer.admin.map_or("", |(_, csrf)| csrf);
    frame(
        "Rotate client",
        Some(viewer),
        html! {
            section.card.narrow {
                h1 { "Rotate " (client.name) }
                @if let Some(error) = form.error {
                    p.error-text role="alert" id="form-error" { (error) }
                }
                p { "Give " code { (client_display_prefix(client.id)) "…" } " a new secret (shown once), or a new public key. Its current credentials keep working until the time you choose, while you move its callers over." }
                form method="post" action={ (PREFIX) "/" (viewer.customer_id) "/clients/" (client.id.to_string()) "/rotate" } {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="credential_id" value=(form.token);
                    label for="public-key" { "New public key " span.muted { "(PEM; leave empty for a new secret)" } }
                    textarea id="public-key" name="public_key" rows="6"
                        placeholder="-----BEGIN PUBLIC KEY-----" { (form.public_key) }
                    label for="overlap" { "The current credentials stop" }
                    select id="overlap" name="overlap" {
                        @for (value, text, _) in OVERLAP_CHOICES {
                            option value=(value) selected[*value == form.overlap] { (text) }
                        }
                    }
                    button.primary type="submit" id="confirm-rotate" { "Rotate" }
                    " "
                    a.button href={ (PREFIX) "/" (viewer.customer_id) "/clients" } { "Cancel" }
                }
            }
        },
    )
}

/// Asks before revoking.
pub fn confirm_revoke(viewer: &Viewer<'_>, client: &OAuthClient) -> Markup {
    let csrf = viewer.admin.map_or("", |(_, csrf)| csrf);
    frame(
        "Revoke client",
        Some(viewer),
        html! {
            section.card.narrow {
                h1 { "Revoke " (client.name) "?" }
                p { "Client " code { (client.client_id()) } " gets no more tokens, and the tokens it holds stop working at once. This cannot be undone." }
                (scope_list(client.scopes))
                form method="post" action={ (PREFIX) "/" (viewer.customer_id) "/clients/" (client.id.to_string()) "/revoke" } {
                    input type="hidden" name="csrf" value=(csrf);
                    button.danger type="submit" id="confirm-revoke" { "Revoke client" }
                    " "
                    a.button href={ (PREFIX) "/" (viewer.customer_id) "/clients" } { "Cancel" }
                }
            }
        },
    )
}
