//! The model-visible history: messages in log order, each with the seq of the event it
//! came from, and the edits long sessions make to it (pruned results, compaction).

use keel_llm::{AssistantMessage, Image, Message, ToolResultMessage, UserMessage};

/// Messages and the seq of the event each one starts at.
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    messages: Vec<Message>,
    seqs: Vec<u64>,
}

impl History {
    pub(crate) fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub(crate) fn seq(&self, index: usize) -> Option<u64> {
        self.seqs.get(index).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    /// User input; consecutive input is one message (providers and chat templates that
    /// want turns to alternate get them).
    pub(crate) fn push_user(&mut self, seq: u64, text: &str, images: Vec<Image>) {
        match self.messages.last_mut() {
            Some(Message::User(previous)) => {
                previous.content.push_str("\n\n");
                previous.content.push_str(text);
                previous.images.extend(images);
            }
            _ => {
                self.messages.push(Message::User(UserMessage { content: text.to_owned(), images }));
                self.seqs.push(seq);
            }
        }
    }

    pub(crate) fn push_assistant(&mut self, seq: u64, message: AssistantMessage) {
        self.messages.push(Message::Assistant(message));
        self.seqs.push(seq);
    }

    pub(crate) fn push_result(&mut self, seq: u64, result: ToolResultMessage) {
        self.messages.push(Message::ToolResult(result));
        self.seqs.push(seq);
    }

    /// Replaces the content of the result for `call_id` (the latest one) with `stub`; its
    /// images go too.
    pub(crate) fn prune(&mut self, call_id: &str, stub: &str) {
        if let Some(Message::ToolResult(result)) = self
            .messages
            .iter_mut()
            .rev()
            .find(|m| matches!(m, Message::ToolResult(r) if r.call_id == call_id))
        {
            result.content = stub.to_owned();
            result.images.clear();
        }
    }

    /// Replaces the images named in `sha256` by a note, wherever they are so far
    /// ([`keel_llm::withdraw_images`]).
    pub(crate) fn withdraw_images(&mut self, sha256: &[String]) {
        keel_llm::withdraw_images(&mut self.messages, sha256);
    }

    /// The index of the first message at or after `seq`, if any.
    pub(crate) fn index_at(&self, seq: u64) -> Option<usize> {
        self.seqs.iter().position(|s| *s >= seq)
    }

    /// True when the history may be cut before the message at `index`: it is a reply or
    /// user input, never a tool result (which must stay right after its call).
    pub(crate) fn is_boundary(&self, index: usize) -> bool {
        !matches!(self.messages.get(index), Some(Message::ToolResult(_)) | None)
    }

    /// Drops the messages before `index` and puts `summary` (as user input, seq `seq`)
    /// in their place. Returns how many messages were dropped.
    pub(crate) fn compact(&mut self, index: usize, seq: u64, summary: &str) -> usize {
        let kept_messages = self.messages.split_off(index.min(self.messages.len()));
        let kept_seqs = self.seqs.split_off(index.min(self.seqs.len()));
        let dropped = self.messages.len();
        self.messages.clear();
        self.seqs.clear();
        self.push_user(seq, summary, Vec::new());
        for (message, message_seq) in kept_messages.into_iter().zip(kept_seqs) {
            match message {
                Message::User(user) => self.push_user(message_seq, &user.content, user.images),
                other => {
                    self.messages.push(other);
                    self.seqs.push(message_seq);
                }
            }
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pruned_result_loses_its_images_with_its_text() {
        let image = keel_llm::Image::from_base64(keel_testkit::mcp::PNG_BASE64).unwrap();
        let mut history = History::default();
        let result = ToolResultMessage {
            call_id: "s1".into(),
            name: "screenshot".into(),
            content: "[image 1 below]".into(),
            is_error: false,
            images: vec![image],
        };
        history.push_result(3, result);
        history.prune("s1", "[output of screenshot pruned]");
        let Some(Message::ToolResult(pruned)) = history.messages().last() else { panic!("no result") };
        assert_eq!((pruned.content.as_str(), pruned.images.len()), ("[output of screenshot pruned]", 0));
    }
}
