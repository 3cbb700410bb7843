//! Loop detection: a model making the same call over and over, or going round a short
//! cycle of calls, is told so, and stopped if it goes on.
//!
//! Calls are compared by tool name and canonical arguments (JSON with keys sorted), so
//! key order and spacing do not matter. What repeats is the last *unit*: one call, or a
//! cycle of two or three calls, repeated back to back. A test-edit-test loop whose edits
//! differ is progress, not a repeat. Counts come from the session's messages (since the
//! last turn that ended other than by a crash), so they survive a resume.

use keel_llm::{Message, ToolCall};
use serde_json::Value;

use crate::registry::ToolRegistry;

/// Longest cycle of calls recognized.
const MAX_CYCLE: usize = 3;

/// The calls of a task so far, as canonical keys.
#[derive(Debug, Default, Clone)]
pub(crate) struct Repeats {
    keys: Vec<String>,
}

/// `call` as a canonical key: name and arguments with object keys sorted. Arguments that
/// are not JSON are compared as written, trimmed.
fn key(call: &ToolCall) -> String {
    let arguments = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(value) => sorted(value).to_string(),
        Err(_) => call.arguments.trim().to_owned(),
    };
    format!("{}\u{0}{arguments}", call.name)
}

/// The value with every object's keys in order (serde_json keeps insertion order here).
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

impl Repeats {
    /// The calls in `messages` (tools that opt out of loop detection left out).
    pub(crate) fn from_messages(messages: &[Message], tools: &ToolRegistry) -> Self {
        let mut repeats = Repeats::default();
        for message in messages {
            if let Message::Assistant(reply) = message {
                for call in reply.tool_calls() {
                    repeats.record(call, tools);
                }
            }
        }
        repeats
    }

    /// Records `call`; returns how many times in a row its unit (the call, or the cycle
    /// it closes) has now been made. Calls of tools that opt out count 0 and break runs.
    pub(crate) fn record(&mut self, call: &ToolCall, tools: &ToolRegistry) -> u32 {
        if tools.get(&call.name).is_some_and(|t| t.repeatable()) {
            self.keys.push(format!("\u{1}{}", self.keys.len()));
            return 0;
        }
        self.keys.push(key(call));
        (1..=MAX_CYCLE).map(|cycle| self.runs(cycle)).max().unwrap_or(1)
    }

    /// How many times the last `cycle` keys repeat back to back at the end.
    fn runs(&self, cycle: usize) -> u32 {
        let keys = &self.keys;
        if keys.len() < cycle {
            return 0;
        }
        let unit = &keys[keys.len() - cycle..];
        // A cycle of two or three must be of different calls (else it is a shorter unit).
        if cycle > 1 && unit.iter().all(|k| *k == unit[0]) {
            return 0;
        }
        let mut count = 0u32;
        let mut end = keys.len();
        while end >= cycle && keys[end - cycle..end] == *unit {
            count += 1;
            end -= cycle;
        }
        count
    }
}

/// The note added to a result whose call was repeated `times` times.
pub(crate) fn repeat_note(times: u32) -> String {
    format!(
        "\n[keel: you have now made this same call (or cycle of calls) {times} times in a row, and its result will not \
         change. Do something different: read the error or output above, change the arguments, or try another tool.]"
    )
}

/// Why the calls of a step that repeats past the limit are not run.
pub(crate) const NOT_RUN_LOOPING: &str = "not run: this call repeats the same calls again and again without progress, so the turn is being stopped";

/// The request for a final answer after stopping a loop.
pub const LOOP_SUMMARY_REQUEST: &str = "You have been repeating the same tool calls without progress, so no more \
tools can be run. Reply now without calling tools: say what you found and did, what went wrong, and what remains.";

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall::new("x", name, arguments)
    }

    #[test]
    fn the_same_call_counts_whatever_its_key_order() {
        let tools = ToolRegistry::new();
        let mut repeats = Repeats::default();
        assert_eq!(repeats.record(&call("read", r#"{"path":"a","limit":5}"#), &tools), 1);
        assert_eq!(repeats.record(&call("read", r#"{ "limit": 5, "path": "a" }"#), &tools), 2);
        assert_eq!(repeats.record(&call("read", r#"{"path":"a","limit":5}"#), &tools), 3);
        assert_eq!(repeats.record(&call("read", r#"{"path":"b"}"#), &tools), 1);
    }

    #[test]
    fn short_cycles_count_but_progress_does_not() {
        let tools = ToolRegistry::new();
        let mut repeats = Repeats::default();
        let counts: Vec<u32> = (0..6u32)
            .map(|i| {
                let c = if i.is_multiple_of(2) {
                    call("read", r#"{"path":"a"}"#)
                } else {
                    call("edit", r#"{"x":1}"#)
                };
                repeats.record(&c, &tools)
            })
            .collect();
        assert_eq!(counts, vec![1, 1, 1, 2, 2, 3]);
        // Test, edit (different each time), test: no repeat beyond 1.
        let mut progress = Repeats::default();
        for i in 0..5 {
            progress.record(&call("shell", r#"{"command":"cargo test"}"#), &tools);
            let n = progress.record(&call("edit", &format!(r#"{{"new":"{i}"}}"#)), &tools);
            assert_eq!(n, 1);
        }
    }

    #[test]
    fn counts_are_rebuilt_from_messages() {
        use keel_llm::{AssistantMessage, ContentBlock};
        let reply = |args: &str| {
            Message::Assistant(AssistantMessage {
                content: vec![ContentBlock::ToolCall(call("read", args))],
                ..AssistantMessage::default()
            })
        };
        let messages = vec![reply(r#"{"path":"a"}"#), reply(r#"{"path": "a"}"#)];
        let tools = ToolRegistry::new();
        let mut repeats = Repeats::from_messages(&messages, &tools);
        assert_eq!(repeats.record(&call("read", r#"{"path":"a"}"#), &tools), 3);
    }
}
