//! Response compression: gzip or zstd, as the client's `Accept-Encoding` prefers (RFC 9110
//! §12.5.3, its q-values; on a tie zstd, then gzip), for the bodies where it pays.
//!
//! * Compressed: a body of [`MIN_BYTES`] or more (lists, the contract, the reference page's
//!   script when it is not served gzipped already) and every streamed body (exports), which
//!   is compressed as it streams, chunk by chunk, so an export's memory stays flat.
//! * Left alone: a body under [`MIN_BYTES`] (an error, a detail, a 304: compression would
//!   cost more than it saves), a body that has a `Content-Encoding` already, a status
//!   without a body or a partial one (204, 206, 304), and server-sent events (each event
//!   must reach the client when it is written).
//! * A client that accepts no encoding posture has, identity included (`identity;q=0`), gets
//!   the identity anyway (RFC 9110 allows it), never a 406.
//!
//! Every body that could have been compressed says `Vary: Accept-Encoding`. A whole body is
//! compressed at once on the worker's thread (flate2's fast level, zstd's level 3); a stream
//! goes through actix-http's encoder, chunk by chunk.

use actix_http::{ResponseHead, body::BodySize, encoding::Encoder};
use actix_web::{
    body::{BoxBody, EitherBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::{
        StatusCode,
        header::{self, AcceptEncoding, ContentEncoding, Encoding, Header as _, HeaderValue},
    },
};

/// Bodies smaller than this are sent as they are.
pub const MIN_BYTES: u64 = 1024;

/// What posture can send, identity included (`negotiate` needs it to honour `identity`).
const SUPPORTED: [Encoding; 3] = [Encoding::identity(), Encoding::zstd(), Encoding::gzip()];

/// The encoding the request asks for, among those posture has.
pub(crate) fn negotiated(req: &ServiceRequest) -> ContentEncoding {
    let Ok(accepted) = AcceptEncoding::parse(req.request()) else {
        return ContentEncoding::Identity;
    };
    match accepted.negotiate(SUPPORTED.iter()) {
        Some(encoding) if encoding == Encoding::zstd() => ContentEncoding::Zstd,
        Some(encoding) if encoding == Encoding::gzip() => ContentEncoding::Gzip,
        _ => ContentEncoding::Identity,
    }
}

/// Whether a response with this head and body size is worth compressing.
fn compressible(head: &ResponseHead, size: BodySize) -> bool {
    let sized_enough = match size {
        BodySize::None => false,
        BodySize::Sized(n) => n >= MIN_BYTES,
        BodySize::Stream => true,
    };
    let streamed_events = head
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    sized_enough
        && !streamed_events
        && !head.headers().contains_key(header::CONTENT_ENCODING)
        && !matches!(
            head.status,
            StatusCode::NO_CONTENT | StatusCode::PARTIAL_CONTENT | StatusCode::NOT_MODIFIED
        )
        && !head.status.is_informational()
}

/// A whole body, compressed here, on the worker's own thread: actix-http's encoder hands
/// every chunk over 1 KiB to the blocking pool, a thread hop per response that cut a list's
/// throughput to a quarter (docs/performance.md, "Compression"). `None` if it fails.
fn compressed(encoding: ContentEncoding, body: &[u8]) -> Option<Vec<u8>> {
    match encoding {
        ContentEncoding::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(
                Vec::with_capacity(body.len() / 4),
                flate2::Compression::fast(),
            );
            std::io::Write::write_all(&mut encoder, body).ok()?;
            encoder.finish().ok()
        }
        ContentEncoding::Zstd => zstd::bulk::compress(body, ZSTD_LEVEL).ok(),
        _ => None,
    }
}

/// zstd's level (actix-http's streaming encoder uses the same).
pub(crate) const ZSTD_LEVEL: i32 = 3;

/// The response compressed as `encoding` says, if it pays (the module's rules). Applied by
/// the one middleware (`pipeline.rs`), outside the JSON error bodies, inside the access log.
pub(crate) fn encode<B: MessageBody + 'static>(
    encoding: ContentEncoding,
    response: ServiceResponse<B>,
) -> ServiceResponse<impl MessageBody> {
    response.map_body(move |head, body| {
        let as_it_is = |head: &mut ResponseHead, body| {
            EitherBody::left(Encoder::response(ContentEncoding::Identity, head, body))
        };
        if !compressible(head, body.size()) {
            return as_it_is(head, body);
        }
        // The representation varies with the request's `Accept-Encoding` whatever it got.
        head.headers_mut()
            .append(header::VARY, HeaderValue::from_static("accept-encoding"));
        if encoding == ContentEncoding::Identity {
            return as_it_is(head, body);
        }
        match body.try_into_bytes() {
            Ok(bytes) => match compressed(encoding, &bytes) {
                Some(smaller) => {
                    head.headers_mut()
                        .insert(header::CONTENT_ENCODING, encoding.to_header_value());
                    EitherBody::right(BoxBody::new(smaller))
                }
                None => EitherBody::right(BoxBody::new(bytes)),
            },
            // A stream (an export): compressed as it streams, memory flat. The encoder sets
            // `Content-Encoding` (and `Vary` again, harmlessly).
            Err(stream) => {
                head.headers_mut().remove(header::VARY);
                EitherBody::left(Encoder::response(encoding, head, stream))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use actix_web::{App, Error, HttpResponse, middleware::Next, test, web};

    use super::*;

    /// The compression alone, as a middleware.
    async fn compress(
        req: ServiceRequest,
        next: Next<impl MessageBody + 'static>,
    ) -> Result<ServiceResponse<impl MessageBody>, Error> {
        let encoding = negotiated(&req);
        Ok(encode(encoding, next.call(req).await?))
    }

    async fn served(
        path: &str,
        accept: Option<&str>,
    ) -> (StatusCode, Vec<(String, String)>, Vec<u8>) {
        let app = test::init_service(
            App::new()
                .wrap(actix_web::middleware::from_fn(compress))
                .route(
                    "/small",
                    web::get().to(|| async { HttpResponse::Ok().body("x".repeat(100)) }),
                )
                .route(
                    "/large",
                    web::get().to(|| async { HttpResponse::Ok().body("ab".repeat(4096)) }),
                )
                .route(
                    "/none",
                    web::get().to(|| async { HttpResponse::NotModified().finish() }),
                )
                .route(
                    "/events",
                    web::get().to(|| async {
                        HttpResponse::Ok()
                            .content_type("text/event-stream")
                            .body("data: x\n\n".repeat(500))
                    }),
                ),
        )
        .await;
        let mut request = test::TestRequest::get().uri(path);
        if let Some(accept) = accept {
            request = request.insert_header((header::ACCEPT_ENCODING, accept));
        }
        let response = test::call_service(&app, request.to_request()).await;
        let status = response.status();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                let text = v.to_str().unwrap_or_else(|e| panic!("header {k}: {e}"));
                (k.to_string(), text.to_owned())
            })
            .collect();
        let body = test::read_body(response).await.to_vec();
        (status, headers, body)
    }

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[actix_web::test]
    async fn a_large_body_is_compressed_as_the_client_prefers() {
        let (_, headers, body) = served("/large", Some("gzip")).await;
        assert_eq!(header(&headers, "content-encoding"), Some("gzip"));
        assert_eq!(header(&headers, "vary"), Some("accept-encoding"));
        let mut plain = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut plain)
            .unwrap();
        assert_eq!(plain, "ab".repeat(4096));
        let (_, headers, body) = served("/large", Some("gzip;q=0.5, zstd")).await;
        assert_eq!(header(&headers, "content-encoding"), Some("zstd"));
        assert_eq!(
            zstd::decode_all(&body[..]).unwrap(),
            "ab".repeat(4096).into_bytes()
        );
        let (_, headers, _) = served("/large", Some("br, gzip;q=0.1")).await;
        assert_eq!(
            header(&headers, "content-encoding"),
            Some("gzip"),
            "no brotli here"
        );
    }

    #[actix_web::test]
    async fn without_accept_encoding_or_with_none_posture_has_the_body_is_sent_as_it_is() {
        for accept in [
            None,
            Some("br"),
            Some("identity;q=0, br"),
            Some("*;q=0"),
            Some("%%%"),
        ] {
            let (status, headers, body) = served("/large", accept).await;
            assert_eq!(status, StatusCode::OK, "{accept:?}: never a 406");
            assert_eq!(header(&headers, "content-encoding"), None, "{accept:?}");
            assert_eq!(
                header(&headers, "vary"),
                Some("accept-encoding"),
                "{accept:?}"
            );
            assert_eq!(body.len(), 8192, "{accept:?}");
        }
    }

    #[actix_web::test]
    async fn small_bodies_304s_and_event_streams_are_never_compressed() {
        for path in ["/small", "/none", "/events"] {
            let (_, headers, _) = served(path, Some("gzip, zstd")).await;
            assert_eq!(header(&headers, "content-encoding"), None, "{path}");
        }
        let (_, headers, body) = served("/small", Some("gzip")).await;
        assert_eq!(header(&headers, "vary"), None, "{headers:?}");
        assert_eq!(body.len(), 100);
    }
}
