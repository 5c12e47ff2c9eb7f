//! `GET /events` and `GET /events/{id}`: the events feed (docs/api.md, "Events").
//!
//! With `wait`, a request that finds nothing after `after` takes a waiting place (bounded
//! per key and per instance), subscribes to word of its customer's changed data *before*
//! reading again (so a pass committing in between is not missed), and answers as soon as
//! a read finds events, at the end of the wait, or when the server begins to shut down.
//! With `Accept: text/event-stream` the same route streams the feed instead ([`stream`]).

mod stream;

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, http::header, web};
use posture_domain::{
    EventId, Refusal, Scope,
    event::{EventFilter, EventPage},
    ports::EventRepository,
};
use posture_wire::{
    DataResponse,
    events::{EventListMeta, EventListResponse, EventResponse, EventsQuery},
};

use super::{Access, Answer, Answers, Built, Content, Endpoint, Reply, RequestHeader, schema};
use crate::{
    auth::{Caller, Presented, presented},
    error::ApiError,
    handler,
    input::{Id, Input, canonical_query, not_found},
    state::ApiState,
};

pub static LIST: Endpoint = Endpoint {
    path: "/events",
    operation_id: "listEvents",
    tag: "events",
    summary: "List finding events",
    description: "The customer's finding events, oldest first: each new finding \
                  (`finding_critical` ... `finding_low`) and each known finding resolved, \
                  reopened or changed in severity, as the analyzer passes committed them, \
                  whether or not any webhook subscription exists. The same events webhook \
                  deliveries announce (by `eventId`): after missed deliveries, read on \
                  `after` the last one received. Kept for the retention period (30 days by \
                  default). With `wait`, a request finding nothing new is answered as soon as \
                  an event exists, or empty at the end of the wait. With `Accept: \
                  text/event-stream`, a stream of Server-Sent Events instead: every event \
                  after `after` (or `Last-Event-ID`) as it is committed, one per message \
                  (`id:` the event's id, `data:` the event as JSON). A customer's keys hold \
                  at most 32 waiting requests and streams at once over every instance, a key \
                  4 on an instance (429 with `Retry-After` past either).",
    request_headers: &[&LAST_EVENT_ID],
    success: "A page of events; or, asked for with `Accept: text/event-stream`, the stream \
              of them.",
    success_headers: &["Link"],
    errors: &[400, 429, 503],
    ..Endpoint::of(handler!(list_events), Access::Scope(Scope::ReadFindings))
};

pub static GET: Endpoint = Endpoint {
    path: "/events/{id}",
    operation_id: "getEvent",
    tag: "events",
    summary: "Get a finding event",
    description: "One event of the customer (an id of another customer, or past retention, \
                  is 404).",
    success: "The event.",
    errors: &[400, 404],
    ..Endpoint::of(handler!(get_event), Access::Scope(Scope::ReadFindings))
};

/// The `Last-Event-ID` request header, as the contract states it: cursor-shaped (an empty
/// value is no value), what it names is the feed's to say.
static LAST_EVENT_ID: RequestHeader = RequestHeader {
    name: "Last-Event-ID",
    description: "The id of the last event received, which an SSE client sends when it \
                  reconnects: the feed goes on after it, as `after` would (and instead of \
                  `after`). An id that is no event of yours is 400; empty, it is ignored.",
    schema: last_event_id_schema,
};

fn last_event_id_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9_-]*$"})
}

/// `Last-Event-ID`, if sent and not empty: the event it names, or why it names none.
fn last_event_id(req: &HttpRequest) -> Result<Option<EventId>, ApiError> {
    let Some(value) = req.headers().get("last-event-id") else {
        return Ok(None);
    };
    let refused = || {
        ApiError::invalid(
            Refusal::Malformed,
            LAST_EVENT_ID.name,
            "Last-Event-ID: not an event id (send the `id` of an event received)",
        )
    };
    let id = value.to_str().map_err(|_| refused())?.trim();
    if id.is_empty() {
        // A client that received no event yet may send it empty: read from `after`.
        return Ok(None);
    }
    id.parse().map(Some).map_err(|_| refused())
}

/// The feed's answer: a page of events as JSON, or their stream.
enum Feed {}

impl Answers for Feed {
    const ANSWER: Answer = Answer {
        status: 200,
        content: Content::Media(&[
            ("application/json", schema::<EventListResponse>),
            ("text/event-stream", stream::schema),
        ]),
    };
}

async fn list_events(
    req: HttpRequest,
    caller: Caller,
    Input(query): Input<EventsQuery>,
    state: web::Data<ApiState>,
) -> Result<Built<Feed>, ApiError> {
    let (after, named_by) = match (last_event_id(&req)?, &query.after) {
        (Some(last), _) => (Some(last), LAST_EVENT_ID.name),
        (None, None) => (None, "after"),
        (None, Some(after)) => (Some(after.event_id().ok_or_else(unknown_after)?), "after"),
    };
    // The feed says "no such event" of `after`; a position the header named is the header's.
    read_after(req, caller, query, state, after)
        .await
        .map(Built::new)
        .map_err(|e| match e {
            ApiError::InvalidRequest(refused)
                if named_by == LAST_EVENT_ID.name && refused.kind == Refusal::CursorMismatch =>
            {
                unknown_position(LAST_EVENT_ID.name)
            }
            other => other,
        })
}

async fn read_after(
    req: HttpRequest,
    caller: Caller,
    query: EventsQuery,
    state: web::Data<ApiState>,
    after: Option<EventId>,
) -> Result<HttpResponse, ApiError> {
    let filter = EventFilter {
        types: query.event_type.0.clone(),
        created_since: query.created_since.map(|t| t.0),
        after,
        limit: query.limit(),
    };
    // A HEAD neither waits nor streams: it is answered as the GET would begin (its status
    // and headers), without taking a waiting place.
    let head = req.method() == actix_web::http::Method::HEAD;
    if stream::wanted(&req) {
        if head {
            read_page(state.ports.events.as_ref(), &caller, &filter).await?;
            return Ok(stream::head());
        }
        return stream::open(&req, &caller, filter, state).await;
    }
    let read = || read_page(state.ports.events.as_ref(), &caller, &filter);
    let mut page = read().await?;
    let waits = &state.event_waits;
    let wait = match head {
        true => Duration::ZERO,
        false => waits.wait_for(Duration::from_secs(query.wait_secs())),
    };
    if page.events.is_empty() && !wait.is_zero() && !waits.is_stopping() {
        let key = presented(req.headers(), state.keyring.token_keys(), state.clock.now())
            .ok_or(ApiError::Unauthorized)?;
        let _slot = waits
            .take(caller.key_id(), caller.scope().customer_id())
            .await?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut changes = waits.changes.subscribe(caller.scope().customer_id());
        // Read once more after subscribing: a pass may have committed in between.
        page = read().await?;
        while page.events.is_empty() {
            let heard = tokio::select! {
                heard = changes.changed() => Some(heard),
                () = tokio::time::sleep(KEY_CHECK) => None,
                () = tokio::time::sleep_until(deadline) => break,
                () = waits.stopped() => break,
            };
            // A key revoked (or expired) while waiting reads nothing committed since, and
            // gives its place back: as a stream's does.
            if key_is_revoked(&state, &key, &caller).await {
                return Err(ApiError::Unauthorized);
            }
            if let Some(heard) = heard {
                page = woken_read(&state, &caller, &filter, heard).await?;
            }
        }
    }
    let next_cursor = page
        .events
        .last()
        .map(|e| e.id)
        .or(filter.after)
        .map(|id: EventId| id.to_string());
    let mut response = HttpResponse::Ok();
    if let (true, Some(cursor)) = (page.has_more, &next_cursor) {
        response.insert_header((header::LINK, next_link(&req, cursor)));
    }
    Ok(response.json(EventListResponse {
        data: page.events.into_iter().map(EventResponse::from).collect(),
        meta: EventListMeta {
            limit: filter.limit,
            next_cursor,
            has_more: page.has_more,
        },
    }))
}

/// How often a waiting request or a quiet stream checks that its key is still valid.
const KEY_CHECK: Duration = Duration::from_secs(1);

/// Whether the key a waiting request presented (`key`, whose principal was `caller`) is no
/// longer valid (revoked, expired, lapsed for inactivity, or fenced away from the caller's
/// address by a changed allow-list): from the key cache's memory, which changes reach at
/// once; the store when the cache no longer holds it. A store that cannot answer now says
/// nothing of the key: the request goes on waiting, never a 401 for a valid key.
async fn key_is_revoked(state: &ApiState, key: &Presented, caller: &Caller) -> bool {
    match key.authenticate(state.ports.keys.as_ref()).await {
        Ok(Some(principal)) => !caller.still_permitted(&principal),
        Ok(None) | Err(posture_domain::Error::CredentialLapsed(_)) => true,
        Err(_) => false,
    }
}

/// `after` names no event of the caller's (another customer's, or one past retention).
fn unknown_after() -> ApiError {
    unknown_position("after")
}

/// `field` (`after` or `Last-Event-ID`) names no event of the caller's.
fn unknown_position(field: &'static str) -> ApiError {
    ApiError::invalid(
        Refusal::CursorMismatch,
        field,
        format!(
            "{field}: no event of yours has this id (or it is older than the retention \
             period): start again with createdSince"
        ),
    )
}

/// The page `filter` asks for.
async fn read_page(
    events: &dyn EventRepository,
    caller: &Caller,
    filter: &EventFilter,
) -> Result<EventPage, ApiError> {
    events
        .list_events(caller.scope(), filter)
        .await
        .map_err(read_error)
}

/// The page `filter` names for a request woken by word of changed data heard at `woken`:
/// shared with the other requests the same change woke that read the same page.
async fn woken_read(
    state: &ApiState,
    caller: &Caller,
    filter: &EventFilter,
    woken: std::time::Instant,
) -> Result<EventPage, ApiError> {
    let page = state
        .event_waits
        .reads
        .read(
            state.ports.events.clone(),
            caller.scope(),
            filter,
            woken,
            read_error,
        )
        .await?;
    Ok(std::sync::Arc::unwrap_or_clone(page))
}

/// What a failed read of the feed answers.
fn read_error(e: posture_domain::Error) -> ApiError {
    match e {
        posture_domain::Error::NotFound => unknown_after(),
        other => other.into(),
    }
}

/// `Link: <...>; rel="next"`: this request's other parameters (canonical, without `wait`,
/// which a next page needs not) and `after` set to `cursor`.
fn next_link(req: &HttpRequest, cursor: &str) -> String {
    let mut query =
        form_urlencoded::Serializer::new(canonical_query(req.query_string(), &["after", "wait"]));
    query.append_pair("after", cursor);
    format!("<{}?{}>; rel=\"next\"", req.path(), query.finish())
}

async fn get_event(
    caller: Caller,
    Id(id): Id<EventId>,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<EventResponse>>, ApiError> {
    let event = state
        .ports
        .events
        .get_event(caller.scope(), id)
        .await
        .map_err(not_found::<EventId>)?;
    Ok(Reply::new(&DataResponse {
        data: EventResponse::from(event),
    }))
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn last_event_id_names_an_event_or_is_refused_in_words() {
        let id = uuid::Uuid::now_v7().to_string();
        let with = |value: &str| {
            TestRequest::default()
                .insert_header(("Last-Event-ID", value))
                .to_http_request()
        };
        assert_eq!(
            last_event_id(&with(&id)).unwrap().map(|e| e.to_string()),
            Some(id.clone())
        );
        assert_eq!(last_event_id(&with("")).unwrap(), None);
        assert_eq!(
            last_event_id(&TestRequest::default().to_http_request()).unwrap(),
            None
        );
        for bad in ["42", "not-an-id", &"f".repeat(4000)] {
            assert!(
                matches!(last_event_id(&with(bad)), Err(ApiError::InvalidRequest(_))),
                "{bad}"
            );
        }
    }
}
