//! `cargo xtask demo --check`: runs every command the demo printed, as printed, and fails
//! when one does not work — so the lines a new user copies stay true (CI runs it).
//!
//! The printed block is read as a user reads it: each indented line is a shell command;
//! `export` lines set the variables the later lines use (the second customer's `KEY` wins,
//! as it would in a terminal). A command passes when it exits 0 and, for a `curl` line, its
//! answer is not a posture error body.

use std::{path::Path, process::Command};

use anyhow::{Context as _, bail};

use crate::process::eprintln_status;

/// Runs the printed block's commands in `cwd` (where `posture sync --into posture.db` may
/// write); returns how many ran.
pub fn run_printed(text: &str, cwd: &Path) -> anyhow::Result<usize> {
    let mut exports = String::new();
    let mut ran = 0;
    for line in text.lines() {
        let Some(command) = line.strip_prefix("  ") else {
            continue;
        };
        let command = command.trim();
        if command.starts_with("export ") {
            exports.push_str(command);
            exports.push('\n');
            continue;
        }
        if command.is_empty() || command.starts_with('#') {
            continue;
        }
        let output = Command::new("bash")
            .arg("-c")
            .arg(format!("set -eu\n{exports}{command}"))
            .current_dir(cwd)
            .env_remove("POSTURE_URL")
            .env_remove("POSTURE_API_KEY")
            .env_remove("KEY")
            .output()
            .with_context(|| format!("running `{command}`"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            bail!(
                "the demo printed `{command}`, which exits with {}:\n{}{}",
                output.status,
                stdout,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        if command.starts_with("curl") && is_error_body(&stdout) {
            bail!("the demo printed `{command}`, which answers an error: {stdout}");
        }
        ran += 1;
    }
    if ran == 0 {
        bail!("the demo printed no command to check");
    }
    eprintln_status(&format!(
        "demo --check: the {ran} printed commands ran as printed"
    ));
    Ok(ran)
}

fn is_error_body(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .is_some_and(|value| value.get("error").is_some() && value.get("reason").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_carry_to_later_lines_and_a_failing_line_fails() {
        let dir = crate::files::scratch_dir("demo-check-unit").unwrap();
        let ok = "intro\n  export A=1\n  test \"$A\" = 1\n  # a comment\n";
        assert_eq!(run_printed(ok, &dir).unwrap(), 1);
        let failing = "  export A=1\n  test \"$A\" = 2\n";
        assert!(run_printed(failing, &dir).is_err());
        assert!(run_printed("no commands\n", &dir).is_err());
    }

    #[test]
    fn a_posture_error_body_is_an_error() {
        assert!(is_error_body(
            r#"{"error":"unauthorized","reason":"no key"}"#
        ));
        assert!(!is_error_body(r#"{"data":[]}"#));
        assert!(!is_error_body("{\"openapi\":\"3.1.0\""));
    }
}
