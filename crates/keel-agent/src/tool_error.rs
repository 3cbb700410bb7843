//! A failed tool call: a documented kind (what a caller branches on) and a message (what
//! the model reads).

/// What kind of failure a tool call had. Its [`ToolErrorKind::as_str`] is the `code` the
/// model sees and the log keeps (`not_found`, `invalid_arguments`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The arguments do not fit the tool's schema or make no sense together.
    InvalidArguments,
    /// No tool by that name is offered.
    UnknownTool,
    /// The permission policy or the user refused the call.
    Denied,
    /// The turn was aborted while the call ran.
    Aborted,
    /// The call never started (an earlier call failed, or the turn ended).
    NotStarted,
    /// The call ran out of time.
    Timeout,
    /// The tool panicked; the call is closed with this error.
    Panic,
    /// No file or folder at that path.
    NotFound,
    /// The system refused access to the path.
    PermissionDenied,
    /// Another input/output failure.
    IoError,
    /// The path is outside the workspace and the allowed roots.
    OutsideWorkspace,
    /// The workspace itself cannot be opened.
    WorkspaceUnavailable,
    /// The path is not usable (empty, not UTF-8, …).
    InvalidPath,
    /// A file was expected and the path is a folder.
    IsADirectory,
    /// A folder was expected and the path is a file.
    NotADirectory,
    /// The path is a device, socket or pipe, which the file tools never open.
    NotARegularFile,
    /// The file has other hard links, so a write would change files elsewhere.
    HardLink,
    /// The path is inside `.git`, which the file tools do not change.
    GitInternals,
    /// The file (or the result of the change) is over the tool's size limit.
    FileTooLarge,
    /// The file is not text.
    BinaryFile,
    /// The file must be read before it is changed.
    NotRead,
    /// The text to replace is not in the file.
    NoMatch,
    /// The text to replace occurs more than once.
    AmbiguousMatch,
    /// The change would drop much of the file, which the call did not ask for.
    WouldDrop,
    /// The change would leave the file unparseable where it parsed before.
    WouldNotParse,
    /// The content is a tool call written as text, not the file's content.
    CallAsContent,
    /// The content is a diff, not the file's new content.
    DiffContent,
    /// The glob pattern is not valid.
    InvalidGlob,
    /// The regular expression is not valid.
    InvalidPattern,
    /// The sandbox the command needs cannot be set up, so it did not run.
    SandboxUnavailable,
    /// The tool's (MCP) server is not running or not reachable.
    ServerUnavailable,
    /// The tool's (MCP) server stopped during the call.
    ServerCrashed,
    /// The MCP server answered the call with an error.
    McpError,
    /// The file is not UTF-8 text.
    NotUtf8,
    /// The tool needs the network and the network is off for this session.
    NetworkOff,
    /// The URL's host is, or resolves to, an address the tool does not reach (loopback,
    /// private, link-local, …).
    BlockedAddress,
    /// The connection failed: name resolution, connect, TLS, a cut or malformed reply.
    NetworkError,
    /// The server answered with an error status.
    HttpStatus,
    /// The response is of a type the tool does not read (not text).
    UnsupportedContent,
    /// Any other failure of the tool.
    ToolError,
    /// A code of the tool's own (a library user's tool), shown and logged as written.
    Other(&'static str),
}

impl ToolErrorKind {
    /// Every kind, in documentation order.
    pub const ALL: &'static [ToolErrorKind] = &[
        ToolErrorKind::InvalidArguments,
        ToolErrorKind::UnknownTool,
        ToolErrorKind::Denied,
        ToolErrorKind::Aborted,
        ToolErrorKind::NotStarted,
        ToolErrorKind::Timeout,
        ToolErrorKind::Panic,
        ToolErrorKind::NotFound,
        ToolErrorKind::PermissionDenied,
        ToolErrorKind::IoError,
        ToolErrorKind::OutsideWorkspace,
        ToolErrorKind::WorkspaceUnavailable,
        ToolErrorKind::InvalidPath,
        ToolErrorKind::IsADirectory,
        ToolErrorKind::NotADirectory,
        ToolErrorKind::NotARegularFile,
        ToolErrorKind::HardLink,
        ToolErrorKind::GitInternals,
        ToolErrorKind::FileTooLarge,
        ToolErrorKind::BinaryFile,
        ToolErrorKind::NotRead,
        ToolErrorKind::NoMatch,
        ToolErrorKind::AmbiguousMatch,
        ToolErrorKind::WouldDrop,
        ToolErrorKind::WouldNotParse,
        ToolErrorKind::CallAsContent,
        ToolErrorKind::DiffContent,
        ToolErrorKind::InvalidGlob,
        ToolErrorKind::InvalidPattern,
        ToolErrorKind::SandboxUnavailable,
        ToolErrorKind::ServerUnavailable,
        ToolErrorKind::ServerCrashed,
        ToolErrorKind::McpError,
        ToolErrorKind::NotUtf8,
        ToolErrorKind::NetworkOff,
        ToolErrorKind::BlockedAddress,
        ToolErrorKind::NetworkError,
        ToolErrorKind::HttpStatus,
        ToolErrorKind::UnsupportedContent,
        ToolErrorKind::ToolError,
    ];

    /// The call was refused on principle — by the permission policy or the user, or
    /// because its target is outside what the tools may touch (outside the workspace,
    /// inside `.git`, a hard link, a device, the network when it is off). The same aim
    /// made by a corrected call is refused again; it is no mistake to fix.
    pub fn is_refusal(self) -> bool {
        matches!(
            self,
            ToolErrorKind::Denied
                | ToolErrorKind::OutsideWorkspace
                | ToolErrorKind::GitInternals
                | ToolErrorKind::HardLink
                | ToolErrorKind::NotARegularFile
                | ToolErrorKind::NetworkOff
                | ToolErrorKind::BlockedAddress
        )
    }

    /// The code the model sees and the log keeps.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorKind::InvalidArguments => "invalid_arguments",
            ToolErrorKind::UnknownTool => "unknown_tool",
            ToolErrorKind::Denied => "denied",
            ToolErrorKind::Aborted => "aborted",
            ToolErrorKind::NotStarted => "not_started",
            ToolErrorKind::Timeout => "timeout",
            ToolErrorKind::Panic => "panic",
            ToolErrorKind::NotFound => "not_found",
            ToolErrorKind::PermissionDenied => "permission_denied",
            ToolErrorKind::IoError => "io_error",
            ToolErrorKind::OutsideWorkspace => "outside_workspace",
            ToolErrorKind::WorkspaceUnavailable => "workspace_unavailable",
            ToolErrorKind::InvalidPath => "invalid_path",
            ToolErrorKind::IsADirectory => "is_a_directory",
            ToolErrorKind::NotADirectory => "not_a_directory",
            ToolErrorKind::NotARegularFile => "not_a_regular_file",
            ToolErrorKind::HardLink => "hard_link",
            ToolErrorKind::GitInternals => "git_internals",
            ToolErrorKind::FileTooLarge => "file_too_large",
            ToolErrorKind::BinaryFile => "binary_file",
            ToolErrorKind::NotRead => "not_read",
            ToolErrorKind::NoMatch => "no_match",
            ToolErrorKind::AmbiguousMatch => "ambiguous_match",
            ToolErrorKind::WouldDrop => "would_drop",
            ToolErrorKind::WouldNotParse => "would_not_parse",
            ToolErrorKind::CallAsContent => "call_as_content",
            ToolErrorKind::DiffContent => "diff_content",
            ToolErrorKind::InvalidGlob => "invalid_glob",
            ToolErrorKind::InvalidPattern => "invalid_pattern",
            ToolErrorKind::SandboxUnavailable => "sandbox_unavailable",
            ToolErrorKind::ServerUnavailable => "server_unavailable",
            ToolErrorKind::ServerCrashed => "server_crashed",
            ToolErrorKind::McpError => "mcp_error",
            ToolErrorKind::NotUtf8 => "not_utf8",
            ToolErrorKind::NetworkOff => "network_off",
            ToolErrorKind::BlockedAddress => "blocked_address",
            ToolErrorKind::NetworkError => "network_error",
            ToolErrorKind::HttpStatus => "http_status",
            ToolErrorKind::UnsupportedContent => "unsupported_content",
            ToolErrorKind::ToolError => "tool_error",
            ToolErrorKind::Other(code) => code,
        }
    }

    /// The kind of a logged code; an unknown one is [`ToolErrorKind::ToolError`].
    /// ([`ToolErrorKind::Other`] is not in [`ToolErrorKind::ALL`]: its codes are the
    /// tools' own.)
    pub fn parse(code: &str) -> ToolErrorKind {
        match code {
            "invalid_arguments" => ToolErrorKind::InvalidArguments,
            "unknown_tool" => ToolErrorKind::UnknownTool,
            "denied" => ToolErrorKind::Denied,
            "aborted" => ToolErrorKind::Aborted,
            "not_started" => ToolErrorKind::NotStarted,
            "timeout" => ToolErrorKind::Timeout,
            "panic" => ToolErrorKind::Panic,
            "not_found" => ToolErrorKind::NotFound,
            "permission_denied" => ToolErrorKind::PermissionDenied,
            "io_error" => ToolErrorKind::IoError,
            "outside_workspace" => ToolErrorKind::OutsideWorkspace,
            "workspace_unavailable" => ToolErrorKind::WorkspaceUnavailable,
            "invalid_path" => ToolErrorKind::InvalidPath,
            "is_a_directory" => ToolErrorKind::IsADirectory,
            "not_a_directory" => ToolErrorKind::NotADirectory,
            "not_a_regular_file" => ToolErrorKind::NotARegularFile,
            "hard_link" => ToolErrorKind::HardLink,
            "git_internals" => ToolErrorKind::GitInternals,
            "file_too_large" => ToolErrorKind::FileTooLarge,
            "binary_file" => ToolErrorKind::BinaryFile,
            "not_read" => ToolErrorKind::NotRead,
            "no_match" => ToolErrorKind::NoMatch,
            "ambiguous_match" => ToolErrorKind::AmbiguousMatch,
            "would_drop" => ToolErrorKind::WouldDrop,
            "would_not_parse" => ToolErrorKind::WouldNotParse,
            "call_as_content" => ToolErrorKind::CallAsContent,
            "diff_content" => ToolErrorKind::DiffContent,
            "invalid_glob" => ToolErrorKind::InvalidGlob,
            "invalid_pattern" => ToolErrorKind::InvalidPattern,
            "sandbox_unavailable" => ToolErrorKind::SandboxUnavailable,
            "server_unavailable" => ToolErrorKind::ServerUnavailable,
            "server_crashed" => ToolErrorKind::ServerCrashed,
            "mcp_error" => ToolErrorKind::McpError,
            "not_utf8" => ToolErrorKind::NotUtf8,
            "network_off" => ToolErrorKind::NetworkOff,
            "blocked_address" => ToolErrorKind::BlockedAddress,
            "network_error" => ToolErrorKind::NetworkError,
            "http_status" => ToolErrorKind::HttpStatus,
            "unsupported_content" => ToolErrorKind::UnsupportedContent,
            "tool_error" => ToolErrorKind::ToolError,
            _ => ToolErrorKind::ToolError,
        }
    }
}

impl std::fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call. Becomes an `is_error` result carrying its kind's code and the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What kind of failure.
    pub kind: ToolErrorKind,
    /// What went wrong and, where possible, how to fix it.
    pub message: String,
}

impl ToolError {
    /// An error of `kind`.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        ToolError { kind, message: message.into() }
    }

    /// A generic tool failure (`tool_error`).
    pub fn msg(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::ToolError, message)
    }

    /// The code the model sees and the log keeps.
    pub fn code(&self) -> &'static str {
        self.kind.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_code() {
        let mut seen = std::collections::BTreeSet::new();
        for kind in ToolErrorKind::ALL {
            assert_eq!(ToolErrorKind::parse(kind.as_str()), *kind);
            assert!(seen.insert(kind.as_str()), "{kind:?}'s code is taken twice");
        }
        assert_eq!(ToolErrorKind::parse("no_such_code"), ToolErrorKind::ToolError);
    }
}
