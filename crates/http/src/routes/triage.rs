//! Triage writes shared by `PATCH /findings/{id}` and the bulk `POST /findings/triage`: the
//! change as asked, checked once, and the customer's write budget.

use std::collections::HashSet;

use actix_web::{http::header::EntityTag, web};
use posture_domain::{
    Error, FindingId, Refusal, Scope,
    rate_limit::RateBucket,
    triage::{MAX_BULK, TriageChange, TriageReason, TriageState, WRITE_RATE, stored_cost},
};
use posture_wire::{
    triage::TriageRequest,
    triage_bulk::{BulkTriageRequest, BulkTriageResponse},
};

use super::{Access, Endpoint, HttpMethod, Reply};
use crate::{
    auth::Caller,
    error::{ApiError, unprocessable},
    handler,
    input::Json,
    state::ApiState,
};

/// Who may triage: the answer is the finding, so reading findings too.
pub(super) const TRIAGES: Access = Access::AllOf(&[Scope::ReadFindings, Scope::WriteFindings]);

pub static BULK: Endpoint = Endpoint {
    method: HttpMethod::Post,
    path: "/findings/triage",
    operation_id: "triageFindings",
    idempotent: true,
    tag: "findings",
    summary: "Triage findings in bulk",
    description: "Writes one triage to up to 500 findings (each once) in one transaction, as \
                  `PATCH /findings/{id}` does to one: the answer says per finding whether it \
                  was `triaged` (with the finding), `not_found`, or `precondition_failed` (its \
                  `ifMatch` no longer holds). Counts once against the rate limit and the \
                  customer's triage budgets (120 writes a minute, a bulk or a PATCH \
                  each; 32 MiB an hour of what they add to storage, 1 KiB a finding and the \
                  comment once). Needs `write:findings` and `read:findings`.",
    body: "The findings and the triage to write.",
    success: "What happened to each finding.",
    errors: &[400, 413, 415, 422],
    ..Endpoint::of(handler!(triage_findings), TRIAGES)
};

/// The change `request` asks for `now`, checked, or a 422 naming the field.
pub(super) fn change_of(
    request: TriageRequest,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<TriageChange, ApiError> {
    let state = request
        .state
        .parse::<TriageState>()
        .map_err(|e| unprocessable(Error::invalid("triage.state", e.to_string())))?;
    let reason = request
        .reason
        .as_deref()
        .map(str::parse::<TriageReason>)
        .transpose()
        .map_err(|e| unprocessable(Error::invalid("triage.reason", e.to_string())))?;
    TriageChange::new(state, reason, request.comment, request.expires_at, now)
        .map_err(unprocessable)
}

/// Counts one triage write of `findings` findings with `change`'s comment against the
/// caller's customer's budgets: 429 past the write budget ([`WRITE_RATE`]), or past what
/// its writes may add to storage (`posture_domain::triage::BYTES_RATE`, counted as
/// [`stored_cost`]), naming the
/// one that refused. A write the byte budget refuses costs it nothing (it counts as a write:
/// every request counts).
pub(super) async fn spend_write_budget(
    state: &ApiState,
    caller: &Caller,
    findings: usize,
    change: &TriageChange,
) -> Result<(), ApiError> {
    let customer = caller.scope().customer_id();
    let budgets = &state.budgets;
    let writes = RateBucket::CustomerTriageWrites(customer);
    let decision = budgets.triage_writes.check(&writes).await?;
    debug_assert_eq!(decision.limit, WRITE_RATE.limit);
    ApiError::over_budget(
        "triage writes are limited to 120 a minute per customer",
        writes,
        decision,
    )?;
    let bytes = RateBucket::CustomerTriageBytes(customer);
    let cost = stored_cost(findings, change.comment.as_deref());
    let decision = budgets.triage_bytes.spend(&bytes, cost).await?;
    ApiError::over_budget(
        "triage writes may add 32 MiB an hour per customer (1 KiB a finding written, and \
         the comment once)",
        bytes,
        decision,
    )
}

async fn triage_findings(
    caller: Caller,
    Json(request): Json<BulkTriageRequest>,
    state: web::Data<ApiState>,
) -> Result<Reply<BulkTriageResponse>, ApiError> {
    if request.findings.is_empty() || request.findings.len() > MAX_BULK {
        return Err(ApiError::unprocessable(
            Refusal::OutOfRange,
            "findings",
            format!(
                "findings: 1 to {MAX_BULK} findings, not {}",
                request.findings.len()
            ),
        ));
    }
    let mut seen = HashSet::with_capacity(request.findings.len());
    let mut items = Vec::with_capacity(request.findings.len());
    for (n, item) in request.findings.into_iter().enumerate() {
        let id = item.id.parse::<FindingId>().map_err(|e| {
            let kind = match &e {
                Error::Invalid { kind, .. } => *kind,
                _ => Refusal::Invalid,
            };
            ApiError::unprocessable(
                kind,
                format!("findings[{n}].id"),
                format!("findings[{n}].id: {e}"),
            )
        })?;
        if !seen.insert(id.clone()) {
            return Err(ApiError::unprocessable(
                Refusal::Repeated,
                format!("findings[{n}].id"),
                format!("findings[{n}].id: {} is given twice", id.as_str()),
            ));
        }
        let expected = item
            .if_match
            .map(|tag| match tag.parse::<EntityTag>() {
                Ok(tag) if !tag.weak => Ok(vec![tag.tag().to_owned()]),
                _ => Err(ApiError::unprocessable(
                    Refusal::Malformed,
                    format!("findings[{n}].ifMatch"),
                    format!(
                        "findings[{n}].ifMatch: must be the finding's strong ETag, quoted as \
                         sent (\"f...\")"
                    ),
                )),
            })
            .transpose()?;
        items.push((id, expected));
    }
    let change = change_of(request.triage, state.clock.now())?;
    spend_write_budget(&state, &caller, items.len(), &change).await?;
    let bulk = state
        .ports
        .reads
        .findings
        .triage_findings(caller.scope(), &items, &change, caller.key_id())
        .await?;
    let answer = BulkTriageResponse::from(bulk);
    tracing::info!(
        findings.triaged = answer.meta.triaged,
        findings.not_found = answer.meta.not_found,
        findings.precondition_failed = answer.meta.precondition_failed,
        triage.state = change.state.as_str(),
        "findings triaged in bulk"
    );
    Ok(Reply::new(&answer))
}
