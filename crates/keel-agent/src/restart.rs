//! A fresh start for a stuck turn (`AgentConfig::fresh_start`).
//!
//! A turn that repeats the same calls, or uses all its steps, rarely recovers inside the
//! context that got it stuck: small models copy their own earlier calls and results. So
//! such a turn starts again, once, from its task: the whole conversation is replaced by
//! one user message holding the turn's first message verbatim (the environment block
//! included), the user's earlier requests, and a note of what the first attempt changed.
//! It is logged as a compaction (`compaction/start` with reason `restart`, then
//! `compaction/end` with outcome `restarted`), so every request is still derived from
//! the log, live and on resume. This module holds the pure part: the message.

use keel_llm::Message;

use crate::compact::plan;

/// Earlier requests carried into the fresh start: at most this many, the latest.
const EARLIER_REQUESTS: usize = 5;
/// Each cut to this many characters.
const EARLIER_REQUEST_CHARS: usize = 1000;
/// Files named in the note, at most.
const FILES_NAMED: usize = 12;

/// Opens the note after the task in a fresh start's message.
const NOTE_START: &str = "(A first attempt at this request stopped without finishing";
/// Opens the current request when earlier requests come before it.
const CURRENT_REQUEST: &str = "\nThe current request:\n";

/// The request in a fresh start's message (environment block already removed): the
/// text without the earlier requests and the note; `text` itself for any other message.
pub(crate) fn request_of(text: &str) -> &str {
    let Some((before, _)) = text.rsplit_once(NOTE_START) else { return text };
    let request = match before.rsplit_once(CURRENT_REQUEST) {
        Some((_, current)) => current,
        None => before,
    };
    request.trim()
}

/// Why a turn starts again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stuck {
    /// The loop guard stopped it for repeating the same calls.
    Looping,
    /// It used all of its steps (the limit).
    OutOfSteps(u32),
}

impl Stuck {
    /// How the first attempt ended, for the note and the log.
    pub(crate) fn describe(self) -> String {
        match self {
            Stuck::Looping => "it made the same calls over and over".to_owned(),
            Stuck::OutOfSteps(steps) => format!("it used all {steps} steps"),
        }
    }
}

/// Splits an environment block (`<environment>…</environment>`) off the front of `text`.
fn split_environment(text: &str) -> (Option<&str>, &str) {
    match (text.trim_start().starts_with("<environment>"), text.rfind("</environment>")) {
        (true, Some(end)) => {
            let end = end + "</environment>".len();
            (Some(text[..end].trim()), text[end..].trim())
        }
        _ => (None, text.trim()),
    }
}

/// Cuts `text` to `max` characters, saying so.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept} …[cut]")
}

/// The message that replaces the whole conversation when a turn starts again.
/// `prompt` is the message that held the user's request when the turn started,
/// `earlier` the messages before it, `turn` the turn's own.
pub(crate) fn fresh_start_message(
    prompt: &str,
    earlier: &[Message],
    turn: &[Message],
    stuck: Stuck,
    tools: &crate::ToolRegistry,
) -> String {
    let (block, task) = split_environment(prompt);
    let mut environment = block.map(str::to_owned);
    let mut requests = Vec::new();
    for text in plan::user_messages(earlier) {
        let (block, request) = split_environment(&text);
        let request = request_of(request);
        if environment.is_none() {
            environment = block.map(str::to_owned);
        }
        if !request.is_empty() {
            requests.push(request.to_owned());
        }
    }
    let mut text = String::new();
    // The environment block comes first, whichever message carried it.
    if let Some(block) = environment {
        text.push_str(&block);
        text.push_str("\n\n");
    }
    if !requests.is_empty() {
        let skip = requests.len().saturating_sub(EARLIER_REQUESTS);
        text.push_str("Earlier requests in this conversation (already answered):\n");
        for request in &requests[skip..] {
            text.push_str(&format!("- {}\n", cut(request, EARLIER_REQUEST_CHARS)));
        }
        text.push_str(CURRENT_REQUEST);
    }
    text.push_str(task);
    text.push_str("\n\n");
    text.push_str(&note(turn, stuck, tools));
    text
}

/// The note after the task: why this is a second attempt and what the first changed.
fn note(turn: &[Message], stuck: Stuck, tools: &crate::ToolRegistry) -> String {
    let (_, changed) = plan::files_touched(turn, tools);
    let files = match changed.len() {
        0 => "It wrote and edited no file. Look at a file's current content before you change it.".to_owned(),
        n => {
            let mut names: Vec<String> = changed.iter().take(FILES_NAMED).map(|f| format!("`{f}`")).collect();
            if n > FILES_NAMED {
                names.push(format!("and {} more", n - FILES_NAMED));
            }
            format!(
                "It wrote or edited {}; they are as it left them, so look at them first: the request may be done already.",
                names.join(", ")
            )
        }
    };
    format!("{NOTE_START}: {}. This is a fresh start. {files})", stuck.describe())
}

#[cfg(test)]
mod tests {
    use keel_llm::{AssistantMessage, ContentBlock, ToolCall, ToolResultMessage, UserMessage};

    use pretty_assertions::assert_eq;

    use super::*;

    fn user(text: &str) -> Message {
        Message::User(UserMessage::text(text))
    }

    fn call(id: &str, name: &str, arguments: &str) -> Message {
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::ToolCall(ToolCall::new(id, name, arguments))],
            ..AssistantMessage::default()
        })
    }

    fn result(id: &str) -> Message {
        Message::ToolResult(ToolResultMessage {
            call_id: id.into(),
            name: "tool".into(),
            content: "ok".into(),
            is_error: false,
            images: Vec::new(),
        })
    }

    const ENV: &str = "<environment>\nFolder: .\nEntries: a.py\n</environment>";

    #[test]
    fn a_first_turn_starts_again_from_its_own_message_with_a_note() {
        let turn = vec![
            user(&format!("{ENV}\n\nAdd a function to a.py.")),
            call("1", "write_file", r#"{"path": "a.py", "content": "x"}"#),
            result("1"),
            call("2", "read_file", r#"{"path": "b.py"}"#),
            result("2"),
        ];
        assert_eq!(
            fresh_start_message(
                &format!("{ENV}\n\nAdd a function to a.py."),
                &[],
                &turn,
                Stuck::Looping,
                &crate::registry::tests_support::registry()
            ),
            format!(
                "{ENV}\n\nAdd a function to a.py.\n\n(A first attempt at this request stopped without finishing: it \
made the same calls over and over. This is a fresh start. It wrote or edited `a.py`; they are as it left them, \
so look at them first: the request may be done already.)"
            )
        );
    }

    #[test]
    fn a_later_turn_carries_the_environment_and_the_earlier_requests() {
        let earlier = vec![
            user(&format!("{ENV}\n\nWhat is in a.py?")),
            Message::Assistant(AssistantMessage {
                content: vec![ContentBlock::Text { text: "A function.".into() }],
                ..AssistantMessage::default()
            }),
        ];
        let turn = vec![user("Now rename it.")];
        assert_eq!(
            fresh_start_message(
                "Now rename it.",
                &earlier,
                &turn,
                Stuck::OutOfSteps(50),
                &crate::registry::tests_support::registry()
            ),
            format!(
                "{ENV}\n\nEarlier requests in this conversation (already answered):\n- What is in a.py?\n\nThe \
current request:\nNow rename it.\n\n(A first attempt at this request stopped without finishing: it used all 50 \
steps. This is a fresh start. It wrote and edited no file. Look at a file's current content before you change \
it.)"
            )
        );
    }

    #[test]
    fn the_request_is_found_again_in_a_fresh_start() {
        let earlier = [user(&format!("{ENV}\n\nWhat is in a.py?"))];
        for (earlier, turn) in [(&earlier[..], user("Now rename it.")), (&[][..], user("Now rename it."))] {
            let text = fresh_start_message(
                "Now rename it.",
                earlier,
                &[turn],
                Stuck::Looping,
                &crate::registry::tests_support::registry(),
            );
            let (_, after_environment) = split_environment(&text);
            assert_eq!(request_of(after_environment), "Now rename it.");
        }
        assert_eq!(request_of("Fix it.\nThe current request:\n"), "Fix it.\nThe current request:\n");
    }

    #[test]
    fn long_earlier_requests_are_cut_and_only_the_latest_kept() {
        let mut earlier: Vec<Message> = (0..8).map(|i| user(&format!("request {i}"))).collect();
        earlier.push(user(&"y".repeat(EARLIER_REQUEST_CHARS + 10)));
        let text = fresh_start_message(
            "go",
            &earlier,
            &[user("go")],
            Stuck::Looping,
            &crate::registry::tests_support::registry(),
        );
        assert!(!text.contains("request 3"), "{text}");
        assert!(text.contains("- request 4\n"), "{text}");
        assert!(text.contains(&format!("- {} …[cut]\n", "y".repeat(EARLIER_REQUEST_CHARS))), "{text}");
    }
}
