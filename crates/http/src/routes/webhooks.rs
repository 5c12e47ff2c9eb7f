//! `/webhooks`: create, list, read and deactivate subscriptions (`manage:webhooks`).

use actix_web::{HttpRequest, HttpResponse, http::header, web};
use posture_domain::{
    Error, Scope, WebhookId,
    secrets::SigningSecret,
    webhook::{MAX_ACTIVE_SUBSCRIPTIONS, SubscriptionRequest, secret_context},
};
use posture_wire::{
    DataResponse, ListResponse,
    webhooks::{CreateWebhookRequest, CreatedWebhookResponse, WebhookResponse},
};
use schemars::{Schema, SchemaGenerator, json_schema};

use super::{
    Body, Endpoint, HttpMethod, LIMIT, OFFSET, Param, ParamIn, Success, list_response, schema,
};
use crate::{
    auth::Caller, body::json_object, error::ApiError, query::QueryParams, state::ApiState,
};

fn webhook_id_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "uuid" })
}

pub static WEBHOOK_ID: Param = Param {
    name: "id",
    location: ParamIn::Path,
    required: true,
    description: "The subscription's id.",
    schema: webhook_id_schema,
    comma_list: false,
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
    params: &[],
    body: Some(Body {
        description: "The subscription.",
        schema: schema::<CreateWebhookRequest>,
    }),
    success: Success::Json {
        status: 201,
        description: "The subscription, with its signing secret.",
        schema: schema::<DataResponse<CreatedWebhookResponse>>,
    },
    errors: &[400, 409, 413, 415, 422],
    success_headers: &["Location"],
    handler: || web::route().to(create_webhook),
};

pub static LIST: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/webhooks",
    scope: Some(Scope::ManageWebhooks),
    operation_id: "listWebhooks",
    tag: "webhooks",
    summary: "List active webhook subscriptions",
    description: "The customer's active subscriptions, oldest first. Secrets are never shown.",
    params: &[&LIMIT, &OFFSET],
    body: None,
    success: Success::Json {
        status: 200,
        description: "A page of subscriptions.",
        schema: schema::<ListResponse<WebhookResponse>>,
    },
    errors: &[400],
    success_headers: &[],
    handler: || web::route().to(list_webhooks),
};

pub static GET: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/webhooks/{id}",
    scope: Some(Scope::ManageWebhooks),
    operation_id: "getWebhook",
    tag: "webhooks",
    summary: "Get a webhook subscription",
    description: "One active subscription, without its secret. A deactivated subscription, or \
                  one of another customer, is 404.",
    params: &[&WEBHOOK_ID],
    body: None,
    success: Success::Json {
        status: 200,
        description: "The subscription.",
        schema: schema::<DataResponse<WebhookResponse>>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(get_webhook),
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
    params: &[&WEBHOOK_ID],
    body: None,
    success: Success::NoContent {
        description: "Deactivated.",
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(delete_webhook),
};

const NOT_FOUND: ApiError = ApiError::NotFound(Some("webhook subscription not found"));

fn webhook_id(raw: &str) -> Result<WebhookId, ApiError> {
    raw.parse().map_err(|_| NOT_FOUND)
}

fn not_found(e: Error) -> ApiError {
    match e {
        Error::NotFound => NOT_FOUND,
        other => other.into(),
    }
}

async fn create_webhook(
    req: HttpRequest,
    payload: web::Payload,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    QueryParams::parse(req.query_string())?.finish()?;
    let mut fields = json_object(&req, payload).await?;
    let request = SubscriptionRequest {
        name: fields.string("name")?,
        webhook_url: fields.string("webhookUrl")?,
        webhook_type: fields.string("webhookType")?,
        event_types: fields.strings("eventTypes")?,
    };
    fields.finish(&["name", "webhookUrl", "webhookType", "eventTypes"])?;
    let subscription = request
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
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let mut query = QueryParams::parse(req.query_string())?;
    let page = query.page()?;
    query.finish()?;
    let result = state
        .ports
        .webhooks
        .list_subscriptions(caller.scope(), page)
        .await?;
    Ok(list_response(result.map(WebhookResponse::from), page, None))
}

async fn get_webhook(
    req: HttpRequest,
    id: web::Path<String>,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    QueryParams::parse(req.query_string())?.finish()?;
    let id = webhook_id(&id)?;
    let subscription = state
        .ports
        .webhooks
        .get_subscription(caller.scope(), id)
        .await
        .map_err(not_found)?;
    Ok(HttpResponse::Ok().json(DataResponse {
        data: WebhookResponse::from(subscription),
    }))
}

async fn delete_webhook(
    req: HttpRequest,
    id: web::Path<String>,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    QueryParams::parse(req.query_string())?.finish()?;
    let id = webhook_id(&id)?;
    state
        .ports
        .webhooks
        .deactivate_subscription(caller.scope(), id)
        .await
        .map_err(not_found)?;
    Ok(HttpResponse::NoContent().finish())
}
