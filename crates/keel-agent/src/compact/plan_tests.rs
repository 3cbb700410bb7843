use keel_llm::{AssistantMessage, ToolResultMessage};
use pretty_assertions::assert_eq;

use super::*;

fn user(text: &str) -> Message {
    Message::User(UserMessage::text(text))
}

fn call(id: &str, name: &str, args: &str) -> Message {
    Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::ToolCall(ToolCall::new(id, name, args))],
        ..AssistantMessage::default()
    })
}

fn result(id: &str, name: &str, content: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        call_id: id.into(),
        name: name.into(),
        content: content.into(),
        is_error: false,
        images: Vec::new(),
    })
}

/// user, then `steps` steps each reading a file with a large result.
fn session(steps: usize) -> Vec<Message> {
    let mut messages = vec![user("Fix the bug in parser.rs")];
    for i in 0..steps {
        let id = format!("c{i}");
        messages.push(call(&id, "read_file", &format!(r#"{{"path": "f{i}.rs"}}"#)));
        messages.push(result(&id, "read_file", &"x".repeat(3500)));
    }
    messages
}

#[test]
fn estimates_grow_with_text_and_use_the_reported_size_when_there_is_one() {
    assert_eq!(text_tokens(""), 0);
    assert_eq!(text_tokens(&"a".repeat(700)), 200);
    let messages = session(2);
    let estimated = context_tokens(&messages, None, 100);
    assert_eq!(estimated, 100 + messages_tokens(&messages));
    // Reported for the first three messages: only the last two are estimated.
    assert_eq!(context_tokens(&messages, Some((5000, 3)), 100), 5000 + messages_tokens(&messages[3..]));
    // A report covering more than there is (stale) falls back to the estimate.
    assert_eq!(context_tokens(&messages, Some((5000, 99)), 100), estimated);
}

#[test]
fn pruning_stubs_large_old_results_and_protects_the_recent_ones() {
    let messages = session(4);
    let (pruned, freed) = prune_plan(&messages, 1200);
    let ids: Vec<&str> = pruned.iter().map(|p| p.call_id.as_str()).collect();
    assert_eq!(ids, ["c0", "c1", "c2"]);
    assert_eq!(pruned[0].stub, "[output of read_file `f0.rs` pruned: 3500 characters; rerun to see it]");
    assert!(freed > 2500, "{freed}");
    // Stubs are not pruned again.
    let mut again = messages.clone();
    if let Message::ToolResult(r) = &mut again[2] {
        r.content = pruned[0].stub.clone();
    }
    let (pruned, _) = prune_plan(&again, 1200);
    assert_eq!(pruned.len(), 2);
}

/// A screenshot result has little text but costs an image's tokens: it is pruned, and the
/// stub says an image went with it.
#[test]
fn an_old_result_with_an_image_is_pruned_for_the_image() {
    let image = keel_llm::Image::from_base64(keel_testkit::mcp::PNG_BASE64).unwrap();
    let big = keel_llm::Image { pixels: Some((1280, 800)), ..image };
    let mut shot = result("s1", "mcp__browser__screenshot", "[image: image/png; image 1 below]");
    if let Message::ToolResult(r) = &mut shot {
        r.images = vec![big];
    }
    let messages =
        vec![user("look"), call("s1", "mcp__browser__screenshot", "{}"), shot, call("c9", "read_file", "{}")];
    let (pruned, freed) = prune_plan(&messages, 0);
    assert_eq!(pruned.len(), 1);
    assert_eq!(
        pruned[0].stub,
        "[output of mcp__browser__screenshot pruned: 33 characters and an image; rerun to see it]"
    );
    assert!(freed > 1000, "{freed}");
}

#[test]
fn the_cut_keeps_whole_steps_within_the_budget_and_never_a_lone_result() {
    let messages = session(4);
    // Each step is ~1000 tokens: a budget of 2100 keeps the last two steps.
    let cut = cut_index(&messages, 2100).unwrap();
    assert_eq!(cut, 5);
    assert!(matches!(messages[cut], Message::Assistant(_)));
    // A budget smaller than one step still keeps the last step.
    assert_eq!(cut_index(&messages, 10), Some(7));
    // Nothing before the first message can be cut.
    assert_eq!(cut_index(&messages[..1], 10), None);
}

#[test]
fn files_read_and_changed_come_from_the_file_tools_calls() {
    let messages = vec![
        user("go"),
        call("a", "read_file", r#"{"path": "a.rs"}"#),
        result("a", "read_file", "..."),
        call("b", "edit_file", r#"{"path": "b.rs", "old_text": "x", "new_text": "y"}"#),
        result("b", "edit_file", "ok"),
        call("c", "shell", r#"{"command": "cat c.rs"}"#),
        result("c", "shell", "..."),
        // A failed call touched nothing (a fresh start's note named files never written).
        call("d", "write_file", r#"{"path": "d.rs", "content": "x"}"#),
        Message::ToolResult(ToolResultMessage {
            call_id: "d".into(),
            name: "write_file".into(),
            content: "not written".into(),
            is_error: true,
            images: Vec::new(),
        }),
    ];
    assert_eq!(
        files_touched(&messages, &crate::registry::tests_support::registry()),
        (vec!["a.rs".to_owned()], vec!["b.rs".to_owned()])
    );
}

#[test]
fn a_summary_carries_the_users_messages_verbatim_even_across_compactions() {
    let older =
        vec![user("Fix the bug in parser.rs"), call("a", "read_file", "{}"), result("a", "read_file", "x")];
    let first =
        summary_message(&older, 1000, Ok("## Task\nfix it"), &crate::registry::tests_support::registry());
    assert!(first.starts_with(SUMMARY_MARKER));
    assert!(first.contains("<user-messages>\nFix the bug in parser.rs\n</user-messages>"), "{first}");
    assert!(
        first.ends_with("Summary of the work so far:\n## Task\nfix it\n[End of the summary.]"),
        "{first}"
    );
    // A second compaction takes the user's messages out of the first summary (and input
    // joined after it), not the summary itself.
    let later = vec![
        user(&format!("{first}\n\nAlso add a test")),
        call("b", "shell", "{}"),
        result("b", "shell", "ok"),
    ];
    let second = summary_message(
        &later,
        1000,
        Err("the summary was empty"),
        &crate::registry::tests_support::registry(),
    );
    assert!(
        second.contains("<user-messages>\nFix the bug in parser.rs\n\nAlso add a test\n</user-messages>"),
        "{second}"
    );
    assert_eq!(second.matches(SUMMARY_MARKER).count(), 1, "{second}");
    assert!(
        second.contains("The earlier steps were dropped to fit the context window (the summary was empty)")
    );
}

#[test]
fn the_users_messages_are_cut_to_the_budget_keeping_the_task_and_the_latest() {
    let older = vec![
        user("TASK"),
        call("a", "shell", "{}"),
        result("a", "shell", "x"),
        user(&"m".repeat(700)),
        call("b", "shell", "{}"),
        result("b", "shell", "x"),
        user("LATEST"),
    ];
    let text = summary_message(&older, 50, Ok("s"), &crate::registry::tests_support::registry());
    assert!(text.contains("TASK\n\n[1 later message(s) left out to fit]\n\nLATEST"), "{text}");
    let huge = vec![user(&"t".repeat(10_000))];
    let text = summary_message(&huge, 100, Ok("s"), &crate::registry::tests_support::registry());
    assert!(text.contains(" …[cut to fit]"), "{text}");
    assert!(text_tokens(&text) < 200, "{}", text_tokens(&text));
}

#[test]
fn the_summary_request_keeps_roles_alternating() {
    let older = vec![user("go"), call("a", "shell", "{}"), result("a", "shell", "x")];
    let request = summary_request(&older, "SUMMARIZE");
    assert_eq!(request.len(), 4);
    assert_eq!(request[3], user("SUMMARIZE"));
    let request = summary_request(&older[..1], "SUMMARIZE");
    assert_eq!(request, vec![user("go\n\nSUMMARIZE")]);
    keel_session::validate(&summary_request(&older, "S")).unwrap();
}

#[test]
fn a_stub_cuts_only_arguments_longer_than_eighty_characters() {
    let exact = "x".repeat(80);
    let long = "y".repeat(81);
    let messages = vec![
        user("go"),
        call("a", "shell", &serde_json::json!({"command": exact}).to_string()),
        result("a", "shell", &"o".repeat(2000)),
        call("b", "shell", &serde_json::json!({"command": long}).to_string()),
        result("b", "shell", &"o".repeat(2000)),
        call("c", "shell", "{}"),
        result("c", "shell", "recent"),
    ];
    let (pruned, _) = prune_plan(&messages, 0);
    assert_eq!(
        pruned[0].stub,
        format!("[output of shell `{exact}` pruned: 2000 characters; rerun to see it]")
    );
    assert_eq!(
        pruned[1].stub,
        format!("[output of shell `{}…` pruned: 2000 characters; rerun to see it]", "y".repeat(80))
    );
}

// The plan carried over a compaction.

fn plan_call(id: &str, step: &str, status: &str) -> Message {
    let arguments = serde_json::json!({"plan": [{"step": step, "status": status}]}).to_string();
    Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::ToolCall(ToolCall::new(id, "update_plan", &arguments))],
        ..AssistantMessage::default()
    })
}

fn plan_result(id: &str, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        call_id: id.into(),
        name: "update_plan".into(),
        content: "ok".into(),
        is_error,
        images: Vec::new(),
    })
}

fn plan_tools() -> crate::ToolRegistry {
    let mut tools = crate::ToolRegistry::new();
    tools.register(PlanTool);
    tools
}

/// A stand-in for keel-tools' update_plan (keel-agent cannot depend on it): it
/// declares the plan its arguments give.
struct PlanTool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct PlanArgs {
    #[allow(dead_code)] // read through `effect`, from the raw arguments
    plan: Vec<serde_json::Value>,
}

impl crate::Tool for PlanTool {
    type Args = PlanArgs;
    fn name(&self) -> &str {
        "update_plan"
    }
    fn description(&self) -> &str {
        "Plan."
    }
    fn effect(&self, arguments: &serde_json::Value) -> keel_session::Effect {
        let steps = arguments["plan"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| serde_json::from_value(item.clone()).ok())
            .collect();
        keel_session::Effect::Plans { steps }
    }
    async fn call(&self, _: PlanArgs, _: crate::ToolContext) -> Result<crate::ToolOutput, crate::ToolError> {
        Ok(crate::ToolOutput::text("ok"))
    }
}

#[test]
fn the_latest_plan_that_was_kept_is_carried() {
    let messages = [
        plan_call("a", "Read", "in_progress"),
        plan_result("a", false),
        plan_call("b", "Fix", "in_progress"),
        plan_result("b", false),
        plan_call("c", "Refused", "in_progress"),
        plan_result("c", true),
    ];
    assert_eq!(latest_plan(&messages, &plan_tools()).as_deref(), Some("[>] Fix"));
    assert_eq!(latest_plan(&messages[..0], &plan_tools()), None);
    let text = summary_message(&messages, 1000, Ok("## Task\nfix it"), &plan_tools());
    assert!(text.ends_with("<plan>\n[>] Fix\n</plan>\n[End of the summary.]"), "{text}");
}

#[test]
fn a_plan_carried_by_an_earlier_summary_is_carried_again() {
    let summary =
        format!("{SUMMARY_MARKER}\n\nSummary.{}\n[End of the summary.]", plan_block("[x] Read\n[>] Fix"));
    let messages = [Message::User(UserMessage::text(summary))];
    assert_eq!(latest_plan(&messages, &plan_tools()).as_deref(), Some("[x] Read\n[>] Fix"));
    let later = [messages[0].clone(), plan_call("d", "Test", "in_progress"), plan_result("d", false)];
    assert_eq!(latest_plan(&later, &plan_tools()).as_deref(), Some("[>] Test"), "a newer plan wins");
}
