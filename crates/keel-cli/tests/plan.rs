#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The agent's plan (`update_plan`, issue 34 item 1) end to end: offered to the model,
//! kept in the log as the call's effect, shown as a checklist on stderr, never on stdout.

mod common;

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
