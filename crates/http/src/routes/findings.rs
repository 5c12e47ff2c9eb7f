//! `GET /findings` and `GET /findings/{id}`.

use actix_web::{HttpRequest, HttpResponse, web};
use posture_domain::{
    ClosedSet, Error, FindingId, Scope,
    finding::{FindingFilter, FindingStatus, FindingType, Severity},
};
use posture_wire::{DataResponse, ListResponse, findings::FindingResponse};
use schemars::{Schema, SchemaGenerator, json_schema};

use super::{
    Endpoint, HttpMethod, ID, LIMIT, OFFSET, Param, ParamIn, Success, TENANT, list_response,
    schema, tenant_filter,
};
use crate::{auth::Caller, error::ApiError, query::QueryParams, state::ApiState};

fn comma_list<T: ClosedSet>(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "array", "items": { "type": "string", "enum": T::allowed() }, "minItems": 1 })
}

pub static SEVERITY: Param = Param {
    name: "severity",
    location: ParamIn::Query,
    required: false,
    description: "Only these severities: one or more of critical, high, medium, low, \
                  comma-separated (`severity=critical,high`).",
    schema: comma_list::<Severity>,
    comma_list: true,
};

pub static STATUS: Param = Param {
    name: "status",
    location: ParamIn::Query,
    required: false,
    description: "Only these statuses: one or more of open, resolved, suppressed, \
                  comma-separated.",
    schema: comma_list::<FindingStatus>,
    comma_list: true,
};

pub static FINDING_TYPE: Param = Param {
    name: "findingType",
    location: ParamIn::Query,
    required: false,
    description: "Only these finding types, comma-separated (catalogue in docs/api.md).",
    schema: comma_list::<FindingType>,
    comma_list: true,
};

pub static LIST: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/findings",
    scope: Some(Scope::ReadFindings),
    operation_id: "listFindings",
    tag: "findings",
    summary: "List findings",
    description: "Analyzer findings across the customer's connected tenants, most severe \
                  first, then newest detection, then id. Filters combine (AND); values within \
                  one filter are alternatives (OR). `meta.total` counts every match.",
    params: &[&SEVERITY, &STATUS, &FINDING_TYPE, &TENANT, &LIMIT, &OFFSET],
    body: None,
    success: Success::Json {
        status: 200,
        description: "A page of findings.",
        schema: schema::<ListResponse<FindingResponse>>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(list_findings),
};

pub static GET: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/findings/{id}",
    scope: Some(Scope::ReadFindings),
    operation_id: "getFinding",
    tag: "findings",
    summary: "Get a finding",
    description: "One finding of the customer, with the affected identity summarised. An id \
                  of another customer is 404.",
    params: &[&ID],
    body: None,
    success: Success::Json {
        status: 200,
        description: "The finding.",
        schema: schema::<DataResponse<FindingResponse>>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(get_finding),
};

/// The filters of `/findings` (shared with the export), parsed but not yet resolved.
pub(crate) struct FindingParams {
    tenant: Option<String>,
    severities: Vec<Severity>,
    statuses: Vec<FindingStatus>,
    finding_types: Vec<FindingType>,
}

impl FindingParams {
    pub(crate) fn take(query: &mut QueryParams) -> Result<Self, ApiError> {
        Ok(Self {
            tenant: query.take("tenant")?,
            severities: query.list("severity")?,
            statuses: query.list("status")?,
            finding_types: query.list("findingType")?,
        })
    }

    /// Resolves the tenant (404 for an unknown or foreign one).
    pub(crate) async fn resolve(
        self,
        state: &ApiState,
        caller: &Caller,
    ) -> Result<FindingFilter, ApiError> {
        Ok(FindingFilter {
            tenant: tenant_filter(state, caller.scope(), self.tenant).await?,
            severities: self.severities,
            statuses: self.statuses,
            finding_types: self.finding_types,
        })
    }
}

async fn list_findings(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let mut query = QueryParams::parse(req.query_string())?;
    let page = query.page()?;
    let params = FindingParams::take(&mut query)?;
    query.finish()?;
    let filter = params.resolve(&state, &caller).await?;
    let result = state
        .ports
        .findings
        .list_findings(caller.scope(), &filter, page)
        .await?;
    Ok(list_response(
        result.map(FindingResponse::from),
        page,
        filter.tenant,
    ))
}

async fn get_finding(
    req: HttpRequest,
    id: web::Path<String>,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    QueryParams::parse(req.query_string())?.finish()?;
    let id: FindingId = id
        .parse()
        .map_err(|_| ApiError::NotFound(Some("finding not found")))?;
    match state.ports.findings.get_finding(caller.scope(), &id).await {
        Ok(finding) => Ok(HttpResponse::Ok().json(DataResponse {
            data: FindingResponse::from(finding),
        })),
        Err(Error::NotFound) => Err(ApiError::NotFound(Some("finding not found"))),
        Err(e) => Err(e.into()),
    }
}
