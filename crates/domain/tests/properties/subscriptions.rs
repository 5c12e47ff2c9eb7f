//! Subscription requests (docs/webhooks.md): any request is accepted or refused naming one of
//! its four fields, and a name is accepted exactly when the contract's rule holds.

use posture_domain::{
    Error,
    webhook::{MAX_NAME_LEN, SubscriptionRequest, TargetPolicy},
};
use proptest::prelude::*;

use crate::json::hostile_string;

const STRICT: TargetPolicy = TargetPolicy {
    allow_private: false,
};

fn valid() -> SubscriptionRequest {
    SubscriptionRequest {
        name: "SIEM".into(),
        webhook_url: "https://hooks.example.com/posture".into(),
        webhook_type: "generic".into(),
        event_types: vec!["finding_critical".into()],
    }
}

fn one_of_or_any(values: &[&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(values.to_vec()).prop_map(str::to_owned),
        hostile_string(),
    ]
}

proptest! {
    #[test]
    fn any_request_is_accepted_or_refused_naming_a_field(
        name in hostile_string(),
        webhook_url in prop_oneof![Just("https://hooks.example.com/x".to_owned()), hostile_string()],
        webhook_type in one_of_or_any(&["generic", "slack", "teams"]),
        event_types in prop::collection::vec(
            one_of_or_any(&["finding_critical", "finding_high", "finding_medium", "finding_low"]),
            0..6,
        ),
    ) {
        let request = SubscriptionRequest { name, webhook_url, webhook_type, event_types };
        match request.clone().validate(STRICT) {
            Ok(created) => {
                prop_assert_eq!(&created.name, &request.name);
                prop_assert!(!created.event_types.is_empty());
                prop_assert!(created.event_types.len() <= 4, "duplicates are dropped");
            }
            Err(Error::Invalid { field, reason, .. }) => {
                prop_assert!(
                    ["name", "webhookUrl", "webhookType", "eventTypes"].contains(&field.as_ref()),
                    "{field}: {reason}"
                );
            }
            Err(other) => prop_assert!(false, "{other}"),
        }
    }

    #[test]
    fn a_name_is_accepted_exactly_when_it_has_no_control_and_is_not_blank(
        name in prop_oneof![hostile_string(), "\\s{0,3}\\PC{0,3}[\u{80}-\u{a0}\u{2000}-\u{200b}]{0,3}"],
    ) {
        // The rule of NAME_PATTERN, restated: 1 to 100 characters, no control character
        // (Unicode Cc), and at least one that is neither a control nor white space.
        let documented = name.chars().count() <= MAX_NAME_LEN
            && !name.chars().any(char::is_control)
            && name.chars().any(|c| !c.is_control() && !c.is_whitespace());
        let result = SubscriptionRequest { name: name.clone(), ..valid() }.validate(STRICT);
        match result {
            Ok(_) => prop_assert!(documented, "{name:?} was accepted"),
            Err(Error::Invalid { field, .. }) => {
                prop_assert!(!documented, "{name:?} was refused");
                prop_assert_eq!(field, "name");
            }
            Err(other) => prop_assert!(false, "{other}"),
        }
    }
}
