//! The one check that a message history is what every provider accepts.

use keel_llm::Message;

/// Why a history is not provider-valid, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("message {index}: {problem}")]
pub struct InvalidHistory {
    /// The index of the offending message.
    pub index: usize,
    /// What is wrong with it.
    pub problem: String,
}

/// Checks `messages` the way providers do: every tool call answered by exactly one
/// result, the results right after their reply and in the model's order, no empty reply,
/// no result without a call, and user input never twice in a row (it is one message).
pub fn validate(messages: &[Message]) -> Result<(), InvalidHistory> {
    let invalid = |index: usize, problem: String| Err(InvalidHistory { index, problem });
    let mut expected: std::collections::VecDeque<&str> = std::collections::VecDeque::new();
    let mut previous_user = false;
    for (index, message) in messages.iter().enumerate() {
        match message {
            Message::Assistant(reply) => {
                if !expected.is_empty() {
                    return invalid(index, format!("a reply while calls {expected:?} have no result"));
                }
                if reply.is_empty() {
                    return invalid(index, "an empty reply".into());
                }
                expected = reply.tool_calls().map(|c| c.id.as_str()).collect();
                previous_user = false;
            }
            Message::User(_) => {
                if !expected.is_empty() {
                    return invalid(index, format!("user input while calls {expected:?} have no result"));
                }
                if previous_user {
                    return invalid(index, "user input twice in a row".into());
                }
                previous_user = true;
            }
            Message::ToolResult(result) => {
                match expected.pop_front() {
                    Some(id) if id == result.call_id => {}
                    Some(id) => {
                        return invalid(
                            index,
                            format!("the result for `{}` where `{id}`'s was due", result.call_id),
                        );
                    }
                    None => {
                        return invalid(
                            index,
                            format!("a result for `{}`, which no reply just asked for", result.call_id),
                        );
                    }
                }
                previous_user = false;
            }
        }
    }
    if let Some(id) = expected.front() {
        return invalid(messages.len(), format!("call `{id}` has no result"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_llm::{AssistantMessage, ContentBlock, ToolCall, ToolResultMessage, UserMessage};

    fn user() -> Message {
        Message::User(UserMessage::text("u"))
    }
    fn calls(ids: &[&str]) -> Message {
        Message::Assistant(AssistantMessage {
            content: ids.iter().map(|id| ContentBlock::ToolCall(ToolCall::new(*id, "t", "{}"))).collect(),
            ..AssistantMessage::default()
        })
    }
    fn result(id: &str) -> Message {
        Message::ToolResult(ToolResultMessage {
            call_id: id.into(),
            name: "t".into(),
            content: "r".into(),
            is_error: false,
            images: Vec::new(),
        })
    }

    #[test]
    fn valid_and_invalid_histories() {
        assert_eq!(validate(&[user(), calls(&["a", "b"]), result("a"), result("b"), user()]), Ok(()));
        let problem = |m: &[Message]| validate(m).unwrap_err().problem;
        assert!(problem(&[user(), calls(&["a"]), user()]).contains("have no result"));
        assert!(problem(&[user(), calls(&["a", "b"]), result("b")]).contains("where `a`'s was due"));
        assert!(problem(&[user(), result("x")]).contains("which no reply just asked for"));
        assert!(problem(&[user(), user()]).contains("twice in a row"));
        assert!(problem(&[user(), calls(&["a"])]).contains("has no result"));
        assert!(problem(&[user(), Message::Assistant(AssistantMessage::default())]).contains("empty reply"));
    }
}
