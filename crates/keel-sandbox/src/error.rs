//! Confinement that could not be set up: a documented kind and what went wrong.

/// What could not be confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfineErrorKind {
    /// This system has nothing to enforce it with (not Linux, no Landlock in the kernel).
    Unsupported,
    /// Landlock refused the file rules.
    Files,
    /// The seccomp filter that keeps the network off could not be built or installed.
    Network,
    /// The mounts outside the writable folders could not all be made read-only.
    Mounts,
}

/// Confinement that could not be set up. For [`ConfineErrorKind::Files`],
/// [`ConfineErrorKind::Network`] and [`ConfineErrorKind::Unsupported`] nothing may run;
/// for [`ConfineErrorKind::Mounts`] the caller says what is not protected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfineError {
    /// What could not be confined.
    pub kind: ConfineErrorKind,
    /// Why, with the system's own words.
    pub message: String,
}

impl ConfineError {
    /// An error of `kind`.
    pub fn new(kind: ConfineErrorKind, message: impl Into<String>) -> Self {
        ConfineError { kind, message: message.into() }
    }
}
