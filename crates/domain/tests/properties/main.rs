//! Property tests of every parser posture's domain runs on outside input: ingest lines,
//! receiver URLs, subscription requests, the webhook signature and text from outside. Each property states a
//! rule of docs/ (or of the contract) and checks it on generated input: nothing panics, and
//! each input either parses to what it says or gives the documented error.
//!
//! Cases per property: proptest's default (256), or `PROPTEST_CASES`.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod ingest;
mod json;
mod outside;
mod signature;
mod subscriptions;
mod urls;
