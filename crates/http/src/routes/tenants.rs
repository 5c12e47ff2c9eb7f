//! `GET /tenants`.

use posture_domain::{Page, Scope, page::Start};
use posture_wire::{ListResponse, paging::PageQuery, query::TenantQuery, tenants::TenantResponse};

use super::{Access, Endpoint, ReadsFrom, Reply, Tagging};
use crate::{auth::Caller, error::ApiError, handler, input::ListQuery, reads::Reads};

pub static LIST: Endpoint = Endpoint {
    path: "/tenants",
    operation_id: "listTenants",
    tag: "tenants",
    summary: "List connected tenants",
    description: "The cloud directory tenants connected to the customer, ordered by \
                  cloudTenantId. Gated by `read:identities`.",
    success_headers: &["Link"],
    success: "A page of tenants.",
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(handler!(list_tenants), Access::Scope(Scope::ReadIdentities))
};

async fn list_tenants(
    caller: Caller,
    list: ListQuery<(PageQuery, TenantQuery)>,
    reads: Reads,
) -> Result<Reply<ListResponse<TenantResponse>>, ApiError> {
    let page = match list.tenant() {
        // Filtered to one tenant: that row, already resolved, is the whole list.
        Some(tenant) => Page {
            items: if *list.page().start() == Start::Offset(0) {
                vec![tenant.clone()]
            } else {
                Vec::new()
            },
            total: 1,
            next: None,
            synced_through: None,
        },
        None => {
            reads
                .tenants
                .list_tenants(caller.scope(), list.page())
                .await?
        }
    };
    Ok(list.respond(page.map(TenantResponse::from)))
}
