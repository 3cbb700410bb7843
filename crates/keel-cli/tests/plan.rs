#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The agent's plan (`update_plan`, issue 34 item 1) end to end: offered to the model,
//! kept in the log as the call's effect, shown as a checklist on stderr, never on stdout.

mod common;
#[path = "common/pty.rs"]
mod pty;

use common::*;
use keel_session::{Effect, EventKind, PlanStatus, PlanStep};
use keel_testkit::{ChatStream, MockServer};
use pretty_assertions::assert_eq;

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_is_offered_logged_and_shown_as_a_checklist() {
    let env = Env::new();
    let server = MockServer::start().await;
    let plan = r#"{"plan":[{"step":"Read hello.py","status":"completed"},{"step":"Say what it prints","status":"in_progress"}]}"#;
    server.push(ChatStream::new().tool_call("p1", "update_plan", plan, 3).finish("tool_calls").response());
    server.push(ChatStream::new().text("It prints hello", 2).finish("stop").response());
    let mut keel = env.keel(&server.base_url());
    keel.arg("What does hello.py print?");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "It prints hello\n");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("  plan (1 of 2 done)\n    ✓ Read hello.py\n    ▸ Say what it prints\n"),
        "{stderr}"
    );
    // The call's own line says how many steps, not the arguments' JSON.
    assert!(
        stderr.contains("  1 ✓ update_plan 2 steps  → Plan updated (1 of 2 done): … (3 lines)"),
        "{stderr}"
    );

    let offered = server.requests()[0].json();
    let names: Vec<&str> = offered["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"update_plan"), "{names:?}");

    let effect = env.session_events().into_iter().find_map(|event| match event.kind {
        EventKind::ToolCall(call) => call.effect,
        _ => None,
    });
    let steps = vec![
        PlanStep { step: "Read hello.py".into(), status: PlanStatus::Completed },
        PlanStep { step: "Say what it prints".into(), status: PlanStatus::InProgress },
    ];
    assert_eq!(effect, Some(Effect::Plans { steps }));
    let second = server.requests()[1].json();
    let result =
        second["messages"].as_array().unwrap().iter().rfind(|m| m["role"] == "tool").unwrap().clone();
    assert_eq!(result["content"], "Plan updated (1 of 2 done):\n[x] Read hello.py\n[>] Say what it prints");
}

/// `--json` sends the plan as the `tool/call`'s effect (docs/json-events.md).
#[tokio::test(flavor = "multi_thread")]
async fn the_json_stream_carries_the_plan_as_the_calls_effect() {
    let env = Env::new();
    let server = MockServer::start().await;
    let plan = r#"{"plan":[{"step":"Read hello.py","status":"in_progress"}]}"#;
    server.push(ChatStream::new().tool_call("p1", "update_plan", plan, 3).finish("tool_calls").response());
    server.push(ChatStream::new().text("It prints hello", 2).finish("stop").response());
    let mut keel = env.keel(&server.base_url());
    keel.args(["--json", "What does hello.py print?"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let calls = json_events(&out.stdout, "tool/call");
    assert_eq!(calls.len(), 1, "{}", text(&out.stdout));
    assert_eq!(
        calls[0]["data"]["effect"],
        serde_json::json!({"kind": "plans", "steps": [{"step": "Read hello.py", "status": "in_progress"}]})
    );
}

/// On a terminal the plan stays at the foot of the screen while the turn runs and each
/// update is drawn over the last; when the turn ends it is printed once, as it stands.
#[tokio::test(flavor = "multi_thread")]
async fn on_a_terminal_the_plan_is_updated_in_place_and_printed_once_at_the_end() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let server = MockServer::start().await;
    let first =
        r#"{"plan":[{"step":"Read hello.py","status":"in_progress"},{"step":"Answer","status":"pending"}]}"#;
    let second = r#"{"plan":[{"step":"Read hello.py","status":"completed"},{"step":"Answer","status":"in_progress"}]}"#;
    server.push(ChatStream::new().tool_call("p1", "update_plan", first, 3).finish("tool_calls").response());
    // Slow replies: the spinner ticks meanwhile and draws the plan below the calls.
    server.push(
        ChatStream::new()
            .tool_call("p2", "update_plan", second, 3)
            .finish("tool_calls")
            .response()
            .delay(std::time::Duration::from_millis(600)),
    );
    server.push(
        ChatStream::new()
            .text("It prints hello.", 1)
            .finish("stop")
            .response()
            .delay(std::time::Duration::from_millis(600)),
    );
    let args = format!("--base-url {} --model mock-model --permission auto", server.base_url());
    let script = pty::under_script(&env.keel_unconfigured(), &args);
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("What does hello.py print?");
        terminal.wait_for("completed", 1);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    let status = terminal.child.wait().unwrap();
    let raw = terminal.text();
    let screen = pty::screen(&raw);
    assert!(status.success(), "{screen}");
    // Drawn live while the turn ran…
    assert!(raw.contains("plan (0 of 2 done)"), "{raw:?}");
    // …and drawn over: what is left is the plan as it ended, once, before the summary.
    assert_eq!(screen.matches("plan (").count(), 1, "{screen}");
    let end = screen.find("plan (1 of 2 done)").expect(&screen);
    assert!(screen[end..].contains("✓ Read hello.py\n    ▸ Answer"), "{screen}");
    assert!(screen[end..].contains("completed"), "{screen}");
}
