//! keel's embedded local model.
//!
//! Pure Rust, always built: reading GGUF metadata ([`gguf`]), rendering the model's own
//! chat template ([`template`]), the
//! model cache and downloads ([`models`],
//! [`download`]), and [`engine::LocalModel`], a `keel_llm::ModelClient` that runs the
//! weights in an engine process. With the `llama` feature the engine itself is built in
//! ([`engine::child`]: llama.cpp, its CPU kernels chosen at run time).

pub mod download;
pub mod engine;
pub mod gguf;
pub mod grammar;
pub mod models;
pub mod reply;
pub mod server;
pub mod template;

/// What went wrong with the local model.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// Reading or writing a file failed.
    #[error("{0}")]
    Io(String),
    /// The file is not a GGUF model.
    #[error("{0}")]
    NotGguf(String),
    /// The model has no usable chat template.
    #[error("{0}")]
    Template(String),
    /// No such model file or name.
    #[error("{0}")]
    NotFound(String),
    /// Fetching weights failed.
    #[error("{0}")]
    Download(String),
    /// Downloaded weights do not match their checksum.
    #[error("{0}")]
    Checksum(String),
    /// llama.cpp refused to load or run the model.
    #[error("{0}")]
    Engine(String),
}

impl From<std::io::Error> for LocalError {
    fn from(error: std::io::Error) -> Self {
        LocalError::Io(error.to_string())
    }
}
