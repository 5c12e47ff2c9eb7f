//! The local webhook receivers of the lab tasks are served one way: actix on a runtime and a
//! thread of their own, on a loopback listener, stopped by the returned handle (or with the
//! process). Each task keeps its own handler, because each receiver answers for something
//! else: the demo's verifies and prints like a customer's (`demo_receiver.rs`), chaos and
//! soak script faults and record every attempt (`chaos/receiver.rs`), the delivery bench
//! only counts, at the worker's full rate (`bench/deliveries.rs`).

use std::net::TcpListener;

use actix_web::{App, HttpServer, dev::ServerHandle, web::ServiceConfig};

/// Serves the routes `configure` adds on `listener` with `workers` threads.
pub fn serve<F>(listener: TcpListener, workers: usize, configure: F) -> anyhow::Result<ServerHandle>
where
    F: Fn(&mut ServiceConfig) + Send + Clone + 'static,
{
    let server = HttpServer::new(move || App::new().configure(configure.clone()))
        .workers(workers)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)?
        .run();
    let handle = server.handle();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(server).ok()
    });
    Ok(handle)
}

/// A listener on a free loopback port and the URL of its `path`.
pub fn loopback(path: &str) -> anyhow::Result<(TcpListener, String)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}{path}", listener.local_addr()?);
    Ok((listener, url))
}
