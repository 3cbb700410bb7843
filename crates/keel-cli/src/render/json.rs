//! `--json`: one JSON object per line on stdout — every session event as logged, plus
//! live events. The schema is documented in docs/json-events.md.

use std::io::Write;
use std::sync::Mutex;

use keel_agent::{AgentEvent, Sink};
use keel_llm::ModelEvent;
use serde_json::json;

/// Writes events to stdout, one line each, flushed per line.
#[derive(Debug, Default)]
pub struct JsonLines {
    out: Mutex<()>,
}

impl JsonLines {
    /// A JSON sink on stdout.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes one value as a line.
    pub fn write_value(&self, value: &serde_json::Value) {
        let _guard = self.out.lock();
        let mut stdout = std::io::stdout().lock();
        let _ = serde_json::to_writer(&mut stdout, value);
        let _ = stdout.write_all(b"\n");
        let _ = stdout.flush();
    }
}

impl Sink for JsonLines {
    fn emit(&self, event: &AgentEvent<'_>) {
        let value = match event {
            AgentEvent::Logged(event) => match serde_json::to_value(event) {
                Ok(value) => value,
                Err(_) => return,
            },
            AgentEvent::Model(ModelEvent::TextDelta(text)) => {
                json!({"type": "delta/text", "data": {"text": text}})
            }
            AgentEvent::Model(ModelEvent::ThinkingDelta(text)) => {
                json!({"type": "delta/thinking", "data": {"text": text}})
            }
            AgentEvent::Model(ModelEvent::ToolCallDelta { index, id, name, arguments }) => json!({
                "type": "delta/tool_call",
                "data": {"index": index, "id": id, "name": name, "arguments": arguments}
            }),
            AgentEvent::Model(ModelEvent::Retrying { attempt, max_retries, delay, reason }) => json!({
                "type": "model/retry",
                "data": {"attempt": attempt, "max_retries": max_retries, "delay_ms": delay.as_millis() as u64, "reason": reason}
            }),
            AgentEvent::Model(_) => return,
            AgentEvent::ToolStarted { step, call } => json!({
                "type": "tool/started",
                "data": {"step": step, "call_id": call.id, "name": call.name}
            }),
            AgentEvent::ToolProgress { call_id, text } => {
                json!({"type": "tool/progress", "data": {"call_id": call_id, "text": text}})
            }
            AgentEvent::ToolFinished { .. } => return,
        };
        self.write_value(&value);
    }
}
