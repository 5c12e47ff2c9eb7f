//! `/webhooks`: create, list, read, edit (pause, resume), rotate the secret of, and
//! deactivate subscriptions (`manage:webhooks`).

use actix_web::{HttpRequest, http::header, web};
use posture_domain::{
    Scope, WebhookId,
    secrets::SigningSecret,
    webhook::{MAX_ACTIVE_SUBSCRIPTIONS, Subscription, SubscriptionRequest, secret_context},
    webhook_change::{Rotation, SubscriptionPatchRequest},
};
use posture_wire::{
    DataResponse, ListResponse,
    paging::PageQuery,
    webhooks::{
        CreateWebhookRequest, CreatedWebhookResponse, PatchWebhookRequest, RotateSecretRequest,
        RotatedSecretResponse, WebhookResponse,
    },
};

use super::{Access, Endpoint, HttpMethod, NoContent, Reply, Tagging};
use crate::{
    auth::Caller,
    error::{ApiError, unprocessable},
    handler,
    input::{Id, Json, ListQuery, not_found},
    preconditions::{if_match, subscription_tag, tagged_read},
    state::ApiState,
};

pub static CREATE: Endpoint = Endpoint {
    method: HttpMethod::Post,
    path: "/webhooks",
    operation_id: "createWebhook",
    idempotent: true,
    tag: "webhooks",
    summary: "Create a webhook subscription",
    description: "Subscribes a receiver to new findings of the listed severities. The response \
                  is the only one that shows `signingSecret`. A customer has at most 25 active \
                  subscriptions.",
    body: "The subscription.",
    success: "The subscription, with its signing secret.",
    errors: &[400, 409, 413, 415, 422],
    success_headers: &["Location"],
    ..Endpoint::of(
        handler!(create_webhook),
        Access::Scope(Scope::ManageWebhooks),
    )
};

pub static LIST: Endpoint = Endpoint {
    path: "/webhooks",
    operation_id: "listWebhooks",
    tag: "webhooks",
    summary: "List active webhook subscriptions",
    description: "The customer's active subscriptions, oldest first. Secrets are never shown.",
    success: "A page of subscriptions.",
    success_headers: &["Link"],
    errors: &[400],
    tagging: Tagging::DataVersion,
    ..Endpoint::of(
        handler!(list_webhooks),
        Access::Scope(Scope::ManageWebhooks),
    )
};

pub static GET: Endpoint = Endpoint {
    path: "/webhooks/{id}",
    operation_id: "getWebhook",
    tag: "webhooks",
    summary: "Get a webhook subscription",
    description: "One subscription, without its secret. A deleted subscription, or one of \
                  another customer, is 404. Its `ETag` is strong (`\"v3\"`): send it as \
                  `If-Match` to `PATCH` or rotate it only if it has not changed, or as \
                  `If-None-Match` to get 304 while it has not.",
    success: "The subscription.",
    errors: &[400, 404],
    success_headers: &["ETag"],
    tagging: Tagging::ByRoute,
    ..Endpoint::of(handler!(get_webhook), Access::Scope(Scope::ManageWebhooks))
};

pub static PATCH: Endpoint = Endpoint {
    method: HttpMethod::Patch,
    path: "/webhooks/{id}",
    operation_id: "updateWebhook",
    tag: "webhooks",
    summary: "Edit, pause or resume a webhook subscription",
    description: "A JSON merge patch of `name`, `webhookUrl`, `eventTypes` (checked as at \
                  creation) and `active`: `false` pauses (new deliveries are held up to 72 \
                  hours), `true` resumes (held deliveries are sent) or re-enables a \
                  subscription posture disabled. `webhookType` and the secret cannot change \
                  (422). Send the subscription's `ETag` as `If-Match` to change it only if \
                  nobody else did since you read it (412 otherwise).",
    body: "The fields to change.",
    success: "The subscription as changed.",
    errors: &[400, 404, 412, 413, 415, 422],
    success_headers: &["ETag"],
    if_match: true,
    ..Endpoint::of(
        handler!(patch_webhook),
        Access::Scope(Scope::ManageWebhooks),
    )
};

pub static ROTATE_SECRET: Endpoint = Endpoint {
    method: HttpMethod::Post,
    path: "/webhooks/{id}/rotate-secret",
    operation_id: "rotateWebhookSecret",
    idempotent: true,
    tag: "webhooks",
    summary: "Rotate a subscription's signing secret",
    description: "Makes a new signing secret (shown in this response only). For \
                  `gracePeriodSeconds` (default a day, at most a week) deliveries are signed \
                  with both: `webhook-signature` carries both signatures, new first, and \
                  `X-Service-Signature-256` keeps the previous secret until the overlap ends. \
                  `0` switches at once (a leaked secret). Rotating again while an overlap \
                  lasts is 409 unless `force` is true.",
    body: "The overlap (`{}` for a day).",
    success: "The new secret, and when the previous one stops signing.",
    errors: &[400, 404, 409, 412, 413, 415, 422],
    success_headers: &["ETag"],
    if_match: true,
    ..Endpoint::of(
        handler!(rotate_secret),
        Access::Scope(Scope::ManageWebhooks),
    )
};

pub static DELETE: Endpoint = Endpoint {
    method: HttpMethod::Delete,
    path: "/webhooks/{id}",
    operation_id: "deleteWebhook",
    tag: "webhooks",
    summary: "Deactivate a webhook subscription",
    description: "Deactivates the subscription: it receives nothing more, its pending \
                  deliveries are cancelled, and it is no longer listed or readable (the record \
                  is kept for audit). Deleting it again is 404.",
    success: "Deactivated.",
    errors: &[400, 404],
    ..Endpoint::of(
        handler!(delete_webhook),
        Access::Scope(Scope::ManageWebhooks),
    )
};

async fn create_webhook(
    caller: Caller,
    Json(request): Json<CreateWebhookRequest>,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<CreatedWebhookResponse>, 201>, ApiError> {
    let subscription = SubscriptionRequest::from(request)
        .validate(state.webhook_policy)
        .map_err(unprocessable)?;
    let scope = caller.scope();
    let id = WebhookId::generate();
    let secret = SigningSecret::generate()?;
    let sealed = state
        .keyring
        .seal(&secret, &secret_context(scope.customer_id(), id))?;
    let created = state
        .ports
        .webhooks
        .create_subscription(scope, id, &subscription, &sealed, MAX_ACTIVE_SUBSCRIPTIONS)
        .await?;
    let location = format!("{}/webhooks/{}", super::PREFIX, created.id);
    let data = CreatedWebhookResponse {
        webhook: created.into(),
        signing_secret: secret.expose().to_owned(),
    };
    Ok(Reply::new(&DataResponse { data }).header((header::LOCATION, location)))
}

async fn list_webhooks(
    caller: Caller,
    list: ListQuery<(PageQuery,)>,
    state: web::Data<ApiState>,
) -> Result<Reply<ListResponse<WebhookResponse>>, ApiError> {
    let page = state
        .ports
        .webhooks
        .list_subscriptions(caller.scope(), list.page())
        .await?;
    Ok(list.respond(page.map(WebhookResponse::from)))
}

async fn get_webhook(
    caller: Caller,
    Id(id): Id<WebhookId>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<WebhookResponse>>, ApiError> {
    let subscription = state
        .ports
        .webhooks
        .get_subscription(caller.scope(), id)
        .await
        .map_err(not_found::<WebhookId>)?;
    let version = subscription.version;
    Ok(tagged_read(
        &req,
        version,
        DataResponse {
            data: WebhookResponse::from(subscription),
        },
    ))
}

/// A subscription changed: 200 with its new tag.
fn changed(subscription: Subscription) -> Reply<DataResponse<WebhookResponse>> {
    let tag = subscription_tag(subscription.version);
    let data = WebhookResponse::from(subscription);
    Reply::new(&DataResponse { data }).header((header::ETAG, tag))
}

async fn patch_webhook(
    caller: Caller,
    Id(id): Id<WebhookId>,
    req: HttpRequest,
    Json(request): Json<PatchWebhookRequest>,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<WebhookResponse>>, ApiError> {
    let expected = if_match(&req)?;
    let patch = SubscriptionPatchRequest::from(request)
        .validate(state.webhook_policy)
        .map_err(unprocessable)?;
    let subscription = state
        .ports
        .webhooks
        .update_subscription(caller.scope(), id, &patch, expected.as_deref())
        .await
        .map_err(not_found::<WebhookId>)?;
    Ok(changed(subscription))
}

async fn rotate_secret(
    caller: Caller,
    Id(id): Id<WebhookId>,
    req: HttpRequest,
    Json(request): Json<RotateSecretRequest>,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<RotatedSecretResponse>>, ApiError> {
    let expected = if_match(&req)?;
    let rotation =
        Rotation::new(request.grace_period_seconds, request.force).map_err(unprocessable)?;
    let scope = caller.scope();
    let secret = SigningSecret::generate()?;
    let sealed = state
        .keyring
        .seal(&secret, &secret_context(scope.customer_id(), id))?;
    let previous_expires_at = rotation.previous_expires_at(state.clock.now());
    let subscription = state
        .ports
        .webhooks
        .rotate_secret(
            scope,
            id,
            &sealed,
            previous_expires_at,
            rotation.force,
            expected.as_deref(),
        )
        .await
        .map_err(not_found::<WebhookId>)?;
    tracing::info!(
        subscription.id = %id,
        overlap_secs = rotation.grace.as_secs(),
        forced = rotation.force,
        "webhook signing secret rotated"
    );
    let data = RotatedSecretResponse {
        signing_secret: secret.expose().to_owned(),
        previous_secret_expires_at: subscription.previous_secret_expires_at,
    };
    Ok(Reply::new(&DataResponse { data })
        .header((header::ETAG, subscription_tag(subscription.version))))
}

async fn delete_webhook(
    caller: Caller,
    Id(id): Id<WebhookId>,
    state: web::Data<ApiState>,
) -> Result<NoContent, ApiError> {
    state
        .ports
        .webhooks
        .deactivate_subscription(caller.scope(), id)
        .await
        .map_err(not_found::<WebhookId>)?;
    Ok(NoContent)
}
