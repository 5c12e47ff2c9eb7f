//! `posture findings triage`: one triage written to findings by id, through the bulk route
//! (`POST /api/v1/findings/triage`, up to 500 findings a request), each request with an
//! `Idempotency-Key` of its own so a retry after a dropped connection acts once.

use chrono::{DateTime, Utc};
use posture_domain::triage::{TriageReason, TriageState};
use serde::Serialize;
use serde_json::Value;

use crate::client::{Api, ApiError};

/// Most findings of one request (the route's bound); more are sent in several.
pub const PER_REQUEST: usize = 500;

/// The triage to write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Triage {
    pub state: TriageState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<TriageReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// What happened to one finding, as the service said.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub id: String,
    /// `triaged`, `not_found` or `precondition_failed`.
    pub outcome: String,
    /// The answer's entry as sent (`--json` prints it).
    pub raw: Value,
}

impl Outcome {
    pub fn triaged(&self) -> bool {
        self.outcome == "triaged"
    }
}

/// Writes `triage` to the findings `ids` (each once, in their first order), [`PER_REQUEST`]
/// at a time; `shown` hears each outcome as its request is answered, so what was written
/// before a later request fails is said. How many were not written.
pub async fn triage(
    api: &Api,
    ids: &[String],
    triage: &Triage,
    shown: &mut (dyn FnMut(&Outcome) + Send),
) -> Result<usize, ApiError> {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    let ids: Vec<&String> = ids.iter().filter(|id| seen.insert(id.as_str())).collect();
    let mut missed = 0;
    for chunk in ids.chunks(PER_REQUEST) {
        let findings: Vec<Value> = chunk
            .iter()
            .map(|id| serde_json::json!({"id": id}))
            .collect();
        let body = serde_json::json!({"findings": findings, "triage": triage});
        let answer: Value = api.post_json("findings/triage", &body).await?;
        let entries = answer["data"]
            .as_array()
            .ok_or_else(|| ApiError::Unexpected("findings/triage: no data list".into()))?;
        for entry in entries {
            let text = |field: &str| entry[field].as_str().unwrap_or_default().to_owned();
            let outcome = Outcome {
                id: text("id"),
                outcome: text("outcome"),
                raw: entry.clone(),
            };
            missed += usize::from(!outcome.triaged());
            shown(&outcome);
        }
    }
    Ok(missed)
}

/// One line for people: the finding and what happened to it.
pub fn render(outcome: &Outcome, triage: &Triage) -> String {
    match outcome.outcome.as_str() {
        "triaged" => {
            let reason = triage
                .reason
                .map(|r| format!(" ({})", r.as_str()))
                .unwrap_or_default();
            let until = triage
                .expires_at
                .map(|t| {
                    format!(
                        " until {}",
                        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    )
                })
                .unwrap_or_default();
            format!("{}: {}{reason}{until}", outcome.id, triage.state.as_str())
        }
        "not_found" => format!(
            "{}: not found (no finding of yours has this id)",
            outcome.id
        ),
        "precondition_failed" => format!("{}: changed meanwhile, not written", outcome.id),
        other => format!("{}: {other}", outcome.id),
    }
}

/// `--until`: an RFC 3339 time, or a date (its start, UTC).
pub fn parse_until(value: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(time) = DateTime::parse_from_rfc3339(value) {
        return Ok(time.with_timezone(&Utc));
    }
    chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .map(|date| date.and_time(chrono::NaiveTime::MIN).and_utc())
        .map_err(|_| {
            "expected a date (2027-03-31) or an RFC 3339 time (2027-03-31T00:00:00Z)".into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_is_a_date_or_a_time() {
        let at = |s: &str| parse_until(s).map(|t| t.to_rfc3339());
        assert_eq!(at("2027-03-31").unwrap(), "2027-03-31T00:00:00+00:00");
        assert_eq!(
            at("2027-03-31T12:00:00+02:00").unwrap(),
            "2027-03-31T10:00:00+00:00"
        );
        for bad in ["", "tomorrow", "2027-13-01", "31/03/2027"] {
            assert!(at(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_triage_is_the_contract_s_body() {
        let triage = Triage {
            state: TriageState::RiskAccepted,
            reason: Some(TriageReason::CompensatingControl),
            comment: None,
            expires_at: Some(parse_until("2027-03-31").unwrap()),
        };
        assert_eq!(
            serde_json::to_value(&triage).unwrap(),
            serde_json::json!({"state": "risk_accepted", "reason": "compensating_control",
                               "expiresAt": "2027-03-31T00:00:00Z"})
        );
    }
}
