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
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub attempts: u32,
    /// Distinct bodies (SHA-256) among its attempts: 1 when every retry resent the same bytes.
    pub bodies: Vec<[u8; 32]>,
}

#[derive(Default)]
struct Endpoint {
    behaviour: Option<Behaviour>,
    secret: Option<String>,
    deliveries: HashMap<String, Seen>,
    bad_signatures: u64,
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
    let answer = {
        let mut endpoints = receiver.endpoints();
        let endpoint = endpoints.entry(name.into_inner()).or_default();
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
