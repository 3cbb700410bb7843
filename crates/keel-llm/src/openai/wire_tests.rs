use super::*;
use crate::message::{AssistantMessage, ToolCall, ToolResultMessage, UserMessage};
use pretty_assertions::assert_eq;

fn body(messages: &[Message], config: &ProviderConfig) -> Value {
    let tools = [ToolDefinition {
        name: "read_file".into(),
        description: "Reads.".into(),
        parameters: RawValue::from_string(r#"{"type":"object"}"#.into()).unwrap(),
    }];
    let request = ModelRequest::new("sys", messages, &tools);
    let encoded = encode_tools(&tools).unwrap();
    let me = ModelInfo { provider: config.provider.clone(), model: config.model.clone() };
    serde_json::from_slice(&encode(&request, config, &me, Some(&encoded)).unwrap()).unwrap()
}

fn history() -> Vec<Message> {
    vec![
        Message::User(UserMessage::text("hi")),
        Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::Thinking { text: "plan".into(), signature: None },
                ContentBlock::ToolCall(ToolCall::new("c1", "read_file", r#"{"path":"a"}"#)),
            ],
            ..AssistantMessage::default()
        }),
        Message::ToolResult(ToolResultMessage {
            call_id: "c1".into(),
            name: "read_file".into(),
            content: "text".into(),
            is_error: false,
            images: Vec::new(),
        }),
        Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::Thinking { text: "done".into(), signature: None },
                ContentBlock::Text { text: "It says ".into() },
                ContentBlock::Text { text: "text.".into() },
            ],
            ..AssistantMessage::default()
        }),
    ]
}

#[test]
fn images_are_parts_of_user_messages_and_a_tools_images_follow_its_results() {
    let (image, hollow) = crate::image::test_images();
    let url = image.data_url().unwrap();
    let mut messages = history();
    messages[0] = Message::User(UserMessage { content: "look".into(), images: vec![image.clone(), hollow] });
    let Message::ToolResult(result) = &mut messages[2] else { panic!() };
    result.images = vec![image];
    let encoded = body(&messages, &ProviderConfig::new("http://x", "m"));
    let sent = &encoded["messages"];
    assert_eq!(
        sent[1],
        serde_json::json!({"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": "[an image (image/png, 70 bytes) whose file is no longer beside the session]"},
        ]})
    );
    assert_eq!(sent[3], serde_json::json!({"role": "tool", "tool_call_id": "c1", "content": "text"}));
    assert_eq!(
        sent[4],
        serde_json::json!({"role": "user", "content": [
            {"type": "text", "text": "Images returned by the `read_file` call c1:"},
            {"type": "image_url", "image_url": {"url": url}},
        ]})
    );
    assert_eq!(sent[5]["role"], "assistant");
    // Without images, a user message is still a plain string.
    let plain = body(&history(), &ProviderConfig::new("http://x", "m"));
    assert_eq!(plain["messages"][1], serde_json::json!({"role": "user", "content": "hi"}));
}

#[test]
fn request_shape_with_reasoning_replayed_on_tool_turns() {
    let mut config = ProviderConfig::new("http://x", "m");
    config.chat.reasoning_replay = ReasoningReplay::ToolTurns;
    assert_eq!(
        body(&history(), &config),
        serde_json::json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "reasoning_content": "plan",
                 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "text"},
                {"role": "assistant", "content": "It says text."}
            ],
            "tools": [{"type": "function", "function": {"name": "read_file", "description": "Reads.", "parameters": {"type": "object"}}}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 8192
        })
    );
}

#[test]
fn a_requests_own_temperature_wins_over_the_configured_one() {
    let mut config = ProviderConfig::new("http://x", "m");
    config.temperature = Some(0.9);
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-6;
    assert!(close(&body(&history(), &config)["temperature"], 0.9));
    let messages = history();
    let tools = [];
    let request = ModelRequest::new("sys", &messages, &tools).temperature(0.2);
    let me = ModelInfo { provider: config.provider.clone(), model: config.model.clone() };
    let sent: Value = serde_json::from_slice(&encode(&request, &config, &me, None).unwrap()).unwrap();
    assert!(close(&sent["temperature"], 0.2), "{sent}");
}

#[test]
fn a_requests_token_cap_stays_within_the_configured_one() {
    let mut config = ProviderConfig::new("http://x", "m");
    config.max_tokens = 1000;
    let messages = history();
    let me = ModelInfo { provider: config.provider.clone(), model: config.model.clone() };
    let sent = |request: ModelRequest<'_>, config: &ProviderConfig| -> Value {
        serde_json::from_slice(&encode(&request, config, &me, None).unwrap()).unwrap()
    };
    assert_eq!(sent(ModelRequest::new("s", &messages, &[]).max_tokens(256), &config)["max_tokens"], 256);
    assert_eq!(sent(ModelRequest::new("s", &messages, &[]).max_tokens(5000), &config)["max_tokens"], 1000);
    config.chat.max_tokens_field = MaxTokensField::MaxCompletionTokens;
    let body = sent(ModelRequest::new("s", &messages, &[]).max_tokens(256), &config);
    assert_eq!(body["max_completion_tokens"], 256);
}

#[test]
fn reasoning_is_never_sent_to_providers_that_reject_it() {
    let config = ProviderConfig::new("http://x", "m");
    let text = serde_json::to_string(&body(&history(), &config)).unwrap();
    assert!(!text.contains("reasoning_content"), "{text}");
}

#[test]
fn invalid_arguments_are_wrapped_and_extra_body_merged() {
    let mut config = ProviderConfig::new("http://x", "m");
    config.chat.max_tokens_field = MaxTokensField::MaxCompletionTokens;
    config.extra_body.insert("thinking".into(), serde_json::json!({"type": "enabled"}));
    let messages = vec![Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::ToolCall(ToolCall::new("c", "t", "{\"a\": "))],
        ..AssistantMessage::default()
    })];
    let body = body(&messages, &config);
    assert_eq!(
        body["messages"][1]["tool_calls"][0]["function"]["arguments"],
        "{\"invalid_arguments\":\"{\\\"a\\\": \"}"
    );
    assert_eq!(body["thinking"], serde_json::json!({"type": "enabled"}));
    assert_eq!(body["max_completion_tokens"], 8192);
    assert!(body.get("max_tokens").is_none());
}

#[test]
fn lenient_chunks_parse() {
    let chunk: Chunk = serde_json::from_str(
        r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"tool_calls":[{"index":0,"function":{"arguments":{"k":1}}}],"new_field":{"x":1}},"finish_reason":null,"logprobs":null}],"usage":null,"system_fingerprint":"fp"}"#,
    )
    .unwrap();
    let delta = chunk.choices.unwrap().remove(0).delta.unwrap();
    assert_eq!(delta.content.as_deref(), Some("ab"));
    assert_eq!(
        delta.tool_calls.unwrap()[0].function.as_ref().unwrap().arguments.as_deref(),
        Some(r#"{"k":1}"#)
    );
    let usage: WireUsage = serde_json::from_str(
        r#"{"prompt_tokens":10,"completion_tokens":5,"prompt_cache_hit_tokens":4,"completion_tokens_details":{"reasoning_tokens":2}}"#,
    )
    .unwrap();
    assert_eq!(
        usage.to_usage(),
        Usage {
            input_tokens: 10,
            output_tokens: 5,
            cached_tokens: 4,
            reasoning_tokens: 2,
            cache_write_tokens: 0
        }
    );
}
