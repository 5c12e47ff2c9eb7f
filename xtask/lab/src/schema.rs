//! `cargo xtask schema [--check]`: writes `crates/store-postgres/src/schema.rs` (Diesel's
//! view of the tables) from a throwaway database migrated with `migrations/`, or checks that
//! the committed file is current. A store-postgres test checks the same on every run.

use crate::{
    files::{ensure_file_contents, project_root},
    servers::postgres,
};

pub fn run(check: bool) -> anyhow::Result<()> {
    let server = postgres("schema-postgres", "")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let text = runtime.block_on(posture_test_support::catalog::diesel_schema_of_migrated(
        &server.url,
    ));
    let path = project_root()
        .join("crates")
        .join("store-postgres")
        .join("src")
        .join("schema.rs");
    ensure_file_contents(&path, &text, check, "cargo xtask schema")
}
