//! Model errors: a struct with a documented kind.

use std::time::Duration;

/// What went wrong talking to a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// Credentials missing or rejected (401/403). Not retried.
    Auth,
    /// The prompt is longer than the model's context window. Not retried.
    ContextOverflow,
    /// The provider asked us to slow down (429). Retried.
    RateLimited,
    /// The provider failed (5xx). Retried.
    Server,
    /// Connecting, sending or reading failed. Retried before any output.
    Network,
    /// No byte arrived for longer than the idle timeout.
    Idle,
    /// The provider rejected the request as invalid (other 4xx). Not retried.
    InvalidRequest,
    /// The provider's reply could not be understood.
    InvalidResponse,
    /// The reply went past a bound keel sets on every response: the total time
    /// (`response_deadline`), the output `max_tokens` allows, the size of one event or
    /// body. A server that does this is broken or hostile. Not retried.
    LimitExceeded,
    /// The model fell into repeating itself, one line, a few sentences or a few characters
    /// over and over
    /// ([`crate::repeats`]): its reply was stopped there. Not retried as it was; a route
    /// that samples may ask again, hotter and with another seed.
    Repeating,
    /// The request was cancelled by the caller.
    Cancelled,
    /// Misconfiguration on keel's side (bad URL, missing model name).
    Config,
}

impl ModelErrorKind {
    /// Every kind, in the order declared.
    pub const ALL: [ModelErrorKind; 12] = [
        ModelErrorKind::Auth,
        ModelErrorKind::ContextOverflow,
        ModelErrorKind::RateLimited,
        ModelErrorKind::Server,
        ModelErrorKind::Network,
        ModelErrorKind::Idle,
        ModelErrorKind::InvalidRequest,
        ModelErrorKind::InvalidResponse,
        ModelErrorKind::LimitExceeded,
        ModelErrorKind::Repeating,
        ModelErrorKind::Cancelled,
        ModelErrorKind::Config,
    ];

    /// The kind whose [`as_str`](Self::as_str) name is `name`.
    pub fn from_name(name: &str) -> Option<ModelErrorKind> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// Whether a fresh attempt of the same request may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ModelErrorKind::RateLimited
                | ModelErrorKind::Server
                | ModelErrorKind::Network
                | ModelErrorKind::Idle
        )
    }

    /// Short snake_case name for logs and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelErrorKind::Auth => "auth",
            ModelErrorKind::ContextOverflow => "context_overflow",
            ModelErrorKind::RateLimited => "rate_limited",
            ModelErrorKind::Server => "server",
            ModelErrorKind::Network => "network",
            ModelErrorKind::Idle => "idle",
            ModelErrorKind::InvalidRequest => "invalid_request",
            ModelErrorKind::InvalidResponse => "invalid_response",
            ModelErrorKind::LimitExceeded => "limit_exceeded",
            ModelErrorKind::Repeating => "repeating",
            ModelErrorKind::Cancelled => "cancelled",
            ModelErrorKind::Config => "config",
        }
    }
}

/// An error from a model client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    /// The category, which decides retrying.
    pub kind: ModelErrorKind,
    /// A message for a human, naming what to do where possible.
    pub message: String,
    /// How long the provider asked us to wait, if it said.
    pub retry_after: Option<Duration>,
    /// HTTP status, when the error came from a response.
    pub status: Option<u16>,
}

impl ModelError {
    /// A new error of `kind`.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        ModelError { kind, message: message.into(), retry_after: None, status: None }
    }

    /// Sets the HTTP status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets the provider's requested wait.
    pub fn with_retry_after(mut self, delay: Option<Duration>) -> Self {
        self.retry_after = delay;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind is in `ALL` once and is found again by its name (the engine process and
    /// `keel replay` pass kinds by name).
    #[test]
    fn every_kind_is_found_by_its_name() {
        for kind in ModelErrorKind::ALL {
            assert_eq!(ModelErrorKind::from_name(kind.as_str()), Some(kind));
            // A kind added to the enum fails to compile here until it is listed: list it in
            // ALL too.
            match kind {
                ModelErrorKind::Auth
                | ModelErrorKind::ContextOverflow
                | ModelErrorKind::RateLimited
                | ModelErrorKind::Server
                | ModelErrorKind::Network
                | ModelErrorKind::Idle
                | ModelErrorKind::InvalidRequest
                | ModelErrorKind::InvalidResponse
                | ModelErrorKind::LimitExceeded
                | ModelErrorKind::Repeating
                | ModelErrorKind::Cancelled
                | ModelErrorKind::Config => {}
            }
        }
        let mut names: Vec<&str> = ModelErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ModelErrorKind::ALL.len());
        assert_eq!(ModelErrorKind::from_name("bogus"), None);
    }
}
