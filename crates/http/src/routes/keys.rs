//! `GET /keys/current`: the key a request presents, described to its holder.

use actix_web::web;
use posture_wire::{DataResponse, keys::CurrentKeyResponse};

use super::{Access, Endpoint, Reply};
use crate::{auth::Caller, error::ApiError, handler, state::ApiState};

pub static CURRENT: Endpoint = Endpoint {
    path: "/keys/current",
    operation_id: "getCurrentKey",
    tag: "keys",
    summary: "Describe the calling key",
    description: "The key this request presents: its scopes, its customer, when it expires and \
                  when it was last used. Lets a consumer check a key and its remaining \
                  lifetime before relying on it. Any valid key may call it, whatever its \
                  scopes; the secret is never returned. `lastUsedAt` is recorded at most once \
                  a minute per key, off the request path, so it can lag by a minute. Never \
                  conditional (no `ETag`): `lastUsedAt` changes without the customer's data \
                  changing.",
    success: "The calling key.",
    ..Endpoint::of(handler!(current_key), Access::AnyKey)
};

async fn current_key(
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<CurrentKeyResponse>>, ApiError> {
    let current = state
        .ports
        .keys
        .current_key(caller.scope(), caller.key_id())
        .await
        // Keys are revoked, never deleted: a key gone since the gate saw it is no key.
        .map_err(|e| match e {
            posture_domain::Error::NotFound => ApiError::Unauthorized,
            other => other.into(),
        })?;
    Ok(Reply::new(&DataResponse {
        data: CurrentKeyResponse::from(current),
    }))
}
