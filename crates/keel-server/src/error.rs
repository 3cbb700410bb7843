//! Errors as JSON: `{"error": {"code": "...", "message": "..."}}` with a fitting status.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use keel_session::{SessionError, SessionErrorKind};

use crate::factory::{PrepareError, PrepareErrorKind};

/// An error answered to a client.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable machine-readable code (`not_found`, `turn_running`, …).
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// Seconds to wait before retrying (503).
    pub retry_after: Option<u32>,
}

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), retry_after: None }
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404: no such session.
    pub fn not_found(id: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", format!("no session `{id}`"))
    }

    /// 409: the session's state does not allow this now.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 503 with `Retry-After`: the server lacks a resource that returns (open files, the
    /// database); logged, since an operator should know.
    pub fn unavailable(message: impl Into<String>) -> Self {
        let mut error = Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message);
        tracing::warn!(error = %error.message, "a request was refused for want of a resource");
        error.retry_after = Some(1);
        error
    }

    /// 500: something on the server failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        let (status, code) = match e.kind {
            SessionErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            SessionErrorKind::Locked => (StatusCode::CONFLICT, "session_locked"),
            SessionErrorKind::Invalid => (StatusCode::BAD_REQUEST, "bad_request"),
            SessionErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "store"),
        };
        let unavailable = e.kind == SessionErrorKind::Unavailable;
        // The client gets the store's message without the server's file paths; the log
        // keeps them.
        let message = match e.kind {
            SessionErrorKind::NotFound => "no such session".to_owned(),
            _ => e.message.clone(),
        };
        if status.is_server_error() {
            tracing::warn!(error = %e, "a store error");
        }
        let mut error = ApiError::new(status, code, message);
        if unavailable {
            tracing::warn!(error = %error.message, "the store is unavailable");
            error.retry_after = Some(1);
        }
        error
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// A session's agent the factory could not build: 503 when it is the server's failure
/// (its kind says so, or the process has no descriptors left, whatever the configuration
/// says), else 400.
impl From<PrepareError> for ApiError {
    fn from(error: PrepareError) -> Self {
        if out_of_descriptors() {
            return ApiError::unavailable(format!("the server is out of open files: {error}"));
        }
        match error.kind {
            PrepareErrorKind::Unavailable => ApiError::unavailable(error.message),
            _ => ApiError::bad_request(error.message),
        }
    }
}

/// Whether this process cannot open another file now (`EMFILE`/`ENFILE`): an error met
/// meanwhile is the server's shortage, not the client's fault.
pub(crate) fn out_of_descriptors() -> bool {
    match std::fs::File::open("/dev/null") {
        Ok(_) => false,
        Err(e) => matches!(e.raw_os_error(), Some(23 | 24)),
    }
}
