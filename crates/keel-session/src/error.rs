//! Session errors: a struct with a documented kind.

use std::path::{Path, PathBuf};

/// What kind of session failure this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionErrorKind {
    /// Reading or writing the store failed.
    Io,
    /// A line of the log is not a valid event (other than a torn last line).
    Corrupt,
    /// An event could not be encoded.
    Encode,
    /// No session with that id.
    NotFound,
    /// Another process holds the session open for writing.
    Locked,
    /// The log was written by an incompatible keel version.
    Version,
    /// The request makes no sense for this session (bad fork point, ambiguous id, …).
    Invalid,
}

/// A session store failure, with the file and line when known.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.render())]
pub struct SessionError {
    /// The category.
    pub kind: SessionErrorKind,
    /// What went wrong.
    pub message: String,
    /// The file involved, if any.
    pub path: Option<PathBuf>,
    /// The 1-based line of the log, for corrupt lines.
    pub line: Option<usize>,
}

impl SessionError {
    /// A new error.
    pub fn new(kind: SessionErrorKind, message: impl Into<String>) -> Self {
        SessionError { kind, message: message.into(), path: None, line: None }
    }

    pub(crate) fn io(err: std::io::Error) -> Self {
        Self::new(SessionErrorKind::Io, err.to_string())
    }

    pub(crate) fn corrupt(err: serde_json::Error) -> Self {
        Self::new(SessionErrorKind::Corrupt, err.to_string())
    }

    pub(crate) fn corrupt_msg(message: String) -> Self {
        Self::new(SessionErrorKind::Corrupt, message)
    }

    pub(crate) fn encode(err: serde_json::Error) -> Self {
        Self::new(SessionErrorKind::Encode, err.to_string())
    }

    /// Attaches a file path.
    pub fn at_path(mut self, path: &Path) -> Self {
        self.path = Some(path.to_path_buf());
        self
    }

    /// Attaches a line number.
    pub fn at_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    fn render(&self) -> String {
        match (&self.path, self.line) {
            (Some(path), Some(line)) => format!("{}:{line}: {}", path.display(), self.message),
            (Some(path), None) => format!("{}: {}", path.display(), self.message),
            (None, Some(line)) => format!("line {line}: {}", self.message),
            (None, None) => self.message.clone(),
        }
    }
}
