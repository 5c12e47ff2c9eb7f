//! The demo's webhook receiver: checks each delivery's signature like a customer's receiver
//! would, counts the deliveries of the initial passes quietly (the demo prints one summary
//! line), then prints each later delivery, its event type and whether it verified.

use std::{
    io::Write as _,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use actix_web::{HttpRequest, HttpResponse, web};

/// What the receiver knows and has seen.
#[derive(Default)]
pub struct Receiver {
    /// The signing secret, known once the subscription exists.
    pub secret: RwLock<Option<String>>,
    /// Print each delivery (after the initial passes) rather than only count it.
    pub verbose: AtomicBool,
    pub received: AtomicU64,
    pub verified: AtomicU64,
    pub findings: AtomicU64,
}

pub type Shared = Arc<Receiver>;

async fn hook(req: HttpRequest, body: web::Bytes, state: web::Data<Shared>) -> HttpResponse {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_owned()
    };
    let signature = header("x-service-signature-256");
    let verified = state
        .secret
        .read()
        .ok()
        .and_then(|s| s.clone())
        .is_some_and(|s| posture_domain::signature::verify(&s, &body, &signature));
    let findings = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["data"]["findings"].as_array().map(Vec::len))
        .unwrap_or(0);
    state.received.fetch_add(1, Ordering::Relaxed);
    state
        .verified
        .fetch_add(u64::from(verified), Ordering::Relaxed);
    state.findings.fetch_add(findings as u64, Ordering::Relaxed);
    if !state.verbose.load(Ordering::Relaxed) {
        return if verified {
            HttpResponse::NoContent().finish()
        } else {
            HttpResponse::Unauthorized().finish()
        };
    }
    let line = format!(
        "webhook  {:<16}  delivery {}  {:>3} findings  signature {}\n",
        header("x-service-event"),
        header("x-service-delivery"),
        findings,
        if verified { "verified" } else { "INVALID" }
    );
    let _ = std::io::stdout().lock().write_all(line.as_bytes());
    if verified {
        HttpResponse::NoContent().finish()
    } else {
        HttpResponse::Unauthorized().finish()
    }
}

/// Starts the receiver on a free loopback port; returns its hook URL.
pub fn start(state: Shared) -> anyhow::Result<String> {
    let (listener, url) = crate::receivers::loopback("/hook")?;
    let state = web::Data::new(state);
    crate::receivers::serve(listener, 1, move |routes| {
        routes
            .app_data(state.clone())
            .route("/hook", web::post().to(hook));
    })?;
    Ok(url)
}

/// Subscribes the receiver for every event type through the API; returns the secret.
pub fn subscribe(api: &str, key: &str, hook_url: &str) -> anyhow::Result<String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let response = reqwest::Client::new()
            .post(format!("{api}/api/v1/webhooks"))
            .bearer_auth(key)
            .json(&serde_json::json!({
                "name": "demo receiver", "webhookUrl": hook_url, "webhookType": "generic",
                "eventTypes": ["finding_critical", "finding_high", "finding_medium", "finding_low"]
            }))
            .send()
            .await?;
        let status = response.status();
        let body: serde_json::Value = response.json().await?;
        body["data"]["signingSecret"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                anyhow::anyhow!("creating the demo subscription failed ({status}): {body}")
            })
    })
}
