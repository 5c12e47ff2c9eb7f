//! Compressed responses over real HTTP: what a client asking for gzip or zstd gets is the
//! same representation, smaller — lists, the streamed export and the contract — while small
//! bodies, 304s and clients that ask for nothing get the body as it is.

use std::io::Read as _;

use posture_test_support::fixtures::{finding, identity};
use reqwest::{StatusCode, header};

use crate::support::TestApp;

fn gunzip(body: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut plain)
        .unwrap();
    plain
}

/// The response to `path` with `Accept-Encoding: accept` (none when `None`): its status,
/// `Content-Encoding`, `ETag` and body as sent.
async fn fetch(
    app: &TestApp,
    key: &str,
    path: &str,
    accept: Option<&str>,
) -> (StatusCode, Option<String>, Option<String>, Vec<u8>) {
    let mut request = app.client.get(app.url(path)).bearer_auth(key);
    if let Some(accept) = accept {
        request = request.header(header::ACCEPT_ENCODING, accept);
    }
    let response = request.send().await.unwrap();
    let text = |name| {
        response
            .headers()
            .get(name)
            .map(|v: &header::HeaderValue| v.to_str().unwrap().to_owned())
    };
    let (encoding, etag) = (text(header::CONTENT_ENCODING), text(header::ETAG));
    let status = response.status();
    (
        status,
        encoding,
        etag,
        response.bytes().await.unwrap().to_vec(),
    )
}

#[tokio::test]
async fn lists_exports_and_the_contract_are_compressed_when_asked_and_decode_to_the_same_bytes() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let records: Vec<_> = std::iter::once(identity("u1", &t, "Ada"))
        .chain((0..200).map(|i| finding(&format!("f{i:03}"), &t, "high", "open", "u1")))
        .collect();
    app.ingest(customer, &records).await;
    let key = app.key_with_every_scope(customer).await;

    for path in [
        "/api/v1/findings?limit=200",
        "/api/v1/findings/export",
        "/api/v1/findings/export?format=cef",
        "/api/v1/openapi.json",
    ] {
        let (status, encoding, etag, plain) = fetch(&app, &key, path, None).await;
        assert_eq!((status, encoding), (StatusCode::OK, None), "{path}");
        let (status, encoding, gz_etag, gzipped) = fetch(&app, &key, path, Some("gzip")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(encoding.as_deref(), Some("gzip"), "{path}");
        assert_eq!(gunzip(&gzipped), plain, "{path}: the same representation");
        assert!(
            gzipped.len() * 4 < plain.len(),
            "{path}: {} of {} bytes",
            gzipped.len(),
            plain.len()
        );
        assert_eq!(gz_etag, etag, "{path}: a weak tag holds for every encoding");
        let (_, encoding, _, zstd) = fetch(&app, &key, path, Some("zstd, gzip;q=0.9")).await;
        assert_eq!(encoding.as_deref(), Some("zstd"), "{path}");
        assert_eq!(zstd::decode_all(&zstd[..]).unwrap(), plain, "{path}");
    }
}

#[tokio::test]
async fn small_bodies_errors_and_304s_are_sent_as_they_are() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let key = app.key_with_every_scope(customer).await;
    let (status, encoding, etag, _) = fetch(&app, &key, "/api/v1/findings/f1", Some("gzip")).await;
    assert_eq!(
        (status, encoding),
        (StatusCode::OK, None),
        "a detail is small"
    );
    let (status, encoding, _, body) =
        fetch(&app, &key, "/api/v1/findings/nope", Some("gzip")).await;
    assert_eq!((status, encoding), (StatusCode::NOT_FOUND, None));
    assert!(String::from_utf8(body).unwrap().contains("not_found"));
    let not_modified = app
        .client
        .get(app.url("/api/v1/findings/f1"))
        .bearer_auth(&key)
        .header(header::ACCEPT_ENCODING, "gzip")
        .header(header::IF_NONE_MATCH, etag.unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), StatusCode::NOT_MODIFIED);
    assert!(
        not_modified
            .headers()
            .get(header::CONTENT_ENCODING)
            .is_none()
    );
}
