//! A CEF parser following the specification's escaping rules, for tests.

use std::collections::BTreeMap;

/// (header fields, extensions) of a line; `None` if it is not CEF with 7 separators.
pub fn parse(line: &str) -> Option<(Vec<String>, BTreeMap<String, String>)> {
    let body = line.strip_prefix("CEF:")?;
    let mut fields = Vec::new();
    let mut current = String::new();
    let mut chars = body.chars();
    while fields.len() < 7 {
        match chars.next()? {
            '\\' => match chars.next()? {
                c @ ('\\' | '|') => current.push(c),
                c => {
                    current.push('\\');
                    current.push(c);
                }
            },
            '|' => fields.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    let extension: String = chars.collect();
    Some((fields, extensions(&extension)))
}

/// `key=value` pairs: a key is `[A-Za-z0-9]+` right after a space (or the start) and
/// before an unescaped `=`; a value runs to the next such key.
fn extensions(text: &str) -> BTreeMap<String, String> {
    let chars: Vec<char> = text.chars().collect();
    // Positions of unescaped '=' that end a key.
    let mut starts = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == '=' {
            let mut k = i;
            while k > 0 && chars[k - 1].is_ascii_alphanumeric() {
                k -= 1;
            }
            if k < i && (k == 0 || chars[k - 1] == ' ') {
                starts.push((k, i));
            }
        }
        i += 1;
    }
    let mut map = BTreeMap::new();
    for (n, (key_start, eq)) in starts.iter().enumerate() {
        let end = starts
            .get(n + 1)
            .map_or(chars.len(), |(next, _)| next.saturating_sub(1));
        let key: String = chars[*key_start..*eq].iter().collect();
        let raw: String = chars[eq + 1..end.max(eq + 1)].iter().collect();
        map.insert(key, unescape(&raw));
    }
    map
}

fn unescape(raw: &str) -> String {
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}
