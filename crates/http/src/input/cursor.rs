//! Cursors on the wire: what a list's `after` must match, opening it, and sealing the next
//! one with its `Link: rel="next"` header.
//!
//! A cursor is bound to the caller's customer, the path (a subscription's delivery log is
//! its own list: `/webhooks/{id}/deliveries` with the id) and the
//! request's other query parameters in a canonical form (sorted, without `limit`, `offset`
//! and `after`), so a page size may change between pages but nothing that selects or orders
//! the rows.

use std::sync::Arc;

use actix_web::HttpRequest;
use posture_domain::{
    CustomerId, Refusal,
    cursor::{Cursor, CursorContext, CursorError},
    page::SortKey,
    secrets::Keyring,
};

use crate::error::ApiError;

/// Parameters that page through a list without changing what it holds.
const PAGE_PARAMS: [&str; 3] = ["limit", "offset", "after"];

/// What the cursor of a list request is bound to, and how its next page is linked.
pub(super) struct CursorBinding {
    keyring: Arc<Keyring>,
    customer: CustomerId,
    route: String,
    /// The query without the page parameters, canonical (sorted, form-encoded).
    filters: String,
    path: String,
    limit: Option<String>,
}

impl CursorBinding {
    pub(super) fn of(req: &HttpRequest, keyring: Arc<Keyring>, customer: CustomerId) -> Self {
        let limit = form_urlencoded::parse(req.query_string().as_bytes())
            .find(|(name, _)| name == "limit")
            .map(|(_, value)| value.into_owned());
        let filters = canonical_query(req.query_string(), &PAGE_PARAMS);
        Self {
            keyring,
            customer,
            route: req.path().to_owned(),
            filters,
            path: req.path().to_owned(),
            limit,
        }
    }

    fn context(&self) -> CursorContext<'_> {
        CursorContext {
            customer: self.customer,
            route: &self.route,
            filters: &self.filters,
        }
    }

    /// The cursor given as `after`, if this server made it for this request.
    pub(super) fn open(&self, token: &str) -> Result<Cursor, ApiError> {
        self.keyring
            .cursor_key()
            .open(token, &self.context())
            .map_err(refused)
    }

    /// The cursor of the page after `key`, and the `Link` header value that asks for it.
    pub(super) fn next(
        &self,
        key: SortKey,
        through: Option<chrono::DateTime<chrono::Utc>>,
    ) -> (String, String) {
        let cursor = Cursor {
            after: key,
            through,
        };
        let token = self.keyring.cursor_key().seal(&cursor, &self.context());
        let mut query = form_urlencoded::Serializer::new(self.filters.clone());
        if let Some(limit) = &self.limit {
            query.append_pair("limit", limit);
        }
        query.append_pair("after", &token);
        let link = format!("<{}?{}>; rel=\"next\"", self.path, query.finish());
        (token, link)
    }
}

/// A query string in a canonical form: decoded, `skip`ped names left out, sorted, encoded
/// again (so `b=1&a=2` and `a=2&b=%31` are the same request).
pub(crate) fn canonical_query(query: &str, skip: &[&str]) -> String {
    // Borrowed from the query string unless percent-decoding changed them.
    let mut pairs: Vec<_> = form_urlencoded::parse(query.as_bytes())
        .filter(|(name, _)| !skip.contains(&name.as_ref()))
        .collect();
    pairs.sort();
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&pairs)
        .finish()
}

/// Every refused cursor is a `cursor_mismatch`: whether altered, made for other parameters
/// or before a key rotation, the caller's way on is the first page.
fn refused(e: CursorError) -> ApiError {
    ApiError::invalid(Refusal::CursorMismatch, "after", format!("after: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canonical_form_is_sorted_decoded_and_encoded_again_without_the_skipped() {
        // Values are compared decoded (`%6Fpen` is `open`), pairs are sorted by name then
        // value, and the page parameters are left out.
        let query = "status=%6Fpen&severity=high&limit=5&after=x&severity=critical&q=a+b%26c";
        assert_eq!(
            canonical_query(query, &PAGE_PARAMS),
            "q=a+b%26c&severity=critical&severity=high&status=open"
        );
        assert_eq!(
            canonical_query("b=2&a=1", &[]),
            canonical_query("a=1&b=2", &[])
        );
        assert_eq!(canonical_query("", &[]), "");
    }
}
