//! `/Users`: the handlers every resource shares (`handlers.rs`), and PATCH as Entra ID
//! updates, deactivates and reactivates: applied to the user as read, written whole under
//! the version read.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use posture_domain::{Error, scim::apply_user_patch};

use super::{
    ScimError,
    exchange::{answer, base, if_match, patch_body, shape_of},
    kind::{Kind as _, Users},
    render,
};
use crate::{auth::Caller, error::ApiError, state::ApiState};

/// Times a PATCH is tried when another write came between its read and its write.
const PATCH_ATTEMPTS: usize = 3;

pub(super) async fn patch(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let id = Users::id(&id)?;
    let request = patch_body(&req, payload).await?;
    let wanted = if_match(&req);
    let scim = &state.ports.scim;
    let mut attempt = 0;
    let user = loop {
        attempt += 1;
        let mut user = scim
            .scim_user(caller.scope(), id)
            .await?
            .ok_or_else(ScimError::not_found)?;
        // With `If-Match`, the version read must be one it names.
        if wanted
            .as_ref()
            .is_some_and(|wanted| !wanted.contains(&user.meta.version))
        {
            return Err(Error::PreconditionFailed(
                "the resource changed since that version".to_owned(),
            )
            .into());
        }
        apply_user_patch(&mut user.attributes, &request)?;
        // The write holds only if nothing came between the read and itself: else read again.
        match scim
            .replace_scim_user(
                caller.scope(),
                caller.key_id(),
                id,
                &user.attributes,
                Some(&[user.meta.version]),
            )
            .await
        {
            Err(Error::PreconditionFailed(_)) if attempt < PATCH_ATTEMPTS => {}
            // Busy, not 412: the version the client named (if any) still held when read.
            Err(Error::PreconditionFailed(_)) => {
                return Err(
                    ApiError::Busy("the user is being changed by other requests; retry").into(),
                );
            }
            outcome => break outcome?,
        }
    };
    let body = shape_of(&req)?.apply(render::user(&user, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(user.meta.version)))
}
