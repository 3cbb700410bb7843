use super::*;
use crate::message::UserMessage;
use pretty_assertions::assert_eq;
use serde_json::json;

fn me() -> ModelInfo {
    ModelInfo { provider: "anthropic".into(), model: "claude-sonnet-4-6".into() }
}

fn config(thinking: Thinking) -> ProviderConfig {
    let mut config =
        ProviderConfig::for_api(crate::config::Api::Anthropic, "http://x/v1", "claude-sonnet-4-6");
    config.provider = "anthropic".into();
    config.anthropic.thinking = thinking;
    config
}

fn tools() -> Vec<ToolDefinition> {
    ["read_file", "shell"]
        .iter()
        .map(|name| ToolDefinition {
            name: (*name).into(),
            description: format!("{name}."),
            parameters: RawValue::from_string(r#"{"type":"object"}"#.into()).unwrap(),
        })
        .collect()
}

fn body(messages: &[Message], config: &ProviderConfig, choice: ToolChoice) -> Value {
    let tools = tools();
    let request = ModelRequest::new("Be brief.", messages, &tools).tool_choice(choice);
    let encoded = encode_tools(&tools).unwrap();
    serde_json::from_slice(&encode(&request, config, &me(), &encoded).unwrap()).unwrap()
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

fn assistant(content: Vec<ContentBlock>, origin: Option<ModelInfo>) -> Message {
    Message::Assistant(AssistantMessage { content, origin, ..AssistantMessage::default() })
}

fn signed(text: &str, signature: &str) -> ContentBlock {
    ContentBlock::Thinking { text: text.into(), signature: Some(signature.into()) }
}

fn call(id: &str, arguments: &str) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall::new(id, "read_file", arguments))
}

#[test]
fn the_whole_request_with_thinking_caching_and_results() {
    let messages = vec![
        user("Read a."),
        assistant(
            vec![
                signed("Read it.", "sig1"),
                ContentBlock::RedactedThinking { data: "ENCRYPTED".into() },
                ContentBlock::Text { text: "Reading.".into() },
                call("toolu_1", r#"{"path":"a"}"#),
            ],
            Some(me()),
        ),
        result("toolu_1", "alpha"),
        user("Hurry."),
    ];
    assert_eq!(
        body(&messages, &config(Thinking::Adaptive), ToolChoice::Auto),
        json!({
            "model": "claude-sonnet-4-6",
            "max_tokens": 8192,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Read a."}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Read it.", "signature": "sig1"},
                    {"type": "redacted_thinking", "data": "ENCRYPTED"},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "alpha"},
                    {"type": "text", "text": "Hurry.", "cache_control": {"type": "ephemeral"}}
                ]}
            ],
            "tools": [
                {"name": "read_file", "description": "read_file.", "input_schema": {"type": "object"}},
                {"name": "shell", "description": "shell.", "input_schema": {"type": "object"},
                 "cache_control": {"type": "ephemeral"}}
            ],
            "thinking": {"type": "adaptive"},
            "stream": true
        })
    );
}

#[test]
fn thinking_goes_back_only_signed_and_only_to_its_model() {
    let other = ModelInfo { provider: "anthropic".into(), model: "claude-opus-4-6".into() };
    let messages = vec![
        user("a"),
        assistant(vec![signed("mine", "s1"), ContentBlock::Text { text: "one".into() }], Some(me())),
        user("b"),
        assistant(vec![signed("theirs", "s2"), ContentBlock::Text { text: "two".into() }], Some(other)),
        user("c"),
        assistant(
            vec![
                ContentBlock::Thinking { text: "cut".into(), signature: None },
                ContentBlock::Text { text: "three".into() },
            ],
            Some(me()),
        ),
        user("d"),
        assistant(vec![signed("no origin", "s3"), ContentBlock::Text { text: "four".into() }], None),
        user("e"),
    ];
    let body = body(&messages, &config(Thinking::Adaptive), ToolChoice::Auto);
    let assistants: Vec<Value> =
        body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").cloned().collect();
    assert_eq!(
        assistants,
        vec![
            json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "mine", "signature": "s1"}, {"type": "text", "text": "one"}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "two"}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "three"}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "four"}]}),
        ]
    );
}

#[test]
fn a_tool_loop_continued_without_thinking_turns_thinking_off() {
    // The model was switched mid-loop: the reply being continued has no thinking of
    // this model, so the request may not ask for thinking (the API would refuse it).
    let other = ModelInfo { provider: "deepseek".into(), model: "deepseek-reasoner".into() };
    let messages = vec![
        user("a"),
        assistant(vec![signed("old", "s1"), ContentBlock::Text { text: "ok".into() }], Some(me())),
        user("b"),
        assistant(
            vec![ContentBlock::Thinking { text: "plan".into(), signature: None }, call("c1", "{}")],
            Some(other),
        ),
        result("c1", "done"),
    ];
    let switched = body(&messages, &config(Thinking::Budget(4096)), ToolChoice::Required);
    assert_eq!(switched.get("thinking"), None);
    assert_eq!(switched["tool_choice"], json!({"type": "any"}));
    assert!(!switched.to_string().contains("\"thinking\""), "no thinking block either: {switched}");
    // The same loop continued by the model that thought: thinking stays on, and a
    // required call becomes auto (the API allows only auto with thinking).
    let messages = vec![
        user("a"),
        assistant(vec![signed("plan", "s9"), call("c1", "{}")], Some(me())),
        result("c1", "x"),
    ];
    let body = body(&messages, &config(Thinking::Budget(4096)), ToolChoice::Required);
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 4096}));
    assert_eq!(body.get("tool_choice"), None);
}

#[test]
fn every_tool_use_gets_one_result_and_strays_become_text() {
    let messages = vec![
        user("go"),
        assistant(vec![call("a", "{}"), call("b", "{}"), call("weird id/1", "")], None),
        result("b", "B"),
        result("zzz", "stray"),
        result("weird id/1", "W"),
        user("next"),
        result("late", "L"),
    ];
    let body = body(&messages, &config(Thinking::Off), ToolChoice::None);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "a", "name": "read_file", "input": {}},
                {"type": "tool_use", "id": "b", "name": "read_file", "input": {}},
                {"type": "tool_use", "id": "weird_id_1", "name": "read_file", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "no result was recorded for this call", "is_error": true},
                {"type": "tool_result", "tool_use_id": "b", "content": "B"},
                {"type": "tool_result", "tool_use_id": "weird_id_1", "content": "W"},
                {"type": "text", "text": "[result of the read_file call zzz]\nstray"},
                {"type": "text", "text": "next"},
                {"type": "text", "text": "[result of the read_file call late]\nL", "cache_control": {"type": "ephemeral"}}
            ]}
        ])
    );
    assert_eq!(body["tool_choice"], json!({"type": "none"}));
}

#[test]
fn arguments_that_are_not_an_object_are_wrapped_and_blank_text_is_left_out() {
    let messages = vec![
        user("go"),
        assistant(vec![ContentBlock::Text { text: "\n\n".into() }, call("a", "{\"path\": ")], None),
        result("a", "bad"),
    ];
    let body = body(&messages, &config(Thinking::Off), ToolChoice::Auto);
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "a", "name": "read_file", "input": {"invalid_arguments": "{\"path\": "}}
        ]})
    );
}

#[test]
fn a_budget_leaves_room_for_the_answer_and_temperature_needs_thinking_off() {
    let mut config = config(Thinking::Budget(30_000));
    config.max_tokens = 16_384;
    config.temperature = Some(0.2);
    let budgeted = body(&[user("hi")], &config, ToolChoice::Auto);
    assert_eq!(budgeted["thinking"], json!({"type": "enabled", "budget_tokens": 15_360}));
    assert_eq!(budgeted.get("temperature"), None);
    config.max_tokens = 1500;
    let small = body(&[user("hi")], &config, ToolChoice::Auto);
    assert_eq!(small.get("thinking"), None, "no room for a budget");
    assert_eq!(small["temperature"], json!(0.2));
}

#[test]
fn ids_are_rewritten_the_same_way_on_calls_and_results() {
    assert_eq!(wire_id("toolu_01-AB"), "toolu_01-AB");
    assert_eq!(wire_id("functions.read_file:0"), "functions_read_file_0");
    assert_eq!(wire_id(""), "call");
}

/// A request capped to a few words (the task's intent) gets that cap and no thinking,
/// whose budget could not fit; a cap above the configured one changes nothing.
#[test]
fn a_capped_request_is_capped_and_does_not_think() {
    let config = config(Thinking::Budget(4096));
    let tools = tools();
    let messages = [user("Which file?")];
    let encoded = encode_tools(&tools).unwrap();
    let send = |request: ModelRequest<'_>| -> Value {
        serde_json::from_slice(&encode(&request, &config, &me(), &encoded).unwrap()).unwrap()
    };
    let capped =
        send(ModelRequest::new("s", &messages, &tools).tool_choice(ToolChoice::Required).max_tokens(256));
    assert_eq!(capped["max_tokens"], 256);
    assert!(capped.get("thinking").is_none(), "{capped}");
    assert_eq!(capped["tool_choice"], serde_json::json!({"type": "any"}));
    let above = send(ModelRequest::new("s", &messages, &tools).max_tokens(1_000_000));
    assert_eq!(above["max_tokens"], config.max_tokens);
    assert!(above.get("thinking").is_some(), "{above}");
}

#[test]
fn images_are_image_blocks_in_user_messages_and_tool_results() {
    let (image, hollow) = crate::image::test_images();
    let data = image.base64().unwrap();
    let mut with_image = result("toolu_1", "shot");
    let Message::ToolResult(r) = &mut with_image else { panic!() };
    r.images = vec![image.clone()];
    let messages = vec![
        Message::User(UserMessage { content: "look".into(), images: vec![image, hollow] }),
        assistant(vec![call("toolu_1", "{}")], Some(me())),
        with_image,
    ];
    let body = body(&messages, &config(Thinking::Off), ToolChoice::Auto);
    let png = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "text", "text": "look"},
            png,
            {"type": "text", "text": "[an image (image/png, 70 bytes) whose file is no longer beside the session]"},
        ])
    );
    assert_eq!(body["messages"][2]["content"][0]["content"], json!([{"type": "text", "text": "shot"}, png]));
}

/// The API measures its 5 MB per image on the base64 text: an image of more than 3.75 MB
/// (keel takes up to 5 MB) goes as a note saying why, not as a request the API refuses.
#[test]
fn an_image_over_the_apis_base64_limit_is_a_note_saying_why() {
    let (image, _) = crate::image::test_images();
    let sized = |len: usize| {
        let mut bytes = image.data.clone().unwrap().to_vec();
        bytes.resize(len, 0);
        Image::from_bytes(bytes).unwrap()
    };
    let largest = sized(MAX_IMAGE_BASE64 / 4 * 3);
    let over = sized(MAX_IMAGE_BASE64 / 4 * 3 + 1);
    assert_eq!(largest.base64().unwrap().len(), MAX_IMAGE_BASE64);
    assert!(over.bytes < crate::MAX_IMAGE_BYTES as u64);
    let messages =
        vec![Message::User(UserMessage { content: "look".into(), images: vec![largest.clone(), over] })];
    let body = body(&messages, &config(Thinking::Off), ToolChoice::Auto);
    let content = body["messages"][0]["content"].as_array().unwrap();
    assert_eq!(content.len(), 3);
    assert_eq!(content[1]["source"]["data"].as_str().map(str::len), Some(MAX_IMAGE_BASE64));
    assert_eq!(
        content[2],
        json!({"type": "text", "cache_control": {"type": "ephemeral"},
            "text": "[an image (image/png, PNG 1×1, 3.8 MB) left out: this API takes images of at most 5242880 bytes once base64-encoded, and it is 5242884]"})
    );
}

/// A prompt that ends with an image (a screenshot pasted after the question) still gets
/// its cache breakpoint, on the image block; so does a stray result's last image.
#[test]
fn the_cache_breakpoint_lands_on_a_last_block_that_is_an_image() {
    let (image, _) = crate::image::test_images();
    let data = image.base64().unwrap();
    let messages = vec![
        user("Hi."),
        Message::User(UserMessage { content: "What is this?".into(), images: vec![image.clone()] }),
    ];
    assert_eq!(
        body(&messages, &config(Thinking::Off), ToolChoice::Auto),
        json!({
            "model": "claude-sonnet-4-6",
            "max_tokens": 8192,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Hi."},
                    {"type": "text", "text": "What is this?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data},
                     "cache_control": {"type": "ephemeral"}}
                ]}
            ],
            "tools": [
                {"name": "read_file", "description": "read_file.", "input_schema": {"type": "object"}},
                {"name": "shell", "description": "shell.", "input_schema": {"type": "object"},
                 "cache_control": {"type": "ephemeral"}}
            ],
            "stream": true
        })
    );

    let mut stray = result("toolu_9", "shot");
    let Message::ToolResult(r) = &mut stray else { panic!() };
    r.images = vec![image];
    let body = body(&[user("Look."), stray], &config(Thinking::Off), ToolChoice::Auto);
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "Look."},
            {"type": "text", "text": "[result of the read_file call toolu_9]\nshot"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data},
             "cache_control": {"type": "ephemeral"}}
        ]}])
    );
}
