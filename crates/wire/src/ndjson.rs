//! Findings as NDJSON (`application/x-ndjson`): one JSON object per line, each line ending
//! in a line feed. JSON escapes the C0 control characters inside strings, so a line holds no
//! raw line feed or carriage return whatever the text of a finding. Every other character
//! some reader takes for a line end — the C1 controls (NEL), U+2028 and U+2029, on which
//! Python's `str.splitlines()` splits — and every invisible format character (zero-width,
//! bidirectional controls) is written as a JSON `\uXXXX` escape too: the same string once
//! parsed, one line for every reader, and nothing hidden from a person reading the line.

use std::io::{self, Write};

use posture_domain::outside::{breaks_lines_somewhere, is_invisible};
use serde::Serialize;

/// Writes one finding (as the API shows it, or as an OCSF event) as one line, line feed
/// included.
pub fn write_line(out: &mut impl Write, finding: &impl Serialize) -> serde_json::Result<()> {
    let mut serializer = serde_json::Serializer::with_formatter(&mut *out, LineSafe);
    finding.serialize(&mut serializer)?;
    out.write_all(b"\n").map_err(serde_json::Error::io)
}

/// serde_json's compact output, with the characters [`escaped`] says written as `\uXXXX`.
struct LineSafe;

/// Whether a character inside a string is written as an escape although JSON allows it raw.
fn escaped(c: char) -> bool {
    breaks_lines_somewhere(c) || is_invisible(c)
}

impl serde_json::ser::Formatter for LineSafe {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            if !escaped(c) {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[start..at])?;
            // Outside the BMP (tags, musical format characters): a surrogate pair.
            for unit in c.encode_utf16(&mut [0; 2]) {
                write!(writer, "\\u{unit:04x}")?;
            }
            start = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn line(value: &serde_json::Value) -> String {
        let mut out = Vec::new();
        write_line(&mut out, value).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn no_reader_splits_a_line_and_nothing_invisible_stays_raw() {
        let comment = "a\u{2028}b\u{2029}c\u{85}d\u{202e}e\u{200b}f\u{feff}g\u{e0041}h\u{7f}i\n";
        let value = json!({"comment": comment, "plain": "ünïcødé ✓ 漢字"});
        let written = line(&value);
        // Python's str.splitlines() splits on these; JavaScript's line terminators too.
        let splits = |c: char| {
            matches!(
                c,
                '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}'
                    ..='\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
            )
        };
        let body = written.strip_suffix('\n').unwrap();
        assert!(!body.chars().any(splits), "{written:?}");
        assert!(!body.chars().any(is_invisible), "{written:?}");
        assert!(
            body.contains(r"\u2028") && body.contains(r"\u202e") && body.contains(r"\udb40\udc41"),
            "{written}"
        );
        // The same value once parsed; other characters as they were.
        let parsed: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(parsed, value);
        assert!(body.contains("ünïcødé ✓ 漢字"));
    }

    #[test]
    fn a_line_is_serde_jsons_compact_form_when_nothing_needs_escaping() {
        let value = json!({"id": "f-1", "n": 3, "list": [true, null], "text": "a \"q\" \\ é"});
        assert_eq!(
            line(&value),
            format!("{}\n", serde_json::to_string(&value).unwrap())
        );
    }
}
