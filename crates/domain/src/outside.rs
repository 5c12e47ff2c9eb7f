//! Text that outsiders control — a webhook receiver's answer, the error its network caused,
//! an identity provider's claims — made safe before it is stored, shown or logged.
//!
//! PostgreSQL refuses NUL in `text` (a receiver answering `bad\0byte` once made a delivery
//! unrecordable, and so retried forever); a line break in a log value forges a log line; a
//! terminal obeys escape sequences. Everything such text reaches goes through one of these:
//! [`excerpt`] keeps the lines of a body, [`one_line`] makes a single line; both replace the
//! other control characters and bound the length at a character boundary.

/// Whether `c` is invisible yet changes how text reads or compares: Unicode's format
/// characters (general category `Cf`: zero-width spaces and joiners, bidirectional
/// controls such as U+202E, the byte order mark, the soft hyphen, tags).
pub fn is_invisible(c: char) -> bool {
    use unicode_general_category::{GeneralCategory, get_general_category};
    get_general_category(c) == GeneralCategory::Format
}

/// Whether `c` ends a line for some reader although JSON leaves it as it is: C1 controls
/// (U+0085 NEL among them) and DEL, and the line and paragraph separators U+2028 and
/// U+2029 (Python's `str.splitlines()` splits on all of them).
pub fn breaks_lines_somewhere(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}')
}

/// What replaces a character that cannot be kept (U+FFFD, as a decoder does).
const REPLACEMENT: char = '\u{FFFD}';

/// The longest prefix of `text` of at most `max_bytes` bytes that ends at a character
/// boundary.
fn bounded(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A body excerpt: line feeds, carriage returns and tabs kept, every other control character
/// (NUL included) replaced, at most `max_bytes` bytes.
pub fn excerpt(text: &str, max_bytes: usize) -> String {
    let kept = |c: char| !c.is_control() || matches!(c, '\n' | '\r' | '\t');
    let cleaned: String = text
        .chars()
        .map(|c| if kept(c) { c } else { REPLACEMENT })
        .collect();
    bounded(&cleaned, max_bytes).to_owned()
}

/// One line: every control character (line breaks included) becomes a space, runs of white
/// space one space, the ends trimmed, at most `max_bytes` bytes.
pub fn one_line(text: &str, max_bytes: usize) -> String {
    let mut line = String::with_capacity(text.len().min(max_bytes));
    for word in text
        .split(|c: char| c.is_control() || c.is_whitespace())
        .filter(|w| !w.is_empty())
    {
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
        if line.len() > max_bytes {
            break;
        }
    }
    bounded(&line, max_bytes).trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_and_escapes_never_pass_and_lines_are_kept_only_in_an_excerpt() {
        let hostile = "bad\0byte\n\u{1b}[2Jline\ttwo\r\n";
        let kept = excerpt(hostile, 100);
        assert!(!kept.contains('\0') && !kept.contains('\u{1b}'), "{kept:?}");
        assert!(kept.contains("\nline\ttwo\r\n") || kept.contains("\n\u{FFFD}[2Jline\ttwo"));
        assert_eq!(one_line(hostile, 100), "bad byte [2Jline two");
        assert_eq!(
            one_line("  sub\nINFO key revoked  ", 100),
            "sub INFO key revoked"
        );
    }

    #[test]
    fn the_bound_falls_on_a_character_boundary() {
        assert_eq!(excerpt("ééé", 5), "éé");
        assert_eq!(one_line("aa éé", 4), "aa");
        assert_eq!(excerpt("short", 1024), "short");
    }
}
