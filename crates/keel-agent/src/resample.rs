//! A reply that makes again, call for call, a call that just failed is asked for once
//! more, hotter.
//!
//! Small models sampled cold keep their most likely reply: told that a call failed, the
//! 1.5B model often makes the very same call in the next step, and the next (three of
//! 45 runs of the real-task suite did so, none of them passed). Its result cannot
//! change, so running it spends a step to learn nothing. When [`AgentConfig::resample_failed_repeat`]
//! is set, such a reply is set aside (logged as `step/resampled`, since whoever watched
//! the step saw it stream) and the step's request is made once more at that temperature.
//! Whatever the second reply is, it is the step's reply: a model that repeats the call
//! again gets it run, and loop detection's notes and limits take over from there.
//!
//! [`AgentConfig::resample_failed_repeat`]: crate::AgentConfig::resample_failed_repeat

use std::collections::HashSet;

use keel_llm::{AssistantMessage, Message, ToolChoice};
use keel_session::{EventKind, SessionError, StepResampled};

use crate::registry::ToolRegistry;
use crate::run::TurnRun;
use crate::turn::Reply;

/// Why a reply is set aside, as logged.
pub(crate) const REASON: &str = "every call in it repeats a call of the step before that failed";

/// Whether every call of `reply` repeats (same tool, same arguments, key order aside) a
/// call of the step just before it that failed. `turn` is the turn's messages so far:
/// the step before is the last assistant message, with only its results after it (a
/// message from the user or a hook in between is new input, after which a call may
/// rightly be made again). Calls of tools that may rightly repeat are never repeats.
pub(crate) fn repeats_failed_calls(turn: &[Message], reply: &AssistantMessage, tools: &ToolRegistry) -> bool {
    let mut failed = HashSet::new();
    let mut before = None;
    for message in turn.iter().rev() {
        match message {
            Message::ToolResult(result) if result.is_error => {
                failed.insert(result.call_id.as_str());
            }
            Message::ToolResult(_) => {}
            Message::Assistant(step) => {
                before = Some(step);
                break;
            }
            Message::User(_) => return false,
        }
    }
    let Some(before) = before else { return false };
    let failed_keys: HashSet<String> =
        before.tool_calls().filter(|call| failed.contains(call.id.as_str())).map(crate::loops::key).collect();
    let mut calls = reply.tool_calls().peekable();
    calls.peek().is_some()
        && calls.all(|call| {
            !tools.get(&call.name).is_some_and(|tool| tool.repeatable())
                && failed_keys.contains(&crate::loops::key(call))
        })
}

impl TurnRun<'_> {
    /// `message`, the step's completed reply, unless it repeats calls that just failed
    /// and resampling is on: then it is logged as set aside and the reply to the same
    /// request made again hotter is returned (however that one ends).
    pub(crate) async fn unless_repeating_failure(
        &mut self,
        tool_choice: ToolChoice,
        message: AssistantMessage,
    ) -> Result<Reply, SessionError> {
        let Some(temperature) = self.agent.config.resample_failed_repeat else {
            return Ok(Reply::Completed(message));
        };
        let turn = &self.session.messages()[self.first_message.min(self.session.messages().len())..];
        if tool_choice == ToolChoice::None || !repeats_failed_calls(turn, &message, &self.tools) {
            return Ok(Reply::Completed(message));
        }
        let Some(logged_temperature) = serde_json::Number::from_f64(f64::from(temperature)) else {
            return Ok(Reply::Completed(message));
        };
        tracing::info!(
            step = self.step,
            temperature,
            "the reply repeats calls that just failed; asking again"
        );
        self.usage += message.usage;
        self.log(EventKind::StepResampled(StepResampled {
            reply: message,
            reason: REASON.to_owned(),
            temperature: logged_temperature,
        }))?;
        Ok(self.stream_reply(tool_choice, None, Some(temperature)).await)
    }
}

#[cfg(test)]
mod tests {
    use keel_llm::{ContentBlock, ToolCall, ToolResultMessage, UserMessage};

    use super::*;

    fn calls(calls: &[(&str, &str, &str)]) -> AssistantMessage {
        AssistantMessage {
            content: calls
                .iter()
                .map(|(id, name, arguments)| ContentBlock::ToolCall(ToolCall::new(*id, *name, *arguments)))
                .collect(),
            ..AssistantMessage::default()
        }
    }

    fn result(id: &str, is_error: bool) -> Message {
        Message::ToolResult(ToolResultMessage {
            call_id: id.into(),
            name: "shell".into(),
            content: "exit code 1".into(),
            is_error,
            images: Vec::new(),
        })
    }

    fn history(step: AssistantMessage, results: Vec<Message>) -> Vec<Message> {
        let mut turn = vec![Message::User(UserMessage::text("Fix the test."))];
        turn.push(Message::Assistant(step));
        turn.extend(results);
        turn
    }

    #[test]
    fn a_failed_call_made_again_at_once_is_a_repeat() {
        let tools = ToolRegistry::new();
        let turn = history(
            calls(&[("a", "shell", r#"{"command":"pytest -q","timeout":9}"#)]),
            vec![result("a", true)],
        );
        let again = calls(&[("b", "shell", r#"{ "timeout": 9, "command": "pytest -q" }"#)]);
        assert!(repeats_failed_calls(&turn, &again, &tools));
    }

    #[test]
    fn a_call_that_worked_new_calls_and_new_input_are_not() {
        let tools = ToolRegistry::new();
        let step = calls(&[("a", "shell", r#"{"command":"ls"}"#), ("b", "shell", r#"{"command":"false"}"#)]);
        let turn = history(step, vec![result("a", false), result("b", true)]);
        // The call that worked, made again.
        assert!(!repeats_failed_calls(&turn, &calls(&[("c", "shell", r#"{"command":"ls"}"#)]), &tools));
        // The failed one beside a new one: the new one is progress.
        let with_new =
            calls(&[("c", "shell", r#"{"command":"false"}"#), ("d", "shell", r#"{"command":"pwd"}"#)]);
        assert!(!repeats_failed_calls(&turn, &with_new, &tools));
        // The failed one alone is a repeat; an answer without calls is not.
        assert!(repeats_failed_calls(&turn, &calls(&[("c", "shell", r#"{"command":"false"}"#)]), &tools));
        assert!(!repeats_failed_calls(&turn, &AssistantMessage::default(), &tools));
        // After new input from the user (or a hook), making it again may be meant.
        let mut steered = turn.clone();
        steered.push(Message::User(UserMessage::text("Try again, the server is up now.")));
        assert!(!repeats_failed_calls(&steered, &calls(&[("c", "shell", r#"{"command":"false"}"#)]), &tools));
        // No step before: nothing to repeat.
        let fresh = vec![Message::User(UserMessage::text("Run false."))];
        assert!(!repeats_failed_calls(&fresh, &calls(&[("c", "shell", r#"{"command":"false"}"#)]), &tools));
    }
}
