//! What a route answers when it succeeds, stated by its handler's return type: [`Reply`]
//! (a JSON body of a type, with a status), [`NoContent`] (204), or [`Built`] (an answer the
//! route builds itself, of a kind that declares its media types). `handler.rs` reads the
//! [`Answer`] from the type into the route's declaration.

use std::marker::PhantomData;

use actix_web::{
    HttpRequest, HttpResponse, Responder,
    body::BoxBody,
    http::{
        StatusCode,
        header::{self, TryIntoHeaderPair},
    },
};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;

use crate::error::ApiError;

/// A function giving a JSON Schema (registering named schemas in the generator).
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// The schema of a wire type.
pub fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// What a route answers when it succeeds, as its handler's return type states it.
#[derive(Clone, Copy)]
pub struct Answer {
    pub status: u16,
    pub content: Content,
}

/// The body of a success answer.
#[derive(Clone, Copy)]
pub enum Content {
    /// A JSON body of this schema.
    Json(SchemaFn),
    /// A body in one of several media types (the export, the event feed).
    Media(&'static [(&'static str, SchemaFn)]),
    /// No body (204).
    Empty,
}

/// A handler's return type: what it answers when it succeeds.
pub trait Answers {
    const ANSWER: Answer;
}

impl<R: Answers> Answers for Result<R, ApiError> {
    const ANSWER: Answer = R::ANSWER;
}

/// A JSON answer of type `T` with status `STATUS`: `Result<Reply<DataResponse<X>>,
/// ApiError>` states the route's success response, and the body it answers is a `T`.
pub struct Reply<T, const STATUS: u16 = 200> {
    response: HttpResponse,
    body: PhantomData<fn() -> T>,
}

impl<T: Serialize, const STATUS: u16> Reply<T, STATUS> {
    /// `body`, as JSON.
    pub fn new(body: &T) -> Self {
        Self::sized(body, 0)
    }

    /// `body`, serialised into a buffer of `capacity` bytes to begin with (a large body
    /// grown by doubling is copied several times over).
    pub(crate) fn sized(body: &T, capacity: usize) -> Self {
        let mut buffer = Vec::with_capacity(capacity);
        let response = match serde_json::to_writer(&mut buffer, body) {
            Ok(()) => HttpResponse::build(status_of(STATUS))
                .content_type(header::ContentType::json())
                .body(buffer),
            Err(e) => {
                tracing::error!(error = %e, "serialising an answer failed");
                actix_web::ResponseError::error_response(&ApiError::Internal)
            }
        };
        Self::answered(response)
    }

    /// With this header too.
    pub fn header(mut self, header: impl TryIntoHeaderPair) -> Self {
        match header.try_into_pair() {
            Ok((name, value)) => {
                self.response.headers_mut().insert(name, value);
            }
            Err(_) => tracing::error!("an answer's header is not a valid header"),
        }
        self
    }
}

impl<T, const STATUS: u16> Reply<T, STATUS> {
    /// 304: the `If-None-Match` tag is current (its headers set by the caller).
    pub(crate) fn not_modified(response: HttpResponse) -> Self {
        debug_assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        Self::answered(response)
    }

    fn answered(response: HttpResponse) -> Self {
        Reply {
            response,
            body: PhantomData,
        }
    }
}

fn status_of(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl<T: JsonSchema, const STATUS: u16> Answers for Reply<T, STATUS> {
    const ANSWER: Answer = {
        assert!(
            STATUS >= 200 && STATUS < 300,
            "a reply is a success: a 2xx status"
        );
        Answer {
            status: STATUS,
            content: Content::Json(schema::<T>),
        }
    };
}

impl<T, const STATUS: u16> Responder for Reply<T, STATUS> {
    type Body = BoxBody;

    fn respond_to(self, _: &HttpRequest) -> HttpResponse {
        self.response
    }
}

/// 204: done, nothing to say.
pub struct NoContent;

impl Answers for NoContent {
    const ANSWER: Answer = Answer {
        status: 204,
        content: Content::Empty,
    };
}

impl Responder for NoContent {
    type Body = BoxBody;

    fn respond_to(self, _: &HttpRequest) -> HttpResponse {
        HttpResponse::NoContent().finish()
    }
}

/// An answer the route builds itself (a stream, a stored document), of the kind `K`
/// declares.
pub struct Built<K> {
    response: HttpResponse,
    kind: PhantomData<K>,
}

impl<K: Answers> Built<K> {
    pub fn new(response: HttpResponse) -> Self {
        Built {
            response,
            kind: PhantomData,
        }
    }
}

impl<K: Answers> Answers for Built<K> {
    const ANSWER: Answer = K::ANSWER;
}

impl<K> Responder for Built<K> {
    type Body = BoxBody;

    fn respond_to(self, _: &HttpRequest) -> HttpResponse {
        self.response
    }
}
