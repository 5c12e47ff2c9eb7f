//! The customer console (docs/console.md) over real HTTP and a real PostgreSQL. Sessions
//! are made through the console port (the browser suite, `cargo xtask console-e2e`, signs in
//! through a real OpenID Connect provider); everything after sign-in is the served console.

mod cli;
mod clients;
mod directory;
mod fences;
mod keys;
mod paging;
mod provider;
mod provisioning;
mod refusals;
mod sessions;
mod sign_in;
pub mod support;
