//! Property tests of the export writers: any finding (any text, any identity) becomes one
//! line that an independent parser reads back to what the documented escaping says.
//!
//! Cases per property: proptest's default (256), or `PROPTEST_CASES`.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod cef;
mod ndjson;

use chrono::{DateTime, Utc};
use posture_domain::{
    CloudTenantId,
    finding::{FindingStatus, FindingType, Severity},
    identity::IdentityKind,
    triage::{Triage, TriageState},
};
use posture_wire::{findings::FindingResponse, identities::IdentitySummaryResponse};
use proptest::prelude::*;

/// Text as hostile as a finding's can be: any Unicode, with the characters every format
/// escapes (`|`, `\`, `=`, `"`), line breaks of every kind and other controls.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\\x7f\u{80}-\u{9f}\u{85}\u{2028}\u{2029}|\\\\=\" a-z]{0,40}",
        "([a-z]{0,3}(\r\n|\r|\n|\\\\|\\||=| [a-z]{1,4}=)){0,8}",
    ]
}

fn time() -> impl Strategy<Value = DateTime<Utc>> {
    (0i64..4_102_444_800_000).prop_map(|ms| DateTime::from_timestamp_millis(ms).unwrap())
}

pub fn finding() -> impl Strategy<Value = FindingResponse> {
    let identity = (
        "[A-Za-z0-9._~:@-]{1,20}",
        text(),
        prop::sample::select(IdentityKind::ALL.to_vec()),
    );
    (
        (
            "[A-Za-z0-9._~:@-]{1,20}",
            any::<u128>(),
            "[a-z][a-z0-9_]{0,63}",
        ),
        (
            prop::sample::select(Severity::ALL.to_vec()),
            prop::sample::select(FindingStatus::ALL.to_vec()),
        ),
        (text(), prop::option::of(text())),
        prop::option::of(identity),
        (time(), time()),
        (
            prop::sample::select(TriageState::ALL.to_vec()),
            prop::option::of(text()),
        ),
    )
        .prop_map(
            |(
                (id, tenant, kind),
                (severity, status),
                (title, description),
                identity,
                times,
                (triage_state, comment),
            )| {
                let tenant = CloudTenantId::from_uuid(uuid::Uuid::from_u128(tenant));
                FindingResponse {
                    id,
                    cloud_tenant_id: tenant,
                    finding_type: kind.parse::<FindingType>().unwrap(),
                    severity,
                    status,
                    title,
                    description,
                    identity: identity.map(|(id, display_name, kind)| IdentitySummaryResponse {
                        id,
                        display_name,
                        kind,
                        cloud_tenant_id: tenant,
                    }),
                    detected_at: times.0,
                    updated_at: times.1,
                    modified_at: times.1,
                    triage: Triage {
                        state: triage_state,
                        comment,
                        ..Triage::default()
                    }
                    .into(),
                }
            },
        )
}
