//! The API reference page in headless Chromium (`cargo xtask clients`): renders
//! `/api/v1/docs` of a running posture-api, checks that the rendered page lists every
//! operation of the contract (summary and path) and that the Content-Security-Policy refused
//! nothing (which would mean the page tried another origin or inline code), and keeps a
//! screenshot.

use std::{path::Path, process::Command};

use anyhow::{Context as _, bail};

use crate::process::eprintln_status;

/// How long (virtual time) Chromium lets the page's scripts run before the DOM is taken.
const BUDGET_MS: &str = "20000";

fn chromium(url: &str, extra: &[&str]) -> anyhow::Result<(String, String)> {
    let out = Command::new("chromium")
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,1000",
        ])
        .arg(format!("--virtual-time-budget={BUDGET_MS}"))
        .args(extra)
        .arg(url)
        .output()
        .context("running chromium")?;
    if !out.status.success() {
        bail!("chromium failed with {}", out.status);
    }
    Ok((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// The text of an HTML document: tags and comments removed, entities of the few kinds
/// Chromium writes decoded, white space collapsed.
fn text_of(html: &str) -> String {
    let mut text = String::with_capacity(html.len() / 4);
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn check(base: &str, out: &Path) -> anyhow::Result<()> {
    eprintln_status("the API reference page in headless Chromium");
    let url = format!("{base}/api/v1/docs");
    let (dom, log) = chromium(&url, &["--dump-dom"])?;
    let screenshot = out.join("docs-page.png");
    chromium(&url, &[&format!("--screenshot={}", screenshot.display())])?;
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Refused to") || l.contains("Content Security Policy"))
        .collect();
    if !refused.is_empty() {
        bail!(
            "the reference page broke its Content-Security-Policy:\n{}",
            refused.join("\n")
        );
    }
    let text = text_of(&dom);
    let contract: serde_json::Value = serde_json::from_slice(&std::fs::read(
        crate::files::project_root().join("docs/openapi.json"),
    )?)?;
    let mut missing = Vec::new();
    let mut listed = 0;
    for (path, item) in contract["paths"].as_object().context("paths")? {
        for (method, operation) in item.as_object().context("path item")? {
            let summary = operation["summary"].as_str().unwrap_or_default();
            if summary.is_empty() || !text.contains(summary) || !text.contains(path.as_str()) {
                missing.push(format!("{} {path} ({summary})", method.to_uppercase()));
            } else {
                listed += 1;
            }
        }
    }
    if !missing.is_empty() || listed == 0 {
        bail!(
            "the rendered reference page lacks {} operation(s) (screenshot: {}):\n{}",
            missing.len(),
            screenshot.display(),
            missing.join("\n")
        );
    }
    eprintln_status(&format!(
        "reference page: {listed} operations listed, {} KB of rendered DOM, screenshot {}",
        dom.len() / 1024,
        screenshot.display()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_of_a_page_ignores_tags_comments_and_word_breaks() {
        assert_eq!(
            text_of("<div><!---->List right<wbr>-sized  role\n recommendations</div>&amp;"),
            "List right-sized role recommendations&"
        );
    }
}
