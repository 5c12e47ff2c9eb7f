//! What goes wrong in the console, as pages in words (never JSON, never a stack trace).

use actix_web::{HttpResponse, ResponseError, http::StatusCode, http::header};
use posture_domain::Error;

use crate::pages;

/// A console request that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// No such page, customer, key, or a customer without a console: all look the same.
    #[error("not found")]
    NotFound,
    /// The page needs a session: back to the customer's sign-in page.
    #[error("sign-in required")]
    SignInRequired { customer: String },
    /// The request cannot be served as sent (a form without its CSRF token, a sign-in
    /// that expired). The text is shown to the user.
    #[error("{0}")]
    BadRequest(String),
    /// The page exists, but not for this method (`allow` names those it answers).
    #[error("method not allowed")]
    MethodNotAllowed { allow: String },
    /// Signed in, but not allowed (not an admin of this customer).
    #[error("{title}")]
    Forbidden { title: String, detail: String },
    /// Too many sign-in attempts from this address.
    #[error("too many sign-in attempts")]
    TooManySignIns { retry_after: u64 },
    /// Too many requests from this address (the API's per-address budget).
    #[error("too many requests")]
    TooManyRequests { retry_after: u64 },
    /// The database cannot be reached now.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The customer's identity provider (its host named to the user) cannot be reached or
    /// answered nonsense.
    #[error("identity provider {provider} unavailable: {cause}")]
    ProviderUnavailable { provider: String, cause: String },
    /// A bug or a broken invariant: logged, shown as a generic page.
    #[error("internal error: {0}")]
    Internal(String),
    /// An error of a customer's sign-in: its page keeps the organisation's name in the
    /// header and links back to the sign-in page, so it is not a dead end.
    #[error("{error}")]
    OfSignIn {
        customer_id: String,
        customer_name: Option<String>,
        error: Box<ConsoleError>,
    },
}

impl ConsoleError {
    /// This error, shown as part of `customer_id`'s sign-in.
    pub fn of_sign_in(self, customer_id: String, customer_name: Option<String>) -> Self {
        match self {
            // A redirect is its own way back; a wrapped error keeps its first wrapping.
            ConsoleError::SignInRequired { .. } | ConsoleError::OfSignIn { .. } => self,
            error => ConsoleError::OfSignIn {
                customer_id,
                customer_name,
                error: Box::new(error),
            },
        }
    }

    /// The page's title and text, and the headers the answer needs.
    fn describe(&self, response: &mut actix_web::HttpResponseBuilder) -> (String, String) {
        match self {
            ConsoleError::SignInRequired { .. } | ConsoleError::OfSignIn { .. } => {
                (String::new(), String::new())
            }
            ConsoleError::NotFound => (
                "Page not found".to_owned(),
                "There is no such page here. If you followed a link to your organisation's \
                 console, ask your posture operator for the right address."
                    .to_owned(),
            ),
            ConsoleError::BadRequest(reason) => ("That did not work".to_owned(), reason.clone()),
            ConsoleError::MethodNotAllowed { allow } => {
                response.insert_header((header::ALLOW, allow.clone()));
                (
                    "Not possible here".to_owned(),
                    "This page cannot be used that way. Go back and use its links and \
                     buttons."
                        .to_owned(),
                )
            }
            ConsoleError::Forbidden { title, detail } => (title.clone(), detail.clone()),
            ConsoleError::TooManySignIns { retry_after } => {
                response.insert_header((header::RETRY_AFTER, retry_after.to_string()));
                (
                    "Too many sign-in attempts".to_owned(),
                    format!(
                        "Too many sign-ins were started from your network. Try again in {} \
                         seconds.",
                        retry_after
                    ),
                )
            }
            ConsoleError::TooManyRequests { retry_after } => {
                response.insert_header((header::RETRY_AFTER, retry_after.to_string()));
                (
                    "Too many requests".to_owned(),
                    format!(
                        "Too many requests came from your network. Try again in {retry_after} \
                         seconds."
                    ),
                )
            }
            ConsoleError::Unavailable(cause) => {
                tracing::warn!(cause = %cause, "console: a dependency is unavailable");
                response.insert_header((header::RETRY_AFTER, "5"));
                (
                    "Temporarily unavailable".to_owned(),
                    "posture cannot reach a service it needs right now. Try again in a \
                     moment."
                        .to_owned(),
                )
            }
            ConsoleError::ProviderUnavailable { provider, cause } => {
                tracing::warn!(provider = %provider, cause = %cause, "console: the identity provider failed");
                response.insert_header((header::RETRY_AFTER, "5"));
                (
                    "Your identity provider cannot be reached".to_owned(),
                    format!(
                        "posture cannot reach your organisation's identity provider \
                         ({provider}) right now, so you cannot sign in. Try again in a moment; \
                         if it goes on, tell your posture operator."
                    ),
                )
            }
            ConsoleError::Internal(cause) => {
                tracing::error!(cause = %cause, "console: internal error");
                (
                    "Something went wrong".to_owned(),
                    "posture could not complete this request. Try again; if it keeps \
                     happening, tell your posture operator."
                        .to_owned(),
                )
            }
        }
    }
}

impl From<Error> for ConsoleError {
    fn from(e: Error) -> Self {
        match e {
            Error::NotFound => ConsoleError::NotFound,
            Error::Invalid { reason, .. } => ConsoleError::BadRequest(reason),
            Error::Conflict(reason)
            | Error::PreconditionFailed(reason)
            | Error::CredentialLapsed(reason) => ConsoleError::BadRequest(reason),
            Error::Unavailable(cause) => ConsoleError::Unavailable(cause.to_string()),
            Error::Busy(reason) => ConsoleError::Unavailable(reason.to_owned()),
            Error::Internal(cause) => ConsoleError::Internal(cause.to_string()),
        }
    }
}

impl ResponseError for ConsoleError {
    fn status_code(&self) -> StatusCode {
        match self {
            ConsoleError::NotFound => StatusCode::NOT_FOUND,
            ConsoleError::SignInRequired { .. } => StatusCode::SEE_OTHER,
            ConsoleError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ConsoleError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ConsoleError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ConsoleError::TooManySignIns { .. } | ConsoleError::TooManyRequests { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ConsoleError::Unavailable(_) | ConsoleError::ProviderUnavailable { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ConsoleError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ConsoleError::OfSignIn { error, .. } => error.status_code(),
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let mut response = HttpResponse::build(status);
        let page = match self {
            ConsoleError::SignInRequired { customer } => {
                return response
                    .insert_header((header::LOCATION, format!("{}/{customer}/", crate::PREFIX)))
                    .finish();
            }
            ConsoleError::OfSignIn {
                customer_id,
                customer_name,
                error,
            } => {
                let (title, detail) = error.describe(&mut response);
                pages::sign_in_error_page(customer_id, customer_name.as_deref(), &title, &detail)
            }
            other => {
                let (title, detail) = other.describe(&mut response);
                pages::error_page(&title, &detail)
            }
        };
        response
            .content_type("text/html; charset=utf-8")
            .body(page.into_string())
    }
}

/// Anything else under `/console/`.
pub async fn not_found() -> Result<HttpResponse, ConsoleError> {
    Err(ConsoleError::NotFound)
}
