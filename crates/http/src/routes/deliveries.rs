//! A subscription's deliveries (`manage:webhooks`): the log, one delivery with its attempts,
//! a redelivery, the recovery of a window after an outage (these two also `read:findings`),
//! and a test delivery.

use actix_web::web;
use posture_domain::{
    DeliveryId, Error, Refusal, Scope, WebhookId,
    delivery::{
        Delivery, DeliveryEvent, DeliveryStatus, DeliveryTarget, Outcome, TEST_CUSTOMER_RATE,
        TEST_RATE,
    },
    rate_limit::RateBucket,
    test_delivery::test_delivery,
};
use posture_wire::{
    DataResponse, ListResponse,
    deliveries::{
        DeliveriesQuery, DeliveryDetailResponse, DeliveryResponse, RecoverRequest, RecoverResponse,
        TestDeliveryRequest, TestDeliveryResponse,
    },
    paging::PageQuery,
};

use super::{Access, Endpoint, HttpMethod, Reply, Tagging};
use crate::{
    auth::Caller,
    error::ApiError,
    handler,
    input::{Id, Input, Json, ListQuery, not_found},
    state::ApiState,
};

/// Who may send past deliveries again: they carry findings' bodies of up to the log's
/// retention, and the subscription's URL may have changed since (a key with
/// `manage:webhooks` alone points subscriptions anywhere, but reads no finding).
const RESENDS_FINDINGS: Access = Access::AllOf(&[Scope::ManageWebhooks, Scope::ReadFindings]);

pub static LIST: Endpoint = Endpoint {
    path: "/webhooks/{id}/deliveries",
    operation_id: "listWebhookDeliveries",
    tag: "webhooks",
    summary: "List a subscription's deliveries",
    description: "The delivery log of an active subscription, newest first (then by id): what \
                  was sent, what is pending, and why an attempt failed. Kept for the retention \
                  the operator sets (30 days by default). Cursor-paged like every list.",
    success: "A page of deliveries.",
    success_headers: &["Link"],
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    ..Endpoint::of(
        handler!(list_deliveries),
        Access::Scope(Scope::ManageWebhooks),
    )
};

pub static GET: Endpoint = Endpoint {
    path: "/webhooks/{id}/deliveries/{deliveryId}",
    operation_id: "getWebhookDelivery",
    tag: "webhooks",
    summary: "Get a delivery with its attempts",
    description: "One delivery of the subscription and every attempt made (time, HTTP status, \
                  latency, error). Receivers' answer bodies are never shown.",
    success: "The delivery.",
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    ..Endpoint::of(handler!(get_delivery), Access::Scope(Scope::ManageWebhooks))
};

pub static REDELIVER: Endpoint = Endpoint {
    method: HttpMethod::Post,
    path: "/webhooks/{id}/deliveries/{deliveryId}/redeliver",
    operation_id: "redeliverWebhookDelivery",
    idempotent: true,
    tag: "webhooks",
    summary: "Send a delivery again",
    description: "Queues the delivery again, at once and on a fresh retry schedule: the same \
                  bytes under the same `X-Service-Delivery`/`webhook-id` (receivers that \
                  deduplicate see a repeat), signed anew. A delivery still pending is 409.",
    success: "Queued again.",
    errors: &[400, 404, 409],
    ..Endpoint::of(handler!(redeliver), RESENDS_FINDINGS)
};

pub static RECOVER: Endpoint = Endpoint {
    method: HttpMethod::Post,
    path: "/webhooks/{id}/recover",
    operation_id: "recoverWebhookDeliveries",
    idempotent: true,
    tag: "webhooks",
    summary: "Send again what failed in a window",
    description: "After a receiver outage: queues again every failed or cancelled delivery \
                  (tests aside) queued in `[since, until)`, oldest first, each on a fresh \
                  schedule. A window reaching past the log's retention, or ending before it \
                  starts, is 422; while deliveries of an earlier recovery are pending, 409.",
    body: "The window.",
    success: "How many were queued.",
    errors: &[400, 404, 409, 413, 415, 422],
    ..Endpoint::of(handler!(recover), RESENDS_FINDINGS)
};

pub static TEST: Endpoint = Endpoint {
    method: HttpMethod::Post,
    path: "/webhooks/{id}/test",
    operation_id: "testWebhook",
    idempotent: true,
    tag: "webhooks",
    summary: "Send a test delivery",
    description: "Sends one signed delivery at once and says what the receiver answered: a \
                  `ping` without findings, or with `eventType` one sample finding of that \
                  severity, rendered for the subscription's type and marked `\"test\": true`. \
                  Never retried; the same address rules and timeout as every delivery. The \
                  answer is 200 even when the receiver refuses (`delivered: false`). At most \
                  5 tests per subscription a minute (429 with `Retry-After`).",
    body: "What to send (`{}` for a ping).",
    success: "What the receiver answered.",
    errors: &[400, 404, 413, 415, 422],
    ..Endpoint::of(handler!(test_webhook), Access::Scope(Scope::ManageWebhooks))
};

/// A delivery route's `NotFound`: the subscription's when it is not the caller's active
/// one, the delivery's otherwise.
async fn subscription_exists(
    state: &ApiState,
    caller: &Caller,
    id: WebhookId,
) -> Result<(), ApiError> {
    state
        .ports
        .webhooks
        .get_subscription(caller.scope(), id)
        .await
        .map(|_| ())
        .map_err(not_found::<WebhookId>)
}

async fn list_deliveries(
    caller: Caller,
    Id(id): Id<WebhookId>,
    Input(filters): Input<DeliveriesQuery>,
    list: ListQuery<(PageQuery,)>,
    state: web::Data<ApiState>,
) -> Result<Reply<ListResponse<DeliveryResponse>>, ApiError> {
    let page = state
        .ports
        .deliveries
        .subscription_deliveries(caller.scope(), id, &filters.filter(), list.page())
        .await
        .map_err(not_found::<WebhookId>)?;
    Ok(list.respond(page.map(DeliveryResponse::from)))
}

async fn get_delivery(
    caller: Caller,
    Id(id): Id<WebhookId>,
    Id(delivery): Id<DeliveryId>,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<DeliveryDetailResponse>>, ApiError> {
    subscription_exists(&state, &caller, id).await?;
    let (delivery, attempts) = state
        .ports
        .deliveries
        .subscription_delivery(caller.scope(), id, delivery)
        .await
        .map_err(not_found::<DeliveryId>)?;
    Ok(Reply::new(&DataResponse {
        data: DeliveryDetailResponse::new(delivery, attempts),
    }))
}

async fn redeliver(
    caller: Caller,
    Id(id): Id<WebhookId>,
    Id(delivery): Id<DeliveryId>,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<DeliveryResponse>, 202>, ApiError> {
    subscription_exists(&state, &caller, id).await?;
    let delivery = state
        .ports
        .deliveries
        .redeliver(caller.scope(), id, delivery)
        .await
        .map_err(not_found::<DeliveryId>)?;
    Ok(Reply::new(&DataResponse {
        data: DeliveryResponse::from(delivery),
    }))
}

async fn recover(
    caller: Caller,
    Id(id): Id<WebhookId>,
    Json(request): Json<RecoverRequest>,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<RecoverResponse>, 202>, ApiError> {
    let now = state.clock.now();
    let until = request.until.unwrap_or(now);
    if until <= request.since {
        return Err(ApiError::unprocessable(
            Refusal::OutOfRange,
            "until",
            "until: must be later than since",
        ));
    }
    let oldest = now - state.webhook_ops.retention;
    if request.since < oldest {
        return Err(ApiError::unprocessable(
            Refusal::OutOfRange,
            "since",
            format!(
                "since: the delivery log keeps {} days; give a time after {}",
                state.webhook_ops.retention.num_days(),
                oldest.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        ));
    }
    let requeued = state
        .ports
        .deliveries
        .recover(caller.scope(), id, request.since, until)
        .await
        .map_err(not_found::<WebhookId>)?;
    Ok(Reply::new(&DataResponse {
        data: RecoverResponse { requeued },
    }))
}

/// The event a test asks for: a `ping` unless an event type is given.
fn test_event(request: &TestDeliveryRequest) -> Result<DeliveryEvent, ApiError> {
    match &request.event_type {
        None => Ok(DeliveryEvent::Ping),
        Some(text) => text.parse().map_err(|e: Error| match e {
            Error::Invalid {
                field,
                reason,
                kind,
            } => {
                let reason = format!("{field}: {reason}");
                ApiError::unprocessable(kind, field, reason)
            }
            other => other.into(),
        }),
    }
}

/// A test delivery counts against its customer (all subscriptions together: deleting and
/// creating subscriptions does not multiply them), then its subscription.
async fn test_allowed(
    state: &ApiState,
    scope: posture_domain::CustomerScope,
    id: WebhookId,
) -> Result<(), ApiError> {
    let ops = &state.webhook_ops;
    let customer = RateBucket::CustomerWebhookTests(scope.customer_id());
    let decision = ops.customer_test_limiter.check(&customer).await?;
    debug_assert_eq!(decision.limit, TEST_CUSTOMER_RATE.limit);
    ApiError::over_budget(
        "test deliveries are limited to 20 a minute per customer",
        customer,
        decision,
    )?;
    let subscription = RateBucket::WebhookTest(id);
    let decision = ops.test_limiter.check(&subscription).await?;
    debug_assert_eq!(decision.limit, TEST_RATE.limit);
    ApiError::over_budget(
        "test deliveries are limited to 5 a minute per subscription",
        subscription,
        decision,
    )
}

async fn test_webhook(
    caller: Caller,
    Id(id): Id<WebhookId>,
    Json(request): Json<TestDeliveryRequest>,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<TestDeliveryResponse>>, ApiError> {
    let event = test_event(&request)?;
    let scope = caller.scope();
    let webhooks = &state.ports.webhooks;
    let subscription = webhooks
        .get_subscription(scope, id)
        .await
        .map_err(not_found::<WebhookId>)?;
    test_allowed(&state, scope, id).await?;
    let secrets = webhooks
        .sealed_secrets(scope, id)
        .await
        .map_err(not_found::<WebhookId>)?;
    let (delivery, findings) = test_delivery(scope, id, event, state.clock.now());
    let target = DeliveryTarget {
        url: subscription.webhook_url,
        webhook_type: subscription.webhook_type,
        secret: secrets.current,
        previous_secret: secrets.previous,
    };
    let sent = state
        .webhook_ops
        .sender
        .send_now(&delivery, &target, findings)
        .await?;
    let delivered = matches!(sent.outcome, Outcome::Delivered { .. });
    let recorded = Delivery {
        status: if delivered {
            DeliveryStatus::Delivered
        } else {
            DeliveryStatus::Failed
        },
        ..delivery
    };
    state
        .ports
        .deliveries
        .record_test(scope, &recorded, &sent.body, &sent.attempt)
        .await
        .map_err(not_found::<WebhookId>)?;
    tracing::info!(
        delivery.id = %recorded.id,
        subscription.id = %id,
        event = event.as_str(),
        http.status = sent.attempt.status_code,
        latency_ms = sent.attempt.latency_ms,
        delivered,
        "test delivery"
    );
    Ok(Reply::new(&DataResponse {
        data: TestDeliveryResponse {
            delivery_id: recorded.id.to_string(),
            delivered,
            status_code: sent.attempt.status_code,
            latency_ms: sent.attempt.latency_ms,
            error: sent.attempt.error,
        },
    }))
}
