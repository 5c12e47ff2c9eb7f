//! Figures: one table on stdout, one JSON file for scripts.

use std::{io::Write as _, path::PathBuf};

use serde_json::json;

use crate::files::project_root;

/// One measured figure, with its baseline and target when it has them.
#[derive(Clone, Debug)]
pub struct Figure {
    pub figure: String,
    pub value: f64,
    pub unit: String,
    pub baseline: Option<f64>,
    pub baseline_name: Option<String>,
    pub target: Option<f64>,
    pub lower_is_better: bool,
}

impl Figure {
    pub fn measure(
        figure: impl Into<String>,
        value: f64,
        unit: &str,
        lower_is_better: bool,
    ) -> Self {
        Self {
            figure: figure.into(),
            value,
            unit: unit.to_owned(),
            baseline: None,
            baseline_name: None,
            target: None,
            lower_is_better,
        }
    }

    /// Compared with a baseline; `target` is a ratio (value / baseline).
    pub fn against(mut self, baseline: f64, name: impl Into<String>, target: Option<f64>) -> Self {
        self.baseline = Some(baseline);
        self.baseline_name = Some(name.into());
        self.target = target;
        self
    }

    /// An absolute target on the value itself.
    pub fn target(mut self, target: f64) -> Self {
        self.target = Some(target);
        self
    }

    pub fn ratio(&self) -> Option<f64> {
        self.baseline.filter(|b| *b > 0.0).map(|b| self.value / b)
    }

    /// Whether the target (if any) is met.
    pub fn meets_target(&self) -> Option<bool> {
        let target = self.target?;
        let measured = if self.baseline.is_some() {
            self.ratio()?
        } else {
            self.value
        };
        Some(if self.lower_is_better {
            measured <= target
        } else {
            measured >= target
        })
    }
}

/// Writes the figures to `target/bench/<timestamp>.json` (`<timestamp>-partial.json` when a
/// scenario failed after them).
pub fn write(figures: &[Figure], partial: bool) -> anyhow::Result<PathBuf> {
    let dir = project_root().join("target").join("bench");
    std::fs::create_dir_all(&dir)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let path = dir.join(if partial {
        format!("{stamp}-partial.json")
    } else {
        format!("{stamp}.json")
    });
    let values: Vec<_> = figures
        .iter()
        .map(|f| {
            json!({"figure": f.figure, "value": f.value, "unit": f.unit, "baseline": f.baseline,
                   "baseline_name": f.baseline_name, "ratio": f.ratio(), "target": f.target,
                   "lower_is_better": f.lower_is_better})
        })
        .collect();
    std::fs::write(&path, serde_json::to_string_pretty(&values)?)?;
    Ok(path)
}

pub fn print(figures: &[Figure]) {
    let mut out = std::io::stdout().lock();
    let width = figures.iter().map(|f| f.figure.len()).max().unwrap_or(10);
    let _ = writeln!(
        out,
        "\n{:<width$} {:>12} {:<6} {:>12} {:>7} {:>9}  baseline is",
        "figure", "value", "unit", "baseline", "ratio", "target"
    );
    for f in figures {
        let baseline = f
            .baseline
            .map_or_else(|| "-".to_owned(), |b| format!("{b:.1}"));
        let ratio = f
            .ratio()
            .map_or_else(|| "-".to_owned(), |r| format!("{r:.2}"));
        let target = match (f.target, f.meets_target()) {
            (Some(t), Some(true)) => format!("{t} ok"),
            (Some(t), _) => format!("{t} MISS"),
            (None, _) => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<width$} {:>12.1} {:<6} {:>12} {:>7} {:>9}  {}",
            f.figure,
            f.value,
            f.unit,
            baseline,
            ratio,
            target,
            f.baseline_name.as_deref().unwrap_or("")
        );
    }
}
