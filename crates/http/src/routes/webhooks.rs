//! `/webhooks`: create, list, read and deactivate subscriptions (`manage:webhooks`).

use actix_web::{HttpResponse, http::header, web};
use posture_domain::{
    Error, Scope, WebhookId,
    secrets::SigningSecret,
    webhook::{MAX_ACTIVE_SUBSCRIPTIONS, SubscriptionRequest, secret_context},
};
use posture_wire::{
    DataResponse, ListResponse,
    paging::PageQuery,
    webhooks::{CreateWebhookRequest, CreatedWebhookResponse, WebhookResponse},
};

use super::{Endpoint, HttpMethod, Success};
use crate::{
    auth::Caller,
    error::ApiError,
    input::{Body, Id, Json, ListQuery, WEBHOOK_ID, not_found, part},
    state::ApiState,
};

pub static CREATE: Endpoint = Endpoint {
    method: HttpMethod::Post,
    path: "/webhooks",
    scope: Some(Scope::ManageWebhooks),
    operation_id: "createWebhook",
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
    ..Endpoint::DEFAULT
};

pub static LIST: Endpoint = Endpoint {
    path: "/webhooks",
    scope: Some(Scope::ManageWebhooks),
    operation_id: "listWebhooks",
    tag: "webhooks",
    summary: "List active webhook subscriptions",
    description: "The customer's active subscriptions, oldest first. Secrets are never shown.",
    query: &[part::<PageQuery>()],
    success: Success::json::<ListResponse<WebhookResponse>>(200, "A page of subscriptions."),
    success_headers: &["Link"],
    errors: &[400],
    handler: || web::route().to(list_webhooks),
    ..Endpoint::DEFAULT
};

pub static GET: Endpoint = Endpoint {
    path: "/webhooks/{id}",
    scope: Some(Scope::ManageWebhooks),
    operation_id: "getWebhook",
    tag: "webhooks",
    summary: "Get a webhook subscription",
    description: "One active subscription, without its secret. A deactivated subscription, or \
                  one of another customer, is 404.",
    path_params: &[&WEBHOOK_ID],
    success: Success::json::<DataResponse<WebhookResponse>>(200, "The subscription."),
    errors: &[400, 404],
    handler: || web::route().to(get_webhook),
    ..Endpoint::DEFAULT
};

pub static DELETE: Endpoint = Endpoint {
    method: HttpMethod::Delete,
    path: "/webhooks/{id}",
    scope: Some(Scope::ManageWebhooks),
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
    ..Endpoint::DEFAULT
};

async fn create_webhook(
    caller: Caller,
    Json(request): Json<CreateWebhookRequest>,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let subscription = SubscriptionRequest::from(request)
        .validate(state.webhook_policy)
        .map_err(|e| match e {
            Error::Invalid { field, reason } => {
                ApiError::Unprocessable(format!("{field} {reason}"))
            }
            other => other.into(),
        })?;
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
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let subscription = state
        .ports
        .webhooks
        .get_subscription(caller.scope(), id)
        .await
        .map_err(not_found::<WebhookId>)?;
    Ok(HttpResponse::Ok().json(DataResponse {
        data: WebhookResponse::from(subscription),
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
