#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 29 (item 2) and issue 32 (item 3): keel asks a server that is not a hosted
//! preset what it knows of its model, and the answer chooses the harness profile and the
//! context window; the choice and its reason are logged in the `request/header`.

mod common;

use common::*;
use keel_session::{EventKind, RequestHeader};
use keel_testkit::chat::{ChatStream, completion};
use keel_testkit::{MockResponse, MockServer};
use serde_json::json;

fn headers(env: &Env) -> Vec<RequestHeader> {
    env.session_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::RequestHeader(header) => Some(header),
            _ => None,
        })
        .collect()
}

fn answering(server: &MockServer, text: &'static str) {
    server.set_handler(move |request| {
        if request.method == "POST" && request.path.ends_with("/chat/completions") {
            ChatStream::new().text(text, 1).finish("stop").response()
        } else {
            MockResponse::json(404, &json!({"error": "no such route"}))
        }
    });
}

/// The same 1.5B model behind a plain `--base-url`, under a name that says nothing of its
/// size, got the full profile: llama.cpp's model list counts its parameters.
#[tokio::test(flavor = "multi_thread")]
async fn a_servers_parameter_count_chooses_the_small_profile() {
    let env = Env::new();
    let server = MockServer::start().await;
    answering(&server, "Hello.");
    server.route(
        "GET",
        "/v1/models",
        MockResponse::json(
            200,
            &json!({"object": "list", "data": [{"id": "default", "meta": {"n_params": 1_543_714_304u64}}]}),
        ),
    );
    let mut keel = env.keel(&server.base_url());
    keel.arg("Say hello.");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let header = headers(&env).remove(0);
    assert_eq!(header.profile.as_deref(), Some("small: 1.5B parameters (the server's model list)"));
    let tools: Vec<&str> = header.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(tools.contains(&"change_file"), "{tools:?}");
}

/// A server that says nothing: the name decides (here, nothing known: full profile), and
/// the questions cost no scripted reply.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_says_nothing_leaves_the_full_profile() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("Hello.", 1).finish("stop").response());
    let mut keel = env.keel(&server.base_url());
    keel.arg("Say hello.");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let header = headers(&env).remove(0);
    assert_eq!(header.profile.as_deref(), Some("full: the model's size is unknown"));
    let asked: Vec<String> = server.questions().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert!(asked.contains(&"GET /v1/models".to_owned()), "{asked:?}");
    assert!(asked.contains(&"GET /props".to_owned()), "{asked:?}");
}

/// Ollama runs a model with the `num_ctx` its Modelfile sets, whatever the model was
/// trained for: that is the window keel compacts for (here a file read fills it), and
/// the parameter count chooses the profile.
#[tokio::test(flavor = "multi_thread")]
async fn ollamas_details_give_the_window_and_the_size() {
    let env = Env::new();
    std::fs::write(
        env.workspace().join("big.txt"),
        "lorem ipsum dolor sit amet, consectetur adipiscing elit\n".repeat(300),
    )
    .unwrap();
    let server = MockServer::start().await;
    server.push(completion(None, &[("call_1", "read_file", r#"{"path": "big.txt"}"#)], "tool_calls"));
    answering(&server, "It is lorem ipsum.");
    server.route(
        "POST",
        "/api/show",
        MockResponse::json(
            200,
            &json!({
                "details": {"parameter_size": "70.6B"},
                "model_info": {"general.parameter_count": 70_553_706_496u64, "llama.context_length": 131072},
                "parameters": "num_ctx 2048",
            }),
        ),
    );
    let mut keel = env.keel(&server.base_url());
    keel.args(["--provider", "ollama", "--model", "mine", "What is in big.txt?"]);
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let header = headers(&env).remove(0);
    assert_eq!(header.profile.as_deref(), Some("full: 71B parameters (Ollama's model details)"));
    let compacted = env.session_events().iter().any(|e| matches!(e.kind, EventKind::CompactionStart(_)));
    assert!(compacted, "a 2,048-token window is full after the read: {stderr}");
}

/// A profile and a window set in the config, on a preset's server: nothing is asked (a
/// server of no preset is asked what kind it is).
#[tokio::test(flavor = "multi_thread")]
async fn a_configured_profile_is_not_asked_about() {
    let env = Env::new();
    let server = MockServer::start().await;
    answering(&server, "Hello.");
    std::fs::write(env.root.path().join("config/config.toml"), "context_window = 8192\n").unwrap();
    let mut keel = env.keel(&server.base_url());
    keel.args(["--provider", "ollama", "--model", "mine", "--tool-profile", "full", "Say hello."]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(headers(&env).remove(0).profile.as_deref(), Some("full: set in the config"));
    assert!(server.questions().is_empty(), "nothing left to ask");
}
