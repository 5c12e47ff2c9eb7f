//! Tests that keep `deploy/monitoring/` and the metrics reference true: the Grafana
//! dashboard and the Prometheus rules query only series the binaries export, and
//! docs/operations.md lists exactly those series.

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::{docs_check::tests::files, files::project_root};

    /// Every series the binaries export: the name of each `metrics::counter!`, `gauge!` and
    /// `histogram!` in the crates' sources (not their tests, which record series of their
    /// own).
    fn exported() -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        let crates = project_root().join("crates");
        for file in files(&crates, &[".rs"]) {
            let within = file.strip_prefix(&crates).unwrap_or(&file);
            if within.components().any(|c| c.as_os_str() == "tests") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for kind in ["counter!(", "gauge!(", "histogram!("] {
                for (at, _) in text.match_indices(kind) {
                    let rest = text[at + kind.len()..].trim_start();
                    if let Some(name) = rest.strip_prefix('"') {
                        names.insert(name[..name.find('"').unwrap()].to_owned());
                    }
                }
            }
        }
        names
    }

    /// The `posture_*` series named in `text`, histogram suffixes taken off.
    fn queried(text: &str) -> BTreeSet<String> {
        text.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .filter(|w| w.starts_with("posture_"))
            .map(|w| {
                ["_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|s| w.strip_suffix(s).filter(|base| base.ends_with("_seconds")))
                    .unwrap_or(w)
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn the_binaries_export_the_series_the_alerts_and_dashboard_need() {
        let names = exported();
        for name in [
            "posture_http_requests_total",
            "posture_webhook_queue_oldest_due_seconds",
            "posture_export_slots",
            "posture_key_cache_live",
        ] {
            assert!(names.contains(name), "{name} is not exported: {names:?}");
        }
    }

    #[test]
    fn the_dashboard_and_the_alert_rules_query_only_exported_series() {
        let names = exported();
        let monitoring = project_root().join("deploy/monitoring");
        for file in ["posture-dashboard.json", "posture-alerts.yaml"] {
            let text = std::fs::read_to_string(monitoring.join(file)).unwrap();
            let used = queried(&text);
            assert!(used.len() >= 6, "{file} queries {used:?}");
            let unknown: Vec<&String> = used.difference(&names).collect();
            assert!(
                unknown.is_empty(),
                "{file} queries series nothing exports: {unknown:?}"
            );
        }
        // Every panel has a query, and the dashboard is one Grafana can import.
        let dashboard: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(monitoring.join("posture-dashboard.json")).unwrap(),
        )
        .unwrap();
        for panel in dashboard["panels"].as_array().unwrap() {
            if panel["type"] != "row" {
                assert!(
                    !panel["targets"].as_array().unwrap().is_empty(),
                    "{}",
                    panel["title"]
                );
            }
        }
    }

    #[test]
    fn the_metrics_reference_lists_exactly_the_exported_series() {
        let doc = std::fs::read_to_string(project_root().join("docs/operations.md")).unwrap();
        let start = doc.find("| series | labels | from |").unwrap();
        let table = &doc[start..start + doc[start..].find("\n\n").unwrap()];
        let documented: BTreeSet<String> = table
            .lines()
            .filter_map(|l| l.strip_prefix("  | `").or_else(|| l.strip_prefix("| `")))
            .map(|l| l[..l.find('`').unwrap()].to_owned())
            .collect();
        assert_eq!(documented, exported(), "docs/operations.md metrics table");
    }
}
