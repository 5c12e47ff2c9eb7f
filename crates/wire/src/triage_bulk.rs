//! The bulk triage: the body and answer of `POST /findings/triage`.

use posture_domain::{
    ids::{EXTERNAL_ID_PATTERN, MAX_EXTERNAL_ID_LEN},
    triage::MAX_BULK,
    triage_bulk::{BulkOutcome, BulkTriage},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{findings::FindingResponse, triage::TriageRequest};

/// One finding of a bulk triage.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BulkTriageItem {
    /// The finding's id.
    #[schemars(length(min = 1, max = MAX_EXTERNAL_ID_LEN), pattern(EXTERNAL_ID_PATTERN))]
    #[schemars(example = &"f-7c1d9a")]
    pub id: String,
    /// The finding's `ETag` as you read it: this finding is written only if it has not
    /// changed since (`precondition_failed` otherwise). Absent: whatever its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200), pattern(r#"^"[!#-~]*"$"#))]
    #[schemars(example = &"\"f642a1b2c3d4e5.642a1b2c3d4e5.0\"")]
    pub if_match: Option<String>,
}

/// The body of `POST /findings/triage`: one triage for many findings.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BulkTriageRequest {
    /// 1 to 500 findings, each once.
    #[schemars(length(min = 1, max = MAX_BULK))]
    pub findings: Vec<BulkTriageItem>,
    pub triage: TriageRequest,
}

/// What a bulk triage did to one finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkOutcomeKind {
    /// Written; `finding` is the finding now.
    Triaged,
    /// No finding of yours has this id.
    NotFound,
    /// Its `ifMatch` is not the finding's `ETag` now: read it again.
    PreconditionFailed,
}

impl BulkOutcomeKind {
    pub const ALL: [BulkOutcomeKind; 3] = [Self::Triaged, Self::NotFound, Self::PreconditionFailed];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Triaged => "triaged",
            Self::NotFound => "not_found",
            Self::PreconditionFailed => "precondition_failed",
        }
    }
}

/// A string enum with its values explained in the description, as every closed set of the
/// contract is: schemars's `oneOf` of documented `const`s makes openapi-python-client
/// generate a parser that refuses all but the first value.
impl JsonSchema for BulkOutcomeKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "BulkOutcomeKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "enum": Self::ALL.map(Self::as_str),
            "description": "What a bulk triage did to one finding: `triaged` (written; \
                            `finding` is the finding now), `not_found` (no finding of yours \
                            has this id), `precondition_failed` (its `ifMatch` is not the \
                            finding's `ETag` now: read it again).",
        })
    }
}

/// One finding of a bulk triage's answer.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkTriageResult {
    pub id: String,
    pub outcome: BulkOutcomeKind,
    /// The finding as triaged (only when `outcome` is `triaged`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<FindingResponse>,
}

/// The answer of `POST /findings/triage`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkTriageResponse {
    /// One result per finding asked, in the order asked.
    pub data: Vec<BulkTriageResult>,
    pub meta: BulkTriageMeta,
}

/// A bulk triage's counts and the id of its change.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkTriageMeta {
    /// The change's id: the `analyzerPassId` of its `finding_triaged` events.
    #[schemars(schema_with = "crate::uuid")]
    pub change_id: String,
    pub triaged: u32,
    pub not_found: u32,
    pub precondition_failed: u32,
}

impl From<BulkTriage> for BulkTriageResponse {
    fn from(bulk: BulkTriage) -> Self {
        let mut meta = BulkTriageMeta {
            change_id: bulk.change_id.to_string(),
            triaged: 0,
            not_found: 0,
            precondition_failed: 0,
        };
        let data = bulk
            .outcomes
            .into_iter()
            .map(|(id, outcome)| {
                let (outcome, finding) = match outcome {
                    BulkOutcome::Triaged(finding) => {
                        meta.triaged += 1;
                        (BulkOutcomeKind::Triaged, Some((*finding).into()))
                    }
                    BulkOutcome::NotFound => {
                        meta.not_found += 1;
                        (BulkOutcomeKind::NotFound, None)
                    }
                    BulkOutcome::PreconditionFailed => {
                        meta.precondition_failed += 1;
                        (BulkOutcomeKind::PreconditionFailed, None)
                    }
                };
                BulkTriageResult {
                    id: id.as_str().to_owned(),
                    outcome,
                    finding,
                }
            })
            .collect();
        Self { data, meta }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_lists_each_outcome_as_it_is_sent() {
        for kind in BulkOutcomeKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }
}
