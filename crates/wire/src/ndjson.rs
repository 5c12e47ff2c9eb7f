//! Findings as NDJSON (`application/x-ndjson`): one JSON object per line, each line ending
//! in a line feed. JSON escapes every control character inside strings, so a line holds no
//! raw line feed or carriage return whatever the text of a finding; U+2028 and U+2029 stay
//! as they are (valid in JSON, and not line ends for NDJSON readers, which split on `\n`).

use std::io::Write;

use serde::Serialize;

/// Writes one finding (as the API shows it, or as an OCSF event) as one line, line feed
/// included.
pub fn write_line(out: &mut impl Write, finding: &impl Serialize) -> serde_json::Result<()> {
    serde_json::to_writer(&mut *out, finding)?;
    out.write_all(b"\n").map_err(serde_json::Error::io)
}
