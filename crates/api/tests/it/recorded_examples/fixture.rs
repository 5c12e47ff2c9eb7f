//! Contoso, the customer whose answers are the contract's examples: one tenant, three
//! identities, findings of every severity, a recommendation, three days of risk scores, and
//! three analyzer passes that raise, resolve, re-rate and reopen findings.

use chrono::{Duration, NaiveDate};
use serde_json::{Value, json};

/// Ada Lovelace's identity id.
pub const ADA: &str = "9f8c2d4e-1b7a-4c3d-8e5f-6a7b8c9d0e1f";

/// Contoso's one tenant.
pub const TENANT: &str = "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b";

fn identity(id: &str, kind: &str, name: &str, principal: Option<&str>, role: &str) -> Value {
    json!({"type": "identity", "id": id, "cloudTenantId": TENANT, "kind": kind,
           "displayName": name, "principalName": principal,
           "roleAssignments": [{"roleName": role, "scope": "/", "assignmentType": "active"}]})
}

#[allow(clippy::too_many_arguments, reason = "one record's fields")]
fn finding(
    id: &str,
    finding_type: &str,
    severity: &str,
    status: &str,
    title: &str,
    description: &str,
    identity: Option<&str>,
    detected: &str,
) -> Value {
    json!({"type": "finding", "id": id, "cloudTenantId": TENANT, "findingType": finding_type,
           "severity": severity, "status": status, "title": title, "description": description,
           "identityId": identity, "detectedAt": detected})
}

/// Contoso's analyzer passes: the first, then one with a finding of each severity, a
/// resolution and a severity change, then one that reopens the resolved finding.
pub fn passes(today: NaiveDate) -> [Vec<Value>; 3] {
    let day = |ago: i64| (today - Duration::days(ago)).format("%Y-%m-%d").to_string();
    let ada = identity(
        "9f8c2d4e-1b7a-4c3d-8e5f-6a7b8c9d0e1f",
        "user",
        "Ada Lovelace",
        Some("ada@contoso.com"),
        "Global Administrator",
    );
    let grace = identity(
        "4b1e7c2a-9d3f-4e8b-a1c6-2f5d8e9b0a31",
        "user",
        "Grace Hopper",
        Some("grace@contoso.com"),
        "Privileged Role Administrator",
    );
    let payroll = identity(
        "c2d9a4f1-6b8e-4a3c-9f7d-1e5b2c8a4d60",
        "servicePrincipal",
        "payroll-sync",
        None,
        "Application Administrator",
    );
    let ada_id = ada["id"].as_str().unwrap().to_owned();
    let grace_id = grace["id"].as_str().unwrap().to_owned();
    let tier0 = finding(
        "f-7c1d9a",
        "tier0_permanent_root",
        "critical",
        "open",
        "Permanent assignment to a Tier 0 role",
        "ada@contoso.com holds Global Administrator permanently, without PIM activation.",
        Some(&ada_id),
        "2026-11-18T05:12:00Z",
    );
    let standing = finding(
        "f-2b4e81",
        "standing_privileged_access",
        "high",
        "open",
        "Standing privileged access without just-in-time activation",
        "grace@contoso.com holds Privileged Role Administrator at all times.",
        Some(&grace_id),
        "2026-11-18T05:12:00Z",
    );
    let legacy = finding(
        "f-9a0c33",
        "legacy_authentication",
        "medium",
        "open",
        "Legacy authentication is allowed",
        "Sign-ins with legacy protocols bypass conditional access.",
        None,
        "2026-11-18T05:12:00Z",
    );
    let mut first = vec![
        json!({"type": "tenant", "cloudTenantId": TENANT, "displayName": "Contoso",
               "primaryDomain": "contoso.onmicrosoft.com"}),
        ada,
        grace,
        payroll,
        tier0.clone(),
        standing.clone(),
        legacy.clone(),
        json!({"type": "roleRecommendation", "id": "r-31b8e2", "cloudTenantId": TENANT,
               "identityId": ada_id, "currentRoles": ["Global Administrator"],
               "recommendedRole": {"name": "User Administrator",
                                   "actions": ["microsoft.directory/users/create",
                                               "microsoft.directory/users/password/update"]},
               "removedActions": ["microsoft.directory/*/allTasks"]}),
    ];
    for (ago, scores) in [(2, [82, 64, 35]), (1, [84, 61, 35]), (0, [86, 58, 31])] {
        for (identity, score) in [
            &ada_id,
            &grace_id,
            &"c2d9a4f1-6b8e-4a3c-9f7d-1e5b2c8a4d60".into(),
        ]
        .into_iter()
        .zip(scores)
        {
            first.push(json!({"type": "uprScore", "identityId": identity,
                              "cloudTenantId": TENANT, "score": score,
                              "factors": {"privilegeTier": score / 2,
                                          "unusedPermission": score - score / 2},
                              "recordedAt": format!("{}T06:00:00Z", day(ago))}));
        }
    }
    let mut second: Vec<Value> = first
        .iter()
        .filter(|r| r["type"] != "uprScore")
        .cloned()
        .collect();
    second[5]["severity"] = json!("critical"); // f-2b4e81: high -> critical
    second[6]["status"] = json!("resolved"); // f-9a0c33
    second.push(finding(
        "f-5d2e70",
        "mfa_not_enforced",
        "critical",
        "open",
        "Sign-ins of a privileged user are not protected by MFA",
        "Ada Lovelace signs in to Global Administrator without multifactor authentication.",
        Some(&ada_id),
        "2026-11-19T22:17:00Z",
    ));
    second.push(finding(
        "f-6e1a04",
        "stale_credentials",
        "high",
        "open",
        "Application credentials older than a year",
        "payroll-sync authenticates with a client secret created 400 days ago.",
        Some("c2d9a4f1-6b8e-4a3c-9f7d-1e5b2c8a4d60"),
        "2026-11-19T22:17:00Z",
    ));
    second.push(finding(
        "f-3c7b58",
        "guest_privileged_role",
        "medium",
        "open",
        "A guest holds a privileged role",
        "A guest account is a member of Helpdesk Administrator.",
        None,
        "2026-11-19T22:17:00Z",
    ));
    second.push(finding(
        "f-8f4d12",
        "unused_permissions",
        "low",
        "open",
        "Permissions unused for 90 days",
        "Grace Hopper has not used 41 of the permissions of her roles in 90 days.",
        Some(&grace_id),
        "2026-11-19T22:17:00Z",
    ));
    let mut third = second.clone();
    third[6]["status"] = json!("open"); // f-9a0c33 reopened
    [first, second, third]
}
