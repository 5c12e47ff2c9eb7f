//! The chaos report: each scenario's measures against what posture promises, printed as a
//! table and written as JSON to `target/chaos/report.json`.

use std::{fmt::Display, io::Write as _, path::Path, time::Duration};

use serde_json::json;

pub struct Check {
    scenario: &'static str,
    measure: String,
    value: String,
    expected: String,
    /// `None` for a figure reported without a bound.
    pass: Option<bool>,
}

#[derive(Default)]
pub struct Report {
    checks: Vec<Check>,
}

impl Report {
    /// A measure with the bound it must keep.
    pub fn check(
        &mut self,
        scenario: &'static str,
        measure: &str,
        value: impl Display,
        expected: &str,
        pass: bool,
    ) {
        self.push(scenario, measure, value, expected, Some(pass));
    }

    /// A figure without a bound.
    pub fn info(&mut self, scenario: &'static str, measure: &str, value: impl Display) {
        self.push(scenario, measure, value, "", None);
    }

    /// A scenario that could not run to its end.
    pub fn aborted(&mut self, scenario: &'static str, error: &anyhow::Error) {
        let error = format!("{error:#}").replace(['\n', '|'], " ");
        self.push(
            scenario,
            "scenario ran to its end",
            error,
            "yes",
            Some(false),
        );
    }

    fn push(
        &mut self,
        scenario: &'static str,
        measure: &str,
        value: impl Display,
        expected: &str,
        pass: Option<bool>,
    ) {
        let check = Check {
            scenario,
            measure: measure.to_owned(),
            value: value.to_string(),
            expected: expected.to_owned(),
            pass,
        };
        let _ = writeln!(std::io::stderr(), "xtask: chaos: {}", line(&check));
        self.checks.push(check);
    }

    pub fn failures(&self) -> usize {
        self.checks.iter().filter(|c| c.pass == Some(false)).count()
    }

    /// Prints the table (Markdown) and writes the JSON next to it.
    pub fn write(&self, dir: &Path, seconds: f64) -> anyhow::Result<()> {
        let mut table =
            String::from("| scenario | measure | value | promise | |\n|---|---|---|---|---|\n");
        for c in &self.checks {
            table.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                c.scenario,
                c.measure,
                c.value,
                c.expected,
                verdict(c.pass)
            ));
        }
        table.push_str(&format!(
            "\n{} checks, {} failed, in {seconds:.0} s\n",
            self.checks.iter().filter(|c| c.pass.is_some()).count(),
            self.failures()
        ));
        std::io::stdout().write_all(table.as_bytes())?;
        std::fs::write(dir.join("report.md"), &table)?;
        let checks: Vec<_> = self
            .checks
            .iter()
            .map(|c| {
                json!({"scenario": c.scenario, "measure": c.measure, "value": c.value,
                       "promise": c.expected, "pass": c.pass})
            })
            .collect();
        let report = json!({"seconds": seconds, "failures": self.failures(), "checks": checks});
        std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&report)?)?;
        Ok(())
    }
}

fn verdict(pass: Option<bool>) -> &'static str {
    match pass {
        Some(true) => "ok",
        Some(false) => "FAILED",
        None => "",
    }
}

fn line(c: &Check) -> String {
    format!(
        "[{}] {}: {} {}",
        c.scenario,
        c.measure,
        c.value,
        match c.pass {
            Some(true) => format!("(ok: {})", c.expected),
            Some(false) => format!("(FAILED: expected {})", c.expected),
            None => String::new(),
        }
    )
}

/// A duration as the report shows it.
pub fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}
