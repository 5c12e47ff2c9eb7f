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

use crate::{LogArgs, LogFormat};

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
        LogFormat::Text => layer.boxed(),
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
