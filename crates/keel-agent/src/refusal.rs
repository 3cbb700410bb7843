//! A request the provider refused as invalid: whether its content (images included) may
//! be why, and the error that reports a second refusal after the first. Pure, shared by
//! a step's retry without images (the `refused` module) and the compaction's.

use keel_llm::{Message, ModelError, ModelErrorKind};

/// Whether a failed request may have been refused for its content, images included:
/// the provider called it invalid (not a context overflow, credentials, limits or its
/// own failure), and not because nothing answers at that address (404, 405) or the
/// server does not implement the request (501): those fail the same without images.
pub(crate) fn may_be_refused_content(error: &ModelError) -> bool {
    error.kind == ModelErrorKind::InvalidRequest && !matches!(error.status, Some(404 | 405 | 501))
}

/// The first refusal, its message extended with how the request without its `images`
/// images fared, so the log and the user keep both.
pub(crate) fn refused_both_times(first: ModelError, images: usize, second: &ModelError) -> ModelError {
    let what = if images == 1 { "its image".to_owned() } else { format!("its {images} images") };
    let message = format!("{}; tried again without {what}, it failed too: {}", first.message, second.message);
    ModelError { message, ..first }
}

/// `messages` with every image that carries its bytes replaced by its note, and the
/// SHA-256 of those images; `None` when there is none (nothing to try without).
pub(crate) fn without_images(messages: &[Message]) -> Option<(Vec<String>, Vec<Message>)> {
    let sha256 = keel_llm::images_sent(messages);
    if sha256.is_empty() {
        return None;
    }
    let mut bare = messages.to_vec();
    keel_llm::withdraw_images(&mut bare, &sha256);
    Some((sha256, bare))
}
