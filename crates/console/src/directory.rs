//! The people and groups the customer's identity provider provisioned over SCIM
//! (docs/scim.md), read-only: admins see who may sign in when provisioning is required, and
//! who the admin group holds. Changes come from the identity provider only.

use actix_web::{HttpResponse, web};
use maud::{Markup, html};
use posture_domain::{
    console::Provisioning,
    scim::{ListPage, ListWindow, ScimGroup, ScimGroupId, ScimUser, group_name_key},
};
use serde::Deserialize;

use crate::{
    ConsoleError, ConsoleState, PREFIX,
    pages::{self, Viewer, frame, time},
    session::Signed,
};

/// Users or groups on one page.
const PAGE: u32 = 50;
/// Members a group's page shows.
const MEMBERS_SHOWN: u32 = 1_000;

#[derive(Deserialize)]
pub struct PageQuery {
    /// The 1-based index of the page's first row (SCIM's `startIndex`).
    start: Option<u32>,
}

fn window(query: &PageQuery) -> ListWindow {
    ListWindow {
        start_index: query.start.unwrap_or(1).max(1),
        count: PAGE,
    }
}

/// `GET users`: the provisioned users, a page at a time.
pub async fn users(
    signed: Signed,
    state: web::Data<ConsoleState>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let window = window(&query);
    let page = state
        .ports
        .scim
        .list_scim_users(signed.session.scope(), None, window)
        .await?;
    Ok(pages::html_page(users_page(&signed, &page, window)))
}

/// `GET groups`: the provisioned groups, a page at a time (no members).
pub async fn groups(
    signed: Signed,
    state: web::Data<ConsoleState>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let window = window(&query);
    let page = state
        .ports
        .scim
        .list_scim_groups(signed.session.scope(), None, window, false)
        .await?;
    Ok(pages::html_page(groups_page(&signed, &page, window)))
}

/// `GET groups/{group}`: one group and its members.
pub async fn group(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ConsoleError> {
    let (_, group) = path.into_inner();
    let id = group
        .parse::<ScimGroupId>()
        .map_err(|_| ConsoleError::NotFound)?;
    let (group, total) = state
        .ports
        .scim
        .scim_group_preview(signed.session.scope(), id, MEMBERS_SHOWN)
        .await?
        .ok_or(ConsoleError::NotFound)?;
    Ok(pages::html_page(group_page(&signed, &group, total)))
}

/// What provisioning means for this console, above each list.
fn provisioning_notice(provisioning: Option<&Provisioning>) -> Markup {
    html! {
        @match provisioning {
            Some(rule) => p.notice id="provisioning" role="note" {
                "Provisioning is required: only the active users below may sign in, matched by the "
                code { (rule.claim) } " claim of their sign-in, and the members of the group “"
                (rule.admin_group) "” are this console's admins. Deactivating or removing someone in your identity provider signs them out at once."
            },
            None => p.notice id="provisioning" role="note" {
                "Provisioning is not required: who may sign in follows your identity provider's admin rule, not this list. Your posture operator can require it."
            },
        }
    }
}

/// Links to the previous and next pages of a list of `total` rows.
fn pager(base: &str, window: ListWindow, total: u64, what: &str) -> Markup {
    let start = u64::from(window.start_index);
    let next = start + u64::from(PAGE);
    html! {
        @if start > 1 || next <= total {
            nav.pager aria-label={ "Pages of " (what) } {
                @if start > 1 {
                    a.button id="previous" href={ (base) "?start=" (start.saturating_sub(u64::from(PAGE)).max(1)) } { "← Previous " (what) }
                }
                @if next <= total {
                    a.button id="next" href={ (base) "?start=" (next) } { "Next " (what) " →" }
                }
            }
        }
    }
}

fn tabs(viewer: &Viewer<'_>, current: &str) -> Markup {
    let base = format!("{PREFIX}/{}", viewer.customer_id);
    html! {
        nav.tabs aria-label="Directory" {
            @for (path, label) in [("users", "Users"), ("groups", "Groups")] {
                @if path == current {
                    a aria-current="page" href={ (base) "/" (path) } { (label) }
                } @else {
                    a href={ (base) "/" (path) } { (label) }
                }
            }
        }
    }
}

fn active(user: &ScimUser) -> Markup {
    match user.attributes.active {
        Some(false) => html! { span.badge.revoked { "Deactivated" } },
        _ => html! { span.badge.active { "Active" } },
    }
}

fn users_page(signed: &Signed, page: &ListPage<ScimUser>, window: ListWindow) -> Markup {
    let viewer = signed.viewer();
    let base = format!("{PREFIX}/{}/users", viewer.customer_id);
    frame(
        "Provisioned users",
        Some(&viewer),
        html! {
            h1 { "Provisioned users" }
            (tabs(&viewer, "users"))
            (provisioning_notice(signed.setup.sso.provisioning.as_ref()))
            section.card {
                p.muted { (page.total) " users, provisioned by your identity provider over SCIM. Read-only: change them in your identity provider." }
                div.table-scroll { table.users {
                    thead { tr { th { "User name" } th { "Name" } th { "Status" } th { "External id" } th { "Changed" } } }
                    tbody {
                        @for user in &page.resources {
                            tr data-user-name=(user.attributes.user_name) {
                                td { (user.attributes.user_name) }
                                td { (user.attributes.display_name.as_deref().unwrap_or("")) }
                                td { (active(user)) }
                                td { span.muted { (user.attributes.external_id.as_deref().unwrap_or("")) } }
                                td { (time(user.meta.modified)) }
                            }
                        }
                    }
                } }
                (pager(&base, window, page.total, "users"))
            }
        },
    )
}

fn groups_page(signed: &Signed, page: &ListPage<ScimGroup>, window: ListWindow) -> Markup {
    let viewer = signed.viewer();
    let base = format!("{PREFIX}/{}/groups", viewer.customer_id);
    let admin_group = signed
        .setup
        .sso
        .provisioning
        .as_ref()
        .map(Provisioning::admin_group_key);
    frame(
        "Provisioned groups",
        Some(&viewer),
        html! {
            h1 { "Provisioned groups" }
            (tabs(&viewer, "groups"))
            (provisioning_notice(signed.setup.sso.provisioning.as_ref()))
            section.card {
                p.muted { (page.total) " groups, provisioned by your identity provider over SCIM. Read-only." }
                div.table-scroll { table.groups {
                    thead { tr { th { "Group" } th { "External id" } th { "Changed" } } }
                    tbody {
                        @for group in &page.resources {
                            tr data-group-name=(group.display_name) {
                                td {
                                    a href={ (base) "/" (group.id.to_string()) } { (group.display_name) }
                                    @if admin_group.as_deref() == Some(group_name_key(&group.display_name).as_str()) {
                                        " " span.badge.active { "Admins" }
                                    }
                                }
                                td { span.muted { (group.external_id.as_deref().unwrap_or("")) } }
                                td { (time(group.meta.modified)) }
                            }
                        }
                    }
                } }
                (pager(&base, window, page.total, "groups"))
            }
        },
    )
}

fn group_page(signed: &Signed, group: &ScimGroup, total: u64) -> Markup {
    let viewer = signed.viewer();
    let members = group.members.as_deref().unwrap_or_default();
    frame(
        &group.display_name,
        Some(&viewer),
        html! {
            h1 { (group.display_name) }
            (tabs(&viewer, "groups"))
            section.card {
                p.muted {
                    (total) " members."
                    @if total > u64::from(MEMBERS_SHOWN) { " The first " (MEMBERS_SHOWN) " are shown." }
                }
                ul.members {
                    @for member in members {
                        li { (member.display) }
                    }
                }
            }
        },
    )
}
