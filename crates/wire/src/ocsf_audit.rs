//! The audit feed as OCSF 1.8.0 events, one JSON object per line
//! (`GET /audit-events/export?format=ocsf`; the mapping is in docs/audit.md):
//!
//! - *Authentication* (3002, category 3 IAM): sign-ins to the console (`Logon`, a refused
//!   one a failure), sign-outs (`Logoff`), a credential's first use from an address
//!   (`Logon`), its refusal by its allow-list (`Logon`, failure), access tokens issued
//!   (`Authentication Ticket`), a credential refused for inactivity (`Logon`, failure);
//! - *Account Change* (3001, IAM; *User Management*, 3007, from OCSF 1.9): keys and OAuth
//!   clients issued (`Create`), revoked (`Delete`), rotated (`Password Change`), their
//!   allow-lists changed and inactivity notices (`Other`); SCIM users created (`Create`),
//!   changed (`Other`), deleted (`Delete`);
//! - *API Activity* (6003, category 6 Application Activity): everything else (sign-in
//!   settings, the inactivity rule, sessions ended, SCIM groups): `Create`, `Update` or
//!   `Delete`, with `api.operation` the event's type.
//!
//! Each carries the feed's event whole in `unmapped.posture`, its id as `metadata.uid`.

use posture_domain::audit::AuditAction;
use serde::Serialize;
use serde_json::{Value, json};

use crate::audit::AuditEventResponse;

/// The OCSF schema version the events follow.
pub const OCSF_AUDIT_VERSION: &str = "1.8.0";

/// The OCSF class, activity and outcome of an event type.
struct Mapping {
    class_uid: u32,
    class_name: &'static str,
    category_uid: u32,
    category_name: &'static str,
    activity_id: u32,
    activity_name: &'static str,
    success: bool,
}

const AUTHENTICATION: (u32, &str, u32, &str) =
    (3002, "Authentication", 3, "Identity & Access Management");
const ACCOUNT_CHANGE: (u32, &str, u32, &str) =
    (3001, "Account Change", 3, "Identity & Access Management");
const API_ACTIVITY: (u32, &str, u32, &str) = (6003, "API Activity", 6, "Application Activity");

fn mapping(action: AuditAction) -> Mapping {
    use AuditAction::*;
    let (class, activity_id, activity_name, success) = match action {
        SessionSignedIn | KeyUsedFromNewAddress | ClientUsedFromNewAddress => {
            (AUTHENTICATION, 1, "Logon", true)
        }
        SessionRefused
        | KeyRefusedByAllowList
        | ClientRefusedByAllowList
        | KeyExpiredInactive
        | ClientExpiredInactive => (AUTHENTICATION, 1, "Logon", false),
        SessionSignedOut => (AUTHENTICATION, 2, "Logoff", true),
        ClientTokensIssued => (AUTHENTICATION, 3, "Authentication Ticket", true),
        KeyIssued | ClientIssued | ScimUserCreated => (ACCOUNT_CHANGE, 1, "Create", true),
        KeyRevoked | ClientRevoked | ScimUserDeleted => (ACCOUNT_CHANGE, 6, "Delete", true),
        ClientRotated => (ACCOUNT_CHANGE, 3, "Password Change", true),
        KeyAllowListChanged
        | ClientAllowListChanged
        | KeyInactiveSoon
        | ClientInactiveSoon
        | ScimUserUpdated => (ACCOUNT_CHANGE, 99, "Other", true),
        ScimGroupCreated => (API_ACTIVITY, 1, "Create", true),
        SsoSet | InactivitySet | ScimGroupUpdated => (API_ACTIVITY, 3, "Update", true),
        SsoCleared | SessionEnded | ScimGroupDeleted => (API_ACTIVITY, 4, "Delete", true),
    };
    Mapping {
        class_uid: class.0,
        class_name: class.1,
        category_uid: class.2,
        category_name: class.3,
        activity_id,
        activity_name,
        success,
    }
}

/// One feed event as an OCSF event.
#[derive(Serialize)]
pub struct OcsfAuditEvent(Value);

impl OcsfAuditEvent {
    pub fn new(event: &AuditEventResponse) -> Self {
        let m = mapping(event.event_type);
        // The account an Authentication or Account Change is about: the credential, the
        // provisioned user, or the admin who signed in.
        let user = match &event.target {
            Some(target) => json!({
                "uid": target.id,
                "name": target.name,
                "type": if target.kind == "user" { "User" } else { "System" },
                "type_id": if target.kind == "user" { 1 } else { 3 },
            }),
            None => {
                json!({"uid": event.actor.id, "name": event.actor.name, "type": "Admin", "type_id": 2})
            }
        };
        let actor = json!({
            "user": {"uid": event.actor.id, "name": event.actor.name},
            "app_name": "posture",
        });
        let src_endpoint = match &event.source_ip {
            Some(ip) => json!({"ip": ip}),
            None => json!({"name": event.actor.kind}),
        };
        let status = if m.success {
            (1, "Success")
        } else {
            (2, "Failure")
        };
        let mut ocsf = json!({
            "activity_id": m.activity_id,
            "activity_name": m.activity_name,
            "category_uid": m.category_uid,
            "category_name": m.category_name,
            "class_uid": m.class_uid,
            "class_name": m.class_name,
            "type_uid": u64::from(m.class_uid) * 100 + u64::from(m.activity_id),
            "type_name": format!("{}: {}", m.class_name, m.activity_name),
            "time": event.occurred_at.timestamp_millis(),
            "severity_id": 1,
            "severity": "Informational",
            "status_id": status.0,
            "status": status.1,
            "message": event.detail.clone().unwrap_or_else(|| event.event_type.as_str().to_owned()),
            "metadata": {
                "version": OCSF_AUDIT_VERSION,
                "uid": event.id,
                "log_name": "posture audit feed",
                "product": {
                    "name": "posture",
                    "vendor_name": "posture",
                    "version": env!("CARGO_PKG_VERSION"),
                },
            },
            "actor": actor,
            "src_endpoint": src_endpoint,
            "unmapped": {"posture": event},
        });
        match m.class_uid {
            6003 => {
                ocsf["api"] = json!({"operation": event.event_type.as_str()});
                if let Some(target) = &event.target {
                    ocsf["resources"] =
                        json!([{"uid": target.id, "name": target.name, "type": target.kind}]);
                }
            }
            _ => ocsf["user"] = user,
        }
        if m.class_uid == 3002 {
            ocsf["service"] = json!({"name": "posture"});
        }
        Self(ocsf)
    }
}
