//! A request refused for its images. A provider that will not take an image (a format
//! or size it does not accept) answers 400, and would answer so to every later request,
//! since each one sends the history again. So a step whose request carried images and
//! was refused as invalid is tried once more with each image replaced by a note; if the
//! provider takes that one, the images are withdrawn from the conversation by a logged
//! `images/withdrawn` ([`keel_session::ImagesWithdrawn`]) before the step's reply, and
//! every later request, and every request rebuilt from the log, sends the notes too.

use keel_llm::{AssistantMessage, ModelError, ToolChoice};
use keel_session::{EventKind, ImagesWithdrawn, SessionError};

use crate::run::TurnRun;
use crate::turn::Reply;

/// Whether a failed request may have been refused for its images: refused for its
/// content ([`crate::refusal::may_be_refused_content`]) before any output.
fn refused_as_invalid(partial: &AssistantMessage, error: &ModelError) -> bool {
    crate::refusal::may_be_refused_content(error) && partial.is_empty()
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
        let Some((sha256, messages)) = crate::refusal::without_images(self.session.messages()) else {
            return Ok(Reply::Failed(partial, error));
        };
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
                    Reply::Failed(partial, crate::refusal::refused_both_times(error, sha256.len(), &second))
                }
                Reply::Completed(_) => Reply::Failed(partial, error),
            });
        }
        self.log(EventKind::ImagesWithdrawn(ImagesWithdrawn { sha256, reason: error.message }))?;
        Ok(retried)
    }
}
