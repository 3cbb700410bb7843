//! What a finished reply of the embedded model (or of llama-server driven like it)
//! becomes in the conversation.

use keel_llm::text_calls::apply_text_tool_calls;
use keel_llm::{AssistantMessage, ContentBlock, FinishReason, Usage};

/// Text before a reply's first call becomes reasoning; see
/// [`keel_llm::text_calls::thoughts_as_reasoning`] (one rule for the embedded engine and
/// local servers).
pub use keel_llm::text_calls::thoughts_as_reasoning;

/// A reply's whole text and what it cost.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The generated text, call tags included.
    pub text: String,
    /// Why generation stopped.
    pub finish: FinishReason,
    /// Prompt tokens evaluated for this request.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Prompt tokens reused from the cache.
    pub reused_tokens: u64,
}

/// The finished reply as a message: calls to `tools` written as text become real calls
/// (one that the output limit cut off included: see
/// [`keel_llm::text_calls::apply_text_tool_calls`]), and text before the first call
/// becomes reasoning.
pub fn finish_message(finished: Finished, tools: &[String]) -> AssistantMessage {
    let mut message = AssistantMessage {
        content: vec![ContentBlock::Text { text: finished.text }],
        finish_reason: finished.finish,
        raw_finish_reason: None,
        usage: Usage {
            input_tokens: finished.prompt_tokens,
            output_tokens: finished.generated_tokens,
            cached_tokens: finished.reused_tokens,
            ..Usage::default()
        },
        interrupted: false,
        origin: None,
    };
    let names: Vec<&str> = tools.iter().map(String::as_str).collect();
    if !names.is_empty() {
        apply_text_tool_calls(&mut message, &names);
    }
    message.content.retain(|b| !matches!(b, ContentBlock::Text { text } if text.is_empty()));
    thoughts_as_reasoning(&mut message.content);
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_llm::{ContentBlock, ToolCall};

    fn call() -> ContentBlock {
        ContentBlock::ToolCall(ToolCall::new("call_1", "read_file", r#"{"path":"app.py"}"#))
    }

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text { text: t.into() }
    }

    #[test]
    fn the_template_does_not_send_a_thought_back() {
        let mut reply = vec![text("Line 3 prints Hello."), call()];
        thoughts_as_reasoning(&mut reply);
        let message = keel_llm::Message::Assistant(keel_llm::AssistantMessage {
            content: reply,
            ..keel_llm::AssistantMessage::default()
        });
        let rendered = crate::template::hf_messages("", &[message]);
        assert_eq!(rendered[0]["content"], serde_json::json!(""));
        assert_eq!(rendered[0]["tool_calls"][0]["function"]["name"], serde_json::json!("read_file"));
    }
}
