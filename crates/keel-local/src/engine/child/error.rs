//! Why the engine process could not start, or could not evaluate a prompt. keel hears of
//! it over the protocol as [`FromEngine::Failed`]: the kind as a model error kind, and
//! this error's text as the message. Only those two cross the process boundary, so the
//! error underneath (an `io::Error`, libloading's) is kept as text in the message.
//!
//! [`FromEngine::Failed`]: crate::engine::protocol::FromEngine::Failed

use keel_llm::ModelErrorKind;

/// What failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EngineErrorKind {
    /// llama.cpp's libraries could not be written out of the binary (neither to keel's
    /// cache nor to the temporary folder), or one does not match its hash.
    Libraries,
    /// A library could not be loaded, or lacks a function the engine calls.
    Load,
    /// No CPU kernel module runs on this machine, or the one asked for is not in this
    /// build.
    Kernels,
    /// llama.cpp could not load the model, or make a context for it.
    Model,
    /// Evaluating a prompt failed (a full batch, a failed decode).
    Decode,
}

/// A failure of the engine process, with words for keel's user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct EngineError {
    /// What failed.
    pub kind: EngineErrorKind,
    /// What happened, for the user.
    pub message: String,
}

impl EngineError {
    /// An error of `kind`.
    pub(crate) fn new(kind: EngineErrorKind, message: impl Into<String>) -> Self {
        EngineError { kind, message: message.into() }
    }

    /// The kind keel is told. A start that failed is the setup's to fix (the model, the
    /// cache, the machine: `config`, never retried); a failed decode is the engine's
    /// (`server`).
    pub(crate) fn model_error_kind(&self) -> ModelErrorKind {
        match self.kind {
            EngineErrorKind::Decode => ModelErrorKind::Server,
            EngineErrorKind::Libraries
            | EngineErrorKind::Load
            | EngineErrorKind::Kernels
            | EngineErrorKind::Model => ModelErrorKind::Config,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds keel is told are the ones it was told when these were strings.
    #[test]
    fn a_failed_start_is_config_and_a_failed_decode_is_server() {
        for kind in [
            EngineErrorKind::Libraries,
            EngineErrorKind::Load,
            EngineErrorKind::Kernels,
            EngineErrorKind::Model,
        ] {
            assert_eq!(EngineError::new(kind, "x").model_error_kind(), ModelErrorKind::Config, "{kind:?}");
        }
        let decode = EngineError::new(EngineErrorKind::Decode, "decoding failed (status 1)");
        assert_eq!(decode.model_error_kind(), ModelErrorKind::Server);
        assert_eq!(decode.to_string(), "decoding failed (status 1)");
    }
}
