#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `keel --remote URL "task"` against the real `keel serve` and the mock model server:
//! print mode, JSON mode, a wrong token, an unknown session, no server.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{Env, output, text};
use keel_session::SessionStore;
use keel_testkit::{ChatStream, MockServer};
use serde_json::Value;

const TOKEN: &str = "remote-test-token-0123456789";

/// `keel serve` on a free port; its address. The caller waits for it (`stop`).
#[allow(clippy::zombie_processes)]
fn serve(env: &Env, model: &MockServer) -> (Child, String) {
    let mut command = env.keel(&model.base_url());
    command.args(["serve", "--listen", "127.0.0.1:0"]).env("KEEL_SERVE_TOKEN", TOKEN).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    loop {
        let line = lines_rx.recv_timeout(Duration::from_secs(30)).expect("keel serve printed its address");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            let address = rest.split('/').next().unwrap().trim().to_owned();
            return (child, format!("http://{address}"));
        }
    }
}

fn stop(child: Child) {
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let mut child = child;
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_print_and_json_modes_run_a_turn_on_the_server() {
    let model = MockServer::start().await;
    model.push(
        ChatStream::new()
            .tool_call("c1", "read_file", r#"{"path":"hello.py"}"#, 2)
            .finish("tool_calls")
            .response(),
    );
    model.push(ChatStream::new().text("It prints hello.", 3).finish("stop").response());
    model.push(ChatStream::new().text("Still hello.", 3).finish("stop").response());
    let env = Env::new();
    let (server, url) = serve(&env, &model);

    // Print mode: the answer on stdout, a summary on stderr.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).args(["--remote", &url, "what does hello.py print?"]);
    let out = output(command).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(stdout, "It prints hello.\n");
    assert!(stderr.contains("completed") && stderr.contains("1 tool call"), "{stderr}");

    // JSON mode, continuing that session: `keel --json` lines, then keel/done.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).env("KEEL_REMOTE", &url).args(["--json", "-c", "and now?"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"turn/start"), "only this turn's events: {kinds:?}");
    assert!(kinds.contains(&"delta/text") && kinds.contains(&"turn/end"), "{kinds:?}");
    let done = lines.last().unwrap();
    assert_eq!(done["type"], "keel/done");
    assert_eq!(done["data"]["reason"], "completed");
    assert_eq!(done["data"]["final_text"], "Still hello.");
    assert_eq!(done["data"]["steps"], 1);
    assert_eq!(done["data"]["exit_code"], 0);
    let sessions = env.store().list().unwrap();
    assert_eq!(sessions.len(), 1, "--continue reused the session");
    assert_eq!(done["data"]["session_id"].as_str(), Some(sessions[0].id.as_str()));

    // A wrong token: one clear line, exit 1.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", "wrong").args(["--remote", &url, "hi"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("401") && stderr.contains("KEEL_SERVE_TOKEN"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    // An unknown session: 404, exit 1.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).args(["--remote", &url, "--resume", "nosuchsession", "hi"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("404"), "{}", text(&out.stderr));
    stop(server);

    // No server: exit 1, no panic.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).args(["--remote", &url, "hi"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("cannot reach") && !stderr.contains("panicked"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_aborts_the_remote_turn_and_exits_130() {
    let model = MockServer::start().await;
    model.push(ChatStream::new().text("Let me think about", 1).finish("stop").response().stall_after(2));
    let env = Env::new();
    let (server, url) = serve(&env, &model);
    let mut command = env.keel_unconfigured();
    command
        .env("KEEL_SERVE_TOKEN", TOKEN)
        .args(["--remote", &url, "long task"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let started = std::time::Instant::now();
    while model.request_count() == 0 {
        assert!(started.elapsed() < Duration::from_secs(20), "the server never asked the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("aborted"), "{stderr}");
    stop(server);
    let events = env.session_events();
    assert!(
        matches!(&events.last().unwrap().kind, keel_session::EventKind::TurnEnd(end) if end.reason == keel_session::TurnEndReason::Aborted),
        "{:?}",
        events.last()
    );
}
