//! `GET /upr`, `/upr/principals` and `/upr/trend`.

use actix_web::web;
use chrono::Duration;
use posture_domain::{Scope, upr::UprFilter};
use posture_wire::{
    DataResponse, ListResponse,
    paging::PageQuery,
    query::TenantQuery,
    upr::{
        TrendQuery, UprPrincipalResponse, UprPrincipalsQuery, UprRollupResponse, UprTrendMeta,
        UprTrendResponse,
    },
};

use super::{Access, Endpoint, ReadsFrom, Reply, Tagging};
use crate::{
    auth::Caller,
    error::ApiError,
    handler,
    input::{Input, ListQuery, TenantFilter},
    reads::Reads,
    state::ApiState,
};

pub static ROLLUP: Endpoint = Endpoint {
    path: "/upr",
    operation_id: "getUprRollup",
    tag: "upr",
    summary: "The UPR rollup",
    description: "Principal count, mean score and counts per band over the latest score of \
                  each principal (bands: critical 80-100, high 60-79, medium 40-59, low 0-39), \
                  overall and per tenant. With `tenant`, restricted to that tenant.",
    success: "The rollup.",
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(handler!(get_rollup), Access::Scope(Scope::ReadUpr))
};

pub static PRINCIPALS: Endpoint = Endpoint {
    path: "/upr/principals",
    operation_id: "listUprPrincipals",
    tag: "upr",
    summary: "List principals by UPR score",
    description: "The latest score of each principal with its factor contributions, highest \
                  score first (then identity id).",
    success: "A page of principals.",
    success_headers: &["Link"],
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(handler!(list_principals), Access::Scope(Scope::ReadUpr))
};

pub static TREND: Endpoint = Endpoint {
    path: "/upr/trend",
    operation_id: "getUprTrend",
    tag: "upr",
    summary: "The UPR trend",
    description: "One point per day that has scores over the last `days` days (UTC, today \
                  included), oldest first: the figures over the scores recorded that day.",
    success: "The trend.",
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(handler!(get_trend), Access::Scope(Scope::ReadUpr))
};

async fn get_rollup(
    caller: Caller,
    tenant: TenantFilter,
    reads: Reads,
) -> Result<Reply<DataResponse<UprRollupResponse>>, ApiError> {
    let rollup = reads.upr.upr_rollup(caller.scope(), tenant.id()).await?;
    Ok(Reply::new(&DataResponse {
        data: UprRollupResponse::new(rollup, tenant.id().map(|t| t.to_string())),
    }))
}

async fn list_principals(
    caller: Caller,
    Input(query): Input<UprPrincipalsQuery>,
    list: ListQuery<(TenantQuery, PageQuery)>,
    reads: Reads,
) -> Result<Reply<ListResponse<UprPrincipalResponse>>, ApiError> {
    let filter = UprFilter {
        tenant: list.tenant_id(),
        min_score: query.min_score(),
    };
    let page = reads
        .upr
        .list_upr_principals(caller.scope(), &filter, list.page())
        .await?;
    Ok(list.respond(page.map(UprPrincipalResponse::from)))
}

async fn get_trend(
    caller: Caller,
    Input(query): Input<TrendQuery>,
    tenant: TenantFilter,
    reads: Reads,
    state: web::Data<ApiState>,
) -> Result<Reply<UprTrendResponse>, ApiError> {
    let days = query.days()?;
    let points = reads
        .upr
        .upr_trend(caller.scope(), tenant.id(), days)
        .await?;
    let today = state.clock.now().date_naive();
    Ok(Reply::new(&UprTrendResponse {
        data: points.into_iter().map(Into::into).collect(),
        meta: UprTrendMeta {
            days,
            from: today - Duration::days(i64::from(days) - 1),
            to: today,
            tenant: tenant.id().map(|t| t.to_string()),
        },
    }))
}
