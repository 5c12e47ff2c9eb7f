//! `embed_migrations!` reads `migrations/` at compile time: a migration added or changed
//! must rebuild the crate, which cargo does not know without being told.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
