//! Running the documentation's examples against a served posture, as a reader would paste
//! them: `https://posture.example.com` stands for the served address, `$KEY` (also
//! `$API_KEY`, `$POSTURE_API_KEY`) for a key holding every scope, `$CLIENT_ID` and
//! `$CLIENT_SECRET` for an OAuth client holding every scope (`$KEY_CLIENT_ID` and
//! `$CLIENT_KEY_FILE` for one with a private key), `$CUSTOMER` for its
//! customer, `$WEBHOOK` for one of its subscriptions, `$POSTURE_URL` is the served address,
//! and `posture-api` and the customers' `posture` are on `PATH` with `DATABASE_URL` set. curl runs with `--fail-with-body` (a `.curlrc` of the run), so an
//! example answered 4xx or 5xx fails.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

use super::{Block, Check};

/// The address the documentation's examples are written against.
pub const DOCUMENTED_BASE: &str = "https://posture.example.com";

/// Where and with what the examples run.
pub struct Served {
    pub base: String,
    /// Variables the examples read (`KEY`, `CUSTOMER`, `WEBHOOK`, `DATABASE_URL`, ...).
    pub env: Vec<(String, String)>,
    /// The directory of the `posture-api` binary.
    pub bin_dir: PathBuf,
    /// A directory of the run's own.
    pub scratch: PathBuf,
}

impl Served {
    fn localised(&self, text: &str) -> String {
        text.replace(DOCUMENTED_BASE, &self.base)
    }

    fn command(&self, dir: &Path, script: &str) -> anyhow::Result<Command> {
        let curlrc = self.scratch.join(".curlrc");
        std::fs::write(&curlrc, "fail-with-body\nshow-error\nmax-time = 60\n")?;
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = Command::new("timeout");
        command
            .args(["120", "bash", "-eo", "pipefail", "-c", script])
            .current_dir(dir)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("CURL_HOME", &self.scratch)
            .env("PATH", path)
            .stdin(Stdio::null());
        Ok(command)
    }
}

/// The `module` blocks: name and text, the documented address replaced by the served one.
pub fn modules(blocks: &[Block], served: &Served) -> BTreeMap<String, String> {
    blocks
        .iter()
        .flat_map(|block| {
            block.checks.iter().filter_map(move |check| match check {
                Check::Module(name) => Some((name.clone(), served.localised(&block.text))),
                _ => None,
            })
        })
        .collect()
}

/// One `$ command` of a console block, with what it must print and whether it fails.
struct Step {
    command: String,
    fails: bool,
    expected: String,
}

fn steps(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continued = false;
    for line in text.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                command: command.to_owned(),
                fails: false,
                expected: String::new(),
            });
            continued = command.ends_with('\\');
        } else if let Some(step) = steps.last_mut() {
            if continued {
                step.command.push('\n');
                step.command.push_str(line);
                continued = line.ends_with('\\');
            } else if step.expected.is_empty() && line.starts_with("? ") {
                step.fails = line != "? success" && line != "? 0";
            } else {
                step.expected.push_str(line);
                step.expected.push('\n');
            }
        }
    }
    steps
}

/// What a command printed (stdout, then stderr) and whether it succeeded.
fn execute(command: &mut Command) -> anyhow::Result<(String, bool)> {
    let output = command.output().context("running an example")?;
    let mut printed = String::from_utf8_lossy(&output.stdout).into_owned();
    printed.push_str(&String::from_utf8_lossy(&output.stderr));
    Ok((printed, output.status.success()))
}

fn matches(expected: &str, actual: &str) -> Result<(), String> {
    snapbox::Assert::new()
        .try_eq(
            Some(&"the example's output"),
            snapbox::Data::text(actual.to_owned()),
            snapbox::Data::text(expected.to_owned()),
        )
        .map_err(|e| e.to_string())
}

/// Runs every `run` and `console` block of every document, each document in a directory of
/// its own holding its `file` blocks; returns how many blocks ran.
pub fn run_documents(blocks: &[Block], served: &Served) -> anyhow::Result<usize> {
    let mut ran = 0;
    let mut failures = Vec::new();
    let mut by_file: BTreeMap<&Path, Vec<&Block>> = BTreeMap::new();
    for block in blocks {
        by_file.entry(&block.file).or_default().push(block);
    }
    for (file, blocks) in by_file {
        let stem = file.to_string_lossy().replace(['/', '.'], "-");
        let dir = served.scratch.join(stem);
        // Fresh each run: what an example leaves (the CLI's `posture.db`, which holds one
        // customer) must not meet the next run's new customers.
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        for block in &blocks {
            for check in &block.checks {
                if let Check::File(name) = check {
                    std::fs::write(dir.join(name), served.localised(&block.text))?;
                }
            }
        }
        for (i, block) in blocks.iter().enumerate() {
            let result = if block.has(&Check::Run) {
                let expected = blocks
                    .get(i + 1)
                    .filter(|next| next.has(&Check::Output))
                    .map(|next| next.text.clone());
                run_block(block, expected.as_deref(), &dir, served)
            } else if block.has(&Check::Console) {
                console_block(block, &dir, served)
            } else {
                continue;
            };
            ran += 1;
            if let Err(e) = result {
                failures.push(format!("{}: {e}", block.place()));
            }
        }
    }
    if !failures.is_empty() {
        bail!(
            "documented examples failed ({} of {ran}):\n{}",
            failures.len(),
            failures.join("\n\n")
        );
    }
    Ok(ran)
}

fn run_block(
    block: &Block,
    expected: Option<&str>,
    dir: &Path,
    served: &Served,
) -> Result<(), String> {
    let script = served.localised(&block.text);
    let mut command = served.command(dir, &script).map_err(|e| e.to_string())?;
    let (printed, succeeded) = execute(&mut command).map_err(|e| e.to_string())?;
    if !succeeded {
        return Err(format!("failed:\n{printed}"));
    }
    match expected {
        Some(expected) => matches(expected, &printed),
        None => Ok(()),
    }
}

fn console_block(block: &Block, dir: &Path, served: &Served) -> Result<(), String> {
    for step in steps(&block.text) {
        let script = served.localised(&step.command);
        let mut command = served.command(dir, &script).map_err(|e| e.to_string())?;
        let (printed, succeeded) = execute(&mut command).map_err(|e| e.to_string())?;
        if succeeded == step.fails {
            return Err(format!(
                "`{}` {} (expected {}):\n{printed}",
                step.command,
                if succeeded { "succeeded" } else { "failed" },
                if step.fails { "a failure" } else { "success" }
            ));
        }
        matches(&step.expected, &printed).map_err(|e| format!("`{}`: {e}", step.command))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_console_block_is_read_as_commands_with_their_output() {
        let steps = steps(
            "$ posture-api ingest --customer $CUSTOMER \\\n    bad.jsonl\n? failed\nerror: line 3: [..]\n$ echo ok\nok\n",
        );
        assert_eq!(steps.len(), 2);
        assert_eq!(
            steps[0].command,
            "posture-api ingest --customer $CUSTOMER \\\n    bad.jsonl"
        );
        assert!(steps[0].fails);
        assert_eq!(steps[0].expected, "error: line 3: [..]\n");
        assert!(!steps[1].fails);
        assert!(matches(&steps[0].expected, "error: line 3: unknown severity\n").is_ok());
        assert!(matches("ok\n", "not ok\n").is_err());
    }
}
