//! What a user sends to start a turn: text, and any images.

use keel_llm::{Image, MAX_IMAGES_PER_MESSAGE};

/// The input that starts a turn. Text converts into it, so `run_turn(…, "fix it", …)`
/// reads as before; images are added with [`Prompt::with_images`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompt {
    /// What the user wrote.
    pub text: String,
    /// Images the user attached (with their bytes), sent after the text.
    pub images: Vec<Image>,
}

impl Prompt {
    /// A prompt of text alone.
    pub fn text(text: impl Into<String>) -> Self {
        Prompt { text: text.into(), images: Vec::new() }
    }

    /// This prompt with `images` attached.
    pub fn with_images(mut self, images: Vec<Image>) -> Self {
        self.images = images;
        self
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Self {
        Prompt::text(text)
    }
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Self {
        Prompt::text(text)
    }
}

impl From<&String> for Prompt {
    fn from(text: &String) -> Self {
        Prompt::text(text.as_str())
    }
}

/// Why a prompt was refused before anything was logged or sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// The model takes no images.
    #[error(
        "{model} does not take images; send the prompt without them, or switch to a model that reads images"
    )]
    ImagesNotAccepted {
        /// The model, as `provider/model`.
        model: String,
    },
    /// More images than one message may carry.
    #[error("{count} images attached; at most {max} fit in one message", max = MAX_IMAGES_PER_MESSAGE)]
    TooManyImages {
        /// How many were attached.
        count: usize,
    },
    /// An image without its bytes (one read back from a log whose file is gone).
    #[error("image {sha256} has no bytes to send")]
    ImageWithoutBytes {
        /// Its hash.
        sha256: String,
    },
}

impl Prompt {
    /// Checks the images against what `model` takes and keel's bounds (`run_turn` does
    /// too; a caller checks first to refuse before opening a session).
    pub fn check(&self, model: &dyn keel_llm::ModelClient) -> Result<(), PromptError> {
        if self.images.is_empty() {
            return Ok(());
        }
        if self.images.len() > MAX_IMAGES_PER_MESSAGE {
            return Err(PromptError::TooManyImages { count: self.images.len() });
        }
        if let Some(image) = self.images.iter().find(|image| image.data.is_none()) {
            return Err(PromptError::ImageWithoutBytes { sha256: image.sha256.clone() });
        }
        if model.accepts_images() == Some(false) {
            let info = model.info();
            return Err(PromptError::ImagesNotAccepted {
                model: format!("{}/{}", info.provider, info.model),
            });
        }
        Ok(())
    }
}
