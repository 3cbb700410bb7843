#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `keel` binary on each wire API against the mock server: a three-step tool task
//! with thinking or reasoning on Anthropic Messages, OpenAI Responses and Chat
//! Completions, and one session switched between providers and models, which never
//! sends a model thinking that is not its own.

mod common;

use std::process::Command;

use common::*;
use keel_llm::{ContentBlock, ModelInfo};
use keel_session::{EventKind, SessionStore, TurnEndReason};
use keel_testkit::{AnthropicStream, ChatStream, MockServer, ResponsesStream};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// `keel` for a preset, pointed at the mock server, with the preset's key set.
fn keel_on(env: &Env, server: &MockServer, provider: &str, key_var: &str, model: &str) -> Command {
    let mut keel = env.keel_unconfigured();
    keel.env(key_var, "sk-test").args([
        "--provider",
        provider,
        "--base-url",
        &server.base_url(),
        "--model",
        model,
    ]);
    keel
}

fn assistant_origins(env: &Env) -> Vec<Option<ModelInfo>> {
    env.session_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::AssistantMessage(m) => Some(m.origin),
            _ => None,
        })
        .collect()
}

fn last_turn_end(env: &Env) -> TurnEndReason {
    env.session_events()
        .into_iter()
        .rev()
        .find_map(|e| match e.kind {
            EventKind::TurnEnd(t) => Some(t.reason),
            _ => None,
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_three_steps_with_signed_thinking() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(
        AnthropicStream::new()
            .thinking("List the files first.", "sig-1", 3)
            .tool_use("toolu_1", "list_files", "{}", 1)
            .stop(20)
            .response(),
    );
    server.push(
        AnthropicStream::new()
            .thinking("Run hello.py.", "sig-2", 2)
            .text("Running it.", 2)
            .tool_use("toolu_2", "shell", r#"{"command":"python3 hello.py"}"#, 3)
            .stop(30)
            .response(),
    );
    server.push(
        AnthropicStream::new()
            .thinking("Done.", "sig-3", 1)
            .text("It prints: hello from keel", 3)
            .stop(10)
            .response(),
    );
    let mut keel = keel_on(&env, &server, "anthropic", "ANTHROPIC_API_KEY", "claude-mock");
    keel.arg("What does hello.py print?");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "It prints: hello from keel\n");
    assert!(text(&out.stderr).contains("(6,000 cached)"), "{}", text(&out.stderr));
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| r.path == "/v1/messages" && r.header("x-api-key") == Some("sk-test")));
    let third = requests[2].json();
    assert_eq!(third["thinking"], json!({"type": "adaptive"}));
    let assistants: Vec<&Value> =
        third["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(
        assistants[0]["content"][0],
        json!({"type": "thinking", "thinking": "List the files first.", "signature": "sig-1"})
    );
    assert_eq!(
        assistants[1]["content"][0],
        json!({"type": "thinking", "thinking": "Run hello.py.", "signature": "sig-2"})
    );
    let last = third["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_2");
    assert_eq!(last["content"][0]["content"], "hello from keel\n[exit code: 0]");
    let origin = Some(ModelInfo { provider: "anthropic".into(), model: "claude-mock".into() });
    assert_eq!(assistant_origins(&env), vec![origin.clone(), origin.clone(), origin]);
}

#[tokio::test(flavor = "multi_thread")]
async fn responses_three_steps_with_encrypted_reasoning() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(
        ResponsesStream::new()
            .reasoning("rs_1", "Listing first.", "enc-1", 2)
            .function_call("fc_1", "call_1", "list_files", "{}", 1)
            .completed(900, 0, 40, 20)
            .response(),
    );
    server.push(
        ResponsesStream::new()
            .reasoning("rs_2", "Now run it.", "enc-2", 2)
            .text("msg_2", "Running it.", 2)
            .function_call("fc_2", "call_2", "shell", r#"{"command":"python3 hello.py"}"#, 3)
            .completed(1000, 896, 50, 30)
            .response(),
    );
    server.push(
        ResponsesStream::new()
            .reasoning("rs_3", "Answer.", "enc-3", 1)
            .text("msg_3", "It prints: hello from keel", 3)
            .completed(1100, 1024, 20, 5)
            .response(),
    );
    let mut keel = keel_on(&env, &server, "openai", "OPENAI_API_KEY", "gpt-5-mini");
    keel.arg("What does hello.py print?");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "It prints: hello from keel\n");
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.path == "/v1/responses" && r.header("authorization") == Some("Bearer sk-test"))
    );
    let third = requests[2].json();
    let session_id = env.store().list().unwrap()[0].id.clone();
    assert_eq!(third["prompt_cache_key"], session_id.as_str());
    assert_eq!(third["store"], false);
    assert_eq!(third["reasoning"], json!({"summary": "auto"}));
    let kinds: Vec<String> = third["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| match item["type"].as_str().unwrap() {
            "message" => format!("message/{}", item["role"].as_str().unwrap()),
            "reasoning" => format!("reasoning/{}", item["encrypted_content"].as_str().unwrap()),
            "function_call" => format!(
                "function_call/{}/{}",
                item["call_id"].as_str().unwrap(),
                item["id"].as_str().unwrap()
            ),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "message/user",
            "reasoning/enc-1",
            "function_call/call_1/fc_1",
            "function_call_output",
            "reasoning/enc-2",
            "message/assistant",
            "function_call/call_2/fc_2",
            "function_call_output",
        ]
    );
    assert_eq!(last_turn_end(&env), TurnEndReason::Completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_three_steps_with_reasoning_content() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(
        ChatStream::new()
            .reasoning("Listing first.", 2)
            .tool_call("c1", "list_files", "{}", 1)
            .finish("tool_calls")
            .usage(400, 30)
            .response(),
    );
    server.push(
        ChatStream::new()
            .reasoning("Now run it.", 2)
            .tool_call("c2", "shell", r#"{"command":"python3 hello.py"}"#, 2)
            .finish("tool_calls")
            .usage(500, 30)
            .response(),
    );
    server.push(
        ChatStream::new()
            .reasoning("Answer.", 1)
            .text("It prints: hello from keel", 2)
            .finish("stop")
            .usage(600, 20)
            .response(),
    );
    let mut keel = keel_on(&env, &server, "deepseek", "DEEPSEEK_API_KEY", "deepseek-reasoner");
    keel.arg("What does hello.py print?");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "It prints: hello from keel\n");
    let third = server.requests()[2].json();
    let assistants: Vec<&Value> =
        third["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(assistants[0]["reasoning_content"], "Listing first.");
    assert_eq!(assistants[1]["reasoning_content"], "Now run it.");
}

/// What a request body says of thinking: signatures, thinking texts and reasoning
/// blobs it carries.
fn thinking_sent(body: &Value) -> Vec<String> {
    let text = body.to_string();
    ["sig-a", "sig-b", "Plan with A", "enc-r", "Plan with R"]
        .iter()
        .filter(|needle| text.contains(*needle))
        .map(|s| (*s).to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_switched_across_providers_sends_no_foreign_thinking() {
    let env = Env::new();
    // Turn 1 on Claude A: signed thinking, a call, an answer.
    let anthropic = MockServer::start().await;
    anthropic.push(
        AnthropicStream::new()
            .thinking("Plan with A", "sig-a", 2)
            .tool_use("toolu_1", "list_files", "{}", 1)
            .stop(10)
            .response(),
    );
    anthropic.push(
        AnthropicStream::new()
            .thinking("Plan with A again", "sig-b", 1)
            .text("Two files.", 1)
            .stop(10)
            .response(),
    );
    let mut keel = keel_on(&env, &anthropic, "anthropic", "ANTHROPIC_API_KEY", "claude-a");
    keel.arg("List the files");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Turn 2 on an OpenAI reasoning model: Claude's thinking stays home.
    let openai = MockServer::start().await;
    openai.push(
        ResponsesStream::new()
            .reasoning("rs_1", "Plan with R", "enc-r", 1)
            .function_call("fc_1", "call_r", "shell", r#"{"command":"python3 hello.py"}"#, 1)
            .completed(100, 0, 10, 5)
            .response(),
    );
    openai
        .push(ResponsesStream::new().text("msg_1", "It prints hello.", 1).completed(120, 0, 5, 0).response());
    let mut keel = keel_on(&env, &openai, "openai", "OPENAI_API_KEY", "gpt-5-mini");
    keel.args(["--continue", "Run hello.py"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let requests = openai.requests();
    assert_eq!(thinking_sent(&requests[0].json()), Vec::<String>::new());
    assert_eq!(
        thinking_sent(&requests[1].json()),
        vec!["enc-r", "Plan with R"],
        "its own reasoning goes back"
    );
    // Claude's call went as a plain function call, answered.
    let first = requests[0].json();
    let call =
        first["input"].as_array().unwrap().iter().find(|i| i["type"] == "function_call").unwrap().clone();
    assert_eq!(
        call,
        json!({"type": "function_call", "call_id": "toolu_1", "name": "list_files", "arguments": "{}"})
    );

    // Turn 3 on another Claude model: neither Claude A's thinking nor OpenAI's reasoning.
    let other = MockServer::start().await;
    other.push(
        AnthropicStream::new().thinking("B thinks", "sig-other", 1).text("Done.", 1).stop(5).response(),
    );
    let mut keel = keel_on(&env, &other, "anthropic", "ANTHROPIC_API_KEY", "claude-b");
    keel.args(["--continue", "Anything else?"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = other.requests()[0].json();
    assert_eq!(thinking_sent(&body), Vec::<String>::new());
    assert!(!body.to_string().contains("\"type\":\"thinking\""), "{body}");

    // Turn 4 back on Claude A: its own signed thinking goes back, nothing else.
    let back = MockServer::start().await;
    back.push(AnthropicStream::new().text("Still here.", 1).stop(5).response());
    let mut keel = keel_on(&env, &back, "anthropic", "ANTHROPIC_API_KEY", "claude-a");
    keel.args(["--continue", "Thanks"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = back.requests()[0].json();
    assert_eq!(thinking_sent(&body), vec!["sig-a", "sig-b", "Plan with A"]);
    assert!(!body.to_string().contains("sig-other"));
    // The log kept every writer's thinking, each message naming its writer.
    let models: Vec<String> = assistant_origins(&env).into_iter().map(|o| o.unwrap().model).collect();
    assert_eq!(models, vec!["claude-a", "claude-a", "gpt-5-mini", "gpt-5-mini", "claude-b", "claude-a"]);
    let kept = env
        .session_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::AssistantMessage(m) => Some(m.content),
            _ => None,
        })
        .flatten()
        .filter(|b| matches!(b, ContentBlock::Thinking { .. } | ContentBlock::ProviderItem { .. }))
        .count();
    assert_eq!(kept, 5, "three signed thinking blocks, one reasoning summary and its item");
}
