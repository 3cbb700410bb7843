//! What a finished reply of the embedded model becomes in the conversation.

/// Text before a reply's first call becomes reasoning; see
/// [`keel_llm::text_calls::thoughts_as_reasoning`] (one rule for the embedded engine and
/// local servers).
pub use keel_llm::text_calls::thoughts_as_reasoning;

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
