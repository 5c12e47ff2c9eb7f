//! What handlers need: the ports (as trait objects) and the HTTP configuration.

use std::sync::Arc;

use posture_domain::ports::{
    ApiKeyRepository, FindingRepository, IdentityRepository, RecommendationRepository,
    TenantRepository, UprRepository,
};

/// The ports the HTTP API calls. The binary wires adapters into them.
#[derive(Clone)]
pub struct Ports {
    pub keys: Arc<dyn ApiKeyRepository>,
    pub tenants: Arc<dyn TenantRepository>,
    pub identities: Arc<dyn IdentityRepository>,
    pub findings: Arc<dyn FindingRepository>,
    pub recommendations: Arc<dyn RecommendationRepository>,
    pub upr: Arc<dyn UprRepository>,
}

/// Shared state of every worker.
#[derive(Clone)]
pub struct ApiState {
    pub ports: Ports,
}

impl ApiState {
    pub fn new(ports: Ports) -> Self {
        Self { ports }
    }
}
