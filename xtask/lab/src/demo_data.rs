//! Deterministic demo data in the ingest format (JSON Lines), at any scale.
//!
//! The same seed gives the same tenants, identities, findings, recommendations and UPR
//! history; times are relative to today (UTC) so a trend always covers recent days. The
//! demo uses it for two customers; benchmarks (`cargo xtask gen-data`) for a million
//! findings over 200 customers.

use std::io::Write;

use chrono::{Days, NaiveDate, Utc};

use posture_domain::finding::{FindingType, Severity};
use serde_json::{Value, json};

/// SplitMix64: a small, fast, deterministic generator (not for secrets).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// A GUID-shaped id (version 4 layout) from the stream.
    pub fn guid(&mut self) -> String {
        let (a, b) = (self.next_u64(), self.next_u64());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48) & 0x3fff,
            b & 0xffff_ffff_ffff
        )
    }
}

/// What to generate for one customer.
#[derive(Clone, Debug)]
pub struct CustomerSpec {
    pub name: String,
    pub tenants: usize,
    pub identities: usize,
    pub findings: usize,
    /// Days of UPR history.
    pub upr_days: u32,
    pub seed: u64,
}

const FIRST: &[&str] = &[
    "Ada",
    "Grace",
    "Linus",
    "Barbara",
    "Alan",
    "Margaret",
    "Dennis",
    "Frances",
    "Ken",
    "Radia",
    "Edsger",
    "Hedy",
    "Donald",
    "Katherine",
    "Tim",
    "Joan",
];
const LAST: &[&str] = &[
    "Lovelace",
    "Hopper",
    "Torvalds",
    "Liskov",
    "Turing",
    "Hamilton",
    "Ritchie",
    "Allen",
    "Thompson",
    "Perlman",
    "Dijkstra",
    "Lamarr",
    "Knuth",
    "Johnson",
    "Berners-Lee",
    "Clarke",
];
const APPS: &[&str] = &[
    "payroll-sync",
    "hr-connector",
    "ci-deployer",
    "backup-agent",
    "crm-export",
    "siem-forwarder",
    "ticket-bot",
    "billing-api",
];
const AGENTS: &[&str] = &[
    "copilot-triage",
    "invoice-agent",
    "onboarding-agent",
    "research-assistant",
];
const PRIVILEGED_ROLES: &[&str] = &[
    "Global Administrator",
    "Privileged Role Administrator",
    "Security Administrator",
    "Application Administrator",
    "Exchange Administrator",
    "User Administrator",
];
const ORDINARY_ROLES: &[&str] = &[
    "Global Reader",
    "Security Reader",
    "Helpdesk Administrator",
    "Reports Reader",
];

fn kind(rng: &mut Rng) -> &'static str {
    match rng.below(100) {
        0..70 => "user",
        70..80 => "group",
        80..92 => "servicePrincipal",
        92..97 => "managedIdentity",
        _ => "agentIdentity",
    }
}

fn severity_for(finding_type: &str, rng: &mut Rng) -> Severity {
    let base = match finding_type {
        "tier0_permanent_root" | "guest_privileged_access" => 0,
        "standing_privileged_access"
        | "mfa_not_enforced"
        | "excessive_api_permissions"
        | "agent_identity_overprivileged" => 1,
        "stale_privileged_identity" | "legacy_authentication" | "long_lived_credential" => 2,
        _ => 3,
    };
    // Mostly the type's usual severity, sometimes one step either way.
    let step: i64 = match rng.below(10) {
        0 => -1,
        1 => 1,
        _ => 0,
    };
    let index = (base as i64 + step).clamp(0, 3) as usize;
    Severity::ALL[index]
}

fn title(finding_type: &str, name: &str) -> String {
    match finding_type {
        "tier0_permanent_root" => {
            format!("{name} holds Global Administrator permanently at the root scope")
        }
        "standing_privileged_access" => {
            format!("{name} has standing privileged access that could be just-in-time")
        }
        "stale_privileged_identity" => {
            format!("Privileged identity {name} has not signed in for 90 days")
        }
        "mfa_not_enforced" => {
            format!("Sign-ins of privileged user {name} are not protected by MFA")
        }
        "unused_permissions" => format!("{name} holds permissions unused for 90 days"),
        "excessive_api_permissions" => {
            format!("{name} holds high-privilege Microsoft Graph permissions")
        }
        "long_lived_credential" => {
            format!("{name} has a client secret valid for more than a year")
        }
        "guest_privileged_access" => format!("Guest account {name} holds a privileged role"),
        "orphaned_service_principal" => format!("Service principal {name} has no owner"),
        "agent_identity_overprivileged" => {
            format!("Agent identity {name} has more privilege than its actions need")
        }
        "legacy_authentication" => format!("{name} signs in with legacy authentication"),
        other => format!("{other} on {name}"),
    }
}

fn line(out: &mut dyn Write, record: &Value) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, record)?;
    out.write_all(b"\n")
}

/// Writes one customer's pass. `today` is the UTC date (`YYYY-MM-DD`) times are relative to.
pub fn write_customer(
    spec: &CustomerSpec,
    today: NaiveDate,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut rng = Rng::new(spec.seed);
    let tenants: Vec<String> = (0..spec.tenants.max(1)).map(|_| rng.guid()).collect();
    let short = spec
        .name
        .split_whitespace()
        .next()
        .unwrap_or("demo")
        .to_lowercase();
    for (i, tenant) in tenants.iter().enumerate() {
        let name = if i == 0 {
            spec.name.clone()
        } else {
            format!("{} {}", spec.name, ["EU", "US", "APAC", "Labs"][i % 4])
        };
        line(
            out,
            &json!({"type": "tenant", "cloudTenantId": tenant, "displayName": name,
                          "primaryDomain": format!("{short}{i}.onmicrosoft.com")}),
        )?;
    }

    // Identities; about one in six holds a privileged role.
    let mut identities: Vec<(String, String, String, bool)> = Vec::with_capacity(spec.identities);
    for n in 0..spec.identities {
        let id = rng.guid();
        let tenant = rng.pick(&tenants).clone();
        let kind = kind(&mut rng);
        let name = match kind {
            "user" => format!("{} {}", rng.pick(FIRST), rng.pick(LAST)),
            "group" => format!(
                "{} team {n}",
                rng.pick(&["Finance", "Platform", "Security", "Sales", "Support"])
            ),
            "servicePrincipal" => format!("{}-{n}", rng.pick(APPS)),
            "managedIdentity" => format!("mi-{}-{n}", rng.pick(APPS)),
            _ => format!("{}-{n}", rng.pick(AGENTS)),
        };
        let privileged = rng.chance(17);
        let mut roles = vec![
            json!({"roleName": rng.pick(ORDINARY_ROLES), "scope": "/", "assignmentType": "active"}),
        ];
        if privileged {
            let assignment = if rng.chance(60) { "active" } else { "eligible" };
            roles.push(json!({"roleName": rng.pick(PRIVILEGED_ROLES), "scope": "/", "assignmentType": assignment}));
        }
        let principal = (kind == "user")
            .then(|| format!("{}@{short}.example", name.to_lowercase().replace(' ', ".")));
        line(
            out,
            &json!({"type": "identity", "id": id, "cloudTenantId": tenant, "kind": kind,
                          "displayName": name, "principalName": principal, "roleAssignments": roles}),
        )?;
        identities.push((id, tenant, name, privileged));
    }

    // Findings, mostly about privileged identities.
    let privileged: Vec<usize> = identities
        .iter()
        .enumerate()
        .filter(|(_, i)| i.3)
        .map(|(n, _)| n)
        .collect();
    for n in 0..spec.findings {
        let who = if !privileged.is_empty() && rng.chance(70) {
            privileged[rng.below(privileged.len() as u64) as usize]
        } else {
            rng.below(identities.len().max(1) as u64) as usize
        };
        let (finding_type, _) = *rng.pick(FindingType::CATALOGUE);
        let severity = severity_for(finding_type, &mut rng);
        let status = match rng.below(100) {
            0..70 => "open",
            70..90 => "resolved",
            _ => "suppressed",
        };
        // Yesterday or earlier: never in the future.
        let detected = at(
            today - Days::new(1 + rng.below(89)),
            rng.below(24) as u32,
            rng.below(60) as u32,
        );
        let mut record = json!({"type": "finding", "id": format!("f-{n:07}"),
            "findingType": finding_type, "severity": severity.as_str(), "status": status,
            "detectedAt": detected});
        match identities.get(who) {
            Some((id, tenant, name, _)) => {
                record["cloudTenantId"] = json!(tenant);
                record["identityId"] = json!(id);
                record["title"] = json!(title(finding_type, name));
                record["description"] =
                    json!(format!("Detected by rule {finding_type} on {name}."));
            }
            None => {
                record["cloudTenantId"] = json!(tenants[0]);
                record["title"] = json!(title(finding_type, "an identity"));
            }
        }
        line(out, &record)?;
    }

    // Right-sized role recommendations for privileged identities.
    for (n, &who) in privileged.iter().enumerate().filter(|(n, _)| n % 2 == 0) {
        let (id, tenant, _, _) = &identities[who];
        line(
            out,
            &json!({"type": "roleRecommendation", "id": format!("rec-{n:06}"), "cloudTenantId": tenant,
            "identityId": id, "currentRoles": ["Global Administrator", "Global Reader"],
            "recommendedRole": {"name": "User Administrator", "actions": [
                "microsoft.directory/users/create", "microsoft.directory/users/basic/update",
                "microsoft.directory/users/password/update"]},
            "removedActions": ["microsoft.directory/*/allTasks", "microsoft.directory/roleAssignments/create"]}),
        )?;
    }

    // UPR history: the privileged principals, one score a day.
    for &who in &privileged {
        let (id, tenant, _, _) = &identities[who];
        let mut score = 40 + rng.below(55) as i64;
        for day in (0..spec.upr_days).rev() {
            score = (score + rng.below(7) as i64 - 3).clamp(0, 100);
            let tier = (score * 45 / 100).min(score);
            line(
                out,
                &json!({"type": "uprScore", "identityId": id, "cloudTenantId": tenant, "score": score,
                "factors": {"privilegeTier": tier, "unusedPermission": (score - tier) / 2,
                            "exposure": score - tier - (score - tier) / 2},
                "recordedAt": at(today - Days::new(u64::from(day)), 0, 5)}),
            )?;
        }
    }
    Ok(())
}

/// RFC 3339 of `day` at this hour and minute, UTC.
fn at(day: NaiveDate, hour: u32, minute: u32) -> String {
    day.and_hms_opt(hour, minute, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Today's UTC date, which demo data is written relative to.
pub fn today() -> NaiveDate {
    Utc::now().date_naive()
}

/// A pass of `findings` new findings (ids `{prefix}000000`...), severities in turn, over 100
/// identities (`u0`..`u99`) of `tenant`: the load of the delivery benchmark and of chaos.
pub fn write_new_findings_pass(
    path: &std::path::Path,
    tenant: &str,
    prefix: &str,
    findings: usize,
) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        out,
        "{}",
        json!({"type": "tenant", "cloudTenantId": tenant, "displayName": "Load"})
    )?;
    for i in 0..100 {
        writeln!(
            out,
            "{}",
            json!({"type": "identity", "id": format!("u{i}"), "cloudTenantId": tenant,
            "kind": "user", "displayName": format!("User {i}")})
        )?;
    }
    let severities = ["critical", "high", "medium", "low"];
    for i in 0..findings {
        writeln!(
            out,
            "{}",
            json!({"type": "finding", "id": format!("{prefix}{i:06}"), "cloudTenantId": tenant,
            "findingType": "standing_privileged_access", "severity": severities[i % 4],
            "title": format!("Finding {i}"), "identityId": format!("u{}", i % 100)})
        )?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_render_as_utc_times() {
        let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
        assert_eq!(at(day(1970, 1, 1), 0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(
            at(day(2000, 3, 1) - Days::new(1), 23, 59),
            "2000-02-29T23:59:00Z"
        );
    }

    fn generate(seed: u64) -> String {
        let spec = CustomerSpec {
            name: "Contoso".into(),
            tenants: 2,
            identities: 50,
            findings: 200,
            upr_days: 5,
            seed,
        };
        let mut out = Vec::new();
        write_customer(
            &spec,
            NaiveDate::from_ymd_opt(2024, 10, 4).unwrap(),
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_same_seed_gives_the_same_data() {
        assert_eq!(generate(7), generate(7));
        assert_ne!(generate(7), generate(8));
    }

    #[test]
    fn every_generated_line_is_a_valid_ingest_record() {
        for (n, text) in generate(7).lines().enumerate() {
            let parsed = posture_domain::ingest::parse_line(text);
            assert!(matches!(parsed, Ok(Some(_))), "line {}: {parsed:?}", n + 1);
        }
    }
}
