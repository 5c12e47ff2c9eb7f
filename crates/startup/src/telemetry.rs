//! Logging, set up once per process: a tracing subscriber writing to stderr (stdout is for
//! command output), as text or JSON.
//!
//! A client's protocol error is not a server error: actix-http ends a connection whose
//! request line or header is malformed, whose head is too large or that sends too slowly
//! with an `ERROR` event "stream error", after logging the cause at `trace` level (target
//! `actix_http::h1::dispatcher`). Those `ERROR` events are counted
//! (`posture_http_protocol_errors_total`) and not written; `POSTURE_LOG=actix_http=trace`
//! shows each cause. Its `ERROR` "Response payload stream error" is dropped too: a body
//! stream fails only when posture aborts an export, and posture logs why itself (at `ERROR`
//! for a database failure, at `INFO` for a client that stalled).

use std::io::IsTerminal as _;

use tracing::{Event, Level, Metadata, field::Field};
use tracing_subscriber::{
    EnvFilter, Layer as _,
    field::Visit,
    filter::FilterExt as _,
    fmt,
    layer::{Context, Filter, SubscriberExt as _},
    util::SubscriberInitExt as _,
};

use crate::args::{LogArgs, LogFormat};

/// Installs the global subscriber. A bad filter falls back to `info` with a warning.
pub fn init(args: &LogArgs) {
    let (filter, bad_filter) = match EnvFilter::try_new(&args.filter) {
        Ok(filter) => (filter, None),
        Err(e) => (EnvFilter::new("info"), Some(e)),
    };
    let layer = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let layer = match args.format {
        LogFormat::Text => layer.fmt_fields(escaped_fields()).boxed(),
        LogFormat::Json => layer
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .boxed(),
    };
    let installed = tracing_subscriber::registry()
        .with(layer.with_filter(filter.and(NotProtocolErrors)))
        .try_init();
    if installed.is_ok()
        && let Some(e) = bad_filter
    {
        tracing::warn!(filter = %args.filter, error = %e, "invalid POSTURE_LOG; using info");
    }
}

/// A text log line's fields with every control character escaped (`\n`, `\u{1b}`): values
/// outsiders control (an identity provider's `sub`, a receiver's error, a key's name) cannot
/// break a line into two and forge the second, nor reach a terminal as an escape sequence.
/// (The JSON format escapes by itself.)
fn escaped_fields() -> impl for<'w> fmt::FormatFields<'w> + Send + Sync + 'static {
    use tracing_subscriber::field::MakeExt as _;
    fmt::format::debug_fn(|writer, field, value| {
        let raw = format!("{value:?}");
        let text = escape_controls(&raw);
        if field.name() == "message" {
            write!(writer, "{text}")
        } else {
            write!(writer, "{field}={text}")
        }
    })
    .delimited(" ")
}

/// `text` with its control characters written as escapes.
fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_debug().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// The targets of actix-http's connection events.
const DISPATCHERS: &[&str] = &["actix_http::h1::dispatcher", "actix_http::h2::dispatcher"];
/// Messages of those targets that say nothing posture has not said better.
const NOISE: &[&str] = &["stream error", "Response payload stream error"];

/// Lets every event through but actix-http's "stream error" (see the module doc).
struct NotProtocolErrors;

impl NotProtocolErrors {
    fn is_protocol_error(event: &Event<'_>) -> bool {
        let meta = event.metadata();
        if !DISPATCHERS.contains(&meta.target()) || *meta.level() != Level::ERROR {
            return false;
        }
        let mut message = Message(false);
        event.record(&mut message);
        message.0
    }
}

/// Whether an event's message is dispatcher noise.
struct Message(bool);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let message = format!("{value:?}");
            self.0 = NOISE.iter().any(|noise| message.starts_with(noise));
        }
    }
}

impl<S> Filter<S> for NotProtocolErrors {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    /// Every level may pass: the `POSTURE_LOG` filter it is combined with sets the bound.
    /// Saying so (rather than nothing) lets the combination keep that filter's bound, so
    /// that the `log` records of libraries below it (tokio-postgres logs every statement at
    /// `debug`) are dropped where they are made instead of reaching the subscriber.
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        if Self::is_protocol_error(event) {
            metrics::counter!("posture_http_protocol_errors_total").increment(1);
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use tracing::level_filters::LevelFilter;
    use tracing_subscriber::Registry;

    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_value_from_outside_cannot_forge_a_text_log_line() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::registry().with(
            fmt::layer()
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .fmt_fields(escaped_fields()),
        );
        let forged = "ada\n2026-11-25T06:00:00Z  INFO posture: key revoked \u{1b}[2J";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(subject = %forged, name = forged, "signed in as {forged}");
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(text.contains("subject=ada\\n2026"), "{text}");
    }

    #[test]
    fn the_combined_filter_keeps_the_bound_of_posture_log() {
        // Without a bound, `log` records of every level (tokio-postgres logs each statement)
        // would be made and then dropped by the subscriber.
        for (directive, bound) in [("warn", LevelFilter::WARN), ("info", LevelFilter::INFO)] {
            let filter = EnvFilter::new(directive).and(NotProtocolErrors);
            assert_eq!(
                Filter::<Registry>::max_level_hint(&filter),
                Some(bound),
                "{directive}"
            );
        }
    }
}
