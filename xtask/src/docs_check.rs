//! Tests that keep the documentation honest: the webhook test vector is what the signing
//! code produces, the published receiver examples verify it, the configuration reference
//! names exactly the variables the binaries read, and the event types listed are the
//! domain's.

#[cfg(test)]
pub(crate) mod tests {
    use std::process::Command;

    use crate::{files::project_root, process::on_path};

    fn webhooks_doc() -> String {
        std::fs::read_to_string(project_root().join("docs/webhooks.md")).unwrap()
    }

    /// (secret, body, header) from the test-vector table.
    fn vector(doc: &str) -> (String, String, String) {
        let start = doc.find("<!-- test-vector -->").unwrap();
        let end = doc.find("<!-- /test-vector -->").unwrap();
        let cell = |row: &str| {
            let line = doc[start..end]
                .lines()
                .find(|l| l.starts_with(&format!("| {row} |")))
                .unwrap();
            let cells: Vec<&str> = line
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            cells[1].trim_matches('`').to_owned()
        };
        (
            cell("secret"),
            cell("body"),
            cell("`X-Service-Signature-256`"),
        )
    }

    /// The value column of row `row` between `<!-- {marker} -->` and its closing marker.
    fn cell(doc: &str, marker: &str, row: &str) -> String {
        let start = doc.find(&format!("<!-- {marker} -->")).unwrap();
        let end = doc.find(&format!("<!-- /{marker} -->")).unwrap();
        let line = doc[start..end]
            .lines()
            .find(|l| l.starts_with(&format!("| {row} |")))
            .unwrap_or_else(|| panic!("no row {row} in {marker}"));
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        cells[1].trim_matches('`').to_owned()
    }

    #[test]
    fn the_documented_standard_webhooks_vector_is_what_posture_signs_and_the_library_verifies() {
        let doc = webhooks_doc();
        let (secret, body, _) = vector(&doc);
        let id = cell(&doc, "test-vector-standard", "`webhook-id`");
        let timestamp: i64 = cell(&doc, "test-vector-standard", "`webhook-timestamp`")
            .parse()
            .unwrap();
        let signature = cell(&doc, "test-vector-standard", "`webhook-signature`");
        assert_eq!(
            posture_domain::signature::standard_signature(&secret, &id, timestamp, body.as_bytes())
                .as_deref(),
            Some(signature.as_str())
        );
        let received = posture_test_support::standard_webhooks::Received {
            body: body.as_bytes(),
            headers: vec![
                ("webhook-id".into(), id),
                ("webhook-timestamp".into(), timestamp.to_string()),
                ("webhook-signature".into(), signature),
            ],
        };
        // Verified as if received at the vector's own time.
        let at_vector_time = timestamp - chrono::Utc::now().timestamp();
        let results = posture_test_support::standard_webhooks::verify(&[
            (&secret, &received, at_vector_time),
            (&secret, &received, 0),
        ]);
        assert_eq!(results[0], Ok(()));
        assert!(results[1].as_ref().unwrap_err().contains("too old"));
    }

    /// The code block of `language` in the document.
    fn example(doc: &str, language: &str) -> String {
        let fence = format!("```{language}\n");
        let start = doc.find(&fence).unwrap() + fence.len();
        let len = doc[start..].find("```").unwrap();
        doc[start..start + len].to_owned()
    }

    #[test]
    fn the_documented_test_vector_is_what_posture_signs() {
        let (secret, body, header) = vector(&webhooks_doc());
        assert!(secret.starts_with("whsec_"));
        assert_eq!(
            posture_domain::signature::signature_header(&secret, body.as_bytes()),
            header
        );
        assert!(posture_domain::signature::verify(
            &secret,
            body.as_bytes(),
            &header
        ));
    }

    /// Runs a documented example on the vector; returns its output (skips without the
    /// interpreter).
    fn run(program: &str, code: String) -> Option<String> {
        on_path(program)?;
        let output = Command::new(program)
            .args(["-e"])
            .arg(&code)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{program}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Some(String::from_utf8(output.stdout).unwrap())
    }

    #[test]
    fn the_documented_python_and_node_examples_verify_the_vector() {
        let doc = webhooks_doc();
        let (secret, body, header) = vector(&doc);
        let literal = |s: &str| serde_json::to_string(s).unwrap();
        let python = format!(
            "{}\nb = {}.encode()\nprint(verify({}, b, {}), verify({}, b + b' ', {}), verify({}, b, ''))",
            example(&doc, "python"),
            literal(&body),
            literal(&secret),
            literal(&header),
            literal(&secret),
            literal(&header),
            literal(&secret)
        );
        // `python3 -e` does not exist: run the program text with -c.
        let mut checked = Vec::new();
        if on_path("python3").is_some() {
            let output = Command::new("python3")
                .arg("-c")
                .arg(&python)
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            assert_eq!(
                String::from_utf8(output.stdout).unwrap().trim(),
                "True False False"
            );
            checked.push("python3");
        }
        let node = format!(
            "{}\nconst b = Buffer.from({});\nconsole.log(verify({}, b, {}), verify({}, Buffer.concat([b, Buffer.from(' ')]), {}), verify({}, b, undefined));",
            example(&doc, "javascript"),
            literal(&body),
            literal(&secret),
            literal(&header),
            literal(&secret),
            literal(&header),
            literal(&secret)
        );
        if let Some(out) = run("node", node) {
            assert_eq!(out.trim(), "true false false");
            checked.push("node");
        }
        // Without either interpreter this test would pass having checked nothing.
        assert!(
            !checked.is_empty(),
            "neither python3 nor node is installed: the documented verification examples \
             were not run (install one: apt-get install -y python3)"
        );
        for missing in ["python3", "node"].iter().filter(|p| !checked.contains(p)) {
            eprintln!("SKIPPED: {missing} is not installed; its documented example was not run");
        }
    }

    /// Every file under `dir` (recursively) whose name ends with one of `suffixes`.
    pub(crate) fn files(dir: &std::path::Path, suffixes: &[&str]) -> Vec<std::path::PathBuf> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                found.extend(files(&path, suffixes));
            } else if suffixes.iter().any(|s| path.to_string_lossy().ends_with(s)) {
                found.push(path);
            }
        }
        found
    }

    /// The environment variables the binaries read: every `env = "NAME"` of a clap argument,
    /// in the service's crates (`customers: false`) or in the customers' CLI (`true`).
    fn variables_in_code(customers: bool) -> std::collections::BTreeSet<String> {
        let mut names = std::collections::BTreeSet::new();
        let cli = project_root().join("crates/cli");
        for file in files(&project_root().join("crates"), &[".rs"]) {
            if file.starts_with(&cli) != customers {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for (at, _) in text.match_indices("env = \"") {
                let rest = &text[at + "env = \"".len()..];
                names.insert(rest[..rest.find('"').unwrap()].to_owned());
            }
        }
        names
    }

    /// Every `POSTURE_*`, `DATABASE_URL` and `REDIS_URL` named in `text`.
    fn variables_named(text: &str) -> std::collections::BTreeSet<String> {
        text.split(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .filter(|w| w.starts_with("POSTURE_") || *w == "DATABASE_URL" || *w == "REDIS_URL")
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_configuration_reference_lists_exactly_the_variables_the_binaries_read() {
        let code = variables_in_code(false);
        assert!(code.contains("DATABASE_URL") && code.contains("POSTURE_SECRET_KEY"));
        // The customers' CLI is documented apart, for customers.
        let cli_doc = std::fs::read_to_string(project_root().join("docs/cli.md")).unwrap();
        let cli_code = variables_in_code(true);
        assert!(cli_code.contains("POSTURE_LISTEN_SECRET"));
        assert!(
            cli_code.is_subset(&variables_named(&cli_doc)),
            "docs/cli.md names every variable of {cli_code:?}"
        );
        let doc = std::fs::read_to_string(project_root().join("docs/operations.md")).unwrap();
        let start = doc.find("## Configuration reference").unwrap();
        let end = start + doc[start..].find("\n## ").unwrap();
        let documented: std::collections::BTreeSet<String> = doc[start..end]
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .map(|l| l[..l.find('`').unwrap()].to_owned())
            .collect();
        assert_eq!(
            documented, code,
            "docs/operations.md#configuration-reference"
        );
    }

    /// Variables the documentation's client examples and the customers' CLI read from the
    /// environment themselves (not as clap arguments): a consumer's key or OAuth client and
    /// posture's address, as a consumer's program has them.
    const CONSUMER_VARIABLES: &[&str] = &[
        "POSTURE_API_KEY",
        "POSTURE_URL",
        "POSTURE_CLIENT_ID",
        "POSTURE_CLIENT_SECRET",
        "POSTURE_CLIENT_KEY_FILE",
    ];

    #[test]
    fn docs_and_deployment_files_name_only_variables_the_binaries_read() {
        let mut code = variables_in_code(false);
        code.extend(variables_in_code(true));
        code.extend(CONSUMER_VARIABLES.iter().map(|v| (*v).to_owned()));
        let root = project_root();
        let mut paths = files(&root.join("docs"), &[".md"]);
        paths.extend(files(
            &root.join("deploy"),
            &[".yaml", ".conf", "Dockerfile"],
        ));
        paths.extend(["README.md", "ARCHITECTURE.md"].map(|f| root.join(f)));
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            let unknown: Vec<String> = variables_named(&text)
                .into_iter()
                .filter(|v| !code.contains(v))
                .collect();
            assert!(unknown.is_empty(), "{} names {unknown:?}", path.display());
        }
    }

    /// The lines of `doc` from the one starting with `start` up to the next blank line.
    fn block<'a>(doc: &'a str, start: &str) -> Vec<&'a str> {
        doc.lines()
            .skip_while(|l| !l.starts_with(start))
            .take_while(|l| !l.trim().is_empty())
            .collect()
    }

    /// The event types are declared in the domain; the documents that list them for readers
    /// (the subscription's `eventTypes` row, the events feed's table) list exactly those.
    #[test]
    fn the_documented_event_types_are_the_domain_s() {
        use posture_domain::webhook::EventType;
        let named = |lines: Vec<&str>| -> std::collections::BTreeSet<String> {
            lines
                .iter()
                .flat_map(|l| l.split('`').skip(1).step_by(2))
                .filter(|w| w.starts_with("finding_") && !w.contains('<'))
                .map(str::to_owned)
                .collect()
        };
        let declared: std::collections::BTreeSet<String> = EventType::ALL
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect();
        let webhooks = webhooks_doc();
        assert_eq!(named(block(&webhooks, "| `eventTypes` |")), declared);
        let api = std::fs::read_to_string(project_root().join("docs/api.md")).unwrap();
        assert_eq!(named(block(&api, "| `type` | when | `change` |")), declared);
    }

    /// docs/api.md's table of refusal kinds lists the domain's, in its order.
    #[test]
    fn the_documented_refusal_kinds_are_the_domain_s() {
        let api = std::fs::read_to_string(project_root().join("docs/api.md")).unwrap();
        let documented: Vec<&str> = block(&api, "| `kind` | the value |")
            .iter()
            .skip(2)
            .filter_map(|l| l.split('`').nth(1))
            .collect();
        let declared: Vec<&str> = posture_domain::Refusal::ALL
            .iter()
            .map(|kind| kind.as_str())
            .collect();
        assert_eq!(documented, declared);
    }
}
