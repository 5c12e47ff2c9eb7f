//! `posture` with a plain-http URL (accepted only for a loopback host) sends its key to that
//! host and to nothing else: a proxy named by `HTTP_PROXY` or `ALL_PROXY` would receive the
//! whole `svc_` key in plain text.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::{
    io::{Read as _, Write as _},
    net::TcpListener,
    process::Command,
    sync::mpsc,
    thread,
    time::Duration,
};

const KEY: &str = "svc_proxytestkey0000000000000000000000000000";

/// Accepts one connection and sends back what it read of the request's head.
fn listener(answer: &'static str) -> (u16, mpsc::Receiver<String>) {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let (sender, received) = mpsc::channel();
    thread::spawn(move || {
        for stream in socket.incoming() {
            let Ok(mut stream) = stream else { return };
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut head = Vec::new();
            let mut byte = [0; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = stream.write_all(answer.as_bytes());
            let _ = sender.send(String::from_utf8_lossy(&head).into_owned());
        }
    });
    (port, received)
}

#[test]
fn a_plain_http_key_goes_to_the_loopback_host_named_and_never_through_a_proxy() {
    let refusal = "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n\
                   content-length: 50\r\nconnection: close\r\n\r\n\
                   {\"error\":\"unauthorized\",\"reason\":\"a test answer\"}";
    let (service, at_service) = listener(refusal);
    let (proxy, at_proxy) = listener(refusal);
    let proxy_url = format!("http://127.0.0.1:{proxy}");
    let output = Command::new(env!("CARGO_BIN_EXE_posture"))
        .arg("whoami")
        .env("POSTURE_URL", format!("http://127.0.0.1:{service}"))
        .env("POSTURE_API_KEY", KEY)
        .env("HTTP_PROXY", &proxy_url)
        .env("http_proxy", &proxy_url)
        .env("ALL_PROXY", &proxy_url)
        .env("all_proxy", &proxy_url)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .unwrap();

    let request = at_service
        .recv_timeout(Duration::from_secs(10))
        .expect("the service named was asked");
    assert!(request.contains(KEY), "{request}");
    assert!(
        at_proxy.recv_timeout(Duration::from_millis(300)).is_err(),
        "the proxy received a request"
    );
    // The 401 of the service named is what the user reads.
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("the key was not accepted"), "{said}");
}
