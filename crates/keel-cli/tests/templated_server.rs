#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `--provider llamacpp` against a llama-server whose template writes `<tool_call>`:
//! with no `grammar` setting keel takes the templated route (its own rendering, a call
//! grammar, `/completion`), every step calls a tool and `answer` concludes; a server
//! without such a template keeps Chat Completions (`compaction.rs` covers that one).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use keel_testkit::{MockResponse, MockServer};
use serde_json::json;

fn qwen_template() -> String {
    let path = format!("{}/../keel-local/tests/fixtures/qwen2.5-coder.jinja", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

/// llama-server's `/props` with Qwen's template.
fn props(template: &str) -> MockResponse {
    MockResponse::json(
        200,
        &json!({"chat_template": template, "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>",
                "default_generation_settings": {"n_ctx": 16384}}),
    )
}

/// The reply to keel's reading of the task's intent (issue 29), when `request` is it.
fn intent(request: &keel_testkit::HttpRequest, wants: &str) -> Option<MockResponse> {
    let body = request.json();
    let grammar = body["grammar"].as_str().unwrap_or_default();
    grammar.contains("classify").then(|| {
        let arguments = keel_testkit::intent_arguments(wants, false, false);
        let call =
            format!("<tool_call>\n{{\"name\": \"classify\", \"arguments\": {arguments}}}\n</tool_call>");
        MockResponse::json(200, &json!({"content": call, "stop_type": "eos"}))
    })
}

/// The requests of the conversation: not the intent's.
fn conversation(server: &MockServer) -> Vec<keel_testkit::HttpRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| {
            r.path == "/completion" && !r.json()["grammar"].as_str().unwrap_or_default().contains("classify")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_qwen_llama_server_is_driven_through_completion_with_a_grammar() {
    let env = Env::new();
    let server = MockServer::start().await;
    let template = qwen_template();
    let steps = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&steps);
    server.set_handler(move |request| match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/props") => props(&template),
        ("POST", "/completion") if intent(request, "answer").is_some() => intent(request, "answer").unwrap(),
        ("POST", "/completion") => {
            let content = match seen.fetch_add(1, Ordering::SeqCst) {
                0 => {
                    r#"<tool_call>
{"name": "shell", "arguments": {"command": "echo product=42"}}
</tool_call>"#
                }
                1 => {
                    r#"<tool_call>
{"name": "answer", "arguments": {"text": "The product is 42."}}
</tool_call>"#
                }
                // The question's answer, asked plainly from the outputs (grounded answers).
                _ => "It prints `product=42`.",
            };
            MockResponse::json(200, &json!({"content": content, "stop_type": "eos"}))
        }
        _ => MockResponse::json(404, &json!({"error": "not found"})),
    });
    let mut keel = env.keel_unconfigured();
    keel.args(["--provider", "llamacpp", "--base-url", &server.base_url(), "What does echo print?"]);
    keel.env("KEEL_SEED", "3");
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(text(&out.stdout).contains("It prints `product=42`."), "{}", text(&out.stdout));
    let posts = conversation(&server);
    assert_eq!(posts.len(), 3);
    let all: Vec<_> = server.requests().into_iter().filter(|r| r.path == "/completion").collect();
    assert_eq!(all.len(), 5, "the intent is read first, in two orders");
    for reading in &all[..2] {
        assert!(reading.json()["prompt"].as_str().unwrap().contains("What does echo print?"));
    }
    for post in &posts[..2] {
        let body = post.json();
        // Every step must call a tool: the grammar names the answer tool too.
        let grammar = body["grammar"].as_str().unwrap();
        assert!(grammar.contains("shell") && grammar.contains("answer"), "{grammar}");
        // The run's seed goes with every request, so a run can be repeated.
        assert_eq!(body["seed"], json!(3));
    }
    let second = posts[1].json();
    assert!(second["prompt"].as_str().unwrap().contains("<tool_response>\nproduct=42"), "{second}");
    // The plain answer request: no grammar, no tools, the output then the question.
    let plain = posts[2].json();
    assert!(plain.get("grammar").is_none(), "{plain}");
    // It quotes: the request's own low temperature, not the server's default.
    assert!((plain["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6, "{plain}");
    let prompt = plain["prompt"].as_str().unwrap();
    assert!(!prompt.contains("<tools>"), "{prompt}");
    assert!(
        prompt.contains("Output of `echo product=42`:\n```\nproduct=42\n[exit code: 0]\n```\n\nWhat does echo print? Answer from the output above"),
        "{prompt}"
    );
    assert!(server.requests().iter().all(|r| r.path != "/v1/chat/completions"));
    // `/props` is read once at start (context size and template) and once by the client.
    assert_eq!(server.questions().iter().filter(|r| r.path == "/props").count(), 2);
}

/// Regression: a reply that looped inside a text-written call until the output limit
/// (llama-server `stop_type: "limit"`) ended the turn with the broken call as the answer
/// (fix-shell-script, llama-server run 1). It is now a call cut off: not run, and the
/// model is told so and asked again.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_cut_off_by_the_output_limit_is_answered_not_taken_as_the_answer() {
    let env = Env::new();
    let server = MockServer::start().await;
    let template = qwen_template();
    let steps = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&steps);
    let looping = format!(
        "<tool_call>\n{{\"name\": \"answer\", \"arguments\": {{\"text\": \"{}",
        "The script was fixed. ".repeat(40)
    );
    server.set_handler(move |request| match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/props") => props(&template),
        ("POST", "/completion") if intent(request, "change").is_some() => intent(request, "change").unwrap(),
        ("POST", "/completion") => match seen.fetch_add(1, Ordering::SeqCst) {
            0 => MockResponse::json(200, &json!({"content": looping, "stop_type": "limit"})),
            _ => MockResponse::json(
                200,
                &json!({"content": "<tool_call>\n{\"name\": \"answer\", \"arguments\": {\"text\": \"Hello.\"}}\n</tool_call>",
                        "stop_type": "eos"}),
            ),
        },
        _ => MockResponse::json(404, &json!({"error": "not found"})),
    });
    let mut keel = env.keel_unconfigured();
    keel.args(["--provider", "llamacpp", "--base-url", &server.base_url(), "Say hello."]);
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Hello."), "{stdout}");
    assert!(!stdout.contains("The script was fixed."), "the cut-off call is not the answer: {stdout}");
    let posts = conversation(&server);
    let second = posts[1].json();
    let prompt = second["prompt"].as_str().unwrap();
    assert!(
        prompt.contains(
            "This call was cut off because the reply reached the output token limit, so it was not run."
        ),
        "{prompt}"
    );
}

/// The same llama-server behind a plain `--base-url` (no preset, a name that says
/// nothing): its `/props` says it is llama.cpp, so it is driven as the llamacpp preset
/// — the templated route with its grammar — and the small profile follows the size its
/// model list counts. Through plain Chat Completions the 1.5B model wrote its calls as
/// JSON in a code block, which nothing ran.
#[tokio::test(flavor = "multi_thread")]
async fn a_llama_server_behind_a_plain_base_url_is_recognized() {
    let env = Env::new();
    let server = MockServer::start().await;
    let template = qwen_template();
    server.set_handler(move |request| match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/props") => props(&template),
        ("GET", "/v1/models") => MockResponse::json(
            200,
            &json!({"data": [{"id": "default", "meta": {"n_params": 1_777_088_000u64}}]}),
        ),
        ("POST", "/completion") if intent(request, "change").is_some() => intent(request, "change").unwrap(),
        ("POST", "/completion") => MockResponse::json(
            200,
            &json!({"content": "<tool_call>\n{\"name\": \"answer\", \"arguments\": {\"text\": \"Hello.\"}}\n</tool_call>",
                    "stop_type": "eos"}),
        ),
        _ => MockResponse::json(404, &json!({"error": "not found"})),
    });
    let mut keel = env.keel(&server.base_url());
    keel.arg("Say hello.");
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(text(&out.stdout).contains("Hello."), "{}", text(&out.stdout));
    assert!(!conversation(&server).is_empty(), "driven through /completion");
    assert!(server.requests().iter().all(|r| r.path != "/v1/chat/completions"));
    let header = env
        .session_events()
        .into_iter()
        .find_map(|e| match e.kind {
            keel_session::EventKind::RequestHeader(h) => Some(h),
            _ => None,
        })
        .unwrap();
    assert_eq!(header.provider, "llamacpp");
    assert_eq!(header.profile.as_deref(), Some("small: 1.8B parameters (the server's model list)"));
}
