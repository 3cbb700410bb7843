#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 32's last check: a newcomer's first ten minutes, walked through in a real
//! terminal (tmux, against mock servers and the embedded model), and what surprised on
//! the way, each fixed and kept fixed here under a pseudo-terminal.

mod common;
#[path = "common/pty.rs"]
mod pty;

use std::time::Duration;

use common::*;
use keel_testkit::{ChatStream, MockResponse, MockServer};

fn answer(text: &str) -> MockResponse {
    ChatStream::new().text(text, 3).finish("stop").usage(500, 20).response()
}

fn shell(id: &str, command: &str) -> MockResponse {
    let args = serde_json::json!({ "command": command }).to_string();
    ChatStream::new().tool_call(id, "shell", &args, 2).finish("tool_calls").usage(400, 30).response()
}

fn tool_results(server: &MockServer, request: usize) -> Vec<String> {
    server.requests()[request].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

/// Typing "also summarize the log" at a shell question, as a person types it (one key
/// at a time), allowed the command *always*: its `a` was the one-key answer, and the
/// rest of the words became the next turn. Now a key counts only when nothing follows
/// it: words typed on, or arriving together, are a no with those words for the model;
/// `y` alone still answers with no Enter.
#[tokio::test(flavor = "multi_thread")]
async fn words_typed_at_a_question_are_words_even_when_they_start_with_a_key() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(shell("c1", "touch typed-slowly"));
    server.push(shell("c2", "touch typed-at-once"));
    server.push(shell("c3", "touch allowed"));
    server.push(answer("Done."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--permission ask --no-session");
    let screen = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("Look at the log");
        terminal.wait_for("Enter: no ·", 1);
        for key in "also summarize the log".chars() {
            terminal.keys(&key.to_string());
            std::thread::sleep(Duration::from_millis(120));
        }
        terminal.keys("\r");
        terminal.wait_for("Enter: no ·", 2);
        terminal.keys("sum it up first\r");
        terminal.wait_for("Enter: no ·", 3);
        terminal.keys("y");
        terminal.wait_for("Done.", 1);
        terminal.wait_for("completed", 1);
        terminal.type_line("/quit");
        pty::plain(&terminal.text())
    })
    .await
    .unwrap();
    let refusals = tool_results(&server, 2);
    assert!(refusals[0].contains("said instead:\nalso summarize the log"), "{refusals:?}\n{screen}");
    assert!(refusals[1].contains("said instead:\nsum it up first"), "{refusals:?}\n{screen}");
    assert!(!env.workspace().join("typed-slowly").exists(), "{screen}");
    assert!(!env.workspace().join("typed-at-once").exists(), "{screen}");
    assert!(env.workspace().join("allowed").exists(), "y alone still allows: {screen}");
    assert!(!screen.contains("› always"), "{screen}");
    assert_eq!(server.requests().len(), 4, "the words were no turn of their own: {screen}");
    // A declined call's line says so; the refusal's words for the model are not shown as
    // if the command had printed them.
    let declined = screen.lines().find(|l| l.contains("✗ shell touch typed-slowly")).expect(&screen);
    assert!(declined.contains("→ The user declined `shell` and said instead: also summarize"), "{declined}");
    assert!(!screen.contains("Do what they said."), "{screen}");
}

/// `keel --local` on two cores showed nothing at all for a minute: a small model's turn
/// first asks the model what the request wants, before its first step, and the spinner
/// only started with the step. It now runs from the turn's start.
#[tokio::test(flavor = "multi_thread")]
async fn the_spinner_runs_from_the_turns_start() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.set_handler(|request| {
        if String::from_utf8_lossy(&request.body).contains("Classify it.") {
            answer("{}").delay(Duration::from_millis(1500))
        } else {
            answer("Done.")
        }
    });
    let mut keel = env.keel(&server.base_url());
    keel.env("KEEL_MODEL", "qwen2.5-coder:1.5b");
    let script = pty::under_script(&keel, "--no-session");
    let seen = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("What does hello.py do?");
        terminal.wait_for("waiting for the model", 1);
        let seen = std::time::Instant::now() - Duration::from_millis(300);
        terminal.wait_for("Done.", 1);
        terminal.type_line("/quit");
        seen
    })
    .await
    .unwrap();
    let requests = server.requests();
    let first_step = requests
        .iter()
        .find(|r| !String::from_utf8_lossy(&r.body).contains("Classify it."))
        .expect("the turn's step");
    assert!(requests.len() >= 2, "the model was asked what the request wants first");
    assert!(seen < first_step.received_at, "the spinner ran while the model was asked");
}

/// A tool's line longer than the terminal wrapped, leaving its time alone on the next
/// line (`…  15.4s`); the closing summary did the same. Both fit now, the summary going
/// on at a separator.
#[tokio::test(flavor = "multi_thread")]
async fn tool_lines_and_the_summary_fit_the_terminal() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    let long = "the-quick-brown-fox-jumps-over-the-lazy-dog-and-keeps-on-running-far-away";
    server.push(shell("c1", &format!("echo {long} && echo {long}")));
    server.push(answer("Done."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--no-session --permission auto");
    let screen = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("Run it");
        terminal.wait_for("completed", 1);
        terminal.type_line("/quit");
        pty::plain(&terminal.text())
    })
    .await
    .unwrap();
    let call = screen.lines().find(|l| l.contains("✓ shell")).expect(&screen);
    assert!(call.chars().count() < 100, "{call}");
    assert!(call.trim_end().ends_with("ms") || call.trim_end().ends_with('s'), "the time stays: {call}");
    assert!(call.contains('…'), "the summary gave way: {call}");
}

/// A reasoning model's thoughts stream beside the spinner and go with it; nothing said
/// there had been any. A line now says how long it reasoned, before the answer.
#[tokio::test(flavor = "multi_thread")]
async fn reasoning_leaves_a_line_saying_how_long() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(
        ChatStream::new()
            .reasoning("First I look at the files.\nThen I answer.", 6)
            .text("It greets.", 2)
            .finish("stop")
            .response()
            .delay_each(Duration::from_millis(150)),
    );
    let script = pty::under_script(&env.keel(&server.base_url()), "--no-session");
    let screen = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("What does hello.py do?");
        terminal.wait_for("completed", 1);
        terminal.type_line("/quit");
        pty::plain(&terminal.text())
    })
    .await
    .unwrap();
    let reasoned = screen.find("  reasoned for ").expect(&screen);
    let answer = screen.find("It greets.").expect(&screen);
    assert!(reasoned < answer, "{screen}");
}

/// `/compact` typed while a turn ran went to the model as steering words. A slash
/// command typed during a turn now waits at the prompt for the turn to end (one Enter
/// runs it); other lines still steer, a path among them.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_typed_during_a_turn_waits_at_the_prompt() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(shell("c1", "sleep 2"));
    server.push(answer("Done."));
    let script = pty::under_script(&env.keel(&server.base_url()), "--no-session --permission auto");
    let screen = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("Wait a bit");
        terminal.wait_for("shell sleep 2", 1);
        terminal.keys("/usage\r");
        terminal.wait_for("waits at the prompt", 1);
        terminal.keys("/tmp/notes.txt has the details\r");
        terminal.wait_for("queued for the next step", 1);
        terminal.wait_for("completed", 1);
        // The command is back at the prompt: Enter runs it.
        terminal.keys("\r");
        terminal.wait_for("1 turn ·", 1);
        terminal.type_line("/quit");
        pty::plain(&terminal.text())
    })
    .await
    .unwrap();
    let sent: String =
        server.requests().iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect();
    assert!(!sent.contains("/usage"), "the command never reached the model: {screen}");
    assert!(sent.contains("/tmp/notes.txt has the details"), "words still steer: {screen}");
    assert!(screen.contains("session ") && screen.contains(" 1 turn · "), "not '1 turns': {screen}");
}
