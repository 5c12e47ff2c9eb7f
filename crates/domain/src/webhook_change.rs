//! Changing a subscription: a JSON merge patch of its editable fields (`PATCH`), and the
//! rules of rotating its signing secret with an overlap.
//!
//! A patch may change `name`, `webhookUrl`, `eventTypes` (checked as at creation) and
//! `active` (`false` pauses, `true` resumes or re-enables). `webhookType` and the secret are
//! immutable; `null` would remove a required field: both are refused naming the field.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::{
    error::{Error, Refusal},
    webhook::{EventType, TargetPolicy, validate_event_types, validate_name, validate_url},
};

/// Longest overlap of a rotation: a week.
pub const MAX_GRACE_SECS: u64 = 604_800;
/// The overlap when none is given: a day.
pub const DEFAULT_GRACE_SECS: u64 = 86_400;

/// A field of a merge patch: absent, `null`, or a value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PatchField<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<T> PatchField<T> {
    pub fn is_absent(&self) -> bool {
        matches!(self, PatchField::Absent)
    }

    /// The value, if one is given; `null` is refused (`field` is required).
    fn required(self, field: &'static str) -> Result<Option<T>, Error> {
        match self {
            PatchField::Absent => Ok(None),
            PatchField::Null => Err(Error::invalid(
                field,
                "cannot be null (it cannot be removed; leave it out to keep it)",
            )),
            PatchField::Value(value) => Ok(Some(value)),
        }
    }
}

/// What a `PATCH` carries, before validation.
#[derive(Clone, Debug, Default)]
pub struct SubscriptionPatchRequest {
    pub name: PatchField<String>,
    pub webhook_url: PatchField<String>,
    pub event_types: PatchField<Vec<String>>,
    pub active: PatchField<bool>,
    /// The immutable fields the request tried to change, by wire name.
    pub immutable: Vec<&'static str>,
}

/// A validated change: `None` keeps the field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscriptionPatch {
    pub name: Option<String>,
    pub webhook_url: Option<String>,
    pub event_types: Option<Vec<EventType>>,
    /// `false` pauses; `true` resumes a paused or re-enables a disabled subscription.
    pub active: Option<bool>,
}

impl SubscriptionPatchRequest {
    pub fn validate(self, policy: TargetPolicy) -> Result<SubscriptionPatch, Error> {
        if let Some(field) = self.immutable.first() {
            return Err(Error::invalid(
                *field,
                "cannot be changed: create a new subscription (rotate a secret with \
                 POST /webhooks/{id}/rotate-secret)",
            ));
        }
        Ok(SubscriptionPatch {
            name: self.name.required("name")?.map(validate_name).transpose()?,
            webhook_url: self
                .webhook_url
                .required("webhookUrl")?
                .map(|url| validate_url(&url, policy))
                .transpose()?,
            event_types: self
                .event_types
                .required("eventTypes")?
                .map(|types| validate_event_types(&types))
                .transpose()?,
            active: self.active.required("active")?,
        })
    }
}

/// A validated rotation: how long the previous secret keeps signing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// Zero: the previous secret stops at once (a leaked secret).
    pub grace: Duration,
    /// Replace the secret even while an earlier rotation's overlap lasts (its previous
    /// secret is then dropped).
    pub force: bool,
}

impl Rotation {
    pub fn new(grace_secs: Option<u64>, force: Option<bool>) -> Result<Self, Error> {
        let grace = grace_secs.unwrap_or(DEFAULT_GRACE_SECS);
        if grace > MAX_GRACE_SECS {
            return Err(Error::refused(
                Refusal::OutOfRange,
                "gracePeriodSeconds",
                format!("must be 0 to {MAX_GRACE_SECS} (a week)"),
            ));
        }
        Ok(Self {
            grace: Duration::from_secs(grace),
            force: force.unwrap_or(false),
        })
    }

    /// When the previous secret stops signing, for a rotation at `now`; `None` without an
    /// overlap.
    pub fn previous_expires_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        (!self.grace.is_zero())
            .then(|| now + chrono::Duration::from_std(self.grace).unwrap_or(chrono::Duration::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: TargetPolicy = TargetPolicy {
        allow_private: true,
    };

    fn field(e: Error) -> String {
        match e {
            Error::Invalid { field, .. } => field.into_owned(),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn an_empty_patch_changes_nothing() {
        assert_eq!(
            SubscriptionPatchRequest::default().validate(DEV).unwrap(),
            SubscriptionPatch::default()
        );
    }

    #[test]
    fn each_field_is_checked_as_at_creation_and_null_is_refused() {
        let patch = |f: fn(&mut SubscriptionPatchRequest)| {
            let mut request = SubscriptionPatchRequest::default();
            f(&mut request);
            request.validate(TargetPolicy::default())
        };
        assert_eq!(
            field(patch(|r| r.name = PatchField::Value(" ".into())).unwrap_err()),
            "name"
        );
        assert_eq!(
            field(patch(|r| r.name = PatchField::Null).unwrap_err()),
            "name"
        );
        assert_eq!(
            field(
                patch(|r| r.webhook_url = PatchField::Value("http://10.0.0.1/x".into()))
                    .unwrap_err()
            ),
            "webhookUrl"
        );
        assert_eq!(
            field(patch(|r| r.event_types = PatchField::Value(vec![])).unwrap_err()),
            "eventTypes"
        );
        assert_eq!(
            field(patch(|r| r.active = PatchField::Null).unwrap_err()),
            "active"
        );
        assert_eq!(
            field(patch(|r| r.immutable = vec!["webhookType"]).unwrap_err()),
            "webhookType"
        );
        let ok = patch(|r| {
            r.event_types = PatchField::Value(vec!["finding_low".into(), "finding_low".into()]);
            r.active = PatchField::Value(false);
        })
        .unwrap();
        assert_eq!(ok.event_types, Some(vec![EventType::FindingLow]));
        assert_eq!(ok.active, Some(false));
    }

    #[test]
    fn a_rotation_overlaps_a_day_by_default_a_week_at_most_and_zero_switches_at_once() {
        let now = Utc::now();
        let default = Rotation::new(None, None).unwrap();
        assert_eq!(
            default.previous_expires_at(now),
            Some(now + chrono::Duration::days(1))
        );
        assert!(!default.force);
        assert_eq!(
            Rotation::new(Some(0), None)
                .unwrap()
                .previous_expires_at(now),
            None
        );
        assert!(Rotation::new(Some(MAX_GRACE_SECS), Some(true)).is_ok());
        assert_eq!(
            field(Rotation::new(Some(MAX_GRACE_SECS + 1), None).unwrap_err()),
            "gracePeriodSeconds"
        );
    }
}
