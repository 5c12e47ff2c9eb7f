//! Text from outside (a receiver's answer, an error its network caused, a provider's
//! claims): whatever it holds, what posture keeps of it can be stored by PostgreSQL (no
//! NUL), cannot break a log or terminal line (no control character but, in an excerpt, a
//! line's own breaks and tabs), stays within its bound at a character boundary, and is kept
//! as it is when it needs nothing.

use chrono::Utc;
use posture_domain::{
    delivery::{ATTEMPT_TEXT_BYTES, Attempt, RESPONSE_EXCERPT_BYTES},
    outside::{excerpt, one_line},
};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f} a-zé]{0,2000}",
        prop::collection::vec(any::<u8>(), 0..3000)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]
}

proptest! {
    #[test]
    fn an_excerpt_keeps_only_a_lines_own_breaks_within_its_bound(text in text(), max in 0usize..1500) {
        let kept = excerpt(&text, max);
        prop_assert!(kept.len() <= max);
        prop_assert!(kept.chars().all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t')), "{:?}", kept);
        if text.len() <= max && text.chars().all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t')) {
            prop_assert_eq!(&kept, &text, "nothing to make safe: kept as it is");
        }
    }

    #[test]
    fn one_line_has_no_control_character_at_all(text in text(), max in 0usize..600) {
        let line = one_line(&text, max);
        prop_assert!(line.len() <= max);
        prop_assert!(!line.chars().any(char::is_control), "{:?}", line);
        prop_assert_eq!(one_line(&line, max), line.clone(), "idempotent");
    }

    #[test]
    fn a_storable_attempt_is_storable_and_stays_so(error in text(), detail in text(), body in text()) {
        let attempt = Attempt {
            number: 1,
            started_at: Utc::now(),
            latency_ms: 5,
            status_code: Some(500),
            error: Some(error),
            response_excerpt: Some(body),
            detail: Some(detail),
        }
        .storable();
        for (text, max) in [
            (attempt.error.as_deref(), ATTEMPT_TEXT_BYTES),
            (attempt.detail.as_deref(), ATTEMPT_TEXT_BYTES),
            (attempt.response_excerpt.as_deref(), RESPONSE_EXCERPT_BYTES),
        ] {
            let text = text.unwrap();
            prop_assert!(!text.contains('\0') && text.len() <= max);
        }
        prop_assert_eq!(attempt.storable(), attempt.clone());
    }
}
