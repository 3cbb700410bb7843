use super::*;
use crate::message::{ToolCall, UserMessage};
use pretty_assertions::assert_eq;
use serde_json::json;

fn me() -> ModelInfo {
    ModelInfo { provider: "openai".into(), model: "gpt-5-mini".into() }
}

fn config() -> ProviderConfig {
    let mut config = ProviderConfig::for_api(crate::config::Api::Responses, "http://x/v1", "gpt-5-mini");
    config.provider = "openai".into();
    config.responses.reasoning_summary = Some("auto".into());
    config
}

fn tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: "read_file".into(),
        description: "Reads.".into(),
        parameters: RawValue::from_string(r#"{"type":"object"}"#.into()).unwrap(),
    }]
}

fn body_with(messages: &[Message], tools: &[ToolDefinition], choice: ToolChoice) -> Value {
    let request = ModelRequest::new("Be brief.", messages, tools).tool_choice(choice).cache_key("s-1");
    let encoded = encode_tools(tools).unwrap();
    serde_json::from_slice(&encode(&request, &config(), &me(), &encoded).unwrap()).unwrap()
}

fn body(messages: &[Message]) -> Value {
    body_with(messages, &tools(), ToolChoice::Auto)
}

fn user(text: &str) -> Message {
    Message::User(UserMessage::text(text))
}

fn result(id: &str, content: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        call_id: id.into(),
        name: "read_file".into(),
        content: content.into(),
        is_error: false,
        images: Vec::new(),
    })
}

fn reasoning(id: &str, encrypted: Option<&str>) -> ContentBlock {
    let mut item =
        json!({"id": id, "type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan."}]});
    if let Some(encrypted) = encrypted {
        item["encrypted_content"] = json!(encrypted);
    }
    ContentBlock::ProviderItem { api: API.into(), item }
}

fn call(id: &str, item_id: &str) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall {
        item_id: Some(item_id.into()),
        ..ToolCall::new(id, "read_file", r#"{"path":"a"}"#)
    })
}

fn assistant(content: Vec<ContentBlock>, origin: Option<ModelInfo>) -> Message {
    Message::Assistant(AssistantMessage { content, origin, ..AssistantMessage::default() })
}

#[test]
fn the_whole_request_replays_reasoning_and_calls_in_order() {
    let messages = vec![
        user("Read a."),
        assistant(
            vec![
                ContentBlock::Thinking { text: "Plan.".into(), signature: None },
                reasoning("rs_1", Some("gAAAAB==")),
                ContentBlock::Text { text: "Reading.".into() },
                call("call_1", "fc_1"),
            ],
            Some(me()),
        ),
        result("call_1", "alpha"),
    ];
    assert_eq!(
        body(&messages),
        json!({
            "model": "gpt-5-mini",
            "instructions": "Be brief.",
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Read a."}]},
                {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan."}],
                 "encrypted_content": "gAAAAB=="},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file",
                 "arguments": "{\"path\":\"a\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "alpha"}
            ],
            "tools": [{"type": "function", "name": "read_file", "description": "Reads.",
                       "parameters": {"type": "object"}, "strict": false}],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "s-1",
            "max_output_tokens": 8192,
            "reasoning": {"summary": "auto"}
        })
    );
}

#[test]
fn reasoning_without_encrypted_content_or_from_another_model_stays_home() {
    let other = ModelInfo { provider: "openai".into(), model: "gpt-5".into() };
    let messages = vec![
        user("a"),
        // Its reasoning item has no encrypted content: neither it nor the call's id go.
        assistant(vec![reasoning("rs_1", None), call("call_1", "fc_1")], Some(me())),
        result("call_1", "one"),
        // Another model's reasoning: the same.
        assistant(vec![reasoning("rs_2", Some("gAAA")), call("call_2", "fc_2")], Some(other)),
        result("call_2", "two"),
    ];
    let input = body(&messages)["input"].clone();
    assert_eq!(
        input,
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
            {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "one"},
            {"type": "function_call", "call_id": "call_2", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
            {"type": "function_call_output", "call_id": "call_2", "output": "two"}
        ])
    );
}

#[test]
fn every_call_gets_one_output_and_strays_become_user_text() {
    let messages = vec![
        user("go"),
        assistant(vec![call("a", "fc_a"), call("b", "fc_b")], None),
        result("b", "B"),
        result("zzz", "stray"),
        user("next"),
    ];
    let input = body(&messages)["input"].clone();
    assert_eq!(
        input,
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {"type": "function_call", "call_id": "a", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
            {"type": "function_call", "call_id": "b", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
            {"type": "function_call_output", "call_id": "a", "output": "no result was recorded for this call"},
            {"type": "function_call_output", "call_id": "b", "output": "B"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "[result of the read_file call zzz]\nstray"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "next"}]}
        ])
    );
}

#[test]
fn without_tools_there_is_no_tool_choice_and_a_required_call_says_so() {
    let body = body_with(&[user("hi")], &[], ToolChoice::Required);
    assert_eq!(body.get("tools"), None);
    assert_eq!(body.get("tool_choice"), None);
    assert_eq!(body.get("parallel_tool_calls"), None);
    let body = body_with(&[user("hi")], &tools(), ToolChoice::Required);
    assert_eq!(body["tool_choice"], "required");
    let body = body_with(&[user("hi")], &tools(), ToolChoice::None);
    assert_eq!(body["tool_choice"], "none");
}

#[test]
fn images_are_input_images_in_messages_and_call_outputs() {
    let (image, hollow) = crate::image::test_images();
    let url = image.data_url().unwrap();
    let mut with_image = result("call_1", "shot");
    let Message::ToolResult(r) = &mut with_image else { panic!() };
    r.images = vec![image.clone()];
    let messages = vec![
        Message::User(UserMessage { content: "look".into(), images: vec![image, hollow] }),
        Message::Assistant(crate::message::AssistantMessage {
            content: vec![ContentBlock::ToolCall(ToolCall::new("call_1", "read_file", "{}"))],
            ..Default::default()
        }),
        with_image,
    ];
    let body = body(&messages);
    assert_eq!(
        body["input"][0],
        json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": url},
            {"type": "input_text", "text": "[an image (image/png, 70 bytes) whose file is no longer beside the session]"},
        ]})
    );
    assert_eq!(
        body["input"][2],
        json!({"type": "function_call_output", "call_id": "call_1", "output": [
            {"type": "input_text", "text": "shot"},
            {"type": "input_image", "image_url": url},
        ]})
    );
}
