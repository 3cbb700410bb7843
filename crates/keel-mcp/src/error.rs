//! Errors of MCP servers: a documented kind, the server, what happened, and the error
//! underneath when there is one.

use std::sync::Arc;

/// What went wrong with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpErrorKind {
    /// Its settings are wrong (fix the configuration): a missing `command` or `url`, a
    /// header name or value that is not valid.
    Config,
    /// An environment variable its settings name (`bearer_token_env_var`,
    /// `env_http_headers`) is not set or empty.
    Variable,
    /// It could not be started for another reason: no tokio runtime, an HTTP client that
    /// could not be built.
    Start,
    /// Its process could not be started (the command is missing, not executable, or a
    /// sandboxed server has no launcher); [`McpError::io_kind`] says which.
    Spawn,
    /// Its process ended while it was starting; the message has how, and the last lines
    /// it wrote on stderr.
    Exited,
    /// The connection or the `initialize` handshake failed.
    Handshake,
    /// Its tools could not be listed (`tools/list` failed or its reply is not a list).
    Listing,
    /// One of its tools cannot be offered (an input schema too large to send with every
    /// request); the server's other tools are.
    Tool,
    /// It was not ready within its startup timeout.
    StartupTimeout,
    /// It was ready, then its connection failed (the process ended, a request failed, a
    /// call hung past its timeout); it is started again on the next call.
    Lost,
    /// keel is shutting down.
    ShuttingDown,
    /// A server marked `required` did not come up; [`McpError::cause`] is why.
    Required,
}

/// A server that could not be configured, started or kept running.
///
/// The error underneath (an `io::Error` of the spawn, the SDK's handshake or request
/// error, the start failure of a required server) is kept as [`McpError::cause`]. Its
/// text is already in `message`, so it is not also [`std::error::Error::source`] (a chain
/// printed with `{:#}` would say it twice), as with keel's `SessionError`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("MCP server `{server}`: {message}")]
pub struct McpError {
    /// What kind of failure.
    pub kind: McpErrorKind,
    /// The server's name.
    pub server: String,
    /// What happened and what to do.
    pub message: String,
    cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl McpError {
    /// An error of `kind` for server `server`.
    pub fn new(kind: McpErrorKind, server: impl Into<String>, message: impl Into<String>) -> Self {
        McpError { kind, server: server.into(), message: message.into(), cause: None }
    }

    /// Keeps `cause`, the error underneath (its text should already be in the message).
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Arc::new(cause));
        self
    }

    /// The error underneath, if one was kept.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }

    /// The `io::ErrorKind` of a process that could not be started (not found,
    /// permission denied, …).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        self.cause()?.downcast_ref::<std::io::Error>().map(std::io::Error::kind)
    }
}

/// Errors are equal when their kind, server and message are (the cause's text is in the
/// message).
impl PartialEq for McpError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.server == other.server && self.message == other.message
    }
}

impl Eq for McpError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_kept_and_not_repeated_as_the_source() {
        let io = std::io::Error::from_raw_os_error(2);
        let error = McpError::new(McpErrorKind::Spawn, "s", format!("cannot start `x`: {io}")).caused_by(io);
        assert_eq!(error.io_kind(), Some(std::io::ErrorKind::NotFound));
        assert!(error.cause().is_some());
        assert!(std::error::Error::source(&error).is_none(), "its text is in the message already");
        assert_eq!(
            error.to_string(),
            "MCP server `s`: cannot start `x`: No such file or directory (os error 2)"
        );
        assert_eq!(error.clone(), error);
    }
}
