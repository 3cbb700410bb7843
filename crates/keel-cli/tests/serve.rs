#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `keel serve`, the real binary, against the mock model server: token on first start,
//! a turn over HTTP watched on the event stream, graceful stop on SIGTERM.

mod common;

use std::time::Duration;

use common::Env;
use futures::StreamExt;
use keel_session::{EventKind, SessionStore, TurnEndReason};
use keel_testkit::{ChatStream, MockServer};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keel_serve_runs_a_turn_over_http_and_stops_cleanly() {
    let model = MockServer::start().await;
    model.push(
        ChatStream::new()
            .tool_call("c1", "read_file", r#"{"path":"hello.py"}"#, 2)
            .finish("tool_calls")
            .response(),
    );
    model.push(ChatStream::new().text("It prints hello.", 3).finish("stop").response());
    let env = Env::new();
    let mut command = env.keel(&model.base_url());
    command.args(["serve", "--listen", "127.0.0.1:0"]);
    let (mut child, address, lines_rx) = common::spawn_serve(command);
    let mut token = None;
    while token.is_none() {
        let line = lines_rx.recv_timeout(Duration::from_secs(30)).expect("keel serve printed its token");
        if let Some(rest) = line.split("): ").nth(1).filter(|_| line.contains("new token")) {
            token = Some(rest.trim().to_owned());
        }
    }
    let token = token.unwrap();
    let kept = std::fs::read_to_string(env.home().join("serve-token")).unwrap();
    assert_eq!(kept.trim(), token, "the token is kept for the next start");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.home().join("serve-token")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().tls_certs_only(Vec::new()).build().unwrap();
    let base = format!("http://{address}/v1");
    let refused = client.get(format!("{base}/sessions")).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let created = client
        .post(format!("{base}/sessions"))
        .bearer_auth(&token)
        .body(json!({"folder": env.workspace()}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    // Issue 28, item 5: a client (or a sandboxed command holding the token) asked for a
    // session without the sandbox and got one.
    for weaker in [json!({"sandbox": "off"}), json!({"sandbox": "off", "permission": "read-only"})] {
        let mut body = weaker.clone();
        body["folder"] = json!(env.workspace());
        let refused = client
            .post(format!("{base}/sessions"))
            .bearer_auth(&token)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status().as_u16(), 400, "{weaker}");
        let text = refused.text().await.unwrap();
        assert!(text.contains("weaker than this server's `workspace-write`"), "{text}");
    }
    let stricter = client
        .post(format!("{base}/sessions"))
        .bearer_auth(&token)
        .body(json!({"folder": env.workspace(), "sandbox": "read-only"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(stricter.status().as_u16(), 201);
    // Issue 31, item 4: the config file is read once, when the server starts (it was read
    // twice for every session): a file broken afterwards does not reach new sessions.
    std::fs::write(env.root.path().join("config/config.toml"), "modle = \"broken\"\n").unwrap();
    let after_edit = client
        .post(format!("{base}/sessions"))
        .bearer_auth(&token)
        .body(json!({"folder": env.workspace()}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(after_edit.status().as_u16(), 201, "{}", after_edit.text().await.unwrap());
    let id = serde_json::from_str::<Value>(&created.text().await.unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = client.get(format!("{base}/sessions/{id}/events")).bearer_auth(&token).send().await.unwrap();
    let sent = client
        .post(format!("{base}/sessions/{id}/messages"))
        .bearer_auth(&token)
        .body(json!({"text": "what does hello.py print?"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status().as_u16(), 202);

    // Read the stream until the turn ends.
    let mut body = events.bytes_stream();
    let mut text = String::new();
    let mut kinds = Vec::new();
    while !kinds.iter().any(|k| k == "turn/end") {
        let chunk =
            tokio::time::timeout(Duration::from_secs(30), body.next()).await.unwrap().unwrap().unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            for data in block.lines().filter_map(|l| l.strip_prefix("data: ")) {
                let value: Value = serde_json::from_str(data).unwrap();
                kinds.push(value["type"].as_str().unwrap().to_owned());
            }
        }
    }
    assert!(kinds.iter().any(|k| k == "delta/text"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "tool/result"), "{kinds:?}");

    // SIGTERM: the server stops and closes its sessions.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    assert!(status.success(), "{status:?}");
    let events = env.store().read(&id).unwrap();
    let answer = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::AssistantMessage(m) => Some(m.text()),
        _ => None,
    });
    assert_eq!(answer.as_deref(), Some("It prints hello."));
    assert!(
        matches!(&events.last().unwrap().kind, EventKind::TurnEnd(end) if end.reason == TurnEndReason::Completed)
    );
    // Closed: another keel can open it at once.
    let store = env.store();
    store.open(&id).unwrap().close().unwrap();
}

/// Issue 30, item 3: `keel serve` raises its soft open-files limit to the hard one at
/// start (a soft limit of 1024 runs out near 250 sessions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keel_serve_raises_its_open_files_limit() {
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum.unwrap_or(u64::MAX);
    assert!(hard > 256, "this test needs a hard open-files limit above 256 (it is {hard})");
    let model = MockServer::start().await;
    let env = Env::new();
    let keel = env.keel(&model.base_url());
    // The soft limit is lowered by the shell that then becomes keel.
    let mut command = std::process::Command::new("sh");
    command
        .args(["-c", "ulimit -Sn 256 && exec \"$0\" serve --listen 127.0.0.1:0", env!("CARGO_BIN_EXE_keel")])
        .env_clear()
        .current_dir(env.workspace())
        .stdin(std::process::Stdio::null());
    for (name, value) in keel.get_envs() {
        if let Some(value) = value {
            command.env(name, value);
        }
    }
    let (mut child, _address, _lines) = common::spawn_serve(command);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap().to_owned();
    let _ = child.kill();
    let _ = child.wait();
    let soft: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    let expected = if hard == u64::MAX { "unlimited".to_owned() } else { hard.to_string() };
    assert_eq!(soft, [expected.as_str(), expected.as_str()], "{line}");
}
