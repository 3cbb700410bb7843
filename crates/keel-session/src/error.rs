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
    /// The store cannot be reached or is out of resources right now (a database that is
    /// down or restarting, no file descriptors left): the same request may work later.
    Unavailable,
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
    /// The error underneath (an `io::Error`, a JSON or database error), kept whole: see
    /// [`SessionError::cause`] and [`SessionError::io_kind`]. Its text is already in
    /// `message`, so it is not also reported as [`std::error::Error::source`] (a chain
    /// printed with `{:#}` would say it twice).
    pub cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl SessionError {
    /// A new error.
    pub fn new(kind: SessionErrorKind, message: impl Into<String>) -> Self {
        SessionError { kind, message: message.into(), path: None, line: None, cause: None }
    }

    pub(crate) fn io(err: std::io::Error) -> Self {
        // Out of file descriptors (the process's or the system's): a resource that
        // returns, not a broken store.
        const EMFILE: i32 = 24;
        const ENFILE: i32 = 23;
        let kind = match err.raw_os_error() {
            Some(EMFILE | ENFILE) => SessionErrorKind::Unavailable,
            _ => SessionErrorKind::Io,
        };
        Self::new(kind, err.to_string()).caused_by(err)
    }

    /// Keeps `cause`, the error underneath (its text should already be in the message).
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Box::new(cause));
        self
    }

    /// The error underneath, if one was kept.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }

    /// The `io::ErrorKind` of an I/O failure (not found, permission denied, disk full, …).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        self.cause()?.downcast_ref::<std::io::Error>().map(std::io::Error::kind)
    }

    pub(crate) fn corrupt(err: serde_json::Error) -> Self {
        Self::new(SessionErrorKind::Corrupt, err.to_string()).caused_by(err)
    }

    pub(crate) fn corrupt_msg(message: String) -> Self {
        Self::new(SessionErrorKind::Corrupt, message)
    }

    pub(crate) fn encode(err: serde_json::Error) -> Self {
        Self::new(SessionErrorKind::Encode, err.to_string()).caused_by(err)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_descriptors_is_unavailable_not_a_broken_store() {
        for errno in [23, 24] {
            let e = SessionError::io(std::io::Error::from_raw_os_error(errno));
            assert_eq!(e.kind, SessionErrorKind::Unavailable, "errno {errno}");
        }
        let e = SessionError::io(std::io::Error::from_raw_os_error(2));
        assert_eq!(e.kind, SessionErrorKind::Io);
        // Issue 31, item 5: the io kind and the error itself are kept, not only its text.
        assert_eq!(e.io_kind(), Some(std::io::ErrorKind::NotFound));
        assert_eq!(e.to_string(), std::io::Error::from_raw_os_error(2).to_string());
        assert!(std::error::Error::source(&e).is_none(), "its text is in the message already");
    }
}
