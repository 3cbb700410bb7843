//! The JSON form of what the loop reports: exactly what `keel --json` prints, one object
//! per event (docs/json-events.md). Logged events are the session's events as stored;
//! live ones (`delta/*`, `model/retry`, `tool/started`, `tool/progress`, `subagent/*`) are not
//! stored.

use keel_agent::AgentEvent;
use keel_llm::ModelEvent;
use serde_json::{Value, json};

/// The JSON object for `event`, or `None` for events `--json` does not show.
pub fn agent_event_value(event: &AgentEvent<'_>) -> Option<Value> {
    let value = match event {
        AgentEvent::Logged(event) => return serde_json::to_value(event).ok(),
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
        AgentEvent::Model(_) => return None,
        AgentEvent::ToolStarted { step, call } => json!({
            "type": "tool/started",
            "data": {"step": step, "call_id": call.id, "name": call.name}
        }),
        AgentEvent::ToolProgress { call_id, text } => {
            json!({"type": "tool/progress", "data": {"call_id": call_id, "text": text}})
        }
        AgentEvent::Subagent { call_id, update } => return subagent_value(call_id, update),
        _ => return None,
    };
    Some(value)
}

/// A child session's news (`subagent/started`, `subagent/tool`, `subagent/finished`):
/// the update's fields and the parent's `call_id`.
fn subagent_value(call_id: &str, update: &keel_agent::SubagentUpdate) -> Option<Value> {
    let Value::Object(mut data) = serde_json::to_value(update).ok()? else { return None };
    let kind = data.remove("event")?;
    data.insert("call_id".into(), Value::from(call_id));
    Some(json!({"type": format!("subagent/{}", kind.as_str()?), "data": data}))
}
