//! A plain request to the model: one user message, no tools, a set temperature. The
//! small profile's change_file and answer ask the model this way, outside the loop's
//! JSON tool calls, where a small model writes and quotes far better.

use futures::StreamExt;
use keel_llm::UserMessage;
use keel_llm::{
    Message, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelRequest, ToolChoice, Usage,
};
use tokio_util::sync::CancellationToken;

/// The system prompt of a plain request.
const SYSTEM: &str = "You are a helpful coding assistant.";

/// Sends `prompt` and returns the reply's text and usage.
pub(crate) async fn ask(
    model: &dyn ModelClient,
    prompt: String,
    temperature: f32,
    cancel: CancellationToken,
) -> Result<(String, Usage), ModelError> {
    let messages = [Message::User(UserMessage { content: prompt })];
    let request =
        ModelRequest::new(SYSTEM, &messages, &[]).tool_choice(ToolChoice::None).temperature(temperature);
    let mut stream = model.stream(request, cancel);
    while let Some(item) = stream.next().await {
        if let ModelEvent::Completed(message) = item? {
            return Ok((message.text(), message.usage));
        }
    }
    Err(ModelError::new(ModelErrorKind::InvalidResponse, "the reply ended before it was complete"))
}
