#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A long session through the real binary: with `context_window` set, a task that
//! outgrows it is compacted (the summary requested with tools off), the user sees it on
//! stderr, the log records it, and the task finishes.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use keel_session::{CompactionOutcome, EventKind};
use keel_testkit::{ChatStream, MockResponse, MockServer};

/// A mock model server: eight large writes, then the answer; summary requests (tool
/// choice none) get a summary; `GET /props` answers like llama.cpp with `n_ctx`.
fn writing_server(server: &MockServer, n_ctx: Option<u64>) -> Arc<AtomicUsize> {
    let steps = Arc::new(AtomicUsize::new(0));
    let summaries = Arc::new(AtomicUsize::new(0));
    let (steps_seen, summaries_seen) = (Arc::clone(&steps), Arc::clone(&summaries));
    server.set_handler(move |request| {
        if request.method == "GET" || request.path == "/api/show" {
            return match (request.path.as_str(), n_ctx) {
                ("/props", Some(n)) => MockResponse::json(200, &serde_json::json!({"default_generation_settings": {"n_ctx": n}})),
                _ => MockResponse::json(404, &serde_json::json!({"error": "not found"})),
            };
        }
        let body = request.json();
        if let Some(reply) = intent_reply(&body, "change") {
            return reply;
        }
        if body["tool_choice"] == "none" {
            summaries_seen.fetch_add(1, Ordering::SeqCst);
            return ChatStream::new()
                .text("## Task\nWrite chapters.\n## Next step\nWrite the next one.", 3)
                .finish("stop")
                .usage(3000, 40)
                .response();
        }
        let step = steps_seen.fetch_add(1, Ordering::SeqCst);
        if step < 8 {
            let args = serde_json::json!({"path": format!("chapter{step}.txt"), "content": "lorem ipsum ".repeat(450)});
            ChatStream::new().tool_call("c", "write_file", &args.to_string(), 4).finish("tool_calls").response()
        } else {
            ChatStream::new().text("Eight chapters written.", 2).finish("stop").response()
        }
    });
    summaries
}

fn compactions(env: &Env) -> Vec<CompactionOutcome> {
    env.session_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::CompactionEnd(end) => Some(end.outcome),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_outgrowing_the_configured_window_is_compacted_and_finishes() {
    let env = Env::new();
    std::fs::write(env.root.path().join("config/config.toml"), "context_window = 9000\n").unwrap();
    let server = MockServer::start().await;
    let summaries = writing_server(&server, None);
    let mut keel = env.keel(&server.base_url());
    keel.arg("Write eight chapters");
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "Eight chapters written.\n");
    assert!(summaries.load(Ordering::SeqCst) >= 1);
    assert!(stderr.contains("context compacted: ~"), "{stderr}");
    let ends = compactions(&env);
    assert!(!ends.is_empty() && ends.iter().all(|o| *o == CompactionOutcome::Compacted), "{ends:?}");
    for step in 0..8 {
        assert!(env.workspace().join(format!("chapter{step}.txt")).exists());
    }
}

/// With a llama.cpp preset and no configured window, keel reads `n_ctx` from `/props`.
#[tokio::test(flavor = "multi_thread")]
async fn a_llama_cpp_servers_context_size_is_read_from_props() {
    let env = Env::new();
    let server = MockServer::start().await;
    let summaries = writing_server(&server, Some(9000));
    let mut keel = env.keel_unconfigured();
    keel.args(["--provider", "llamacpp", "--base-url", &server.base_url(), "Write eight chapters"]);
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(server.questions().iter().any(|r| r.method == "GET" && r.path == "/props"));
    assert!(summaries.load(Ordering::SeqCst) >= 1, "{stderr}");
    assert!(!compactions(&env).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compact_at_outside_zero_to_one_is_refused() {
    let env = Env::new();
    let mut keel = env.keel("http://127.0.0.1:9/v1");
    keel.args(["--compact-at", "1.5", "hi"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("compact_at must be a share of the context window below 1"),
        "{}",
        text(&out.stderr)
    );
}
