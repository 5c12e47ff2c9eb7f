//! The declaration rules of a route (`handler.rs`, `routes/endpoint.rs`), each proven by a
//! route that breaks it and does not compile, for the reason its `.stderr` beside it names:
//! a snippet failing for another reason (a renamed import, say) fails this test.
//!
//! The snapshots are rustc's own words, so a new toolchain may word them differently:
//! `TRYBUILD=overwrite cargo test -p posture-http --test compile_fail` rewrites them, and
//! the diff shows whether each still names its rule.

#[test]
fn a_route_breaking_a_declaration_rule_does_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
