//! The console's pages: maud templates (HTML escaped by construction, checked at compile
//! time) and the frame they share.

use actix_web::HttpResponse;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};
use posture_domain::{ApiKey, Scope, console::SessionSummary};

use crate::{PREFIX, paging::Paged};

/// Largest form body the console accepts.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// Who is looking at a page: the customer, and the signed-in admin if any.
pub struct Viewer<'a> {
    pub customer_id: &'a str,
    pub customer_name: &'a str,
    /// The admin's display name and the session's CSRF token.
    pub admin: Option<(&'a str, &'a str)>,
}

/// An HTML page response.
pub fn html_page(markup: Markup) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(markup.into_string())
}

pub(crate) fn frame(title: &str, viewer: Option<&Viewer<'_>>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · posture" }
                link rel="stylesheet" href={ (PREFIX) "/assets/console.css" };
                link rel="icon" type="image/svg+xml" href={ (PREFIX) "/assets/favicon.svg" };
                script src={ (PREFIX) "/assets/console.js" } defer {}
            }
            body {
                header.top {
                    span.brand { "posture" }
                    @if let Some(viewer) = viewer {
                        span.org { (viewer.customer_name) }
                        @if let Some((name, csrf)) = viewer.admin {
                            nav {
                                a href={ (PREFIX) "/" (viewer.customer_id) "/keys" } { "API keys" }
                                a href={ (PREFIX) "/" (viewer.customer_id) "/clients" } { "OAuth clients" }
                                a href={ (PREFIX) "/" (viewer.customer_id) "/audit" } { "Audit log" }
                                a href={ (PREFIX) "/" (viewer.customer_id) "/sessions" } { "Sessions" }
                                a href={ (PREFIX) "/" (viewer.customer_id) "/users" } { "Directory" }
                                a href={ (PREFIX) "/" (viewer.customer_id) "/settings" } { "Settings" }
                            }
                            form.signout method="post" action={ (PREFIX) "/" (viewer.customer_id) "/sign-out" } {
                                span.who { (name) }
                                input type="hidden" name="csrf" value=(csrf);
                                button.link type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

pub(crate) fn time(t: DateTime<Utc>) -> Markup {
    html! { time datetime=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M UTC")) } }
}

fn maybe_time(t: Option<DateTime<Utc>>, none: &str) -> Markup {
    match t {
        Some(t) => time(t),
        None => html! { span.muted { (none) } },
    }
}

/// The links under a paged list: to its newest rows (from a later page) and to the next,
/// older ones.
pub(crate) fn pager<T>(page: &Paged<T>, list: &str, what: &str) -> Markup {
    html! {
        @if page.later || page.older.is_some() {
            nav.pager aria-label={ "Pages of " (what) } {
                @if page.later {
                    a.button href=(list) id="newest" { "Newest " (what) }
                }
                @if let Some(older) = &page.older {
                    a.button href={ (list) "?before=" (older) } id="older" { "Older " (what) " →" }
                }
            }
        }
    }
}

/// `/console/`: where customers' consoles live.
pub async fn landing() -> HttpResponse {
    html_page(frame(
        "Console",
        None,
        html! {
            section.card {
                h1 { "posture console" }
                p { "Each organisation has its own console address, which signs you in with your organisation's identity provider. Ask your posture operator for yours." }
            }
        },
    ))
}

/// An error in words.
pub fn error_page(title: &str, detail: &str) -> Markup {
    frame(
        title,
        None,
        html! {
            section.card.error {
                h1 { (title) }
                p { (detail) }
            }
        },
    )
}

/// An error page of a customer's sign-in: the organisation's name in the header (when
/// known) and a link back to its sign-in page.
pub fn sign_in_error_page(
    customer_id: &str,
    customer_name: Option<&str>,
    title: &str,
    detail: &str,
) -> Markup {
    let viewer = customer_name.map(|name| Viewer {
        customer_id,
        customer_name: name,
        admin: None,
    });
    frame(
        title,
        viewer.as_ref(),
        html! {
            section.card.error {
                h1 { (title) }
                p { (detail) }
                p {
                    a.button.primary id="back-to-sign-in" href={ (PREFIX) "/" (customer_id) "/" } {
                        "Back to the sign-in page"
                    }
                }
            }
        },
    )
}

/// The sign-in page of a customer.
pub fn sign_in(viewer: &Viewer<'_>, provider: &str, notice: Option<&str>) -> Markup {
    frame(
        "Sign in",
        Some(viewer),
        html! {
            section.card.narrow {
                h1 { "Sign in to " (viewer.customer_name) }
                @if let Some(notice) = notice {
                    p.notice role="status" { (notice) }
                }
                p { "Manage your organisation's posture API keys. You sign in with your organisation's identity provider; only its admins can issue and revoke keys." }
                a.button.primary id="sign-in" href={ (PREFIX) "/" (viewer.customer_id) "/sign-in" } {
                    "Sign in with " (provider)
                }
            }
        },
    )
}

fn scope_list(key: &ApiKey) -> Markup {
    html! {
        ul.scopes {
            @for scope in key.scopes.iter() { li { code { (scope.as_str()) } } }
        }
    }
}

/// What the expiry choices of the issue form mean, in days (`None`: never).
pub const EXPIRY_CHOICES: &[(&str, &str, Option<i64>)] = &[
    ("never", "Never", None),
    ("7d", "In 7 days", Some(7)),
    ("30d", "In 30 days", Some(30)),
    ("90d", "In 90 days", Some(90)),
    ("365d", "In 1 year", Some(365)),
];

/// The expiry choice that takes the form's date (`expires_on`).
pub const EXPIRES_ON_A_DATE: &str = "date";

/// The form that issues a key, with the values to show again after a mistake.
pub struct IssueForm<'a> {
    /// The form's one-time token: the id the key will have, so that posting the same form
    /// twice (a reload of the page that shows the key) cannot issue a second key, bound to
    /// the session (`posture_domain::console::FormKey`).
    pub key_id: String,
    pub name: &'a str,
    pub scopes: &'a [Scope],
    pub expires: &'a str,
    /// The date of the `date` choice, as sent (`YYYY-MM-DD`).
    pub expires_on: &'a str,
    /// The allowed networks as typed.
    pub allow_from: &'a str,
    pub error: Option<&'a str>,
}

impl IssueForm<'_> {
    /// An empty form for a new key, for the session of `csrf_token`.
    pub fn fresh(
        keyring: &posture_domain::secrets::Keyring,
        csrf_token: &str,
    ) -> IssueForm<'static> {
        IssueForm {
            key_id: keyring
                .form_key()
                .issue_form_token(csrf_token, posture_domain::KeyId::generate()),
            name: "",
            scopes: &[],
            expires: "90d",
            expires_on: "",
            allow_from: "",
            error: None,
        }
    }
}

/// The scopes of an issue form (a key's or a client's), each with what it grants; those of
/// `checked` checked.
pub(crate) fn scope_choices(checked: &[Scope]) -> Markup {
    html! {
        fieldset {
            legend { "Scopes" }
            @for scope in Scope::ALL {
                label.check.scope {
                    input type="checkbox" name="scope" value=(scope.as_str())
                        checked[checked.contains(scope)];
                    code { (scope.as_str()) }
                    span.grants { (scope.grants()) }
                }
            }
        }
    }
}

fn issue_form(viewer: &Viewer<'_>, form: &IssueForm<'_>) -> Markup {
    let csrf = viewer.admin.map_or("", |(_, csrf)| csrf);
    html! {
        section.card id="issue" {
            h2 { "Issue a key" }
            @if let Some(error) = form.error {
                p.error-text role="alert" id="form-error" { (error) }
            }
            form method="post" action={ (PREFIX) "/" (viewer.customer_id) "/keys" } {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="key_id" value=(form.key_id);
                label for="name" { "Name" }
                input id="name" name="name" type="text" required maxlength="100" value=(form.name)
                    placeholder="e.g. SIEM connector (production)";
                (scope_choices(form.scopes))
                label for="expires" { "Expires" }
                select id="expires" name="expires" {
                    @for (value, text, _) in EXPIRY_CHOICES {
                        option value=(value) selected[*value == form.expires] { (text) }
                    }
                    option value=(EXPIRES_ON_A_DATE) selected[form.expires == EXPIRES_ON_A_DATE] {
                        "On the date below"
                    }
                }
                label for="expires-on" { "Expiry date " span.muted { "(with “On the date below”; the key stops working at 00:00 UTC that day)" } }
                input id="expires-on" name="expires_on" type="date" value=(form.expires_on);
                (allow_from_field(form.allow_from))
                button.primary type="submit" id="issue-key" { "Issue key" }
            }
        }
    }
}

/// The issue forms' allowed networks (one per line; empty: from anywhere).
pub(crate) fn allow_from_field(typed: &str) -> Markup {
    html! {
        label for="allow-from" { "Allowed networks " span.muted { "(optional: one IPv4 or IPv6 network or address per line; empty allows every address)" } }
        textarea id="allow-from" name="allow_from" rows="3" placeholder="203.0.113.0/24" { (typed) }
    }
}

/// A credential's last use: when, from where, with what client.
pub(crate) fn last_use(
    at: Option<DateTime<Utc>>,
    from: Option<std::net::IpAddr>,
    agent: Option<&str>,
) -> Markup {
    html! {
        @match at {
            None => span.muted { "never" },
            Some(at) => {
                (time(at))
                @if let Some(from) = from { br; span.muted.from { "from " code { (from) } } }
                @if let Some(agent) = agent { br; span.muted.agent title=(agent) { (agent.chars().take(40).collect::<String>()) } }
            }
        }
    }
}

/// A credential's allow-list, or that it has none.
pub(crate) fn allowed_from(list: &posture_domain::allow_list::AllowList) -> Markup {
    html! {
        @if list.is_open() {
            span.muted { "anywhere" }
        } @else {
            @for (i, net) in list.networks().iter().enumerate() {
                @if i > 0 { br; }
                code { (net) }
            }
        }
    }
}

/// The API keys settings: a page of the customer's keys and the issue form, `now`.
pub fn keys(
    viewer: &Viewer<'_>,
    page: &Paged<ApiKey>,
    form: &IssueForm<'_>,
    notice: Option<&str>,
    now: DateTime<Utc>,
) -> Markup {
    let keys = &page.rows;
    let list = format!("{PREFIX}/{}/keys", viewer.customer_id);
    frame(
        "API keys",
        Some(viewer),
        html! {
            h1 { "API keys" }
            @if let Some(notice) = notice { p.notice role="status" { (notice) } }
            section.card {
                @if keys.is_empty() && !page.later {
                    p.muted { "No keys yet. Issue the first one below." }
                } @else {
                    div.table-scroll { table.keys {
                        thead { tr {
                            th { "Name" } th { "Prefix" } th { "Scopes" } th { "Created by" }
                            th { "Created" } th { "Expires" } th { "Last used" } th { "Allowed from" } th { "Status" } th {}
                        } }
                        tbody {
                            @for key in keys {
                                @let expired = key.expires_at.is_some_and(|e| e <= now);
                                tr data-key-id=(key.id.to_string()) {
                                    td { (key.name) }
                                    td { code { (key.prefix) "…" } }
                                    td { (scope_list(key)) }
                                    td { (key.created_by) }
                                    td { (time(key.created_at)) }
                                    td { (maybe_time(key.expires_at, "never")) }
                                    td { (last_use(key.last_used_at, key.last_used_from, key.last_used_user_agent.as_deref())) }
                                    td.allowed { (allowed_from(&key.allow_from)) }
                                    td {
                                        @if let Some(at) = key.revoked_at {
                                            span.badge.revoked { "Revoked" } " " (time(at))
                                        } @else if expired {
                                            span.badge.revoked { "Expired" }
                                        } @else {
                                            span.badge.active { "Active" }
                                        }
                                    }
                                    td {
                                        @if key.revoked_at.is_none() && !expired {
                                            a href={ (PREFIX) "/" (viewer.customer_id) "/keys/" (key.id.to_string()) "/allow-from" } { "Allowed from…" }
                                            " "
                                            a.danger href={ (PREFIX) "/" (viewer.customer_id) "/keys/" (key.id.to_string()) "/revoke" } { "Revoke…" }
                                        }
                                    }
                                }
                            }
                        }
                    } }
                }
                (pager(page, &list, "keys"))
            }
            (issue_form(viewer, form))
        },
    )
}

/// The one page that shows a new key.
pub fn issued(viewer: &Viewer<'_>, key: &ApiKey, secret: &str) -> Markup {
    frame(
        "Key issued",
        Some(viewer),
        html! {
            section.card.narrow {
                h1 { "Key issued: " (key.name) }
                p.warning role="alert" { strong { "Copy this key now." } " It will not be shown again: posture keeps only its hash. If you lose it, revoke it and issue a new one." }
                div.secret {
                    code id="new-key" { (secret) }
                    button.copy type="button" data-copy="new-key" hidden { "Copy" }
                }
                (scope_list(key))
                p { "Expires: " (maybe_time(key.expires_at, "never")) }
                a.button href={ (PREFIX) "/" (viewer.customer_id) "/keys" } id="done" { "Done" }
            }
        },
    )
}

/// Asks before revoking.
pub fn confirm_revoke(viewer: &Viewer<'_>, key: &ApiKey) -> Markup {
    let csrf = viewer.admin.map_or("", |(_, csrf)| csrf);
    frame(
        "Revoke key",
        Some(viewer),
        html! {
            section.card.narrow {
                h1 { "Revoke " (key.name) "?" }
                p { "Key " code { (key.prefix) "…" } " stops working at once, for every caller using it. This cannot be undone." }
                (scope_list(key))
                form method="post" action={ (PREFIX) "/" (viewer.customer_id) "/keys/" (key.id.to_string()) "/revoke" } {
                    input type="hidden" name="csrf" value=(csrf);
                    button.danger type="submit" id="confirm-revoke" { "Revoke key" }
                    " "
                    a.button href={ (PREFIX) "/" (viewer.customer_id) "/keys" } { "Cancel" }
                }
            }
        },
    )
}

/// The customer's live sessions, each but the viewer's own with a button that ends it.
pub fn sessions(viewer: &Viewer<'_>, sessions: &[SessionSummary], notice: Option<&str>) -> Markup {
    let csrf = viewer.admin.map_or("", |(_, csrf)| csrf);
    let base = format!("{PREFIX}/{}/sessions", viewer.customer_id);
    let others = sessions.iter().filter(|s| !s.current).count();
    frame(
        "Sessions",
        Some(viewer),
        html! {
            h1 { "Sessions" }
            @if let Some(notice) = notice { p.notice role="status" { (notice) } }
            section.card {
                p { "Everyone signed in to this console now. Ending a session signs its browser out at once; the admin can sign in again if your identity provider still lets them (remove them there first)." }
                div.table-scroll { table.sessions {
                    thead { tr {
                        th { "Admin" } th { "Signed in" } th { "Last active" } th { "Ends at the latest" } th {}
                    } }
                    tbody {
                        @for session in sessions {
                            tr data-session-id=(session.id.to_string()) {
                                td { (session.display_name) br; span.muted { (session.subject) } }
                                td { (time(session.created_at)) }
                                td { (time(session.last_seen_at)) }
                                td { (time(session.expires_at)) }
                                td {
                                    @if session.current {
                                        span.badge.active { "This session" }
                                    } @else {
                                        form.inline method="post" action={ (base) "/" (session.id.to_string()) "/end" } {
                                            input type="hidden" name="csrf" value=(csrf);
                                            button.danger type="submit" { "Sign out" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                } }
                @if others > 0 {
                    form method="post" action={ (base) "/end-others" } {
                        input type="hidden" name="csrf" value=(csrf);
                        button.danger type="submit" id="end-others" {
                            "Sign out everywhere else (" (others) ")"
                        }
                    }
                }
            }
        },
    )
}
