//! `GET /events` with `Accept: text/event-stream`: the feed as Server-Sent Events (WHATWG
//! HTML, "Server-sent events"), for consumers that would rather hold one connection than
//! long-poll.
//!
//! A stream sends every event after `after` (or after `Last-Event-ID`, which a reconnecting
//! client sends and which wins: `mod.rs` reads it for both answers), then each new one as its pass commits: one message per
//! event, `id:` its id and `data:` the event as a page of the feed lists it. It takes one
//! waiting place of its key and instance for its whole life (the bounds of long-polls), is
//! counted once against the rate limit, and reads the database only when word of its
//! customer's changed data arrives (the `LISTEN` the long-polls use).
//!
//! A stream ends by itself, and its client reconnects with `Last-Event-ID` (browsers and
//! SSE libraries do): after `POSTURE_EVENT_STREAM_SECS`, when the server begins to shut
//! down, within a second of its key being revoked or expiring, and when its reader takes
//! more than 30 seconds to accept a message (a reader that stops reading does not hold
//! memory or a place: what waits for it is one message). Messages are produced by a task
//! that owns the place; the response body only drains what the task sends.

use std::convert::Infallible;

use actix_web::{
    HttpRequest, HttpResponse,
    http::header::{self, Accept, Header as _, Quality},
    web::{self, Bytes},
};
use posture_domain::{
    event::{EventFilter, EventPage},
    ports::DataChangeSubscription,
};
use posture_wire::events::EventResponse;
use schemars::{Schema, SchemaGenerator};
use tokio::{sync::mpsc, time::Instant};

use super::{KEY_CHECK, key_is_revoked, read_page, woken_read};
use crate::{
    auth::{Caller, Presented, presented},
    error::ApiError,
    event_waits::WaitSlot,
    state::ApiState,
};

/// The schema of the stream's body (for the contract).
pub(super) fn schema(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({
        "type": "string",
        "description": "Server-Sent Events: one message per event \
                        (`id:` the event's id, `data:` the event as a page of the feed lists \
                        it, on one line), and a `: keep-alive` comment after 15 seconds \
                        without a message. The stream ends after the instance's stream \
                        period (10 minutes by default), at shutdown or when the key is no \
                        longer valid: reconnect with `Last-Event-ID`."
    })
}

/// Whether the request asks for the stream (`text/event-stream` among the media types it
/// accepts, with a quality above 0).
pub(super) fn wanted(req: &HttpRequest) -> bool {
    Accept::parse(req).is_ok_and(|accept| {
        accept.iter().any(|item| {
            item.item.essence_str() == "text/event-stream" && item.quality > Quality::ZERO
        })
    })
}

/// Answers with the stream: its place taken and its first page read before the answer, so
/// that a bound reached, or an unknown `after`, is an error status rather than a stream.
pub(super) async fn open(
    req: &HttpRequest,
    caller: &Caller,
    filter: EventFilter,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let waits = &state.event_waits;
    if waits.is_stopping() {
        return Err(ApiError::Busy("the server is shutting down"));
    }
    let key = presented(req.headers(), state.keyring.token_keys(), state.clock.now())
        .ok_or(ApiError::Unauthorized)?;
    let slot = waits
        .take(caller.key_id(), caller.scope().customer_id())
        .await?;
    // Subscribed before the first read: a pass committing in between is not missed.
    let changes = waits.changes.subscribe(caller.scope().customer_id());
    let page = read_page(state.ports.events.as_ref(), caller, &filter).await?;
    let (sender, receiver) = mpsc::channel::<Bytes>(1);
    let stream = Stream {
        state: state.clone(),
        caller: caller.clone(),
        key,
        filter,
        changes,
        sender,
        _slot: slot,
    };
    actix_web::rt::spawn(stream.run(page));
    metrics::counter!("posture_event_streams_opened_total").increment(1);
    let body = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let message = receiver.recv().await?;
        Some((Ok::<_, Infallible>(message), receiver))
    });
    Ok(stream_response().streaming(body))
}

/// The headers a stream is answered with, without the stream (a HEAD).
pub(super) fn head() -> HttpResponse {
    stream_response().finish()
}

fn stream_response() -> actix_web::HttpResponseBuilder {
    let mut response = HttpResponse::Ok();
    response
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        // Proxies that buffer responses (nginx) pass this one on as it comes.
        .insert_header(("x-accel-buffering", "no"));
    response
}

/// A stream's task: what it reads, where it sends, and the place it holds until it ends.
struct Stream {
    state: web::Data<ApiState>,
    caller: Caller,
    key: Presented,
    filter: EventFilter,
    changes: Box<dyn DataChangeSubscription>,
    sender: mpsc::Sender<Bytes>,
    _slot: WaitSlot,
}

/// Why a stream ended (the `reason` label of `posture_event_streams_ended_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// It lasted the instance's stream period.
    Period,
    /// The server began to shut down.
    Shutdown,
    /// Its key was revoked or expired.
    Key,
    /// Its reader left, or took too long to accept a message.
    Reader,
    /// A read failed (the database, `after` past retention, an event not serialisable): the
    /// client's reconnection gets the error status.
    Read,
}

impl End {
    fn label(self) -> &'static str {
        match self {
            End::Period => "period",
            End::Shutdown => "shutdown",
            End::Key => "key",
            End::Reader => "reader",
            End::Read => "read",
        }
    }
}

impl Stream {
    async fn run(mut self, page: EventPage) {
        let Err(end) = self.follow(page).await;
        metrics::counter!("posture_event_streams_ended_total", "reason" => end.label())
            .increment(1);
    }

    /// Sends the events of `page` and of every page after it, as they come, until the
    /// stream ends (and why).
    async fn follow(&mut self, mut page: EventPage) -> Result<Infallible, End> {
        let deadline = Instant::now() + self.state.event_waits.stream_for();
        // No `retry:` field: SSE libraries hand a message of it alone to their callers as
        // an event without data (httpx-sse does); their own reconnection delay serves.
        loop {
            let caught_up = !page.has_more;
            for event in std::mem::take(&mut page.events) {
                self.filter.after = Some(event.id);
                let message = message(EventResponse::from(event)).map_err(|e| {
                    tracing::error!(error = %e, "an event could not be written as a message");
                    End::Read
                })?;
                self.send(message).await?;
            }
            page = if caught_up {
                let heard = self.wait_for_news(deadline).await?;
                woken_read(&self.state, &self.caller, &self.filter, heard).await
            } else if self.state.event_waits.is_stopping() {
                return Err(End::Shutdown);
            } else if Instant::now() >= deadline {
                return Err(End::Period);
            } else if key_is_revoked(&self.state, &self.key, &self.caller).await {
                // Catching up on many pages: the key is checked before each, as when quiet.
                return Err(End::Key);
            } else {
                read_page(self.state.ports.events.as_ref(), &self.caller, &self.filter).await
            }
            .map_err(|_| End::Read)?;
        }
    }

    /// Returns when the customer's data may have changed (and the key is still valid), with
    /// the instant the change was heard, or why the stream ends; sends a comment after the
    /// heartbeat period without a message.
    async fn wait_for_news(&mut self, deadline: Instant) -> Result<std::time::Instant, End> {
        let mut quiet_since = Instant::now();
        loop {
            let news = tokio::select! {
                heard = self.changes.changed() => Some(heard),
                () = tokio::time::sleep(KEY_CHECK) => None,
                () = tokio::time::sleep_until(deadline) => return Err(End::Period),
                () = self.state.event_waits.stopped() => return Err(End::Shutdown),
                () = self.sender.closed() => return Err(End::Reader),
            };
            if key_is_revoked(&self.state, &self.key, &self.caller).await {
                return Err(End::Key);
            }
            if let Some(heard) = news {
                return Ok(heard);
            }
            if quiet_since.elapsed() >= self.state.event_waits.heartbeat() {
                self.send(Bytes::from_static(b": keep-alive\n\n")).await?;
                quiet_since = Instant::now();
            }
        }
    }

    /// Hands a message to the reader, or ends the stream if it is gone or too slow.
    async fn send(&self, message: Bytes) -> Result<(), End> {
        self.sender
            .send_timeout(message, self.state.event_waits.slow_reader())
            .await
            .map_err(|_| End::Reader)
    }
}

/// One event as an SSE message.
fn message(event: EventResponse) -> serde_json::Result<Bytes> {
    // One line: serde_json escapes every newline inside strings.
    let data = serde_json::to_string(&event)?;
    Ok(Bytes::from(format!("id: {}\ndata: {data}\n\n", event.id)))
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn the_stream_is_asked_for_by_accept() {
        for (accept, wanted) in [
            ("text/event-stream", true),
            ("application/json, text/event-stream;q=0.5", true),
            ("TEXT/Event-Stream", true),
            ("text/event-stream;q=0", false),
            ("application/json", false),
            ("*/*", false),
            ("text/*", false),
            ("nonsense;;;", false),
        ] {
            let req = TestRequest::default()
                .insert_header((header::ACCEPT, accept))
                .to_http_request();
            assert_eq!(self::wanted(&req), wanted, "{accept}");
        }
        assert!(!wanted(&TestRequest::default().to_http_request()));
    }
}
