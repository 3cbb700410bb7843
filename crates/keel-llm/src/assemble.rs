//! Assembling streamed deltas into one assistant message.

use crate::client::ModelEvent;
use crate::message::{AssistantMessage, ContentBlock, FinishReason, ToolCall, Usage};

/// Collects deltas, in arrival order, into an [`AssistantMessage`].
///
/// Consecutive text (or thinking) deltas join one block; tool-call fragments are matched
/// by the provider's `index`, and several calls may interleave.
#[derive(Debug, Default)]
pub struct MessageBuilder {
    content: Vec<ContentBlock>,
    /// (provider index, position in `content`) for each tool call seen.
    calls: Vec<(usize, usize)>,
}

impl MessageBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends answer text.
    pub fn push_text(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        if let Some(ContentBlock::Text { text }) = self.content.last_mut() {
            text.push_str(delta);
        } else {
            self.content.push(ContentBlock::Text { text: delta.to_owned() });
        }
    }

    /// Appends reasoning text. A signed block is closed: text after it starts another.
    pub fn push_thinking(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        if let Some(ContentBlock::Thinking { text, signature: None }) = self.content.last_mut() {
            text.push_str(delta);
        } else {
            self.content.push(ContentBlock::Thinking { text: delta.to_owned(), signature: None });
        }
    }

    /// Sets the signature of the latest reasoning block (creating one if needed).
    pub fn set_thinking_signature(&mut self, value: String) {
        if let Some(ContentBlock::Thinking { signature, .. }) = self.content.last_mut() {
            *signature = Some(value);
        } else {
            self.content.push(ContentBlock::Thinking { text: String::new(), signature: Some(value) });
        }
    }

    /// The tool call at `index`, as assembled so far.
    pub fn tool_call(&self, index: usize) -> Option<&ToolCall> {
        let &(_, position) = self.calls.iter().rev().find(|(i, _)| *i == index)?;
        match self.content.get(position) {
            Some(ContentBlock::ToolCall(call)) => Some(call),
            _ => None,
        }
    }

    /// Applies a fragment of the tool call at `index`.
    pub fn push_tool_call(&mut self, index: usize, id: Option<&str>, name: Option<&str>, arguments: &str) {
        // From the end: fragments mostly continue the latest call.
        let position = match self.calls.iter().rev().find(|(i, _)| *i == index) {
            Some(&(_, position)) => position,
            None => {
                self.content.push(ContentBlock::ToolCall(ToolCall::new("", "", "")));
                let position = self.content.len() - 1;
                self.calls.push((index, position));
                position
            }
        };
        if let Some(ContentBlock::ToolCall(call)) = self.content.get_mut(position) {
            if let Some(id) = id.filter(|id| !id.is_empty()) {
                call.id = id.to_owned();
            }
            if let Some(name) = name.filter(|name| !name.is_empty()) {
                // Some servers repeat the name on every fragment; others split it.
                if call.name != name {
                    call.name.push_str(name);
                }
            }
            call.arguments.push_str(arguments);
        }
    }

    /// Applies one streamed event. `Completed` and `Retrying` carry nothing to assemble.
    pub fn apply(&mut self, event: &ModelEvent) {
        match event {
            ModelEvent::TextDelta(text) => self.push_text(text),
            ModelEvent::ThinkingDelta(text) => self.push_thinking(text),
            ModelEvent::ToolCallDelta { index, id, name, arguments } => {
                self.push_tool_call(*index, id.as_deref(), name.as_deref(), arguments)
            }
            ModelEvent::Retrying { .. } | ModelEvent::Completed(_) => {}
        }
    }

    /// True when nothing has been received yet.
    pub fn is_empty(&self) -> bool {
        self.content.is_empty()
    }

    /// Forgets everything (a retry starts over).
    pub fn clear(&mut self) {
        self.content.clear();
        self.calls.clear();
    }

    /// The finished message. Calls without an id get a generated one (`call_<n>`); calls
    /// without a name are kept so the loop can answer them with an error.
    pub fn finish(
        self,
        finish_reason: FinishReason,
        raw_finish_reason: Option<String>,
        usage: Usage,
    ) -> AssistantMessage {
        let mut content = self.content;
        for (n, block) in content.iter_mut().enumerate() {
            if let ContentBlock::ToolCall(call) = block
                && call.id.is_empty()
            {
                call.id = format!("call_{n}");
            }
        }
        AssistantMessage {
            content,
            finish_reason,
            raw_finish_reason,
            usage,
            interrupted: false,
            origin: None,
        }
    }

    /// What arrived before an interruption: text and reasoning only (an unfinished tool
    /// call cannot be run), marked `interrupted`.
    pub fn into_partial(self, finish_reason: FinishReason) -> AssistantMessage {
        let content =
            self.content.into_iter().filter(|block| !matches!(block, ContentBlock::ToolCall(_))).collect();
        AssistantMessage {
            content,
            finish_reason,
            raw_finish_reason: None,
            usage: Usage::default(),
            interrupted: true,
            origin: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn interleaved_tool_calls_assemble_by_index() {
        let mut builder = MessageBuilder::new();
        builder.push_text("Let me ");
        builder.push_text("look.");
        builder.push_tool_call(0, Some("a"), Some("read_file"), "{\"pa");
        builder.push_tool_call(1, Some("b"), Some("grep"), "{\"pattern\"");
        builder.push_tool_call(0, None, None, "th\":\"x\"}");
        builder.push_tool_call(1, None, None, ":\"y\"}");
        let message = builder.finish(FinishReason::ToolUse, None, Usage::default());
        assert_eq!(
            message.content,
            vec![
                ContentBlock::Text { text: "Let me look.".into() },
                ContentBlock::ToolCall(ToolCall::new("a", "read_file", "{\"path\":\"x\"}")),
                ContentBlock::ToolCall(ToolCall::new("b", "grep", "{\"pattern\":\"y\"}")),
            ]
        );
    }

    #[test]
    fn partial_keeps_text_and_drops_unfinished_calls() {
        let mut builder = MessageBuilder::new();
        builder.push_thinking("think");
        builder.push_text("answer so far");
        builder.push_tool_call(0, Some("a"), Some("shell"), "{\"comm");
        let message = builder.into_partial(FinishReason::Aborted);
        assert_eq!(
            message,
            AssistantMessage {
                content: vec![
                    ContentBlock::Thinking { text: "think".into(), signature: None },
                    ContentBlock::Text { text: "answer so far".into() },
                ],
                finish_reason: FinishReason::Aborted,
                raw_finish_reason: None,
                usage: Usage::default(),
                interrupted: true,
                origin: None,
            }
        );
    }

    #[test]
    fn missing_ids_are_generated_and_repeated_names_not_doubled() {
        let mut builder = MessageBuilder::new();
        builder.push_tool_call(0, None, Some("ls"), "{}");
        builder.push_tool_call(0, None, Some("ls"), "");
        let message = builder.finish(FinishReason::Stop, None, Usage::default());
        assert_eq!(
            message.tool_calls().cloned().collect::<Vec<_>>(),
            vec![ToolCall::new("call_0", "ls", "{}")]
        );
    }
}
