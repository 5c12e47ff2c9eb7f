//! `GET /upr`, `/upr/principals` and `/upr/trend`.

use actix_web::{HttpRequest, HttpResponse, web};
use chrono::{Duration, Utc};
use posture_domain::{
    Scope,
    upr::{MAX_SCORE, UprFilter, trend_days},
};
use posture_wire::{
    DataResponse, ListResponse,
    upr::{UprPrincipalResponse, UprRollupResponse, UprTrendMeta, UprTrendResponse},
};
use schemars::{Schema, SchemaGenerator, json_schema};

use super::{
    Endpoint, HttpMethod, LIMIT, OFFSET, Param, ParamIn, Success, TENANT, list_response, schema,
    tenant_filter,
};
use crate::{auth::Caller, error::ApiError, query::QueryParams, state::ApiState};

fn min_score_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "integer", "minimum": 0, "maximum": 100 })
}

fn days_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "integer", "minimum": 1, "default": 30, "x-clamped-maximum": 365,
        "description": "Values above 365 are clamped to 365 (not rejected)."
    })
}

pub static MIN_SCORE: Param = Param {
    name: "minScore",
    location: ParamIn::Query,
    required: false,
    description: "Only principals scoring at least this (0 to 100).",
    schema: min_score_schema,
    comma_list: false,
};

pub static DAYS: Param = Param {
    name: "days",
    location: ParamIn::Query,
    required: false,
    description: "Days covered, today included: default 30; above 365 it is clamped to 365.",
    schema: days_schema,
    comma_list: false,
};

pub static ROLLUP: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/upr",
    scope: Some(Scope::ReadUpr),
    operation_id: "getUprRollup",
    tag: "upr",
    summary: "The UPR rollup",
    description: "Principal count, mean score and counts per band over the latest score of \
                  each principal (bands: critical 80-100, high 60-79, medium 40-59, low 0-39), \
                  overall and per tenant. With `tenant`, restricted to that tenant.",
    params: &[&TENANT],
    body: None,
    success: Success::Json {
        status: 200,
        description: "The rollup.",
        schema: schema::<DataResponse<UprRollupResponse>>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(get_rollup),
};

pub static PRINCIPALS: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/upr/principals",
    scope: Some(Scope::ReadUpr),
    operation_id: "listUprPrincipals",
    tag: "upr",
    summary: "List principals by UPR score",
    description: "The latest score of each principal with its factor contributions, highest \
                  score first (then identity id).",
    params: &[&MIN_SCORE, &TENANT, &LIMIT, &OFFSET],
    body: None,
    success: Success::Json {
        status: 200,
        description: "A page of principals.",
        schema: schema::<ListResponse<UprPrincipalResponse>>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(list_principals),
};

pub static TREND: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/upr/trend",
    scope: Some(Scope::ReadUpr),
    operation_id: "getUprTrend",
    tag: "upr",
    summary: "The UPR trend",
    description: "One point per day that has scores over the last `days` days (UTC, today \
                  included), oldest first: the figures over the scores recorded that day.",
    params: &[&DAYS, &TENANT],
    body: None,
    success: Success::Json {
        status: 200,
        description: "The trend.",
        schema: schema::<UprTrendResponse>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(get_trend),
};

async fn get_rollup(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let mut query = QueryParams::parse(req.query_string())?;
    let tenant = query.take("tenant")?;
    query.finish()?;
    let tenant = tenant_filter(&state, caller.scope(), tenant).await?;
    let rollup = state.ports.upr.upr_rollup(caller.scope(), tenant).await?;
    Ok(HttpResponse::Ok().json(DataResponse {
        data: UprRollupResponse::new(rollup, tenant.map(|t| t.to_string())),
    }))
}

async fn list_principals(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let mut query = QueryParams::parse(req.query_string())?;
    let page = query.page()?;
    let min_score = query.integer("minScore")?;
    let tenant = query.take("tenant")?;
    query.finish()?;
    if min_score.is_some_and(|m| m > u64::from(MAX_SCORE)) {
        return Err(ApiError::invalid(format!(
            "minScore must be 0 to {MAX_SCORE}"
        )));
    }
    let tenant = tenant_filter(&state, caller.scope(), tenant).await?;
    let filter = UprFilter {
        tenant,
        min_score: min_score.map(|m| m as u8),
    };
    let result = state
        .ports
        .upr
        .list_upr_principals(caller.scope(), &filter, page)
        .await?;
    Ok(list_response(
        result.map(UprPrincipalResponse::from),
        page,
        tenant,
    ))
}

async fn get_trend(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let mut query = QueryParams::parse(req.query_string())?;
    let days = query.integer("days")?;
    let tenant = query.take("tenant")?;
    query.finish()?;
    let days = trend_days(days).map_err(|_| ApiError::invalid("days must be 1 or more"))?;
    let tenant = tenant_filter(&state, caller.scope(), tenant).await?;
    let points = state
        .ports
        .upr
        .upr_trend(caller.scope(), tenant, days)
        .await?;
    let today = Utc::now().date_naive();
    Ok(HttpResponse::Ok().json(UprTrendResponse {
        data: points.into_iter().map(Into::into).collect(),
        meta: UprTrendMeta {
            days,
            from: today - Duration::days(i64::from(days) - 1),
            to: today,
            tenant: tenant.map(|t| t.to_string()),
        },
    }))
}
