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

/// A cell as a terminal shows it: control characters escaped (`\u{1b}`), so a value that
/// came from outside (a key's name from the console, a receiver's error) cannot move the
/// cursor or forge a line.
pub fn printable(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    } else {
        text.to_owned()
    }
}

/// Rows as a table for people: each column as wide as its widest cell (in characters), two
/// spaces apart, the last one unpadded; `right` names the columns aligned right (numbers).
pub fn table<const N: usize>(
    header: [&str; N],
    right: &[usize],
    rows: impl IntoIterator<Item = [String; N]>,
) -> String {
    let rows: Vec<[String; N]> = rows
        .into_iter()
        .map(|row| row.map(|c| printable(&c)))
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, value) in widths.iter_mut().zip(row) {
            *width = (*width).max(value.chars().count());
        }
    }
    let line = |cells: [&str; N]| {
        let mut out = String::new();
        for (i, value) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(value.chars().count());
            if i > 0 {
                out.push_str("  ");
            }
            if right.contains(&i) {
                out.push_str(&" ".repeat(pad));
                out.push_str(value);
            } else {
                out.push_str(value);
                if i + 1 < N {
                    out.push_str(&" ".repeat(pad));
                }
            }
        }
        out
    };
    std::iter::once(line(header))
        .chain(
            rows.iter()
                .map(|row| line(row.each_ref().map(String::as_str))),
        )
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::table;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let text = table(
            ["ID", "EVENT", "ATTEMPTS", "LAST ERROR"],
            &[2],
            [
                [
                    "a".into(),
                    "finding_severity_changed".into(),
                    "3".into(),
                    "-".into(),
                ],
                [
                    "bb".into(),
                    "finding_low".into(),
                    "12".into(),
                    "HTTP 503".into(),
                ],
            ],
        );
        assert_eq!(
            text,
            "ID  EVENT                     ATTEMPTS  LAST ERROR\n\
             a   finding_severity_changed         3  -\n\
             bb  finding_low                     12  HTTP 503"
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        let text = table(["NAME"], &[], [["evil\n\u{1b}[2Jkey".to_owned()]]);
        assert_eq!(text, "NAME\nevil\\n\\u{1b}[2Jkey");
    }
}
