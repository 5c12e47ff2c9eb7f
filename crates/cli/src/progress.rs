//! What a long command shows while it runs: a progress bar on a terminal, nothing otherwise.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress of rows (or lines) read.
pub trait Progress: Send + Sync {
    /// A step begins (`findings`, `export`); `total` rows are expected.
    fn begin(&self, label: &str, total: u64);
    /// Rows done.
    fn advance(&self, rows: u64);
    fn end(&self);
    /// A message for the user while the step waits (a 429, a retry).
    fn say(&self, text: &str);
}

/// Shows nothing.
pub struct Quiet;

impl Progress for Quiet {
    fn begin(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
    fn say(&self, _: &str) {}
}

/// A bar on stderr, drawn only when stderr is a terminal (indicatif hides it otherwise);
/// messages go to stderr either way.
pub struct Bar {
    bar: ProgressBar,
}

impl Default for Bar {
    fn default() -> Self {
        Self::new()
    }
}

impl Bar {
    pub fn new() -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>11} [{bar:30}] {human_pos}/{human_len} ({per_sec}, {eta} left)",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        bar.set_draw_target(ProgressDrawTarget::hidden());
        Self { bar }
    }
}

impl Progress for Bar {
    fn begin(&self, label: &str, total: u64) {
        self.bar.reset();
        self.bar.set_prefix(label.to_owned());
        self.bar.set_length(total);
        self.bar.set_position(0);
        self.bar.set_draw_target(ProgressDrawTarget::stderr());
    }

    fn advance(&self, rows: u64) {
        self.bar.inc(rows);
    }

    fn end(&self) {
        self.bar.finish_and_clear();
        self.bar.set_draw_target(ProgressDrawTarget::hidden());
    }

    fn say(&self, text: &str) {
        // Above the bar when there is one; a plain line on stderr otherwise.
        if self.bar.is_hidden() {
            crate::output::err_line(text);
        } else {
            self.bar.println(text);
        }
    }
}
