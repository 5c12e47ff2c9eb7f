//! A receiver whose `/hook/held-*` endpoints hold every request until the test opens the
//! gate (a receiver as slow as the test wants, without a clock), and whose other endpoints
//! answer 204 at once. It counts the requests each endpoint has open, and the most it ever
//! had, so a test sees what the worker keeps in flight.

use std::{
    collections::HashMap,
    net::TcpListener,
    sync::{Arc, Mutex},
};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use tokio::sync::watch;

#[derive(Default)]
struct Counts {
    /// Requests open now, by endpoint.
    open: HashMap<String, usize>,
    /// The most ever open at once, by endpoint.
    most: HashMap<String, usize>,
    /// Requests received, by endpoint.
    received: HashMap<String, usize>,
}

#[derive(Clone)]
pub struct GatedReceiver {
    base: String,
    counts: Arc<Mutex<Counts>>,
    gate: Arc<watch::Sender<bool>>,
}

impl GatedReceiver {
    /// Serves on a loopback port from a thread of its own, the gate closed.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let receiver = Self {
            base,
            counts: Arc::default(),
            gate: Arc::new(watch::channel(false).0),
        };
        let state = web::Data::new(receiver.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .route("/hook/{name}", web::post().to(hook))
        })
        .workers(1)
        .max_connections(100_000)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)
        .unwrap()
        .run();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _ = runtime.block_on(server);
        });
        receiver
    }

    /// The URL of endpoint `name` (`held-...` ones wait for the gate).
    pub fn url(&self, name: &str) -> String {
        format!("{}/hook/{name}", self.base)
    }

    /// Every held request answers now, and later ones at once.
    pub fn open(&self) {
        self.gate.send_replace(true);
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Requests `name` has open now.
    pub fn open_at(&self, name: &str) -> usize {
        self.counts().open.get(name).copied().unwrap_or(0)
    }

    /// The most requests `name` ever had open at once.
    pub fn most_at(&self, name: &str) -> usize {
        self.counts().most.get(name).copied().unwrap_or(0)
    }

    /// Requests `name` received.
    pub fn received_at(&self, name: &str) -> usize {
        self.counts().received.get(name).copied().unwrap_or(0)
    }
}

async fn hook(
    request: HttpRequest,
    _body: web::Bytes,
    receiver: web::Data<GatedReceiver>,
) -> HttpResponse {
    let name = request.match_info().get("name").unwrap_or("").to_owned();
    {
        let mut counts = receiver.counts();
        *counts.received.entry(name.clone()).or_default() += 1;
        let open = counts.open.entry(name.clone()).or_default();
        *open += 1;
        let now = *open;
        let most = counts.most.entry(name.clone()).or_default();
        *most = (*most).max(now);
    }
    // Closed when the request ends, answered or dropped (a client that gave up).
    let _open = Open {
        receiver: receiver.get_ref().clone(),
        name: name.clone(),
    };
    if name.starts_with("held-") {
        let mut gate = receiver.gate.subscribe();
        let _ = gate.wait_for(|open| *open).await;
    }
    HttpResponse::NoContent().finish()
}

/// A request open at an endpoint.
struct Open {
    receiver: GatedReceiver,
    name: String,
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(open) = self.receiver.counts().open.get_mut(&self.name) {
            *open -= 1;
        }
    }
}
