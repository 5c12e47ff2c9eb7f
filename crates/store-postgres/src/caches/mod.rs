//! The caches that `NOTIFY` keeps true in each serving process: authenticated keys
//! (`keys.rs`), customers' data versions (`versions.rs`), and the word of changed data that
//! waiting feed requests hear (`changes.rs`), all fed by one `LISTEN` connection per
//! process (`listen.rs`).

mod changes;
mod keys;
mod listen;
mod versions;

pub(crate) use changes::subscription;
pub(crate) use keys::KeyCache;
pub use keys::{APPLICATION_NAME, KeyCacheStats};
pub(crate) use listen::follow_key_changes;
pub use versions::VersionLookups;
pub(crate) use versions::{DATA_CHANNEL, ReadVersion, Reader};
