#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Subagents under the other front ends: a `task` call made in a `keel acp` session and
//! in a `keel serve` session starts a child that is a session of the same store as its
//! parent, its header citing the parent's call.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::Env;
use keel_session::{EventKind, SessionStore, TurnEndReason};
use keel_testkit::{ChatStream, MockServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const TASK: &str = r#"{"prompt":"Find what hello.py prints.","description":"find the greeting"}"#;

/// The parent's call to `task`, the child's answer, the parent's answer.
fn script(model: &MockServer) {
    model.push(ChatStream::new().tool_call("t1", "task", TASK, 2).finish("tool_calls").response());
    model.push(ChatStream::new().text("hello.py prints `hello from keel`.", 2).finish("stop").response());
    model.push(ChatStream::new().text("It prints hello from keel.", 2).finish("stop").response());
}

/// The store holds the parent `parent` and one child of its call `t1`.
fn assert_child_of(env: &Env, parent: &str) {
    let sessions = env.store().list().unwrap();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let child = sessions.iter().find(|s| s.id != parent).unwrap();
    let link = child.spawned_by.as_ref().expect("the other session is a child");
    assert_eq!((link.id.as_str(), link.call_id.as_str(), link.agent.as_str()), (parent, "t1", "general"));
    let answer = env.store().read(&child.id).unwrap().iter().rev().find_map(|e| match &e.kind {
        EventKind::AssistantMessage(m) => Some(m.text()),
        _ => None,
    });
    assert_eq!(answer.as_deref(), Some("hello.py prints `hello from keel`."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_started_under_acp_is_a_session_of_the_store() {
    let model = MockServer::start().await;
    script(&model);
    let env = Env::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let mut command = tokio::process::Command::from(env.keel(&model.base_url()));
    command
        .args(["--tool-profile", "full", "acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = async |request: Value| -> Value {
        stdin.write_all(format!("{request}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await.unwrap();
            let message: Value = serde_json::from_str(&line.unwrap().unwrap()).unwrap();
            if message["id"] == request["id"] {
                return message;
            }
        }
    };
    ask(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})).await;
    let new = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": workspace, "mcpServers": []}});
    let id = ask(new).await["result"]["sessionId"].as_str().unwrap().to_owned();
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": id, "prompt": [{"type": "text", "text": "What does hello.py print?"}]}});
    assert_eq!(ask(prompt).await["result"]["stopReason"], "end_turn");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "keel acp exited with {status}");
    assert_child_of(&env, &id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_started_under_serve_is_a_session_of_the_store() {
    let model = MockServer::start().await;
    script(&model);
    let env = Env::new();
    let token = "subagents-test-token-0123456789";
    let mut command = env.keel(&model.base_url());
    command.env("KEEL_SERVE_TOKEN", token).args([
        "--tool-profile",
        "full",
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]);
    let (mut server, address, _lines) = common::spawn_serve(command);

    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().tls_certs_only(Vec::new()).build().unwrap();
    let base = format!("http://{address}/v1");
    let created = client
        .post(format!("{base}/sessions"))
        .bearer_auth(token)
        .body(json!({"folder": env.workspace()}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let id = serde_json::from_str::<Value>(&created.text().await.unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let sent = client
        .post(format!("{base}/sessions/{id}/messages"))
        .bearer_auth(token)
        .body(json!({"text": "What does hello.py print?"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status().as_u16(), 202);
    // The parent's turn ends (its log is read without locking it).
    let ended = async {
        loop {
            let events = env.store().read(&id).unwrap_or_default();
            if let Some(EventKind::TurnEnd(end)) = events.last().map(|e| &e.kind) {
                return end.reason;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let reason = tokio::time::timeout(Duration::from_secs(30), ended).await.unwrap();
    assert_eq!(reason, TurnEndReason::Completed);

    rustix::process::kill_process(
        rustix::process::Pid::from_raw(server.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || server.wait().unwrap()).await.unwrap();
    assert!(status.success(), "{status:?}");
    assert_child_of(&env, &id);
}
