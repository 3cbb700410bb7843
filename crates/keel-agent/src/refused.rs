//! A request refused for its images. A provider that will not take an image (a format
//! or size it does not accept) answers 400, and would answer so to every later request,
//! since each one sends the history again. So a step whose request carried images and
//! was refused as invalid is tried once more with each image replaced by a note; if the
//! provider takes that one, the images are withdrawn from the conversation by a logged
//! `images/withdrawn` ([`keel_session::ImagesWithdrawn`]) before the step's reply, and
//! every later request, and every request rebuilt from the log, sends the notes too.

use keel_llm::{AssistantMessage, ModelError, ModelErrorKind, ToolChoice};
use keel_session::{EventKind, ImagesWithdrawn, SessionError};

use crate::run::TurnRun;
use crate::turn::Reply;

/// Whether a failed request may have been refused for its content, images included:
/// the provider called it invalid (not a context overflow, credentials, limits or its
/// own failure), and not because nothing answers at that address (404, 405) or the
/// server does not implement the request (501): those fail the same without images.
pub(crate) fn may_be_refused_content(error: &ModelError) -> bool {
    error.kind == ModelErrorKind::InvalidRequest && !matches!(error.status, Some(404 | 405 | 501))
}

/// Whether a failed request may have been refused for its images: refused for its
/// content ([`may_be_refused_content`]) before any output.
fn refused_as_invalid(partial: &AssistantMessage, error: &ModelError) -> bool {
    may_be_refused_content(error) && partial.is_empty()
}

/// The first refusal, its message extended with how the request without its `images`
/// images fared, so the log and the user keep both.
pub(crate) fn refused_both_times(first: ModelError, images: usize, second: &ModelError) -> ModelError {
    let what = if images == 1 { "its image".to_owned() } else { format!("its {images} images") };
    let message = format!("{}; tried again without {what}, it failed too: {}", first.message, second.message);
    ModelError { message, ..first }
}

impl TurnRun<'_> {
    /// After a step's request failed with `partial` and `error`: the reply to the same
    /// request without its images when the provider refused it as invalid and takes
    /// that one (it completes, or streams output before it stops), the images then
    /// withdrawn in the log. Otherwise the first failure stands (or the user's abort of
    /// the second try) and nothing is withdrawn.
    pub(crate) async fn without_refused_images(
        &mut self,
        tool_choice: ToolChoice,
        partial: AssistantMessage,
        error: ModelError,
    ) -> Result<Reply, SessionError> {
        if !refused_as_invalid(&partial, &error) || self.cancel.is_cancelled() {
            return Ok(Reply::Failed(partial, error));
        }
        let sha256 = keel_llm::images_sent(self.session.messages());
        if sha256.is_empty() {
            return Ok(Reply::Failed(partial, error));
        }
        let mut messages = self.session.messages().to_vec();
        keel_llm::withdraw_images(&mut messages, &sha256);
        tracing::info!(images = sha256.len(), error = %error, "the request was refused; trying it without its images");
        let retried = self.stream_reply(tool_choice, Some(&messages)).await;
        let taken = match &retried {
            Reply::Completed(_) => true,
            Reply::Aborted(partial) | Reply::Failed(partial, _) => !partial.is_empty(),
        };
        if !taken {
            return Ok(match retried {
                Reply::Aborted(nothing) => Reply::Aborted(nothing),
                Reply::Failed(_, second) => {
                    Reply::Failed(partial, refused_both_times(error, sha256.len(), &second))
                }
                Reply::Completed(_) => Reply::Failed(partial, error),
            });
        }
        self.log(EventKind::ImagesWithdrawn(ImagesWithdrawn { sha256, reason: error.message }))?;
        Ok(retried)
    }
}
