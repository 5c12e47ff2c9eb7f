//! The prose of the contract that is not a route's own: what each status and each tag means.

pub(super) fn status_description(status: u16) -> &'static str {
    match status {
        400 => "Malformed request: `reason` names the parameter or field.",
        401 => "Missing, malformed, unknown, revoked or expired key.",
        403 => "The key lacks the route's scope: `reason` names it.",
        404 => "No such resource for this customer (a foreign id or tenant is also 404).",
        409 => "The request conflicts with the current state.",
        412 => "`If-Match` does not hold: the resource changed since its `ETag` was read.",
        413 => "The body is too large.",
        415 => "The body is not `application/json`.",
        422 => "The body breaks a rule: `reason` names the field.",
        429 => {
            "A quota of the window is used up (the key's requests, or a budget of the \
             customer's the route counts: `RateLimit-Policy` names the one that refused \
             first); retry after `Retry-After` seconds."
        }
        500 => "Unexpected error; nothing is revealed, the cause is logged.",
        503 => "A backing service is unavailable; retry later.",
        _ => "Error.",
    }
}

/// What each tag groups (the reference page's section introductions).
pub(super) fn tag_description(tag: &str) -> Option<&'static str> {
    Some(match tag {
        "identities" => {
            "Users, groups, service principals and managed identities of the connected tenants."
        }
        "findings" => "What the analyzer found: list, inspect, and export as NDJSON, CEF or OCSF.",
        "roles" => "Right-sized role recommendations.",
        "upr" => "Unused-permission risk (UPR) scores: the rollup, principals by score, the trend.",
        "tenants" => "The cloud directory tenants connected to the customer.",
        "webhooks" => {
            "Signed webhook subscriptions, their delivery log, redelivery, testing and secret rotation."
        }
        "events" => {
            "The finding events of every analyzer pass, in commit order: read on by event id, or \
             wait for the next ones."
        }
        "keys" => "The calling API key, described to its holder.",
        "audit" => {
            "The customer's audit feed: who issued, changed, revoked or used which credential, \
             sign-ins, settings and provisioning, oldest first; exportable as NDJSON or OCSF."
        }
        "contract" => "This document.",
        _ => return None,
    })
}
