//! The chaos receiver: webhook endpoints whose behaviour a scenario sets (answer at once,
//! slowly, or fail the first attempts), recording every attempt of every delivery by its
//! `X-Service-Delivery` id and checking its signature.

use std::{
    collections::HashMap,
    net::TcpListener,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use actix_web::{HttpRequest, HttpResponse, web};
use sha2::{Digest as _, Sha256};

/// How an endpoint answers.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// 204 at once.
    Ok,
    /// 204 after this long.
    Slow(Duration),
    /// 500 to the first `n` attempts of each delivery, then 204.
    FailFirst(u32),
}

/// What an endpoint saw of one delivery.
#[derive(Clone, Debug)]
pub struct Seen {
    pub attempts: u32,
    /// Distinct bodies (SHA-256) among its attempts: 1 when every retry resent the same bytes.
    pub bodies: Vec<[u8; 32]>,
    /// When its first attempt arrived.
    pub first_at: std::time::Instant,
}

impl Default for Seen {
    fn default() -> Self {
        Self {
            attempts: 0,
            bodies: Vec::new(),
            first_at: std::time::Instant::now(),
        }
    }
}

#[derive(Default)]
struct Endpoint {
    behaviour: Option<Behaviour>,
    secret: Option<String>,
    deliveries: HashMap<String, Seen>,
    bad_signatures: u64,
    /// Requests being answered now, and the most ever at once.
    open: usize,
    most_open: usize,
}

#[derive(Clone, Default)]
pub struct Receiver {
    endpoints: Arc<Mutex<HashMap<String, Endpoint>>>,
}

impl Receiver {
    fn endpoints(&self) -> MutexGuard<'_, HashMap<String, Endpoint>> {
        self.endpoints.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serves on `listener` from a thread of its own; returns a handle that stops it.
    pub fn serve(&self, listener: TcpListener) -> anyhow::Result<actix_web::dev::ServerHandle> {
        let state = web::Data::new(self.clone());
        crate::receivers::serve(listener, 2, move |routes| {
            routes
                .app_data(state.clone())
                .app_data(web::PayloadConfig::new(4 * 1024 * 1024))
                .route("/hook/{name}", web::post().to(hook));
        })
    }

    /// Sets how `name` answers.
    pub fn set(&self, name: &str, behaviour: Behaviour) {
        self.endpoints()
            .entry(name.to_owned())
            .or_default()
            .behaviour = Some(behaviour);
    }

    /// The signing secret `name`'s deliveries must carry.
    pub fn set_secret(&self, name: &str, secret: String) {
        self.endpoints().entry(name.to_owned()).or_default().secret = Some(secret);
    }

    /// Every delivery `name` saw, by id.
    pub fn seen(&self, name: &str) -> HashMap<String, Seen> {
        self.endpoints()
            .get(name)
            .map(|e| e.deliveries.clone())
            .unwrap_or_default()
    }

    /// The most requests `name` was answering at once.
    pub fn most_open(&self, name: &str) -> usize {
        self.endpoints().get(name).map_or(0, |e| e.most_open)
    }

    /// Attempts whose signature did not verify, over every endpoint.
    pub fn bad_signatures(&self) -> u64 {
        self.endpoints().values().map(|e| e.bad_signatures).sum()
    }
}

async fn hook(
    req: HttpRequest,
    name: web::Path<String>,
    body: web::Bytes,
    receiver: web::Data<Receiver>,
) -> HttpResponse {
    let header = |h: &str| {
        req.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let delivery = header("x-service-delivery");
    let signature = header("x-service-signature-256");
    let digest: [u8; 32] = Sha256::digest(&body).into();
    let name = name.into_inner();
    let answer = {
        let mut endpoints = receiver.endpoints();
        let endpoint = endpoints.entry(name.clone()).or_default();
        endpoint.open += 1;
        endpoint.most_open = endpoint.most_open.max(endpoint.open);
        let verified = endpoint
            .secret
            .as_deref()
            .is_some_and(|s| posture_domain::signature::verify(s, &body, &signature));
        if !verified {
            endpoint.bad_signatures += 1;
        }
        let seen = endpoint.deliveries.entry(delivery).or_default();
        seen.attempts += 1;
        if !seen.bodies.contains(&digest) {
            seen.bodies.push(digest);
        }
        match endpoint.behaviour.unwrap_or(Behaviour::Ok) {
            Behaviour::FailFirst(n) if seen.attempts <= n => Err(()),
            Behaviour::Slow(pause) => Ok(Some(pause)),
            _ => Ok(None),
        }
    };
    // Closed when the request ends, answered or dropped (a worker that gave up).
    let _open = Open(receiver.get_ref().clone(), name);
    match answer {
        Err(()) => HttpResponse::InternalServerError().finish(),
        Ok(pause) => {
            if let Some(pause) = pause {
                tokio::time::sleep(pause).await;
            }
            HttpResponse::NoContent().finish()
        }
    }
}

/// A request an endpoint is answering.
struct Open(Receiver, String);

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(endpoint) = self.0.endpoints().get_mut(&self.1) {
            endpoint.open = endpoint.open.saturating_sub(1);
        }
    }
}
