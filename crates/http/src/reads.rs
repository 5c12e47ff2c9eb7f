//! Where a request's reads go: the primary, or a read replica that keeps up.
//!
//! The gate chooses once per request (`gate::reads_for`) and keeps the choice in the
//! request, so the data version behind the `ETag` and the body come from the same database:
//! a tag never stands for newer data than its body, even when replicas stand at different
//! points. Only the routes declaring `ReadsFrom::Replica` (the `GET`s of the customer's
//! analysed data) may go to a replica; everything that must see its own writes (the webhook
//! routes, the caller's key, readiness, and every authentication, which goes through the
//! key cache and the primary) reads the primary.

use std::{future::Ready, sync::Arc};

use actix_web::{FromRequest, HttpMessage as _, HttpRequest, dev::Payload};
use posture_domain::ports::{
    DataVersionRepository, FindingRepository, IdentityRepository, RecommendationRepository,
    TenantRepository, UprRepository,
};

use crate::error::ApiError;

/// The ports of the read routes, all on one database.
#[derive(Clone)]
pub struct Reads {
    pub tenants: Arc<dyn TenantRepository>,
    pub identities: Arc<dyn IdentityRepository>,
    pub findings: Arc<dyn FindingRepository>,
    pub recommendations: Arc<dyn RecommendationRepository>,
    pub upr: Arc<dyn UprRepository>,
    /// Customers' data versions (the `ETag`s of the read routes).
    pub versions: Arc<dyn DataVersionRepository>,
}

/// The read replicas (the binary wires them in): the reads of the next usable one.
pub trait ReadReplicas: Send + Sync {
    /// `None` when no replica is usable: the primary serves.
    fn pick(&self) -> Option<Reads>;
}

/// A route's reads: the gate's choice for the request.
impl FromRequest for Reads {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(chosen_for(req))
    }
}

/// The reads of `req`, which the gate chose (it does for every authenticated request).
pub(crate) fn chosen_for(req: &HttpRequest) -> Result<Reads, ApiError> {
    req.extensions()
        .get::<Reads>()
        .cloned()
        .ok_or(ApiError::Internal)
}
