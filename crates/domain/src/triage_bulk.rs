//! A bulk triage's answer (`POST /findings/triage`): what happened to each finding.

use crate::{finding::Finding, ids::FindingId};

/// What a bulk triage did to one finding.
#[derive(Clone, Debug, PartialEq)]
pub enum BulkOutcome {
    /// Written: the finding as it is now.
    Triaged(Box<Finding>),
    /// No finding of the customer has this id.
    NotFound,
    /// Its `ifMatch` tag is not the finding's now.
    PreconditionFailed,
}

/// A bulk triage's answer: the id of the change (its events' `analyzerPassId`) and, in the
/// order asked, what happened to each finding.
#[derive(Clone, Debug, PartialEq)]
pub struct BulkTriage {
    pub change_id: uuid::Uuid,
    pub outcomes: Vec<(FindingId, BulkOutcome)>,
}
