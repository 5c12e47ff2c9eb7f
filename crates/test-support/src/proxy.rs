//! A TCP proxy that can freeze a connection without closing it: the fault a half-open TCP
//! connection, a stuck NAT entry or a paused virtual machine produces, which no error
//! reports. Tests and `cargo xtask chaos` put it between posture and PostgreSQL.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream, tcp},
};

/// One proxied connection: the port its upstream side uses (PostgreSQL's
/// `pg_stat_activity.client_port`) and whether it is frozen.
struct Link {
    upstream_port: u16,
    frozen: Arc<AtomicBool>,
}

/// A loopback TCP proxy to `upstream`, running on its own thread until dropped.
pub struct FreezingProxy {
    addr: SocketAddr,
    links: Arc<Mutex<Vec<Link>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FreezingProxy {
    /// Starts a proxy on a free loopback port.
    pub fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let links: Arc<Mutex<Vec<Link>>> = Arc::default();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let accepted = Arc::clone(&links);
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = TcpListener::from_std(listener) else {
                    return;
                };
                tokio::select! {
                    _ = stopped => {}
                    () = accept(listener, upstream, accepted) => {}
                }
            });
        });
        Ok(Self {
            addr,
            links,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Freezes the connection whose upstream side uses `port`: bytes stop flowing both
    /// ways, and nothing is closed. Returns whether such a connection exists.
    pub fn freeze_upstream_port(&self, port: u16) -> bool {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let mut found = false;
        for link in links.iter().filter(|l| l.upstream_port == port) {
            link.frozen.store(true, Ordering::Release);
            found = true;
        }
        found
    }

    /// Freezes, or thaws, every connection open now.
    pub fn set_all_frozen(&self, frozen: bool) {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        for link in links.iter() {
            link.frozen.store(frozen, Ordering::Release);
        }
    }
}

impl Drop for FreezingProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, links: Arc<Mutex<Vec<Link>>>) {
    while let Ok((client, _)) = listener.accept().await {
        let Ok(server) = TcpStream::connect(upstream).await else {
            continue;
        };
        let Ok(local) = server.local_addr() else {
            continue;
        };
        let frozen = Arc::new(AtomicBool::new(false));
        links.lock().unwrap_or_else(|p| p.into_inner()).push(Link {
            upstream_port: local.port(),
            frozen: Arc::clone(&frozen),
        });
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        tokio::spawn(pipe(client_read, server_write, Arc::clone(&frozen)));
        tokio::spawn(pipe(server_read, client_write, frozen));
    }
}

/// Copies bytes one way while the link is not frozen; a frozen link holds what it read.
async fn pipe(mut from: tcp::OwnedReadHalf, mut to: tcp::OwnedWriteHalf, frozen: Arc<AtomicBool>) {
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while frozen.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    if !frozen.load(Ordering::Acquire) {
        let _ = to.shutdown().await;
    }
}
