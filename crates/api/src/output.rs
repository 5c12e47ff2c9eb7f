//! Command output: text for people, or one JSON object (`--json`) for scripts, with the
//! same camelCase names as the API. Output goes to stdout; logs go to stderr.

use std::io::Write as _;

use serde::Serialize;

/// Prints `value` as one JSON line, or `text` for people.
pub fn emit<T: Serialize>(
    json: bool,
    value: &T,
    text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, value)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", text())?;
    }
    Ok(())
}

/// Prints a warning for people on stderr (both modes: stdout stays one JSON object).
pub fn warn(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {text}");
}
