//! The events feed as Server-Sent Events (`Accept: text/event-stream`, docs/api.md "Events"):
//! what is there, then each event as its pass commits; resumed by `Last-Event-ID`; bounded
//! like waiting requests; ended by the stream period, a revoked key, a reader that left and
//! shutdown.

use std::time::Duration;

use posture_domain::{Scope, console::Actor, ports::ApiKeyRepository as _};
use posture_test_support::{fixtures, waits::wait_for};
use reqwest::{Response, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{TestApp, assert_error};

/// A message of the stream: its fields as sent (`id`, `data`, or a comment).
#[derive(Debug, Default)]
struct Message {
    id: Option<String>,
    data: Option<Value>,
    comment: bool,
}

/// Reads a stream message by message (a minimal reader of the WHATWG format: fields up to
/// a blank line; posture sends one `data:` line per message).
struct Sse {
    response: Response,
    buffer: String,
}

impl Sse {
    async fn open(app: &TestApp, query: &str, key: &str, last_event_id: Option<&str>) -> Self {
        let response = request(app, query, key, last_event_id).await;
        assert_eq!(response.status(), StatusCode::OK);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next message, or `None` when the stream ended.
    async fn next(&mut self) -> Option<Message> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                return Some(parse(&block));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.response.chunk())
                .await
                .expect("a message within 20 s")
                .unwrap()?;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// The next event message (past comments), as `(id, event)`.
    async fn event(&mut self) -> (String, Value) {
        loop {
            let message = self.next().await.expect("the stream goes on");
            if let (Some(id), Some(data)) = (message.id, message.data) {
                assert_eq!(data["id"], id.as_str(), "the message's id is the event's");
                return (id, data);
            }
        }
    }

    /// Reads until the stream ends; panics if an event comes first.
    async fn ends(&mut self) {
        while let Some(message) = self.next().await {
            assert!(message.id.is_none(), "no event expected: {message:?}");
        }
    }
}

fn parse(block: &str) -> Message {
    let mut message = Message::default();
    for line in block.lines() {
        if line.starts_with(':') {
            message.comment = true;
        } else if let Some(value) = line.strip_prefix("id: ") {
            message.id = Some(value.to_owned());
        } else if let Some(value) = line.strip_prefix("data: ") {
            message.data = Some(serde_json::from_str(value).unwrap());
        } else if !line.is_empty() {
            panic!("unexpected line {line:?}");
        }
    }
    message
}

async fn request(app: &TestApp, query: &str, key: &str, last_event_id: Option<&str>) -> Response {
    let mut request = app
        .client
        .get(app.url(&format!("/api/v1/events{query}")))
        .bearer_auth(key)
        .header("accept", "text/event-stream")
        .header("accept-encoding", "gzip, zstd");
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    request.send().await.unwrap()
}

/// A server whose quiet streams send a comment every second: a reader that left is noticed
/// when a write to its connection fails (actix-web has no other sign of it), so by the
/// second comment after it left.
async fn quickly_noticing_readers_who_left() -> TestApp {
    TestApp::with_event_waits(|waits| waits.with_heartbeat(Duration::from_secs(1))).await
}

fn types(events: &[(String, Value)]) -> Vec<(&str, &str)> {
    events
        .iter()
        .map(|(_, e)| {
            (
                e["type"].as_str().unwrap(),
                e["finding"]["id"].as_str().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_stream_sends_what_is_there_then_each_event_as_it_commits_and_resumes() {
    let app = quickly_noticing_readers_who_left().await;
    let (a, tenant) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let u1 = fixtures::identity("u1", &tenant, "Ada");
    app.ingest(
        a,
        &[
            u1.clone(),
            fixtures::finding("f1", &tenant, "critical", "open", "u1"),
            fixtures::finding("f2", &tenant, "high", "open", "u1"),
        ],
    )
    .await;
    let feed = app.get_json("/api/v1/events", &key, StatusCode::OK).await;

    let mut stream = Sse::open(&app, "", &key, None).await;
    let headers = stream.response.headers();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["cache-control"], "no-cache");
    assert!(
        headers.get("content-encoding").is_none(),
        "a stream is never compressed (a compressor would hold messages back)"
    );
    let mut received = vec![stream.event().await, stream.event().await];
    assert_eq!(
        received.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>(),
        feed["data"].as_array().unwrap().clone(),
        "each event as GET /events shows it"
    );
    assert_eq!(app.event_waits.waiting(), 1, "a stream takes one place");

    // A pass commits while the stream is open: its events come without asking.
    app.ingest(
        a,
        &[
            u1,
            fixtures::finding("f1", &tenant, "critical", "resolved", "u1"),
            fixtures::finding("f2", &tenant, "high", "open", "u1"),
            fixtures::finding("f3", &tenant, "low", "open", "u1"),
        ],
    )
    .await;
    received.push(stream.event().await);
    received.push(stream.event().await);
    assert_eq!(
        types(&received),
        [
            ("finding_critical", "f1"),
            ("finding_high", "f2"),
            ("finding_low", "f3"),
            ("finding_resolved", "f1"),
        ]
    );
    drop(stream);
    wait_for("the place given back", Duration::from_secs(20), || async {
        (app.event_waits.waiting() == 0).then_some(())
    })
    .await;

    // A reconnecting client sends Last-Event-ID, which wins over `after`; filters hold.
    let first_id = &received[0].0;
    let last_id = &received[3].0;
    let mut resumed = Sse::open(
        &app,
        &format!("?after={last_id}"),
        &key,
        Some(first_id.as_str()),
    )
    .await;
    let mut again = Vec::new();
    for _ in 0..3 {
        again.push(resumed.event().await);
    }
    assert_eq!(
        again.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        received[1..].iter().map(|(id, _)| id).collect::<Vec<_>>(),
        "exactly the events after Last-Event-ID"
    );
    drop(resumed);
    let mut lifecycle = Sse::open(&app, "?type=finding_resolved", &key, None).await;
    assert_eq!(
        types(&[lifecycle.event().await]),
        [("finding_resolved", "f1")]
    );
}

#[tokio::test]
async fn streams_are_bounded_and_refused_in_words_before_they_start() {
    let app = quickly_noticing_readers_who_left().await;
    let (a, _) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let (_, no_scope) = app.key(a, &[Scope::ReadIdentities]).await;
    for (last_event_id, query) in [
        (Some("not-an-id"), ""),
        (Some("42"), ""),
        (None, "?after=not-an-id"),
        (Some(&*uuid::Uuid::now_v7().to_string()), ""),
    ] {
        let response = request(&app, query, &key, last_event_id).await;
        let reason = assert_error(response, StatusCode::BAD_REQUEST, "invalid_request").await;
        assert!(!reason.is_empty());
    }
    assert_error(
        request(&app, "", &no_scope, None).await,
        StatusCode::FORBIDDEN,
        "insufficient_scope",
    )
    .await;
    assert_eq!(
        app.event_waits.waiting(),
        0,
        "a refused stream holds no place"
    );

    let streams = [
        Sse::open(&app, "", &key, None).await,
        Sse::open(&app, "", &key, None).await,
        Sse::open(&app, "", &key, None).await,
        Sse::open(&app, "", &key, None).await,
    ];
    let fifth = request(&app, "", &key, None).await;
    assert_eq!(fifth.headers()["retry-after"], "1");
    assert_error(fifth, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    // A long-poll of the same key shares the bound.
    assert_error(
        app.get("/api/v1/events?wait=5", &key).await,
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
    )
    .await;
    drop(streams);
    wait_for(
        "every place given back",
        Duration::from_secs(20),
        || async { (app.event_waits.waiting() == 0).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn a_revoked_key_ends_its_streams_and_shutting_down_ends_every_stream() {
    let app = TestApp::start().await;
    let (a, _) = app.customer("A").await;
    let (id, key) = app.key(a, &[Scope::ReadFindings]).await;
    let (_, other) = app.key(a, &[Scope::ReadFindings]).await;
    let mut revoked = Sse::open(&app, "", &key, None).await;
    let mut staying = Sse::open(&app, "", &other, None).await;
    assert_eq!(app.event_waits.waiting(), 2);

    app.store
        .revoke_key(None, id, &Actor::Operator)
        .await
        .unwrap();
    revoked.ends().await;
    assert_error(
        request(&app, "", &key, None).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    assert_eq!(
        app.event_waits.waiting(),
        1,
        "the other key's stream goes on"
    );

    app.event_waits.stop_waiting();
    staying.ends().await;
    assert_error(
        request(&app, "", &other, None).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
    )
    .await;
}

#[tokio::test]
async fn a_stream_ends_after_its_period_and_a_quiet_one_says_it_is_alive() {
    let app = TestApp::with_event_waits(|waits| {
        (waits.with_stream_for(Duration::from_secs(4))).with_heartbeat(Duration::from_secs(1))
    })
    .await;
    let (a, _) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let mut stream = Sse::open(&app, "", &key, None).await;
    let heartbeat = stream.next().await.unwrap();
    assert!(
        heartbeat.comment,
        "a comment after the heartbeat period of quiet"
    );
    let started = std::time::Instant::now();
    stream.ends().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "ended after its period"
    );
    assert_eq!(app.event_waits.waiting(), 0);
}

/// A customer with `backlog` new findings, hence `backlog` events, and a key of it.
async fn with_backlog(app: &TestApp, backlog: usize) -> (posture_domain::KeyId, String) {
    let (a, tenant) = app.customer("A").await;
    let key = app.key(a, &[Scope::ReadFindings]).await;
    let mut records = vec![fixtures::identity("u1", &tenant, "Ada")];
    records.extend(
        (0..backlog).map(|i| fixtures::finding(&format!("f{i:05}"), &tenant, "high", "open", "u1")),
    );
    app.ingest(a, &records).await;
    key
}

/// A stream of `query` read by a client with a 4 KiB receive window, past its head (200):
/// the server waits on it once the connection's buffers are full.
async fn small_window_stream(app: &TestApp, query: &str, key: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let address = app.base.trim_start_matches("http://").parse().unwrap();
    let mut connection = socket.connect(address).await.unwrap();
    connection
        .write_all(
            format!(
                "GET /api/v1/events{query} HTTP/1.1\r\nHost: posture\r\n\
                 Authorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut head = [0u8; 512];
    let read = connection.read(&mut head).await.unwrap();
    assert!(
        head[..read].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head[..read])
    );
    connection
}

#[tokio::test]
async fn a_reader_that_stops_reading_holds_no_place() {
    let app =
        TestApp::with_event_waits(|waits| waits.with_slow_reader(Duration::from_secs(1))).await;
    // About six megabytes of events: more than the connection's buffers hold (the
    // server's send buffer grows to 4 MB by default on Linux).
    let (_, key) = with_backlog(&app, 12_000).await;
    // A client that reads the head, then nothing more.
    let connection = small_window_stream(&app, "", &key).await;
    assert_eq!(app.event_waits.waiting(), 1);
    wait_for(
        "the stream given up on its slow reader",
        Duration::from_secs(20),
        || async { (app.event_waits.waiting() == 0).then_some(()) },
    )
    .await;
    drop(connection);
}

#[tokio::test]
async fn a_key_revoked_while_its_stream_catches_up_ends_it_before_the_backlog() {
    let app = TestApp::start().await;
    let backlog = 30_000;
    let (id, key) = with_backlog(&app, backlog).await;
    // The stream waits on its reader page after page.
    let mut connection = small_window_stream(&app, "?limit=500", &key).await;

    app.store
        .revoke_key(None, id, &Actor::Operator)
        .await
        .unwrap();
    // Read all it sends: it ends (the chunked body's last chunk) long before the backlog.
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let read = connection.read(&mut buffer).await.unwrap();
            received.extend_from_slice(&buffer[..read]);
            if read == 0 || received.ends_with(b"0\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream ended");
    let events = received.windows(4).filter(|w| w == b"id: ").count();
    assert!(
        events < backlog / 2,
        "{events} of {backlog} events sent after the key was revoked"
    );
}
