//! The skeleton every list shares, written once: the page, the tenant filter resolved to one
//! of the caller's tenants, and the `{data, meta}` response.
//!
//! A list handler takes a [`ListQuery`] (and its own filters with `Input`), calls its port
//! and answers [`ListQuery::respond`]: nothing else. Roll-ups that take only a tenant use
//! [`TenantFilter`]. Which parts of the skeleton a list takes (its page always; its tenant,
//! order and `modifiedSince` if it has them) its type says: `ListQuery<(TenantQuery,
//! PageQuery)>`, in the order the contract lists them.

use std::marker::PhantomData;

use actix_web::{
    FromRequest, HttpRequest,
    dev::Payload,
    http::header::{self, HeaderValue},
    web,
};
use chrono::{DateTime, Utc};
use futures_util::future::LocalBoxFuture;
use posture_domain::{
    CloudTenantId, CustomerScope, Error, Page, PageRequest,
    page::{ListOrder, OrderBy},
    tenant::Tenant,
};
use posture_wire::{
    ListMeta, ListResponse,
    paging::{ModifiedSinceQuery, OrderQuery, PageQuery},
    query::{TenantParam, TenantQuery},
};
use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};

use super::{
    cursor::CursorBinding,
    query::{QueryPart, part, take, take_declared},
};
use crate::{answer::Reply, auth::Caller, error::ApiError, reads::Reads, state::ApiState};

/// An unknown tenant and a tenant of another customer are answered alike.
const NO_SUCH_TENANT: ApiError = ApiError::NotFound(Some("tenant not found"));

/// Resolves the `tenant` filter to one of the caller's tenants: an unknown or foreign tenant
/// is 404 (never 403, so a foreign tenant is not confirmed).
async fn resolve_tenant(
    reads: &Reads,
    scope: CustomerScope,
    param: Option<TenantParam>,
) -> Result<Option<Tenant>, ApiError> {
    match param {
        None => Ok(None),
        Some(TenantParam(id)) => match reads.tenants.find_tenant(scope, id).await {
            Ok(tenant) => Ok(Some(tenant)),
            Err(Error::NotFound) => Err(NO_SUCH_TENANT),
            Err(e) => Err(e.into()),
        },
    }
}

/// The tenant filter of the request, resolved (the route must declare `TenantQuery`).
fn tenant_of(req: &HttpRequest, declared: bool) -> LocalBoxFuture<'static, TenantResult> {
    let param = if declared {
        take::<TenantQuery>(req).map(|q| q.tenant)
    } else {
        Ok(take_declared::<TenantQuery>(req).and_then(|q| q.tenant))
    };
    let reads = crate::reads::chosen_for(req);
    let caller = Caller::extract(req).into_inner();
    Box::pin(async move {
        let param = param?;
        if param.is_none() {
            return Ok(None);
        }
        resolve_tenant(&reads?, caller?.scope(), param).await
    })
}

type TenantResult = Result<Option<Tenant>, ApiError>;

/// The `tenant` filter of a roll-up, resolved to one of the caller's tenants.
pub struct TenantFilter(pub Option<Tenant>);

impl TenantFilter {
    pub fn id(&self) -> Option<CloudTenantId> {
        self.0.as_ref().map(|t| t.cloud_tenant_id)
    }
}

impl FromRequest for TenantFilter {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let tenant = tenant_of(req, true);
        Box::pin(async move { tenant.await.map(TenantFilter) })
    }
}

/// The page of a list, its order and `modifiedSince` (on the lists that can be kept in
/// sync) and its tenant filter (when the route declares one), resolved; and how to link the
/// next page.
pub struct ListQuery<P> {
    page: PageRequest,
    tenant: Option<Tenant>,
    modified_since: Option<DateTime<Utc>>,
    binding: CursorBinding,
    parts: PhantomData<P>,
}

/// A part of the query that [`ListQuery`] reads.
pub trait ListPart: DeserializeOwned + JsonSchema + 'static {
    /// Whether it is the page (`limit`, `offset`, `after`).
    const PAGE: bool = false;
}

impl ListPart for PageQuery {
    const PAGE: bool = true;
}

impl ListPart for TenantQuery {}

impl ListPart for OrderQuery {}

impl ListPart for ModifiedSinceQuery {}

/// The parts of a list's query, in the order the contract lists their parameters: the page
/// once among them (a list without it does not compile).
pub trait ListParts: 'static {
    const PARTS: &'static [QueryPart];
}

macro_rules! list_parts {
    ($($part:ident),+) => {
        impl<$($part: ListPart),+> ListParts for ($($part,)+) {
            const PARTS: &'static [QueryPart] = {
                let pages = 0 $(+ $part::PAGE as usize)+;
                assert!(pages == 1, "a list's query parts hold its page, PageQuery, once");
                &[$(part::<$part>()),+]
            };
        }
    };
}

list_parts!(A);
list_parts!(A, B);
list_parts!(A, B, C);
list_parts!(A, B, C, D);

impl<P> ListQuery<P> {
    pub fn page(&self) -> PageRequest {
        self.page.clone()
    }

    /// The tenant the list is restricted to, if any.
    pub fn tenant(&self) -> Option<&Tenant> {
        self.tenant.as_ref()
    }

    pub fn tenant_id(&self) -> Option<CloudTenantId> {
        self.tenant.as_ref().map(|t| t.cloud_tenant_id)
    }

    /// `modifiedSince`, on the routes that declare it.
    pub fn modified_since(&self) -> Option<DateTime<Utc>> {
        self.modified_since
    }

    /// The list response: `{data, meta}`, and `Link: rel="next"` when more rows follow.
    pub fn respond<T: Serialize>(&self, page: Page<T>) -> Reply<ListResponse<T>> {
        let through = match self.page.order() {
            ListOrder::Modified { .. } => page.synced_through,
            ListOrder::Natural => None,
        };
        let next = page.next.clone().map(|key| self.binding.next(key, through));
        let (cursor, link) = next.unzip();
        let response = list_response(page, &self.page, self.tenant_id(), cursor);
        match link.and_then(|link| HeaderValue::try_from(link).ok()) {
            Some(link) => response.header((header::LINK, link)),
            None => response,
        }
    }
}

/// The order asked for: without an `order`, `modifiedSince` implies the order by
/// modification; `order=default` given with it lists what changed in the list's own order
/// (a view of recent changes, not for syncing: those pages are not bounded by a pass). So
/// `order` declares no default in the contract: no single value means its absence.
fn order_of(order: Option<OrderQuery>, since: Option<&ModifiedSinceQuery>) -> Option<OrderBy> {
    let asked = order.and_then(|o| o.order).map(|o| o.0);
    let since = since.is_some_and(|s| s.modified_since.is_some());
    asked.or(since.then_some(OrderBy::Modified))
}

impl<P: 'static> FromRequest for ListQuery<P> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let parsed = (|| {
            let query = take::<PageQuery>(req)?;
            let page = query.page()?;
            let since = take_declared::<ModifiedSinceQuery>(req);
            let order = order_of(take_declared::<OrderQuery>(req), since.as_ref());
            let state = req
                .app_data::<web::Data<ApiState>>()
                .ok_or(ApiError::Internal)?;
            let caller = Caller::extract(req).into_inner()?;
            let binding =
                CursorBinding::of(req, state.keyring.clone(), caller.scope().customer_id());
            let cursor = query
                .after
                .map(|after| binding.open(&after.0))
                .transpose()?;
            let mut page = page;
            let mut through = None;
            if let Some(cursor) = cursor {
                through = cursor.through;
                page = page.after(cursor.after);
            }
            if order == Some(OrderBy::Modified) {
                page = page.ordered(ListOrder::Modified { through });
            }
            let since = since.and_then(|s| s.modified_since).map(|t| t.0);
            Ok::<_, ApiError>((page, since, binding))
        })();
        let tenant = tenant_of(req, false);
        Box::pin(async move {
            let (page, modified_since, binding) = parsed?;
            Ok(ListQuery {
                page,
                tenant: tenant.await?,
                modified_since,
                binding,
                parts: PhantomData,
            })
        })
    }
}

/// About the size of one serialised list item, rounded up for the largest, a finding with
/// its identity and `triage` object: about 700 bytes (a page of 100 of the demo's was 69,333
/// bytes; the other lists' items are smaller). Too small an estimate grows the buffer once
/// by doubling, copying the page written so far (0.6 % of a list's CPU when it was 640);
/// too large a one costs only untouched memory.
const LIST_ITEM_BYTES: usize = 800;

/// A list response: `{data, meta}`.
fn list_response<T: Serialize>(
    page: Page<T>,
    request: &PageRequest,
    tenant: Option<CloudTenantId>,
    next_cursor: Option<String>,
) -> Reply<ListResponse<T>> {
    // Sized for the page up front: growing a buffer of tens of KiB by doubling copies it
    // several times over.
    let capacity = 256 + page.items.len() * LIST_ITEM_BYTES;
    let list = ListResponse {
        data: page.items,
        meta: ListMeta {
            total: page.total,
            limit: request.limit(),
            offset: request.offset(),
            next_cursor,
            synced_through: page.synced_through,
            tenant: tenant.map(|t| t.to_string()),
        },
    };
    Reply::sized(&list, capacity)
}
