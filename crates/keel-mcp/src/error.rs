//! Errors of MCP servers.

/// What went wrong with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpErrorKind {
    /// Its settings are wrong (fix the configuration).
    Config,
    /// It could not be started or connected to, or the handshake failed.
    Start,
    /// It was not ready within its startup timeout.
    StartupTimeout,
    /// A server marked `required` did not come up.
    Required,
}

/// A server that could not be configured or started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server `{server}`: {message}")]
pub struct McpError {
    /// What kind of failure.
    pub kind: McpErrorKind,
    /// The server's name.
    pub server: String,
    /// What happened and what to do.
    pub message: String,
}

impl McpError {
    /// An error of `kind` for server `server`.
    pub fn new(kind: McpErrorKind, server: impl Into<String>, message: impl Into<String>) -> Self {
        McpError { kind, server: server.into(), message: message.into() }
    }
}
