//! Query-string parsing with one set of rules for every route.
//!
//! * A malformed value is a 400 naming the parameter (`limit must be an integer...`).
//! * A parameter the route does not know is a 400 naming it and the allowed ones.
//! * A parameter given twice is a 400 (comma-separated lists are the way to give several).
//! * List parameters (`severity=critical,high`) reject empty items and unknown values,
//!   naming the allowed values; repeated values count once.

use posture_domain::{ClosedSet, PageRequest, page::MAX_OFFSET};

use crate::error::ApiError;

/// The parsed query string of one request.
pub struct QueryParams {
    pairs: Vec<(String, String)>,
    known: Vec<&'static str>,
}

impl QueryParams {
    pub fn parse(query: &str) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
            .map_err(|_| ApiError::invalid("the query string is not valid URL encoding"))?;
        Ok(Self {
            pairs,
            known: Vec::new(),
        })
    }

    /// The value of `name`, if given (and marks `name` as known to this route).
    pub fn take(&mut self, name: &'static str) -> Result<Option<String>, ApiError> {
        self.known.push(name);
        let mut values = self.pairs.iter().filter(|(k, _)| k == name);
        let first = values.next().map(|(_, v)| v.clone());
        if values.next().is_some() {
            return Err(ApiError::invalid(format!(
                "{name} is given more than once; give several values as one comma-separated list"
            )));
        }
        self.pairs.retain(|(k, _)| k != name);
        Ok(first)
    }

    /// A non-negative integer parameter.
    pub fn integer(&mut self, name: &'static str) -> Result<Option<u64>, ApiError> {
        self.take(name)?
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    ApiError::invalid(format!("{name} must be a non-negative integer, got {v:?}"))
                })
            })
            .transpose()
    }

    /// `limit` and `offset`.
    pub fn page(&mut self) -> Result<PageRequest, ApiError> {
        let limit = self.integer("limit")?;
        let offset = match self.take("offset")? {
            None => None,
            Some(v) => Some(
                v.parse::<u64>()
                    .ok()
                    .filter(|o| *o <= MAX_OFFSET)
                    .ok_or_else(|| {
                        ApiError::invalid(format!(
                            "offset must be an integer from 0 to {MAX_OFFSET}, got {v:?}"
                        ))
                    })?,
            ),
        };
        PageRequest::new(limit, offset).map_err(|e| match e {
            posture_domain::Error::Invalid { field, reason } => {
                ApiError::invalid(format!("{field} {reason}"))
            }
            other => other.into(),
        })
    }

    /// A comma-separated list of values of a closed set (empty when not given).
    pub fn list<T: ClosedSet>(&mut self, name: &'static str) -> Result<Vec<T>, ApiError> {
        let Some(raw) = self.take(name)? else {
            return Ok(Vec::new());
        };
        let mut values = Vec::new();
        for item in raw.split(',') {
            let item = item.trim();
            let value = item.parse::<T>().map_err(|_| {
                let allowed = T::allowed().join(", ");
                if item.is_empty() {
                    ApiError::invalid(format!(
                        "{name} has an empty item; allowed values: {allowed}"
                    ))
                } else {
                    ApiError::invalid(format!(
                        "{name} has an unknown value {item:?}; allowed values: {allowed}"
                    ))
                }
            })?;
            if !values.contains(&value) {
                values.push(value);
            }
        }
        Ok(values)
    }

    /// Fails if the request carries a parameter the route did not ask for.
    pub fn finish(self) -> Result<(), ApiError> {
        match self.pairs.first() {
            None => Ok(()),
            Some((name, _)) => {
                let allowed = if self.known.is_empty() {
                    "this route takes no query parameters".to_owned()
                } else {
                    format!("allowed: {}", self.known.join(", "))
                };
                Err(ApiError::invalid(format!(
                    "unknown query parameter {name:?}; {allowed}"
                )))
            }
        }
    }
}
