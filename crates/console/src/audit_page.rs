//! The audit log's page: the customer's audit log, newest first, a page at a time.

use maud::{Markup, html};
use posture_domain::console::AuditEvent;

use crate::{
    PREFIX,
    pages::{Viewer, frame, pager, time},
    paging::Paged,
};

/// A page of the audit log.
pub fn audit(viewer: &Viewer<'_>, page: &Paged<AuditEvent>) -> Markup {
    let events = &page.rows;
    let list = format!("{PREFIX}/{}/audit", viewer.customer_id);
    frame(
        "Audit log",
        Some(viewer),
        html! {
            h1 { "Audit log" }
            section.card {
                @if events.is_empty() && !page.later {
                    p.muted { "Nothing yet: sign-ins, sign-outs, issued and revoked keys and clients, their allow-lists and uses from new addresses, and provisioning over SCIM appear here." }
                } @else {
                    div.table-scroll { table.audit {
                        thead { tr { th { "When" } th { "Who" } th { "From" } th { "What" } th { "Key or setting" } } }
                        tbody {
                            @for event in events {
                                tr {
                                    td { (time(event.at)) }
                                    td {
                                        (event.actor_name)
                                        @if event.actor_kind == "admin" {
                                            br; span.muted { (event.actor_subject) }
                                        }
                                        @if event.actor_kind == "key" {
                                            br; span.muted { @if event.action.starts_with("scim.") { "API key (SCIM)" } @else { "the credential itself" } }
                                        }
                                    }
                                    td.from { @match event.source_ip { Some(ip) => code { (ip) }, None => span.muted { "—" } } }
                                    td { @match event.action.as_str() {
                                        "key.issued" => "Issued",
                                        "key.revoked" => "Revoked",
                                        "client.issued" => "OAuth client issued",
                                        "client.rotated" => "OAuth client rotated",
                                        "client.revoked" => "OAuth client revoked",
                                        "key.allow_list_changed" | "client.allow_list_changed" => "Allowed networks changed",
                                        "key.used_from_new_address" | "client.used_from_new_address" => "Used from a new address",
                                        "key.refused_by_allow_list" | "client.refused_by_allow_list" => "Refused: address not allowed",
                                        "client.tokens_issued" => "Access tokens issued",
                                        "key.inactive_soon" | "client.inactive_soon" => "Stops working soon: unused",
                                        "key.expired_inactive" | "client.expired_inactive" => "Refused: unused too long",
                                        "inactivity.set" => "Inactivity rule changed",
                                        "session.refused" => "Sign-in refused",
                                        "sso.set" => "Sign-in settings changed",
                                        "sso.cleared" => "Sign-in removed",
                                        "session.signed_in" => "Signed in",
                                        "session.signed_out" => "Signed out",
                                        "session.ended" => "Ended sessions",
                                        "scim.user.created" => "User provisioned",
                                        "scim.user.updated" => "User updated",
                                        "scim.user.deleted" => "User deprovisioned",
                                        "scim.group.created" => "Group provisioned",
                                        "scim.group.updated" => "Group updated",
                                        "scim.group.deleted" => "Group deleted",
                                        other => (other),
                                    } }
                                    td {
                                        @if let Some(key) = &event.key {
                                            (key.name) " " code { (key.prefix) "…" }
                                        }
                                        @if let Some(detail) = &event.detail {
                                            span.muted { (detail) }
                                        }
                                    }
                                }
                            }
                        }
                    } }
                }
                (pager(page, &list, "entries"))
            }
        },
    )
}
