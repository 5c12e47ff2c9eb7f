//! Webhook subscriptions and the rules of creating one.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use regex::Regex;

pub use crate::event_type::EventType;
use crate::{
    error::{Error, Refusal},
    ids::{CustomerId, WebhookId},
};

string_enum! {
    /// How deliveries to the receiver are rendered.
    pub enum WebhookType ("webhookType") {
        /// posture's JSON event envelope, for any JSON receiver.
        Generic = "generic",
        /// A Slack Block Kit message (incoming webhook).
        Slack = "slack",
        /// A Microsoft Teams Adaptive Card message (Workflows webhook).
        Teams = "teams",
    }
}

/// Longest subscription name, in characters.
pub const MAX_NAME_LEN: usize = 100;
/// A subscription name as a regular expression (for the contract): no control character
/// (Unicode `Cc`), and at least one character that is neither a control nor white space
/// (Unicode `White_Space`). [`SubscriptionRequest::validate`] checks the same rule.
pub const NAME_PATTERN: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*\
[^\\u0000-\\u0020\\u007F-\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]\
[^\\u0000-\\u001F\\u007F-\\u009F]*$";
static NAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(NAME_PATTERN).expect("NAME_PATTERN is a regular expression"));

pub use crate::webhook_target::{
    MAX_STORED_URL_LEN, MAX_URL_LEN, TargetPolicy, URL_PATTERN, validate_url,
};

/// Most active subscriptions per customer.
pub const MAX_ACTIVE_SUBSCRIPTIONS: u32 = 25;

/// A webhook subscription (without its secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    pub id: WebhookId,
    pub name: String,
    pub webhook_url: String,
    pub webhook_type: WebhookType,
    pub event_types: Vec<EventType>,
    /// Not deactivated (deleted): a deactivated subscription is kept for audit only.
    pub active: bool,
    /// Whether it receives deliveries now.
    pub status: SubscriptionStatus,
    /// Why the worker disabled it (with [`SubscriptionStatus::Disabled`]).
    pub disabled_reason: Option<DisabledReason>,
    /// While a rotation's overlap lasts: when the previous secret stops signing.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// Bumped by every change: the subscription's `ETag`.
    pub version: u32,
    pub created_at: DateTime<Utc>,
    pub deactivated_at: Option<DateTime<Utc>>,
}

string_enum! {
    /// Whether a subscription receives deliveries.
    pub enum SubscriptionStatus ("status") {
        /// Deliveries are sent.
        Active = "active",
        /// Paused by the customer: new deliveries are held (up to [`MAX_HOLD_HOURS`]) and
        /// sent on resume.
        Paused = "paused",
        /// Disabled by posture (see `disabledReason`): nothing is queued until re-enabled.
        Disabled = "disabled",
    }
}

string_enum! {
    /// Why posture disabled a subscription.
    pub enum DisabledReason ("disabledReason") {
        /// Every attempt failed for days.
        Failing = "failing",
    }
}

/// How long a paused subscription's deliveries are held; older ones are cancelled (a
/// recovery sends them after the resume).
pub const MAX_HOLD_HOURS: i64 = 72;
/// Days of failing attempts after which the worker disables a subscription, by default.
pub const DEFAULT_DISABLE_AFTER_DAYS: u32 = 5;

/// What a subscription's sealed secret is bound to: its customer and id.
pub fn secret_context(customer: CustomerId, id: WebhookId) -> Vec<u8> {
    format!("webhook-secret/{customer}/{id}").into_bytes()
}

/// A validated subscription to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSubscription {
    pub name: String,
    pub webhook_url: String,
    pub webhook_type: WebhookType,
    pub event_types: Vec<EventType>,
}

/// What a create request carries, before validation.
#[derive(Clone, Debug, Default)]
pub struct SubscriptionRequest {
    pub name: String,
    pub webhook_url: String,
    pub webhook_type: String,
    pub event_types: Vec<String>,
}

impl SubscriptionRequest {
    /// Checks every rule; the error names the field.
    pub fn validate(self, policy: TargetPolicy) -> Result<NewSubscription, Error> {
        let name = validate_name(self.name)?;
        let webhook_url = validate_url(&self.webhook_url, policy)?;
        let webhook_type = self.webhook_type.parse::<WebhookType>()?;
        let event_types = validate_event_types(&self.event_types)?;
        Ok(NewSubscription {
            name,
            webhook_url,
            webhook_type,
            event_types,
        })
    }
}

/// A subscription name: 1 to [`MAX_NAME_LEN`] characters, not blank, no control character.
pub fn validate_name(name: String) -> Result<String, Error> {
    let kind = match name.chars().count() > MAX_NAME_LEN {
        true => Refusal::OutOfRange,
        // Empty or blank.
        false => Refusal::Invalid,
    };
    if kind == Refusal::OutOfRange || name.chars().all(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::refused(
            kind,
            "name",
            format!("must be 1 to {MAX_NAME_LEN} characters"),
        ));
    }
    if !NAME_RE.is_match(&name) {
        return Err(Error::invalid(
            "name",
            "must not contain control characters",
        ));
    }
    Ok(name)
}

/// One or more event types; repeated values count once.
pub fn validate_event_types(texts: &[String]) -> Result<Vec<EventType>, Error> {
    if texts.is_empty() {
        return Err(Error::refused(
            Refusal::OutOfRange,
            "eventTypes",
            format!(
                "must list at least one of {}",
                EventType::allowed().join(", ")
            ),
        ));
    }
    let mut event_types = Vec::new();
    for text in texts {
        let event = text.parse::<EventType>()?;
        if !event_types.contains(&event) {
            event_types.push(event);
        }
    }
    Ok(event_types)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: TargetPolicy = TargetPolicy {
        allow_private: false,
    };
    const DEV: TargetPolicy = TargetPolicy {
        allow_private: true,
    };

    fn request() -> SubscriptionRequest {
        SubscriptionRequest {
            name: "SIEM".into(),
            webhook_url: "https://hooks.example.com/posture".into(),
            webhook_type: "generic".into(),
            event_types: vec!["finding_critical".into(), "finding_high".into()],
        }
    }

    fn field(result: Result<NewSubscription, Error>) -> String {
        match result {
            Err(Error::Invalid { field, .. }) => field.into_owned(),
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_request_is_accepted_and_duplicate_event_types_count_once() {
        let mut r = request();
        r.event_types.push("finding_critical".into());
        let new = r.validate(STRICT).unwrap();
        assert_eq!(
            new.event_types,
            vec![EventType::FindingCritical, EventType::FindingHigh]
        );
        assert_eq!(new.webhook_type, WebhookType::Generic);
    }

    #[test]
    fn each_rule_names_its_field() {
        type Change = fn(&mut SubscriptionRequest);
        let cases: Vec<(Change, &str)> = vec![
            (|r| r.name = String::new(), "name"),
            (|r| r.name = "x".repeat(101), "name"),
            (|r| r.name = "a\u{7}b".into(), "name"),
            (|r| r.name = " \u{3000}\u{a0}".into(), "name"),
            (|r| r.name = "\u{85}".into(), "name"),
            (
                |r| r.webhook_url = "https://hooks.example.com/a b".into(),
                "webhookUrl",
            ),
            (
                |r| r.webhook_url = "https://hooks.example.com/é".into(),
                "webhookUrl",
            ),
            (
                |r| r.webhook_url = "https://hooks.example.com/{x}".into(),
                "webhookUrl",
            ),
            (
                |r| r.webhook_url = "https://[::127.0.0.1]/x".into(),
                "webhookUrl",
            ),
            (|r| r.webhook_url = "not a url".into(), "webhookUrl"),
            (|r| r.webhook_url = "/relative".into(), "webhookUrl"),
            (
                |r| r.webhook_url = "http://hooks.example.com/".into(),
                "webhookUrl",
            ),
            (
                |r| r.webhook_url = "ftp://hooks.example.com/".into(),
                "webhookUrl",
            ),
            (
                |r| r.webhook_url = "https://user:pw@hooks.example.com/".into(),
                "webhookUrl",
            ),
            (
                |r| r.webhook_url = format!("https://e.com/{}", "a".repeat(2040)),
                "webhookUrl",
            ),
            (
                |r| r.webhook_url = "https://127.0.0.1/".into(),
                "webhookUrl",
            ),
            (|r| r.webhook_url = "https://[::1]/".into(), "webhookUrl"),
            (
                |r| r.webhook_url = "https://169.254.169.254/latest/meta-data".into(),
                "webhookUrl",
            ),
            (|r| r.webhook_url = "https://10.0.0.8/".into(), "webhookUrl"),
            (
                |r| r.webhook_url = "https://hooks.example.com:22/".into(),
                "webhookUrl",
            ),
            (
                |r| r.webhook_url = "https://hooks.example.com:1023/".into(),
                "webhookUrl",
            ),
            (
                |r| r.webhook_url = "https://localhost:8443/".into(),
                "webhookUrl",
            ),
            (|r| r.webhook_type = "discord".into(), "webhookType"),
            (|r| r.event_types = vec![], "eventTypes"),
            (
                |r| r.event_types = vec!["finding_info".into()],
                "eventTypes",
            ),
        ];
        for (change, expected) in cases {
            let mut r = request();
            change(&mut r);
            assert_eq!(field(r.validate(STRICT)), expected);
        }
    }

    #[test]
    fn normalising_a_url_of_the_pattern_adds_at_most_the_slash_of_an_empty_path() {
        let longest = |prefix: &str| {
            let fill = "a".repeat(MAX_URL_LEN - prefix.len());
            format!("{prefix}{fill}")
        };
        for text in [
            longest("https://e.com?"),
            longest("https://e.com#"),
            longest("https://E.COM:443/A/./b/../%7e/"),
            longest("https://[0:0:0:0:0:0:0:1]/"),
            longest("http://1.2.3.4:080?"),
        ] {
            assert_eq!(text.chars().count(), MAX_URL_LEN);
            let stored = validate_url(&text, DEV).unwrap();
            assert!(stored.len() <= MAX_STORED_URL_LEN, "{stored}");
        }
    }

    #[test]
    fn a_name_with_visible_characters_among_spaces_is_accepted() {
        let mut r = request();
        r.name = " \u{3000}SIEM feed ".into();
        assert!(r.validate(STRICT).is_ok());
    }

    #[test]
    fn the_development_policy_allows_http_and_loopback() {
        let mut r = request();
        r.webhook_url = "http://127.0.0.1:9000/hook".into();
        assert_eq!(
            r.validate(DEV).unwrap().webhook_url,
            "http://127.0.0.1:9000/hook"
        );
    }
}
