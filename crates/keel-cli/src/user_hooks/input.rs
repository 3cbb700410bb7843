//! The JSON a hook gets on stdin, in Claude Code's shape: `session_id`,
//! `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`, and the event's own
//! fields (`tool_name`, `tool_input`, `tool_use_id`, `tool_response`, `prompt`, `source`,
//! `stop_hook_active`, `trigger`, `custom_instructions`).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::config::Event;
use super::matcher::claude_name;

/// What every event's input holds.
#[derive(Debug, Clone, Copy)]
pub struct Common<'a> {
    /// The session's id.
    pub session_id: &'a str,
    /// The project folder.
    pub cwd: &'a Path,
    /// keel's permission mode (`auto`, `ask`, `read-only`).
    pub permission_mode: &'a str,
}

/// The input of `event` with its own `fields`, as bytes for stdin.
pub fn encode(common: Common<'_>, event: Event, fields: Map<String, Value>) -> Vec<u8> {
    let mut input = Map::new();
    input.insert("session_id".into(), json!(common.session_id));
    input.insert("transcript_path".into(), transcript(common.session_id));
    input.insert("cwd".into(), json!(common.cwd));
    input.insert("permission_mode".into(), json!(common.permission_mode));
    input.insert("hook_event_name".into(), json!(event.as_str()));
    input.extend(fields);
    serde_json::to_vec(&Value::Object(input)).unwrap_or_default()
}

/// The session's log (keel's JSONL events, not Claude Code's transcript), when it is a
/// file in keel's sessions folder.
fn transcript(session_id: &str) -> Value {
    let path = crate::paths::sessions_dir().join(format!("{session_id}.jsonl"));
    if path.is_file() { json!(path) } else { Value::Null }
}

/// A tool event's fields: `tool_name`, `tool_input` (the arguments as JSON, and for the
/// file tools also `file_path`, absolute, as Claude Code's tools have it), `tool_use_id`.
pub fn tool_fields(tool: &str, arguments: &str, call_id: &str, workspace: &Path) -> Map<String, Value> {
    let mut input = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!(arguments));
    let file_tool = matches!(claude_name(tool), Some("Read" | "Write" | "Edit"));
    if let (true, Value::Object(args)) = (file_tool, &mut input)
        && !args.contains_key("file_path")
        && let Some(path) = args.get("path").and_then(Value::as_str)
    {
        let absolute = workspace.join(path);
        args.insert("file_path".into(), json!(absolute));
    }
    let mut fields = Map::new();
    fields.insert("tool_name".into(), json!(tool));
    fields.insert("tool_input".into(), input);
    fields.insert("tool_use_id".into(), json!(call_id));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_has_claude_codes_fields() {
        let common = Common { session_id: "s1", cwd: Path::new("/w"), permission_mode: "ask" };
        let mut fields =
            tool_fields("edit_file", r#"{"path":"src/a.rs","old_text":"a"}"#, "c1", Path::new("/w"));
        fields.insert("tool_response".into(), json!({"content": "ok", "is_error": false}));
        let input: Value = serde_json::from_slice(&encode(common, Event::PostToolUse, fields)).unwrap();
        assert_eq!(input["session_id"], "s1");
        assert_eq!(input["cwd"], "/w");
        assert_eq!(input["hook_event_name"], "PostToolUse");
        assert_eq!(input["permission_mode"], "ask");
        assert_eq!(input["tool_name"], "edit_file");
        assert_eq!(input["tool_input"]["path"], "src/a.rs");
        assert_eq!(input["tool_input"]["file_path"], "/w/src/a.rs");
        assert_eq!(input["tool_use_id"], "c1");
        assert_eq!(input["tool_response"]["content"], "ok");
        assert!(input.get("transcript_path").is_some());
        let shell = tool_fields("shell", r#"{"command":"ls"}"#, "c2", Path::new("/w"));
        assert_eq!(shell["tool_input"], json!({"command": "ls"}));
        let raw = tool_fields("x", "not json", "c3", Path::new("/w"));
        assert_eq!(raw["tool_input"], "not json");
    }
}
