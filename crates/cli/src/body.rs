//! Reading an answer's body with a bound: the service's pages are a few hundred KiB, so an
//! answer far larger is not one (a misconfigured proxy, a wrong `POSTURE_URL`) and is not
//! read into memory whole.

use reqwest::Response;

/// The most of a JSON answer the CLI reads: a page of 500 rows is well under 1 MiB.
pub const MAX_JSON: usize = 32 * 1024 * 1024;
/// The most of an error's body read for its `reason`.
pub const MAX_ERROR: usize = 64 * 1024;

/// Why a body could not be read.
#[derive(Debug)]
pub enum BodyError {
    /// The connection failed while reading (worth another attempt).
    Network(reqwest::Error),
    /// More than the bound.
    TooLarge,
}

/// The body, failing once it passes `limit` bytes.
pub async fn read_limited(mut response: Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Network)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// At most `limit` bytes of the body (the rest is not read); empty when it cannot be read.
pub async fn read_prefix(mut response: Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = limit - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= limit {
            break;
        }
    }
    body
}
