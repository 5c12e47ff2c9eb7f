//! Query-string inputs: the value types of query parameters, and the parts every list shares
//! (`limit`, `offset`, `tenant`).
//!
//! A route's query is one or more structs whose fields are its parameters (a field's doc
//! comment is the parameter's description). Each value type states once how its text is
//! parsed and what the contract says of it, with bounds and defaults taken from the domain's
//! constants, so the parser and the OpenAPI document cannot disagree. A parse error is a
//! phrase that follows the parameter's name ("must be an integer from 0 to 100, got \"x\""):
//! the HTTP layer puts the name in front.

use std::{borrow::Cow, marker::PhantomData};

use posture_domain::{
    ClosedSet, CloudTenantId,
    audit::AuditAction,
    finding::{FindingStatus, FindingType, MAX_FINDING_TYPE_LEN, Severity},
    page::{DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET},
    triage::TriageState,
    upr::{DEFAULT_TREND_DAYS, MAX_SCORE, MAX_TREND_DAYS},
    webhook::EventType,
};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, de::Error as _};

/// Why a parameter's text is refused: a phrase that follows the parameter's name.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(String);

/// The rule of an integer parameter.
pub trait IntegerRule: 'static {
    /// Names the rule's schema (it is always inlined).
    const NAME: &'static str;
    /// The smallest value accepted.
    const MIN: u64;
    /// The largest value accepted; larger ones are refused.
    const MAX: u64;
    /// The value when the parameter is not given, if there is one.
    const DEFAULT: Option<u64> = None;
    /// Values above this count as this (they are accepted, not refused).
    const CLAMPED_TO: Option<u64> = None;
}

/// An integer parameter that keeps its rule `R`.
#[derive(Debug, PartialEq, Eq)]
pub struct Integer<R>(u64, PhantomData<fn() -> R>);

impl<R> Clone for Integer<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Integer<R> {}

impl<R: IntegerRule> Integer<R> {
    /// The value as given (before any clamping).
    pub fn get(self) -> u64 {
        self.0
    }

    /// What a value must be, as a phrase.
    fn rule() -> String {
        match R::CLAMPED_TO {
            Some(clamp) => format!(
                "an integer from {} to {} (above {clamp} it counts as {clamp})",
                R::MIN,
                R::MAX
            ),
            None => format!("an integer from {} to {}", R::MIN, R::MAX),
        }
    }

    /// Parses the text of the parameter.
    pub fn parse(text: &str) -> Result<Self, Refused> {
        text.parse::<u64>()
            .ok()
            .filter(|v| (R::MIN..=R::MAX).contains(v))
            .map(|v| Self(v, PhantomData))
            .ok_or_else(|| Refused(format!("must be {}, got {text:?}", Self::rule())))
    }
}

impl<'de, R: IntegerRule> Deserialize<'de> for Integer<R> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        Self::parse(&text).map_err(D::Error::custom)
    }
}

impl<R: IntegerRule> JsonSchema for Integer<R> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed(R::NAME)
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let mut schema = json_schema!({ "type": "integer", "minimum": R::MIN, "maximum": R::MAX });
        if let Some(default) = R::DEFAULT {
            schema.insert("default".into(), default.into());
        }
        if let Some(clamp) = R::CLAMPED_TO {
            schema.insert("x-clamped-maximum".into(), clamp.into());
        }
        schema
    }
}

/// `limit`: 1 or more, default 100, clamped to 500 (never refused for being large).
#[derive(Debug)]
pub struct LimitRule;

impl IntegerRule for LimitRule {
    const NAME: &'static str = "Limit";
    const MIN: u64 = 1;
    const MAX: u64 = u64::MAX;
    const DEFAULT: Option<u64> = Some(DEFAULT_LIMIT as u64);
    const CLAMPED_TO: Option<u64> = Some(MAX_LIMIT as u64);
}

/// `offset`: zero-based, inside PostgreSQL's `bigint`.
#[derive(Debug)]
pub struct OffsetRule;

impl IntegerRule for OffsetRule {
    const NAME: &'static str = "Offset";
    const MIN: u64 = 0;
    const MAX: u64 = MAX_OFFSET;
    const DEFAULT: Option<u64> = Some(0);
}

/// `days` of the UPR trend: 1 or more, default 30, clamped to 365.
#[derive(Debug)]
pub struct TrendDaysRule;

impl IntegerRule for TrendDaysRule {
    const NAME: &'static str = "TrendDays";
    const MIN: u64 = 1;
    const MAX: u64 = u64::MAX;
    const DEFAULT: Option<u64> = Some(DEFAULT_TREND_DAYS as u64);
    const CLAMPED_TO: Option<u64> = Some(MAX_TREND_DAYS as u64);
}

/// A UPR score bound: 0 to 100.
#[derive(Debug)]
pub struct ScoreRule;

impl IntegerRule for ScoreRule {
    const NAME: &'static str = "Score";
    const MIN: u64 = 0;
    const MAX: u64 = MAX_SCORE as u64;
}

/// `wait` of the events feed: seconds to wait for the next events, 0 (the default: answer
/// at once) to 30 (larger is clamped to 30, never refused).
#[derive(Debug)]
pub struct WaitRule;

impl IntegerRule for WaitRule {
    const NAME: &'static str = "Wait";
    const MIN: u64 = 0;
    const MAX: u64 = u64::MAX;
    const DEFAULT: Option<u64> = Some(0);
    const CLAMPED_TO: Option<u64> = Some(posture_domain::event::MAX_WAIT.as_secs());
}

pub type Limit = Integer<LimitRule>;
pub type Wait = Integer<WaitRule>;
pub type Offset = Integer<OffsetRule>;
pub type TrendDays = Integer<TrendDaysRule>;
pub type Score = Integer<ScoreRule>;

/// One value of a closed set (`format=cef`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneOf<T>(pub T);

fn unknown_value<T: ClosedSet>(text: &str) -> Refused {
    let allowed = T::allowed().join(", ");
    Refused(if text.is_empty() {
        format!("has an empty value; allowed values: {allowed}")
    } else {
        format!("has an unknown value {text:?}; allowed values: {allowed}")
    })
}

impl<'de, T: ClosedSet> Deserialize<'de> for OneOf<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        text.parse::<T>()
            .map(OneOf)
            .map_err(|_| D::Error::custom(unknown_value::<T>(&text)))
    }
}

impl<T: ClosedSet> JsonSchema for OneOf<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Owned(format!("OneOf_{}", T::WHAT))
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        crate::inline_closed_set::<T>()
    }
}

/// A value of a comma-separated list parameter: how one item parses and what the contract
/// says of it.
pub trait ListItem: Sized + PartialEq + 'static {
    /// Names the item type in schema names.
    const NAME: &'static str;
    /// Parses one (non-empty, trimmed) item; the reason follows the parameter's name.
    fn parse_item(text: &str) -> Result<Self, Refused>;
    /// The schema of one item.
    fn item_schema() -> Schema;
}

/// [`ListItem`] for a closed set: one of its values.
macro_rules! closed_set_item {
    ($($t:ty),+) => {$(
        impl ListItem for $t {
            const NAME: &'static str = <$t as ClosedSet>::WHAT;

            fn parse_item(text: &str) -> Result<Self, Refused> {
                text.parse::<$t>().map_err(|_| unknown_value::<$t>(text))
            }

            fn item_schema() -> Schema {
                crate::inline_closed_set::<$t>()
            }
        }
    )+};
}

closed_set_item!(Severity, FindingStatus, EventType, TriageState, AuditAction);

impl ListItem for FindingType {
    const NAME: &'static str = "findingType";

    fn parse_item(text: &str) -> Result<Self, Refused> {
        text.parse::<FindingType>().map_err(|_| {
            Refused(format!(
                "has {text:?}, which is not a finding type (lower snake case, starting with a \
                 letter, at most {MAX_FINDING_TYPE_LEN} characters)"
            ))
        })
    }

    fn item_schema() -> Schema {
        crate::finding_type(&mut SchemaGenerator::default())
    }
}

/// Most items of a list parameter (repeats included): bounds the query it becomes.
pub const MAX_FILTER_VALUES: usize = 32;

/// Several values, comma-separated (`severity=critical,high`), at most
/// [`MAX_FILTER_VALUES`] items; spaces (only U+0020) around an item are ignored; a value
/// given twice counts once. Not given: empty (no filter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommaList<T>(pub Vec<T>);

impl<T> Default for CommaList<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T: ListItem> CommaList<T> {
    /// Parses the text of the parameter.
    pub fn parse(text: &str) -> Result<Self, Refused> {
        let mut values = Vec::new();
        for (n, item) in text.split(',').enumerate() {
            if n == MAX_FILTER_VALUES {
                return Err(Refused(format!("has more than {MAX_FILTER_VALUES} items")));
            }
            let value = T::parse_item(item.trim_matches(' '))?;
            if !values.contains(&value) {
                values.push(value);
            }
        }
        Ok(Self(values))
    }
}

impl<'de, T: ListItem> Deserialize<'de> for CommaList<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        Self::parse(&text).map_err(D::Error::custom)
    }
}

impl<T: ListItem> JsonSchema for CommaList<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Owned(format!("CommaList_{}", T::NAME))
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "array",
            "items": T::item_schema(),
            "minItems": 1,
            "maxItems": MAX_FILTER_VALUES
        })
    }
}

/// The `tenant` filter as given: a GUID. Text that is no GUID cannot name any tenant and is a
/// 400 naming the rule (it confirms nothing); a well-formed GUID that is unknown, or another
/// customer's, is answered alike later (404).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TenantParam(pub CloudTenantId);

impl<'de> Deserialize<'de> for TenantParam {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        if text.is_empty() {
            return Err(D::Error::custom("must not be empty"));
        }
        text.parse().map(TenantParam).map_err(|_| {
            D::Error::custom("must be a tenant's cloudTenantId, a GUID such as 3f2504e0-4f89-41d3-9a0c-0305e82c3301")
        })
    }
}

impl JsonSchema for TenantParam {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("TenantParam")
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        crate::tenant_id(generator)
    }
}

/// `tenant`: restricts a list or roll-up to one connected tenant.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct TenantQuery {
    /// Restrict to one connected tenant (its cloudTenantId, a GUID: other text is 400). An
    /// unknown tenant, or one of another customer, is 404. `meta.tenant` echoes the resolved
    /// id.
    pub tenant: Option<TenantParam>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_integer_is_accepted_at_its_bounds_and_refused_past_them() {
        assert_eq!(Score::parse("0").unwrap().get(), 0);
        assert_eq!(Score::parse("100").unwrap().get(), 100);
        assert!(Score::parse("101").is_err());
        assert!(Score::parse("-1").is_err());
        assert_eq!(
            Offset::parse(&MAX_OFFSET.to_string()).unwrap().get(),
            MAX_OFFSET
        );
        assert!(Offset::parse(&(MAX_OFFSET + 1).to_string()).is_err());
        assert!(Limit::parse("0").is_err());
        assert_eq!(Limit::parse(&u64::MAX.to_string()).unwrap().get(), u64::MAX);
        assert!(Limit::parse("18446744073709551616").is_err());
    }

    #[test]
    fn an_integer_error_states_the_rule() {
        let reason = Limit::parse("x").unwrap_err().to_string();
        assert!(reason.contains("above 500 it counts as 500"), "{reason}");
        assert!(reason.ends_with("got \"x\""), "{reason}");
    }

    #[test]
    fn a_comma_list_counts_repeated_values_once_and_names_the_bad_item() {
        assert_eq!(
            CommaList::<Severity>::parse("high, critical,high")
                .unwrap()
                .0,
            vec![Severity::High, Severity::Critical]
        );
        let reason = CommaList::<Severity>::parse("high,urgent").unwrap_err();
        assert!(reason.to_string().contains("\"urgent\""), "{reason}");
        let reason = CommaList::<Severity>::parse("high,").unwrap_err();
        assert!(reason.to_string().contains("empty value"), "{reason}");
        assert!(CommaList::<FindingType>::parse("oauth_consent_grant,mfa_not_enforced").is_ok());
        let reason = CommaList::<FindingType>::parse("Not-A-Type").unwrap_err();
        assert!(
            reason.to_string().contains("not a finding type"),
            "{reason}"
        );
        let many: Vec<String> = (0..=MAX_FILTER_VALUES).map(|i| format!("t{i}")).collect();
        let reason = CommaList::<FindingType>::parse(&many.join(",")).unwrap_err();
        assert!(
            reason.to_string().contains("more than 32 items"),
            "{reason}"
        );
        let repeated = vec!["high"; MAX_FILTER_VALUES].join(",");
        assert_eq!(
            CommaList::<Severity>::parse(&repeated).unwrap().0,
            vec![Severity::High]
        );
    }

    #[test]
    fn the_schema_of_an_integer_states_its_bounds_default_and_clamp() {
        let schema = Limit::json_schema(&mut SchemaGenerator::default());
        assert_eq!(schema.get("minimum"), Some(&1.into()));
        assert_eq!(schema.get("maximum"), Some(&u64::MAX.into()));
        assert_eq!(schema.get("default"), Some(&100.into()));
        assert_eq!(schema.get("x-clamped-maximum"), Some(&500.into()));
    }
}
