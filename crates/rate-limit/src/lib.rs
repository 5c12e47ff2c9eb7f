//! posture's rate limiters and place counters: shared through Redis ([`RedisRateLimiter`],
//! `shared.rs`), and in this process ([`InProcessRateLimiter`], [`InProcessPlaces`]: an
//! instance's own, and the shared ones' fallback while Redis is unreachable).

mod in_process;
mod places;
mod shared;
mod shared_places;

pub use in_process::InProcessRateLimiter;
pub use places::InProcessPlaces;
pub use shared::RedisRateLimiter;
