//! Logging, set up once per process: a tracing subscriber writing to stderr (stdout is for
//! command output), as text or JSON.

use std::io::IsTerminal as _;

use tracing_subscriber::{EnvFilter, fmt};

use crate::{LogArgs, LogFormat};

/// Installs the global subscriber. A bad filter falls back to `info` with a warning.
pub fn init(args: &LogArgs) {
    let (filter, bad_filter) = match EnvFilter::try_new(&args.filter) {
        Ok(filter) => (filter, None),
        Err(e) => (EnvFilter::new("info"), Some(e)),
    };
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = match args.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    if installed.is_ok()
        && let Some(e) = bad_filter
    {
        tracing::warn!(filter = %args.filter, error = %e, "invalid POSTURE_LOG; using info");
    }
}
