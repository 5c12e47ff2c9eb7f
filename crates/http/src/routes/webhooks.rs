//! `/webhooks`: create, list, read, edit (pause, resume), rotate the secret of, and
//! deactivate subscriptions (`manage:webhooks`).

use actix_web::{HttpRequest, HttpResponse, http::header, web};
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

use super::{Access, Endpoint, HttpMethod, Success, Tagging};
use crate::{
    auth::Caller,
    error::{ApiError, unprocessable},
    input::{Body, Id, Json, ListQuery, WEBHOOK_ID, not_found, part},
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
    body: Some(Body::json::<CreateWebhookRequest>("The subscription.")),
    success: Success::json::<DataResponse<CreatedWebhookResponse>>(
        201,
        "The subscription, with its signing secret.",
    ),
    errors: &[400, 409, 413, 415, 422],
    success_headers: &["Location"],
    handler: || web::route().to(create_webhook),
    ..Endpoint::open_to(Access::Scope(Scope::ManageWebhooks))
};

pub static LIST: Endpoint = Endpoint {
    path: "/webhooks",
    operation_id: "listWebhooks",
    tag: "webhooks",
    summary: "List active webhook subscriptions",
    description: "The customer's active subscriptions, oldest first. Secrets are never shown.",
    query: &[part::<PageQuery>()],
    success: Success::json::<ListResponse<WebhookResponse>>(200, "A page of subscriptions."),
    success_headers: &["Link"],
    errors: &[400],
    handler: || web::route().to(list_webhooks),
    tagging: Tagging::DataVersion,
    ..Endpoint::open_to(Access::Scope(Scope::ManageWebhooks))
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
    path_params: &[&WEBHOOK_ID],
    success: Success::json::<DataResponse<WebhookResponse>>(200, "The subscription."),
    errors: &[400, 404],
    success_headers: &["ETag"],
    handler: || web::route().to(get_webhook),
    tagging: Tagging::ByRoute,
    ..Endpoint::open_to(Access::Scope(Scope::ManageWebhooks))
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
    path_params: &[&WEBHOOK_ID],
    body: Some(Body::json::<PatchWebhookRequest>("The fields to change.")),
    success: Success::json::<DataResponse<WebhookResponse>>(200, "The subscription as changed."),
    errors: &[400, 404, 412, 413, 415, 422],
    success_headers: &["ETag"],
    if_match: true,
    handler: || web::route().to(patch_webhook),
    ..Endpoint::open_to(Access::Scope(Scope::ManageWebhooks))
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
    path_params: &[&WEBHOOK_ID],
    body: Some(Body::json::<RotateSecretRequest>(
        "The overlap (`{}` for a day).",
    )),
    success: Success::json::<DataResponse<RotatedSecretResponse>>(
        200,
        "The new secret, and when the previous one stops signing.",
    ),
    errors: &[400, 404, 409, 412, 413, 415, 422],
    success_headers: &["ETag"],
    if_match: true,
    handler: || web::route().to(rotate_secret),
    ..Endpoint::open_to(Access::Scope(Scope::ManageWebhooks))
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
    path_params: &[&WEBHOOK_ID],
    success: Success::NoContent {
        description: "Deactivated.",
    },
    errors: &[400, 404],
    handler: || web::route().to(delete_webhook),
    ..Endpoint::open_to(Access::Scope(Scope::ManageWebhooks))
};

async fn create_webhook(
    caller: Caller,
    Json(request): Json<CreateWebhookRequest>,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
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
    Ok(HttpResponse::Created()
        .insert_header((
            header::LOCATION,
            format!("{}/webhooks/{}", super::PREFIX, created.id),
        ))
        .json(DataResponse {
            data: CreatedWebhookResponse {
                webhook: created.into(),
                signing_secret: secret.expose().to_owned(),
            },
        }))
}

async fn list_webhooks(
    caller: Caller,
    list: ListQuery,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
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
) -> Result<HttpResponse, ApiError> {
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
fn changed(subscription: Subscription) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::ETAG, subscription_tag(subscription.version)))
        .json(DataResponse {
            data: WebhookResponse::from(subscription),
        })
}

async fn patch_webhook(
    caller: Caller,
    Id(id): Id<WebhookId>,
    req: HttpRequest,
    Json(request): Json<PatchWebhookRequest>,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
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
) -> Result<HttpResponse, ApiError> {
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
    Ok(HttpResponse::Ok()
        .insert_header((header::ETAG, subscription_tag(subscription.version)))
        .json(DataResponse {
            data: RotatedSecretResponse {
                signing_secret: secret.expose().to_owned(),
                previous_secret_expires_at: subscription.previous_secret_expires_at,
            },
        }))
}

async fn delete_webhook(
    caller: Caller,
    Id(id): Id<WebhookId>,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    state
        .ports
        .webhooks
        .deactivate_subscription(caller.scope(), id)
        .await
        .map_err(not_found::<WebhookId>)?;
    Ok(HttpResponse::NoContent().finish())
}
