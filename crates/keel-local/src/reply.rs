//! What a finished reply of the embedded model becomes in the conversation.

use keel_llm::ContentBlock;

/// Turns the text before a reply's first call into reasoning. That text is the model's
/// note to itself ("line 3 prints Hello; I change it to Hi"), not an answer, and the
/// chat template does not send reasoning back: a small model shown its own earlier
/// notes copies them, and they come to narrate steps it never took. A reply without a
/// call is left alone (its text is the answer).
pub fn thoughts_as_reasoning(content: &mut [ContentBlock]) {
    let Some(first_call) = content.iter().position(|b| matches!(b, ContentBlock::ToolCall(_))) else {
        return;
    };
    for block in &mut content[..first_call] {
        if let ContentBlock::Text { text } = block {
            let text = std::mem::take(text).trim().to_owned();
            *block = ContentBlock::Thinking { text, signature: None };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_llm::ToolCall;

    fn call() -> ContentBlock {
        ContentBlock::ToolCall(ToolCall::new("call_1", "read_file", r#"{"path":"app.py"}"#))
    }

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text { text: t.into() }
    }

    #[test]
    fn text_before_a_call_becomes_reasoning_and_a_plain_answer_stays() {
        let mut reply = vec![text("I read app.py first. \n"), call()];
        thoughts_as_reasoning(&mut reply);
        assert_eq!(
            reply,
            vec![ContentBlock::Thinking { text: "I read app.py first.".into(), signature: None }, call()]
        );

        let mut answer = vec![text("app.py prints Hi now.")];
        thoughts_as_reasoning(&mut answer);
        assert_eq!(answer, vec![text("app.py prints Hi now.")]);
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
