//! `/Groups`: the handlers every resource shares (`handlers.rs`), and PATCH of the name and
//! members, applied as member changes without reading the members.

use actix_web::{
    HttpRequest, HttpResponse,
    http::{
        StatusCode,
        header::{self, HeaderValue},
    },
    web,
};
use posture_domain::scim::GroupPatch;

use super::{
    ScimError,
    exchange::{answer, base, if_match, patch_body, shape_of},
    kind::{Groups, Kind as _},
    render,
};
use crate::{auth::Caller, state::ApiState};

pub(super) async fn patch(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let id = Groups::id(&id)?;
    let request = patch_body(&req, payload).await?;
    let patch = GroupPatch::from_request(&request)?;
    // The group is answered only when asked for (`attributes`): otherwise 204, which RFC 7644
    // allows, and no read of what may be 100,000 members.
    let shape = shape_of(&req)?;
    let asked = shape.asks();
    let group = state
        .ports
        .scim
        .patch_scim_group(
            caller.scope(),
            caller.key_id(),
            id,
            &patch,
            if_match(&req).as_deref(),
            asked && shape.members(),
        )
        .await?;
    if !asked {
        let mut answer = HttpResponse::NoContent();
        if let Ok(tag) = HeaderValue::from_str(&render::etag(group.meta.version)) {
            answer.insert_header((header::ETAG, tag));
        }
        return Ok(answer.finish());
    }
    let body = shape.apply(render::group(&group, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(group.meta.version)))
}
