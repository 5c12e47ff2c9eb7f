//! posture's HTTP API on actix-web.
//!
//! [`app`] builds the application: one middleware (`pipeline.rs`: request ids and the access
//! log, under `/api/v1` the gate — authentication and rate limits, `Cache-Control:
//! no-store` — and the route's scope and query, JSON error bodies for every 4xx/5xx,
//! compressed responses), `/healthz` and `/readyz`, the API reference page
//! (`/api/v1/docs`), and the `/api/v1` scope (the routes of the
//! [route table](routes::ENDPOINTS)). This
//! crate depends on the domain's ports only; the binary wires the adapters in.

mod answer;
mod auth;
pub mod client_ip;
mod compression;
mod conditional;
mod docs_page;
mod error;
pub mod event_waits;
pub mod export_slots;
mod gate;
mod handler;
mod health;
mod idempotency;
pub mod input;
mod json_errors;
pub mod mount;
pub mod oauth;
pub mod openapi;
mod pipeline;
mod places;
mod preconditions;
#[cfg(test)]
mod properties;
pub mod readiness;
mod reads;
pub mod routes;
pub mod scim;
pub mod shared_reads;
mod state;
mod telemetry;

use actix_web::{
    App, Error, HttpResponse,
    body::MessageBody,
    dev::{ServiceFactory, ServiceRequest, ServiceResponse},
    http::header,
    middleware::{DefaultHeaders, from_fn},
    web,
};

pub use client_ip::TrustedProxies;
pub use error::{ApiError, Refused};
pub use export_slots::ExportSlots;
pub use input::MAX_BODY_BYTES;
pub use reads::{ReadReplicas, Reads};
pub use state::{
    ApiState, Budgets, DEFAULT_CONCURRENT_EXPORTS, DEFAULT_EXPORT_STALL, DEFAULT_EXPORT_WAIT,
    MetricsRender, Ports, WebhookOps,
};
pub use telemetry::RequestId;

/// The application of one worker.
pub fn app(
    state: web::Data<ApiState>,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = Error,
        InitError = (),
    >,
> {
    let hsts = state.hsts;
    App::new()
        .app_data(state)
        .app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
        // The one middleware: telemetry, the gate and the route's admission under
        // `/api/v1`, JSON errors, compression (`pipeline.rs`).
        .wrap(from_fn(move |req, next| pipeline::serve(hsts, req, next)))
        .service(web::resource("/healthz").route(web::get().to(health::healthz)))
        .service(web::resource("/readyz").route(web::get().to(health::readyz)))
        .service(web::resource("/metrics").route(web::get().to(health::metrics)))
        // The reference page is public and static: registered before the gated scope.
        // A scope: its prefix is compared as text, where the template of its assets would be
        // tried with a regular expression on every request.
        .service(
            web::scope(docs_page::PATH)
                .service(web::resource("").route(web::get().to(docs_page::serve_page)))
                .service(web::resource("/").route(web::get().to(docs_page::redirect_to_page)))
                .service(web::resource("/{file}").route(web::get().to(docs_page::serve_asset)))
                .default_service(web::to(error::not_found)),
        )
        .configure(scim::register)
        .configure(oauth::register)
        .service(
            web::scope(routes::PREFIX)
                .configure(routes::register)
                .default_service(web::to(error::not_found)),
        )
        .default_service(web::to(error::not_found))
}

/// The application serving only `/metrics` (for `POSTURE_METRICS_BIND`).
pub fn metrics_app(
    render: MetricsRender,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = Error,
        InitError = (),
    >,
> {
    App::new()
        .wrap(DefaultHeaders::new().add((header::X_CONTENT_TYPE_OPTIONS, "nosniff")))
        .route(
            "/metrics",
            web::get().to(move || {
                let render = render.clone();
                async move {
                    HttpResponse::Ok()
                        .content_type("text/plain; version=0.0.4; charset=utf-8")
                        .body(render())
                }
            }),
        )
}
