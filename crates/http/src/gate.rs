//! The gate of `/api/v1`: authentication and the rate limit, before the route.
//!
//! 1. A public route counts against the client address's bucket.
//! 2. A request without a key of valid form (none, malformed, bad checksum) counts against
//!    its address and is refused (401): no lookup.
//! 3. A key this process knows (`ApiKeyRepository::known_key`) costs no query: a valid one
//!    counts against its key's bucket, one found unknown moments ago against its address
//!    (401).
//! 4. A key it does not know costs a query, so it is looked up only while the client
//!    address has budget left (read without counting): an address over its limit gets 429
//!    and no lookup. A flood of made-up keys from one address therefore stops reaching
//!    PostgreSQL once the address's budget is spent. A key found valid counts against its
//!    own bucket; one found unknown against the address. Keys this process saw valid lately
//!    are looked up whatever their address's budget (`KnownKey::Recent`), so a flood from a
//!    shared address (a NAT) does not lock out the keys already in use behind it.
//! 5. A valid key used from an address its allow-list does not name is refused (403) and
//!    counts against the address, never the key: a stolen key tried from elsewhere cannot
//!    spend its owner's quota. The refusal reaches the customer's audit feed (one event per
//!    key, address and hour); a request its budgets admit has its use recorded
//!    (`record_use`, off the request's path).
//! 6. Over the limit: 429 with `Retry-After`. Otherwise a failed authentication is answered
//!    (401), or the route runs (which checks its scope).
//!
//! A valid key's conditional read (`conditional.rs`) is tagged before it counts: when its
//! `If-None-Match` holds the tag, it is answered 304 without counting (the headers then show
//! the key's bucket as it stands).
//!
//! A valid key's request that its key's bucket allows counts against its customer's budget
//! too (all of the customer's keys together, when the operator sets one): a customer's
//! admins cannot multiply the quota by issuing keys. When the customer's budget refuses,
//! the headers describe it.
//!
//! Every response of `/api/v1` carries the headers of the bucket it counted against last:
//! `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds of the
//! window's end), and the IETF draft fields `RateLimit-Policy` and `RateLimit`.

use actix_web::{
    Error, HttpResponse,
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::{
        StatusCode,
        header::{self, EntityTag, HeaderMap, HeaderName, HeaderValue},
    },
    middleware::Next,
    web,
};
use posture_domain::{
    Principal,
    ports::KnownKey,
    rate_limit::{RateBucket, RateDecision},
};

use crate::{
    auth::presented,
    client_ip::{request_bucket_name, request_client},
    conditional,
    error::ApiError,
    reads::Reads,
    routes::{self, Endpoint, ReadsFrom, Routed},
    state::ApiState,
};

const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The bucket of a request without a valid key: its client address.
pub(crate) fn address_bucket(req: &ServiceRequest, state: &ApiState) -> RateBucket {
    RateBucket::Address(request_bucket_name(req.request(), &state.trusted_proxies))
}

pub(crate) fn set_headers(headers: &mut HeaderMap, bucket: &RateBucket, d: &RateDecision) {
    let numbers = [
        (X_LIMIT, u64::from(d.limit)),
        (X_REMAINING, u64::from(d.remaining)),
        (X_RESET, d.reset_at),
    ];
    for (name, value) in numbers {
        headers.insert(name, HeaderValue::from(value));
    }
    let policy = bucket.policy_name();
    let quota = format_args!("\"{policy}\";q={};w={}", d.limit, d.window_secs);
    if let Some(value) = header_value(quota) {
        headers.insert(POLICY, value);
    }
    let state = format_args!("\"{policy}\";r={};t={}", d.remaining, d.retry_after);
    if let Some(value) = header_value(state) {
        headers.insert(RATELIMIT, value);
    }
}

/// The headers of a response refused by a budget of the route's (`refused`), the key's (or
/// address's) bucket `counted` counted as well: `X-RateLimit-*` describe the budget that
/// refused, `RateLimit-Policy` and `RateLimit` list it first, then the counted bucket.
pub(crate) fn set_refused_headers(
    headers: &mut HeaderMap,
    refused: &crate::error::RefusedBy,
    counted: Option<(&RateBucket, &RateDecision)>,
) {
    set_headers(headers, &refused.bucket, &refused.decision);
    let Some((bucket, decision)) = counted else {
        return;
    };
    let (first, other) = (refused.bucket.policy_name(), bucket.policy_name());
    let (d, c) = (&refused.decision, decision);
    let quotas = format_args!(
        "\"{first}\";q={};w={}, \"{other}\";q={};w={}",
        d.limit, d.window_secs, c.limit, c.window_secs
    );
    if let Some(value) = header_value(quotas) {
        headers.insert(POLICY, value);
    }
    let states = format_args!(
        "\"{first}\";r={};t={}, \"{other}\";r={};t={}",
        d.remaining, d.retry_after, c.remaining, c.retry_after
    );
    if let Some(value) = header_value(states) {
        headers.insert(RATELIMIT, value);
    }
}

/// `text` as a header value, written on the stack first: the value's own copy is the one
/// allocation (`format!` then `from_str` made two). `None` if it is longer than two
/// policies' names and eight numbers can be, or not a valid value.
fn header_value(text: std::fmt::Arguments<'_>) -> Option<HeaderValue> {
    let mut buffer = [0u8; 256];
    let mut rest = &mut buffer[..];
    std::io::Write::write_fmt(&mut rest, text).ok()?;
    let unused = rest.len();
    let written = buffer.len() - unused;
    HeaderValue::from_bytes(&buffer[..written]).ok()
}

/// One request counted against one bucket.
pub(crate) struct Counted {
    pub(crate) bucket: RateBucket,
    /// `None` when the limiter failed (a bug: the request is let through uncounted).
    pub(crate) decision: Option<RateDecision>,
}

impl Counted {
    pub(crate) fn over_limit(&self) -> Option<ApiError> {
        let decision = self.decision.as_ref().filter(|d| !d.allowed)?;
        metrics::counter!("posture_rate_limit_rejections_total", "policy" => self.bucket.policy_name())
            .increment(1);
        Some(ApiError::RateLimited {
            retry_after: decision.retry_after,
        })
    }
}

pub(crate) async fn count(state: &ApiState, bucket: RateBucket) -> Counted {
    count_on(state.ports.limiter.as_ref(), bucket).await
}

pub(crate) async fn count_on(
    limiter: &dyn posture_domain::rate_limit::RateLimiter,
    bucket: RateBucket,
) -> Counted {
    let decision = match check(limiter, &bucket).await {
        Ok(decision) => Some(decision),
        Err(e) => {
            // The limiters answer even without Redis; this is a bug, not a reason to refuse.
            tracing::error!(error = %e, "rate limiter failed; request not counted");
            None
        }
    };
    Counted { bucket, decision }
}

/// One request of `bucket` counted (at once when the limiter can).
async fn check(
    limiter: &dyn posture_domain::rate_limit::RateLimiter,
    bucket: &RateBucket,
) -> posture_domain::Result<RateDecision> {
    match limiter.check_now(bucket) {
        Some(decision) => Ok(decision),
        None => limiter.check(bucket).await,
    }
}

/// The state of `bucket`'s window, without counting (at once when the limiter can).
async fn peek(
    limiter: &dyn posture_domain::rate_limit::RateLimiter,
    bucket: &RateBucket,
) -> posture_domain::Result<RateDecision> {
    match limiter.peek_now(bucket) {
        Some(decision) => Ok(decision),
        None => limiter.peek(bucket).await,
    }
}

/// Whether the bucket has a request left (a limiter failure counts as yes, as in `count`).
pub(crate) async fn has_budget(state: &ApiState, bucket: &RateBucket) -> bool {
    peek(state.ports.limiter.as_ref(), bucket)
        .await
        .map_or(true, |d| d.allowed)
}

/// What the gate decided: the principal (if the key is valid) and where the route reads,
/// the count its headers report, the refusal to answer instead of the route (if any), and
/// the response's tag (a conditional read) with whether the client already holds it.
pub(crate) struct Admission {
    pub(crate) principal: Option<(Principal, Reads)>,
    pub(crate) counted: Counted,
    pub(crate) refusal: Option<ApiError>,
    tag: Option<EntityTag>,
    not_modified: bool,
}

impl Admission {
    fn anonymous(counted: Counted, refusal: Option<ApiError>) -> Self {
        Self {
            principal: None,
            counted,
            refusal,
            tag: None,
            not_modified: false,
        }
    }
}

/// Where the request's reads go (`reads.rs`): a usable replica when its route reads from
/// one and replicas are configured, the primary otherwise.
fn reads_for(state: &ApiState, endpoint: Option<&Endpoint>) -> Reads {
    let replica = endpoint.is_some_and(|e| e.reads == ReadsFrom::Replica);
    replica
        .then(|| state.ports.replicas.as_ref()?.pick())
        .flatten()
        .unwrap_or_else(|| state.ports.reads.clone())
}

/// A valid key: refused (403) from an address its allow-list does not name, which counts
/// against that address, never the key; otherwise its use is recorded, a conditional read
/// whose tag the client holds is not counted (304), and any other request counts against
/// the key.
async fn admit_key(
    req: &ServiceRequest,
    state: &ApiState,
    endpoint: Option<&'static Endpoint>,
    principal: Principal,
) -> Admission {
    let now = state.clock.now();
    let from = request_client(req.request(), &state.trusted_proxies);
    if !principal.permits(from) {
        if let Some(from) = from {
            state.ports.keys.record_refusal(&principal, from, now);
        }
        let counted = count(state, address_bucket(req, state)).await;
        let refusal = counted.over_limit().or(Some(ApiError::Forbidden));
        return Admission::anonymous(counted, refusal);
    }
    let bucket = RateBucket::Key(principal.key_id());
    let reads = reads_for(state, endpoint);
    let tag = conditional::tag(req, endpoint, state, &reads, &principal).await;
    // A use is recorded once the request is admitted (a 304 too), never for one its budget
    // refuses: a key sent from ever new addresses past its quota costs no write.
    let record_use = |principal: &Principal| {
        if let Some(from) = from {
            let agent = req
                .headers()
                .get(header::USER_AGENT)
                .and_then(|value| value.to_str().ok());
            state.ports.keys.record_use(principal, now, from, agent);
        }
    };
    if let Some(tag) = tag.as_ref().filter(|tag| conditional::matches(req, tag)) {
        record_use(&principal);
        let decision = peek(state.ports.limiter.as_ref(), &bucket).await.ok();
        return Admission {
            principal: Some((principal, reads)),
            counted: Counted { bucket, decision },
            refusal: None,
            tag: Some(tag.clone()),
            not_modified: true,
        };
    }
    let mut counted = count(state, bucket).await;
    let mut refusal = counted.over_limit();
    // The customer's budget, all its keys together: counted once the key's allows the
    // request; when it refuses, the headers describe it.
    if refusal.is_none()
        && let Some(limiter) = &state.customer_limiter
    {
        let customer = count_on(
            limiter.as_ref(),
            RateBucket::Customer(principal.scope().customer_id()),
        )
        .await;
        if let Some(over) = customer.over_limit() {
            refusal = Some(over);
            counted = customer;
        }
    }
    if refusal.is_none() {
        record_use(&principal);
    }
    Admission {
        principal: Some((principal, reads)),
        counted,
        refusal,
        tag,
        not_modified: false,
    }
}

/// Authenticates and counts the request (see the module's rules) for `endpoint`, the route
/// it reaches (`None`: a path of no route, or a route outside the table).
pub(crate) async fn authenticate_and_count(
    req: &ServiceRequest,
    state: &ApiState,
    endpoint: Option<&'static Endpoint>,
) -> Admission {
    if routes::is_public(req.match_info().as_str()) {
        let counted = count(state, address_bucket(req, state)).await;
        let refusal = counted.over_limit();
        return Admission::anonymous(counted, refusal);
    }
    let now = state.clock.now();
    let Some(credential) = presented(req.headers(), state.keyring.token_keys(), now) else {
        let counted = count(state, address_bucket(req, state)).await;
        let refusal = counted.over_limit().or(Some(ApiError::Unauthorized));
        return Admission::anonymous(counted, refusal);
    };
    match state.ports.keys.known_key(&credential.hash()) {
        KnownKey::Valid(principal) => admit_key(req, state, endpoint, principal).await,
        KnownKey::Unknown => {
            let counted = count(state, address_bucket(req, state)).await;
            let refusal = counted.over_limit().or(Some(ApiError::Unauthorized));
            Admission::anonymous(counted, refusal)
        }
        known @ (KnownKey::Unseen | KnownKey::Recent) => {
            let address = address_bucket(req, state);
            if known == KnownKey::Unseen && !has_budget(state, &address).await {
                let counted = count(state, address).await;
                let refusal = counted.over_limit().or(Some(ApiError::Unauthorized));
                return Admission::anonymous(counted, refusal);
            }
            match credential.authenticate(state.ports.keys.as_ref()).await {
                Ok(Some(principal)) => admit_key(req, state, endpoint, principal).await,
                Ok(None) => {
                    let counted = count(state, address).await;
                    let refusal = counted.over_limit().or(Some(ApiError::Unauthorized));
                    Admission::anonymous(counted, refusal)
                }
                Err(e) => {
                    let counted = count(state, address).await;
                    Admission::anonymous(counted, Some(e.into()))
                }
            }
        }
    }
}

/// Admits a request of `/api/v1` reaching `route` (`None`: no route of the table; the
/// router answers it) and serves it (`routes::serve`), or answers for it.
pub(crate) async fn gate<B: MessageBody + 'static>(
    route: Option<&'static Routed>,
    req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let Some(state) = req.app_data::<web::Data<ApiState>>().cloned() else {
        return Ok(req.error_response(ApiError::Internal));
    };
    let admission = authenticate_and_count(&req, &state, route.map(|r| r.endpoint)).await;
    let mut response = match admission.refusal {
        Some(refusal) => req.error_response(refusal),
        None if admission.not_modified => req.into_response(HttpResponse::NotModified().finish()),
        // The caller is handed to the route that was checked for it, and to no other: a
        // request the table finds no route for (a 404, a 405) reaches no handler as anyone.
        None => match route {
            Some(route) => routes::serve(route, admission.principal, req, next).await?,
            None => next.call(req).await?.map_into_boxed_body(),
        },
    };
    let tagged = response.status() == StatusCode::OK || admission.not_modified;
    if let Some(tag) = admission.tag.as_ref().filter(|_| tagged)
        && let Some(value) = conditional::header_value(tag)
    {
        response.headers_mut().insert(header::ETAG, value);
    }
    let counted = admission.counted;
    write_rate_headers(&mut response, &counted);
    // Nothing of the API is cached on the way, unless a route says otherwise (a stream).
    if !response.headers().contains_key(header::CACHE_CONTROL) {
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    Ok(response)
}

/// The rate-limit headers of `response`: of the budget that refused it, if one did, and of
/// the bucket the request `counted` against.
pub(crate) fn write_rate_headers<B>(response: &mut ServiceResponse<B>, counted: &Counted) {
    let refused = response
        .response()
        .extensions()
        .get::<crate::error::RefusedBy>()
        .cloned();
    let decision = counted.decision.as_ref();
    match refused {
        Some(refused) => set_refused_headers(
            response.headers_mut(),
            &refused,
            decision.map(|d| (&counted.bucket, d)),
        ),
        None => {
            if let Some(decision) = decision {
                set_headers(response.headers_mut(), &counted.bucket, decision);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use posture_domain::CustomerId;

    use super::*;

    /// The rate-limit headers hold the longest policy name with the largest numbers (the
    /// values are written on the stack, in 128 bytes).
    #[test]
    fn the_largest_rate_limit_headers_fit() {
        let bucket = RateBucket::CustomerTriageWrites(CustomerId::generate());
        let decision = RateDecision {
            limit: u32::MAX,
            remaining: u32::MAX,
            reset_at: u64::MAX,
            retry_after: u64::MAX,
            window_secs: u32::MAX,
            allowed: true,
        };
        let mut headers = HeaderMap::new();
        set_headers(&mut headers, &bucket, &decision);
        let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(
            header("ratelimit-policy").as_deref(),
            Some("\"triage-writes-per-customer\";q=4294967295;w=4294967295")
        );
        assert_eq!(
            header("ratelimit").as_deref(),
            Some("\"triage-writes-per-customer\";r=4294967295;t=18446744073709551615")
        );
        assert_eq!(
            header("x-ratelimit-reset").as_deref(),
            Some("18446744073709551615")
        );
    }
}
