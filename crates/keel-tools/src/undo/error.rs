//! Why a file could not be put back: a documented kind, the words shown to the user, and
//! the error underneath when there is one.

use std::sync::Arc;

/// Why undo left a file as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UndoErrorKind {
    /// It changed after keel's change (the user's edits, or a command's): undo never
    /// overwrites work it did not do.
    ChangedSince,
    /// Its earlier content was not kept (larger than [`super::MAX_KEPT_BYTES`]).
    NotKept,
    /// It is outside the folders keel may write.
    Outside,
    /// Something other than a file is there now (a folder, a device).
    NotAFile,
    /// A folder on its way was replaced (by a link, say); nothing is followed through it.
    PathChanged,
    /// The file tools refuse to write it now (a link out, a hard link, `.git`); the cause
    /// is their `ToolError`.
    Refused,
    /// Reading the kept copy, or writing or removing the file, failed.
    Io,
}

/// A file undo could not put back. Its text is what the user is shown.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct UndoError {
    /// Why.
    pub kind: UndoErrorKind,
    /// What happened, for the user.
    pub message: String,
    cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl UndoError {
    /// An error of `kind`.
    pub fn new(kind: UndoErrorKind, message: impl Into<String>) -> Self {
        UndoError { kind, message: message.into(), cause: None }
    }

    /// Keeps `cause`, the error underneath (its text should already be in the message,
    /// so it is not [`std::error::Error::source`]: a chain printed with `{:#}` would say it
    /// twice).
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Arc::new(cause));
        self
    }

    /// The error underneath, if one was kept.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }

    /// The `io::ErrorKind` of an I/O failure.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        self.cause()?.downcast_ref::<std::io::Error>().map(std::io::Error::kind)
    }

    /// An I/O failure whose text is the message.
    pub(super) fn io(error: std::io::Error) -> Self {
        Self::new(UndoErrorKind::Io, error.to_string()).caused_by(error)
    }

    /// The file tools' refusal to write a file back, as the matching kind.
    pub(super) fn refused(error: keel_agent::ToolError) -> Self {
        use keel_agent::ToolErrorKind;
        let kind = match error.kind {
            ToolErrorKind::OutsideWorkspace => UndoErrorKind::Outside,
            ToolErrorKind::IsADirectory | ToolErrorKind::NotARegularFile => UndoErrorKind::NotAFile,
            ToolErrorKind::NotFound | ToolErrorKind::PermissionDenied | ToolErrorKind::IoError => {
                UndoErrorKind::Io
            }
            _ => UndoErrorKind::Refused,
        };
        Self::new(kind, error.message.clone()).caused_by(error)
    }
}

/// Errors are equal when their kind and message are (the cause's text is in the message).
impl PartialEq for UndoError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for UndoError {}
