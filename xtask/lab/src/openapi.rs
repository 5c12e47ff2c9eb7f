//! `cargo xtask openapi [--check]`: writes `docs/openapi.json` from the route table, or
//! checks that the committed file is current.

use crate::files::{ensure_file_contents, project_root};

pub fn run(check: bool) -> anyhow::Result<()> {
    let path = project_root().join("docs").join("openapi.json");
    ensure_file_contents(
        &path,
        &posture_http::openapi::render(),
        check,
        "cargo xtask openapi",
    )
}

#[cfg(test)]
mod tests {
    /// `cargo test` fails when the committed contract is stale, like `--check` in CI.
    #[test]
    fn committed_openapi_document_is_current() {
        super::run(true).unwrap();
    }
}
