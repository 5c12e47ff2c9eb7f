//! The pieces a test server is assembled from (`support.rs` assembles them): the console's
//! state, and a server on a thread and runtime of its own.

use std::{
    net::TcpListener,
    sync::{Arc, mpsc},
};

use posture_api::server;
use posture_console::ConsoleState;
use posture_domain::secrets::Keyring;
use posture_domain::{
    clock::ManualClock,
    console::SessionPolicy,
    rate_limit::{RateLimiter, RatePolicy},
};
use posture_http::{ApiState, TrustedProxies};
use posture_rate_limit::InProcessRateLimiter;
use posture_store_postgres::PgStore;

/// The key sealing webhook secrets in tests.
pub const TEST_SECRET_KEY: [u8; 32] = [7; 32];

pub fn test_keyring() -> Keyring {
    Keyring::new(&TEST_SECRET_KEY, &[]).unwrap()
}

/// The console of a test server: sign-ins limited to `limit` per address per 10 minutes.
pub fn console_state(
    store: &PgStore,
    limit: u32,
    request_limiter: Arc<dyn RateLimiter>,
    trusted_proxies: TrustedProxies,
) -> ConsoleState {
    ConsoleState {
        // Test providers listen on loopback: the operator's allow-list names it.
        ports: server::console_ports(
            store,
            vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()],
            Arc::new(held_limiter(RatePolicy {
                limit,
                window_secs: 600,
            })),
            request_limiter,
        )
        .unwrap(),
        keyring: Arc::new(test_keyring()),
        sessions: SessionPolicy::DEFAULT,
        public_url: None,
        secure_cookies: false,
        trusted_proxies,
        clock: store.clock(),
    }
}

/// Runs `state` on `listener` on a thread and runtime of its own, so the server outlives
/// nothing of the test's runtime; with `key_cache`, that store's key cache listens too.
/// Returns once the server is listening.
pub fn spawn_server(
    listener: TcpListener,
    state: ApiState,
    serving: server::Serving,
    key_cache: Option<PgStore>,
) -> (actix_web::dev::ServerHandle, std::net::SocketAddr) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            if let Some(store) = key_cache {
                store.start_key_cache();
            }
            let running = server::start(listener, state, serving).unwrap();
            tx.send((running.handle.clone(), running.local_addr))
                .unwrap();
            running.server.await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// An in-process limiter on a clock nobody moves: a test's window never ends between its
/// requests (a fixed window on the system clock may, at a minute's turn).
pub fn held_limiter(policy: RatePolicy) -> InProcessRateLimiter {
    InProcessRateLimiter::new(policy, Arc::new(ManualClock::starting_now()))
}
