//! `Idempotency-Key` on the POSTs that create or act (the IETF httpapi idempotency-key
//! draft): the route table marks them (`Endpoint::idempotent`), and the route's admission
//! (`routes::serve`) sends their requests through [`admit`] after the scope check.
//!
//! A request with a key claims it for its API key; its answer, if it would be the same again
//! ([`is_kept`]), is kept 24 hours with its body compressed and sealed, and a retry with the
//! same key and request gets it again with `Idempotent-Replayed: true`. Another request with
//! the key is a 422; a retry while the first still runs is a 409. A request without the
//! header runs as always.

use std::time::Duration;

use actix_web::{
    HttpMessage as _,
    body::{BodySize, BoxBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    http::{
        StatusCode,
        header::{HeaderName, HeaderValue},
    },
    middleware::Next,
    web,
};
use posture_domain::{
    CustomerScope, KeyId, Refusal,
    credential::Principal,
    idempotency::{
        Claim, ClaimId, Fingerprint, IN_PROGRESS_SECS, IdempotencyKey, MAX_HELD_SECS, StoredAnswer,
        is_kept,
    },
    ports::IdempotencyRepository,
};

use crate::{error::ApiError, state::ApiState};

/// The response header of a replayed answer.
pub const REPLAYED: &str = "Idempotent-Replayed";

/// Headers of an answer kept with it (the rest, rate limits and request id, are the
/// retry's own).
const KEPT_HEADERS: &[&str] = &["content-type", "location", "etag"];

/// Most bytes of an answer kept. These routes answer a JSON object of a few hundred bytes
/// but one: a bulk triage answers its 500 findings whole, each with its 2,000-character
/// comment, title and description (up to about 8 KiB of UTF-8 each: 4 MiB). An answer past
/// this (none of these routes makes one) goes out as it is and is not kept.
const MAX_KEPT_BYTES: u64 = 16 * 1024 * 1024;

/// What binds a sealed answer to its owner.
fn context(principal: &Principal, key: &IdempotencyKey) -> Vec<u8> {
    format!(
        "posture idempotent answer\0{}\0{}\0{}",
        principal.scope().customer_id(),
        principal.key_id(),
        key.as_str()
    )
    .into_bytes()
}

/// Runs the request through its `Idempotency-Key`, if it has one.
pub(crate) async fn admit<B: MessageBody + 'static>(
    mut req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let run = |req: ServiceRequest| async move {
        next.call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body)
    };
    let Some(value) = req.headers().get("idempotency-key") else {
        return run(req).await;
    };
    let key = match IdempotencyKey::parse(value.as_bytes()) {
        Ok(key) => key,
        Err(e) => return Ok(req.error_response(ApiError::from(e))),
    };
    let principal = req.extensions().get::<Principal>().cloned();
    let state = req.app_data::<web::Data<ApiState>>().cloned();
    let (Some(principal), Some(state)) = (principal, state) else {
        return run(req).await;
    };
    // The body, read once (within the body limit) and put back for the route.
    let body = match req.extract::<web::Bytes>().await {
        Ok(body) => body,
        Err(e) => return Ok(req.error_response(e)),
    };
    req.set_payload(Payload::from(body.clone()));
    let fingerprint = Fingerprint::of(req.method().as_str(), req.path(), &body);
    let held = Held {
        store: state.ports.idempotency.clone(),
        scope: principal.scope(),
        by: principal.key_id(),
        key,
    };
    let claim = held
        .store
        .claim_idempotency_key(held.scope, held.by, &held.key, &fingerprint)
        .await;
    let context = context(&principal, &held.key);
    match claim {
        Err(e) => Ok(req.error_response(ApiError::from(e))),
        Ok(Claim::OtherRequest) => Ok(req.error_response(ApiError::unprocessable(
            Refusal::Invalid,
            "Idempotency-Key",
            "Idempotency-Key was used for another request (another body or route) in the \
             last 24 hours: send a new key for a new request",
        ))),
        Ok(Claim::InProgress) => Ok(req.error_response(ApiError::Conflict(
            "a request with this Idempotency-Key is still in progress: retry after it ends".into(),
        ))),
        Ok(Claim::Replay(answer)) => match replay(&state, &answer, &context) {
            Ok(response) => Ok(req.into_response(response)),
            Err(e) => Ok(req.error_response(e)),
        },
        Ok(Claim::Run(claim)) => {
            let response = held.hold_while(claim, run(req)).await;
            held.keep(claim, &state, &context, response).await
        }
    }
}

/// A key this request claimed, and where it is kept.
struct Held {
    store: std::sync::Arc<dyn IdempotencyRepository>,
    scope: CustomerScope,
    by: KeyId,
    key: IdempotencyKey,
}

impl Held {
    /// Runs the request, renewing the key's hold every third of it while it runs, for
    /// [`MAX_HELD_SECS`] at most: a request that runs longer than the hold (a triage behind a
    /// long lock wait) keeps its key, and a retry meanwhile is a 409, never a second run; one
    /// that hangs does not hold its key for ever.
    async fn hold_while<R>(&self, claim: ClaimId, running: impl Future<Output = R>) -> R {
        let every = Duration::from_secs(IN_PROGRESS_SECS.unsigned_abs() / 3);
        let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let renewing = async {
            for _ in 0..MAX_HELD_SECS / every.as_secs() {
                renew.tick().await;
                if let Err(e) = self
                    .store
                    .extend_idempotency_hold(self.scope, self.by, &self.key, claim)
                    .await
                {
                    tracing::warn!(error = %e, "renewing an idempotency key's hold failed");
                }
            }
            std::future::pending::<std::convert::Infallible>().await
        };
        tokio::select! {
            outcome = running => outcome,
            never = renewing => match never {},
        }
    }

    /// Keeps the answer for replay when it would be the same again (and fits), else frees
    /// the key so that a retry runs again.
    async fn keep(
        &self,
        claim: ClaimId,
        state: &ApiState,
        context: &[u8],
        response: Result<ServiceResponse<BoxBody>, actix_web::Error>,
    ) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
        let (store, scope, by, key) = (&self.store, self.scope, self.by, &self.key);
        let status = match &response {
            Ok(response) => response.status().as_u16(),
            Err(e) => e.as_response_error().status_code().as_u16(),
        };
        let response = match response {
            Ok(response) if is_kept(status) && fits(response.response().body()) => response,
            other => {
                // Not kept: a retry runs again.
                if let Err(e) = store.release_idempotency_key(scope, by, key, claim).await {
                    tracing::warn!(error = %e, "freeing an idempotency key failed; it frees itself within a minute");
                }
                return other;
            }
        };
        let (request, response) = response.into_parts();
        let (response, body) = response.into_parts();
        // Sized and within the bound (`fits`): reading it cannot fail but on our side.
        let bytes = match actix_web::body::to_bytes(body).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::error!(error = %e, "reading an answer to keep failed");
                let _ = store.release_idempotency_key(scope, by, key, claim).await;
                return Ok(ServiceResponse::new(
                    request,
                    actix_web::ResponseError::error_response(&ApiError::Internal),
                ));
            }
        };
        let headers = KEPT_HEADERS
            .iter()
            .filter_map(|name| {
                let value = response.headers().get(*name)?.to_str().ok()?;
                Some(((*name).to_owned(), value.to_owned()))
            })
            .collect();
        let kept = pack(&bytes)
            .and_then(|packed| state.keyring.seal_answer(&packed, context))
            .map(|body| StoredAnswer {
                status,
                headers,
                body,
            });
        let outcome = match kept {
            Ok(answer) => {
                store
                    .keep_idempotent_answer(scope, by, key, claim, &answer)
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = outcome {
            // The request acted: its answer goes out; a retry will find the key in
            // progress until it frees itself, then run again.
            tracing::warn!(error = %e, "keeping an idempotent answer failed");
        }
        Ok(ServiceResponse::new(
            request,
            response.set_body(BoxBody::new(bytes)),
        ))
    }
}

/// The first bytes of a zstd frame: what [`pack`] writes, and no JSON body begins with.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// An answer as it is kept: compressed (a bulk triage's answer repeats its comment in each
/// of 500 findings), then sealed.
fn pack(body: &[u8]) -> Result<Vec<u8>, posture_domain::Error> {
    zstd::bulk::compress(body, crate::compression::ZSTD_LEVEL)
        .map_err(|e| posture_domain::Error::internal(format!("compressing an answer: {e}")))
}

/// A kept answer's body as it was sent: unpacked, or as it is when it was kept before
/// answers were compressed (a JSON body, never a zstd frame).
fn unpack(kept: Vec<u8>) -> Result<Vec<u8>, posture_domain::Error> {
    if !kept.starts_with(&ZSTD_MAGIC) {
        return Ok(kept);
    }
    zstd::bulk::decompress(&kept, MAX_KEPT_BYTES as usize)
        .map_err(|e| posture_domain::Error::internal(format!("a kept answer: {e}")))
}

/// Whether an answer's body may be kept: its size known, and within [`MAX_KEPT_BYTES`].
fn fits(body: &BoxBody) -> bool {
    matches!(
        body.size(),
        BodySize::None | BodySize::Sized(0..=MAX_KEPT_BYTES)
    )
}

/// The kept answer, as first sent, marked as a replay.
fn replay(
    state: &ApiState,
    answer: &StoredAnswer,
    context: &[u8],
) -> Result<actix_web::HttpResponse, ApiError> {
    let body = state
        .keyring
        .open_answer(&answer.body, context)
        .and_then(unpack)
        .map_err(ApiError::from)?;
    let status = StatusCode::from_u16(answer.status).map_err(|_| ApiError::Internal)?;
    let mut response = actix_web::HttpResponse::build(status);
    for (name, value) in &answer.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            response.insert_header((name, value));
        }
    }
    response.insert_header((REPLAYED, "true"));
    Ok(response.body(body))
}

#[cfg(test)]
mod tests {
    use actix_web::body::{BodyStream, BoxBody};

    use super::*;

    #[test]
    fn an_answer_is_kept_packed_and_one_kept_before_packing_reads_as_it_was() {
        let answer = format!("{{\"data\":[{}]}}", "{\"comment\":\"é\"},".repeat(5000));
        let packed = pack(answer.as_bytes()).unwrap();
        assert!(
            packed.len() * 20 < answer.len(),
            "{} to {}",
            answer.len(),
            packed.len()
        );
        assert_eq!(unpack(packed).unwrap(), answer.as_bytes());
        assert_eq!(
            unpack(answer.clone().into_bytes()).unwrap(),
            answer.as_bytes()
        );
        assert_eq!(unpack(Vec::new()).unwrap(), b"");
        let mut broken = pack(b"{}").unwrap();
        broken.truncate(6);
        assert!(unpack(broken).is_err());
    }

    #[test]
    fn only_a_sized_answer_within_the_bound_is_kept() {
        let sized = |n: usize| BoxBody::new(web::Bytes::from(vec![b'x'; n]));
        assert!(fits(&BoxBody::new(())));
        assert!(fits(&sized(0)));
        assert!(fits(&sized(MAX_KEPT_BYTES as usize)));
        assert!(!fits(&sized(MAX_KEPT_BYTES as usize + 1)));
        let stream = futures_util::stream::empty::<Result<web::Bytes, std::io::Error>>();
        assert!(
            !fits(&BoxBody::new(BodyStream::new(stream))),
            "a stream's size is unknown"
        );
    }
}
