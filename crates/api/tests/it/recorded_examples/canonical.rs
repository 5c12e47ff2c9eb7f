//! The canonical form of what changes from one run to the next, so that the recorded file is
//! the same every run: ids by order of first appearance (keeping their UUID version), times
//! by rank (their order and precision kept; an expiry by its distance in hours), days by
//! their distance from today, secrets, key prefixes and cursors as fixed values of their
//! real form and length, the receiver's loopback address, latencies.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Duration, NaiveDate, Utc};
use regex::Regex;
use serde_json::{Map, Value, json};

use super::fixture::TENANT;

/// Replaces what changes from run to run with canonical values of the same form.
#[derive(Default)]
pub struct Canonical {
    uuids: HashMap<String, String>,
    times: BTreeSet<String>,
    secrets: HashMap<String, String>,
    receiver: String,
    today: Option<NaiveDate>,
}

impl Canonical {
    /// For a run on `today` whose receiver listened at `receiver`.
    pub fn new(receiver: String, today: NaiveDate) -> Self {
        Self {
            receiver,
            today: Some(today),
            ..Self::default()
        }
    }

    fn uuid(&mut self, text: &str) -> String {
        let next = self.uuids.len() + 1;
        self.uuids
            .entry(text.to_owned())
            .or_insert_with(|| match text.as_bytes().get(14) {
                Some(b'7') => format!("0193f2a0-7c1e-7000-8000-{next:012x}"),
                _ => format!("3b5e8f1c-2a4d-4e6f-9a1b-{next:012x}"),
            })
            .clone()
    }

    fn secret(&mut self, text: &str) -> String {
        const SECRETS: [&str; 3] = [
            "whsec_cG9zdHVyZS13ZWJob29rLXRlc3QtdmVjdG9yLWtleSE=",
            "whsec_YSBzZWNvbmQgc2VjcmV0LCBhZnRlciByb3RhdGlvbiE=",
            "whsec_YW5kIGEgdGhpcmQgc2VjcmV0IG9mIHRoaXMgZmlsZS4=",
        ];
        let next = self.secrets.len() % SECRETS.len();
        self.secrets
            .entry(text.to_owned())
            .or_insert_with(|| SECRETS[next].to_owned())
            .clone()
    }

    /// First pass: notes every time; second pass ([`Self::rewrite`]) maps them by rank.
    pub fn note_times(&mut self, value: &Value) {
        match value {
            Value::String(text)
                if is_time(text)
                    && !FIXED_TIMES.contains(&text.as_str())
                    && !text.ends_with(DAILY) =>
            {
                self.times.insert(text.clone());
            }
            Value::Array(items) => items.iter().for_each(|v| self.note_times(v)),
            Value::Object(map) => map.values().for_each(|v| self.note_times(v)),
            _ => {}
        }
    }

    /// A time of the run: those within an hour of the run's first time by rank (7 s apart,
    /// their order kept), later ones (an expiry, a rotation's overlap) by their distance
    /// from it in whole hours; the precision of each is kept, by its class.
    fn time(&self, text: &str) -> String {
        let parsed: DateTime<Utc> = text.parse().unwrap();
        let times: Vec<DateTime<Utc>> = self.times.iter().map(|t| t.parse().unwrap()).collect();
        let first = times.iter().min().copied().unwrap_or(parsed);
        let base = DateTime::parse_from_rfc3339("2026-11-20T06:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let near = |t: &DateTime<Utc>| *t - first < Duration::hours(1);
        let rank = times.iter().filter(|t| near(t) && **t < parsed).count() as i64;
        let canonical = if near(&parsed) {
            base + Duration::seconds(rank * 7)
        } else {
            base + Duration::hours(((parsed - first).num_minutes() + 30) / 60)
        } + Duration::microseconds((rank * 104_729) % 1_000_000);
        // Written with the fewest of 0, 3, 6 or 9 digits that say it all: a time PostgreSQL
        // kept (microseconds) has 3 when its microseconds end in 000, one run in a thousand.
        // Its class is what the example shows: a whole second (a time the test chose),
        // microseconds, or a clock's nanoseconds.
        let digits = match text
            .split_once('.')
            .map_or(0, |(_, f)| f.trim_end_matches('Z').len())
        {
            3 => 6,
            n => n,
        };
        let format = match digits {
            0 => "%Y-%m-%dT%H:%M:%SZ".to_owned(),
            n => format!("%Y-%m-%dT%H:%M:%S%.{n}fZ"),
        };
        canonical.format(&format).to_string()
    }

    fn day(&self, text: &str) -> String {
        let day: NaiveDate = text.parse().unwrap();
        let today = self.today.unwrap();
        (NaiveDate::from_ymd_opt(2026, 11, 20).unwrap() + (day - today))
            .format("%Y-%m-%d")
            .to_string()
    }

    pub fn rewrite(&mut self, key: &str, value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.rewrite(k, v)))
                    .collect::<Map<_, _>>(),
            ),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.rewrite(key, v)).collect())
            }
            Value::Number(_) if key == "latencyMs" => json!(184),
            Value::String(text) => json!(self.string(key, text)),
            other => other.clone(),
        }
    }

    fn string(&mut self, key: &str, text: &str) -> String {
        static UUID: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
            Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap()
        });
        match key {
            // The events feed's cursor is an event id: canonical like every id.
            "nextCursor" if UUID.is_match(text) => {}
            "nextCursor" => {
                return "AQAAAAGT8qB8HnAAgAAAAAAAAAFleyJrIjpbeyJzIjoiZi03YzFkOWEifV19".into();
            }
            "prefix" => return "svc_k3jx2a".into(),
            "signingSecret" => return self.secret(text),
            _ => {}
        }
        if FIXED_TIMES.contains(&text) {
            return text.to_owned();
        }
        if let Some(day) = text.strip_suffix(DAILY) {
            return format!("{}{DAILY}", self.day(day));
        }
        if is_time(text) {
            return self.time(text);
        }
        if text.len() == 10 && text.parse::<NaiveDate>().is_ok() {
            return self.day(text);
        }
        let text = text.replace(&self.receiver, "https://hooks.example.com");
        // Ids anywhere in a string (an id, or a delivery's id inside a chat message).
        let mut out = String::new();
        let mut last = 0;
        for found in UUID.find_iter(&text) {
            out.push_str(&text[last..found.start()]);
            let id = found.as_str();
            out.push_str(&if id == TENANT || FIXED_IDS.contains(&id) {
                id.to_owned()
            } else {
                self.uuid(id)
            });
            last = found.end();
        }
        out.push_str(&text[last..]);
        out
    }
}

/// Times of the fixture itself (detections), kept as they are.
const FIXED_TIMES: [&str; 2] = ["2026-11-18T05:12:00Z", "2026-11-19T22:17:00Z"];

/// The time of day of the fixture's daily risk scores: their day is relative to today.
const DAILY: &str = "T06:00:00Z";

/// Ids of the fixture itself, kept as they are.
const FIXED_IDS: [&str; 3] = [
    "9f8c2d4e-1b7a-4c3d-8e5f-6a7b8c9d0e1f",
    "4b1e7c2a-9d3f-4e8b-a1c6-2f5d8e9b0a31",
    "c2d9a4f1-6b8e-4a3c-9f7d-1e5b2c8a4d60",
];

fn is_time(text: &str) -> bool {
    text.len() >= 20 && text.ends_with('Z') && text.parse::<DateTime<Utc>>().is_ok()
}

#[test]
fn a_time_written_short_because_its_microseconds_end_in_zeros_is_canonical_alike() {
    let canonical = |second: &str| {
        let today = NaiveDate::from_ymd_opt(2026, 11, 28).unwrap();
        let mut canonical = Canonical::new("http://receiver".into(), today);
        let value = json!({"createdAt": "2026-11-28T10:00:00.123456Z", "lastAttemptAt": second});
        canonical.note_times(&value);
        canonical.rewrite("", &value)
    };
    let short = canonical("2026-11-28T10:00:01.837Z");
    assert_eq!(short, canonical("2026-11-28T10:00:01.837832Z"));
    assert_eq!(short["lastAttemptAt"], "2026-11-20T06:00:07.104729Z");
    let whole = canonical("2026-11-28T10:00:01Z");
    assert_eq!(whole["lastAttemptAt"], "2026-11-20T06:00:07Z");
}
