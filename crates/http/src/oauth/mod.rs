//! OAuth 2.0 on the API's origin: the token endpoint (`token.rs`) and its RFC 8414 metadata
//! (`metadata.rs`), mounted from one [`Mount`] table beside SCIM's.
//!
//! Clients and their credentials are issued by operators (`posture-api clients`) and the
//! console; the endpoint exchanges a client's credential for an access token that works
//! wherever a key does (`auth.rs`). docs/auth.md is the account for users.

mod issuer;
mod metadata;
mod token;

use actix_web::web;

pub use issuer::{METADATA_PATH, TOKEN_PATH};

use crate::{error::ApiError, mount::Mount};

/// The routes of OAuth, full paths (registered on the application itself).
const TABLE: &[Mount] = &[
    Mount::post(TOKEN_PATH, || web::to(token::token)),
    Mount::get(METADATA_PATH, || web::to(metadata::metadata)),
];

/// OAuth's route templates: what the access log and the metrics name its requests by.
pub fn routes() -> Vec<&'static str> {
    crate::mount::templates(TABLE)
}

/// Registers OAuth's routes on the application (a wrong method: 405 with `Allow`, in the
/// API's `{error, reason}` shape).
pub(crate) fn register(cfg: &mut web::ServiceConfig) {
    for resource in crate::mount::resources(TABLE, |allow| ApiError::MethodNotAllowed { allow }) {
        cfg.service(resource);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_has_no_faults() {
        assert_eq!(crate::mount::faults(super::TABLE), Vec::<String>::new());
    }
}
