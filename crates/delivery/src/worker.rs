//! The worker loop: claim due deliveries as slots free, send each at once, record every
//! attempt, repeat.
//!
//! Claims are leases (`FOR UPDATE SKIP LOCKED`): any number of workers run side by side and
//! never hold the same delivery at once; a crashed worker's claims are retried when their
//! lease ends. A worker claims only what its free slots can send now, on two lanes (prompt
//! receivers, slow ones), fairly between customers (`posture_domain::fair_share`): no
//! customer or receiver can hold all of them (`running.rs`). It claims again when a
//! notification says new deliveries are queued, when the poll interval passes (retries come
//! due without one), and as its deliveries finish. On shutdown it claims nothing more and
//! lets in-flight attempts finish (each bounded by the request timeout): nothing it claimed
//! is left unstarted. `sending.rs` sends one delivery; `housekeeping.rs` does the rest.

mod housekeeping;
mod running;
mod sending;

pub use sending::{Sent, Worker, WorkerConfig};
