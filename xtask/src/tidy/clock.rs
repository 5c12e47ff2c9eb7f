//! One clock: shipped library code reads the `Clock` it is given
//! (`posture_domain::clock`), so a test states the time it means by moving a `ManualClock`
//! instead of sleeping. A direct `Utc::now()` or `SystemTime::now()` in a shipped crate's
//! `src/` (its tests aside) is a breach unless its file is listed here with its reason.
//! (`Instant::now()` measures how long something took and stays.)

use super::tree::tracked;
use crate::files::project_root;

/// Files that read the system's clock themselves, and why.
const EXCEPTIONS: &[(&str, &str)] = &[
    (
        "crates/domain/src/clock.rs",
        "the system clock itself (`SystemClock`), and a test clock starting at the real time",
    ),
    (
        "crates/store-postgres/src/pool_health.rs",
        "a lock-free stamp of the last connection failure, compared only with later stamps \
         of the same process: how long ago, never a time of day",
    ),
    (
        "crates/api/src/commands/keys.rs",
        "an operator command of the binary: a key's lifetime counts from the operator's now",
    ),
    (
        "crates/api/src/commands/clients.rs",
        "an operator command of the binary: a rotation's overlap counts from the operator's now",
    ),
    (
        "crates/cli/src/credential.rs",
        "the customers' CLI: the `iat` and `exp` of the assertions it signs, on its machine's \
         clock (the service allows a minute of skew)",
    ),
    (
        "crates/cli/src/commands/whoami.rs",
        "the customers' CLI, a binary on their machine: the key's ages it prints",
    ),
    (
        "crates/cli/src/commands/listen.rs",
        "the customers' CLI: how long ago each forwarded event happened, as it prints it",
    ),
    (
        "crates/cli/src/listen.rs",
        "the customers' CLI: the Standard Webhooks timestamp of an event it forwards",
    ),
    (
        "crates/cli/src/mirror.rs",
        "the customers' CLI: when its SQLite mirror was last synced",
    ),
];

/// The direct reads of the system's clock.
const READS: &[&str] = &["Utc::now", "SystemTime::now", "Local::now"];

/// Crates that ship no code (tests' support).
const NOT_SHIPPED: &[&str] = &["crates/test-support/", "crates/test-servers/"];

/// The shipped part of `text`: everything before its tests module (`#[cfg(test)]` then
/// `mod tests`; an item merely marked `#[cfg(test)]` does not end it).
pub(super) fn shipped(text: &str) -> &str {
    let mut at = 0;
    while let Some(found) = text[at..].find("#[cfg(test)]") {
        let start = at + found;
        let next = text[start + "#[cfg(test)]".len()..].trim_start();
        if next.starts_with("mod tests") || next.starts_with("pub(crate) mod tests") {
            return &text[..start];
        }
        at = start + 1;
    }
    text
}

/// Whether `path` is a shipped crate's library or binary source (not a test).
fn is_shipped_source(path: &str) -> bool {
    path.starts_with("crates/")
        && path.contains("/src/")
        && path.ends_with(".rs")
        && !path.ends_with("/tests.rs")
        && !path.contains("/tests/")
        && !NOT_SHIPPED.iter().any(|p| path.starts_with(p))
}

/// Breaches of the rule.
pub(super) fn direct_clock_reads() -> Vec<String> {
    let root = project_root();
    let mut found = Vec::new();
    for path in tracked().iter().filter(|p| is_shipped_source(p)) {
        if EXCEPTIONS.iter().any(|(file, _)| file == path) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(path)) else {
            continue;
        };
        for (n, line) in shipped(&text).lines().enumerate() {
            if READS.iter().any(|read| line.contains(read)) && !line.trim_start().starts_with("//")
            {
                found.push(format!(
                    "{path}:{}: reads the system clock; take the `Clock` you are given (or list \
                     the file in tidy/clock.rs with its reason)",
                    n + 1
                ));
            }
        }
    }
    for (file, _) in EXCEPTIONS {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        if !READS.iter().any(|read| shipped(&text).contains(read)) {
            found.push(format!(
                "tidy/clock.rs lists {file}, which no longer reads the system clock: drop it"
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_shipped_sources_before_their_tests_count() {
        assert!(is_shipped_source("crates/http/src/routes/upr.rs"));
        assert!(!is_shipped_source("crates/http/tests/it/main.rs"));
        assert!(!is_shipped_source(
            "crates/store-postgres/src/caches/tests.rs"
        ));
        assert!(!is_shipped_source("crates/test-servers/src/servers.rs"));
        assert!(!is_shipped_source("xtask/src/main.rs"));
        let text = "fn a() { clock.now() }\n#[cfg(test)]\nmod tests { Utc::now() }";
        assert!(!READS.iter().any(|r| shipped(text).contains(r)));
        let marked = "#[cfg(test)]\nfn probe() {}\nfn b() { x.map_or_else(Utc::now, f) }";
        assert!(READS.iter().any(|r| shipped(marked).contains(r)));
    }
}
