//! A plain request to the model: one user message, no tools, a set temperature. The
//! small profile's change_file and answer ask the model this way, outside the loop's
//! JSON tool calls, where a small model writes and quotes far better.

use futures::StreamExt;
use keel_agent::ModelAside;
use keel_llm::UserMessage;
use keel_llm::{
    Message, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelRequest, ToolChoice, Usage,
};
use tokio_util::sync::CancellationToken;

/// The system prompt of a plain request.
const SYSTEM: &str = "You are a helpful coding assistant.";

/// A plain request's outcome and its record for the log (`model/aside`).
pub(crate) struct Asked {
    /// The reply's text and usage, or why there is none.
    pub result: Result<(String, Usage), ModelError>,
    /// The exchange, logged before the tool's result.
    pub aside: ModelAside,
}

/// Sends `prompt` (for `purpose`, named in the log) and returns the reply's text and
/// usage with the record of the exchange.
pub(crate) async fn ask(
    model: &dyn ModelClient,
    purpose: &str,
    prompt: String,
    temperature: f32,
    cancel: CancellationToken,
) -> Asked {
    let mut aside = ModelAside {
        purpose: purpose.to_owned(),
        call_id: None,
        system: SYSTEM.to_owned(),
        prompt,
        tools: Vec::new(),
        tool_choice: ToolChoice::None,
        temperature: serde_json::Number::from_f64(f64::from(temperature)),
        max_tokens: None,
        reply: None,
        error: None,
    };
    let messages = [Message::User(UserMessage::text(aside.prompt.clone()))];
    let request =
        ModelRequest::new(SYSTEM, &messages, &[]).tool_choice(ToolChoice::None).temperature(temperature);
    let mut stream = model.stream(request, cancel);
    let mut result =
        Err(ModelError::new(ModelErrorKind::InvalidResponse, "the reply ended before it was complete"));
    while let Some(item) = stream.next().await {
        match item {
            Ok(ModelEvent::Completed(message)) => {
                result = Ok((message.text(), message.usage));
                aside.reply = Some(message);
                break;
            }
            Ok(_) => {}
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = &result {
        aside.error = Some(e.to_string());
    }
    Asked { result, aside }
}
