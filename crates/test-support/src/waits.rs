//! Waiting in tests for what happens outside the test's hands — another process's `LISTEN`,
//! a `NOTIFY` reaching a cache, a write a server spawned: poll for the event itself, with a
//! bound, never a fixed pause standing in for it. Time a test can hold comes from a
//! `ManualClock` instead.

use std::{future::Future, time::Duration};

/// How long between two looks at what is awaited.
const POLL: Duration = Duration::from_millis(5);

/// Polls `probe` until it gives a value; fails naming `what` after `bound`.
pub async fn wait_for<T, F, Fut>(what: &str, bound: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + bound;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen within {bound:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Blocks until something accepts connections on `port` of the loopback address (a server
/// the test spawned is up); fails naming `what` after `bound`. For tests outside a runtime
/// as well as in one.
pub fn wait_for_port(what: &str, port: u16, bound: Duration) {
    let deadline = std::time::Instant::now() + bound;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not listen on port {port} within {bound:?}"
        );
        std::thread::sleep(POLL);
    }
}
