use super::*;
use keel_llm::{AssistantMessage, FinishReason, Usage};
use keel_session::{StepStart, UserInput};
use pretty_assertions::assert_eq;

fn event(seq: u64, kind: EventKind) -> Event {
    Event { seq, time: "2026-12-01T00:00:00.000Z".into(), kind }
}

fn reply(content: Vec<keel_llm::ContentBlock>, usage: Usage) -> EventKind {
    EventKind::AssistantMessage(AssistantMessage {
        content,
        finish_reason: FinishReason::ToolUse,
        usage,
        ..AssistantMessage::default()
    })
}

fn user(text: &str, source: InputSource) -> EventKind {
    let mut input: UserInput = serde_json::from_value(serde_json::json!({"text": text})).unwrap();
    input.source = source;
    EventKind::UserMessage(input)
}

fn result(call_id: &str, name: &str, content: &str, change: Option<FileChange>) -> EventKind {
    EventKind::ToolResult(ToolResultData {
        call_id: call_id.into(),
        name: name.into(),
        source_seq: 3,
        content: content.into(),
        is_error: false,
        error_code: None,
        concludes_turn: false,
        duration_ms: Some(1),
        change,
        images: Vec::new(),
    })
}

/// keel's built-in tools, whose declared effects give the calls' kinds.
fn builtin_tools() -> ToolRegistry {
    keel_tools::builtin(std::sync::Arc::new(keel_tools::ToolsConfig::default()))
}

fn text_chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// A replayed log: the user's prompt (not keel's environment block), the reasoning and
/// text of a reply, its calls as pending tool calls with usage, a write's result with its
/// diff, and a plan from `update_plan`.
#[test]
fn a_replayed_log_gives_every_step_as_updates() {
    let workspace = Path::new("/w");
    let write = r#"{"path":"notes.txt","content":"one\ntwo\n"}"#;
    let plan_args =
        r#"{"plan":[{"step":"write notes","status":"completed"},{"step":"check","status":"in_progress"}]}"#;
    let change = FileChange {
        path: "notes.txt".into(),
        created: false,
        added: 1,
        removed: 1,
        diff: "@@ -1,2 +1,2 @@\n one\n-old\n+two\n".into(),
        cut_lines: 0,
    };
    let events = [
        event(1, user("<environment>", InputSource::Context)),
        event(2, user("write notes", InputSource::Prompt)),
        event(3, EventKind::StepStart(StepStart { step: 1 })),
        event(
            4,
            reply(
                vec![
                    keel_llm::ContentBlock::Thinking { text: "hmm".into(), signature: None },
                    keel_llm::ContentBlock::Text { text: "Writing.".into() },
                    keel_llm::ContentBlock::ToolCall(keel_llm::ToolCall::new("c1", "write_file", write)),
                    keel_llm::ContentBlock::ToolCall(keel_llm::ToolCall::new("c2", "update_plan", plan_args)),
                ],
                Usage { input_tokens: 100, output_tokens: 20, ..Usage::default() },
            ),
        ),
        event(5, result("c1", "write_file", "Wrote notes.txt", Some(change))),
        event(6, result("c2", "update_plan", "Plan updated", None)),
    ];
    let mut translator = Translator::new(workspace, Some(1000), true);
    translator.set_tools(builtin_tools());
    let updates: Vec<SessionUpdate> = events.iter().flat_map(|e| translator.logged(e)).collect();
    let write_call = ToolCall::new("c1", "write_file: notes.txt")
        .kind(ToolKind::Edit)
        .status(ToolCallStatus::Pending)
        .locations(vec![ToolCallLocation::new("/w/notes.txt")])
        .raw_input(serde_json::from_str::<Value>(write).unwrap());
    let plan_call = ToolCall::new("c2", "update_plan")
        .kind(ToolKind::Think)
        .status(ToolCallStatus::Pending)
        .raw_input(serde_json::from_str::<Value>(plan_args).unwrap());
    let write_done = ToolCallUpdateFields::new().status(ToolCallStatus::Completed).content(vec![
        ToolCallContent::Diff(Diff::new("/w/notes.txt", "one\ntwo\n").old_text("one\nold\n".to_owned())),
        ToolCallContent::Content(Content::new(ContentBlock::Text(TextContent::new("Wrote notes.txt")))),
    ]);
    let plan_done = ToolCallUpdateFields::new().status(ToolCallStatus::Completed).content(vec![
        ToolCallContent::Content(Content::new(ContentBlock::Text(TextContent::new("Plan updated")))),
    ]);
    assert_eq!(
        updates,
        vec![
            SessionUpdate::UserMessageChunk(text_chunk("write notes")),
            SessionUpdate::AgentThoughtChunk(text_chunk("hmm")),
            SessionUpdate::AgentMessageChunk(text_chunk("Writing.")),
            SessionUpdate::ToolCall(write_call),
            SessionUpdate::ToolCall(plan_call),
            SessionUpdate::UsageUpdate(UsageUpdate::new(120, 1000)),
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new("c1", write_done)),
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new("c2", plan_done)),
            SessionUpdate::Plan(Plan::new(vec![
                PlanEntry::new("write notes", PlanEntryPriority::Medium, PlanEntryStatus::Completed),
                PlanEntry::new("check", PlanEntryPriority::Medium, PlanEntryStatus::InProgress),
            ])),
        ]
    );
}

/// Live, the text and reasoning stream as deltas and are not sent again with the logged
/// reply; a call waits for its permission until it starts, then is in progress; a failed
/// call is `failed`.
#[test]
fn live_deltas_are_sent_once_and_calls_go_pending_in_progress_failed() {
    let mut translator = Translator::new(Path::new("/w"), None, false);
    translator.set_tools(builtin_tools());
    assert_eq!(translator.logged(&event(1, user("hi", InputSource::Prompt))), vec![]);
    assert_eq!(translator.logged(&event(2, EventKind::StepStart(StepStart { step: 1 }))), vec![]);
    assert_eq!(
        translator.delta(&ModelEvent::TextDelta("Run".into())),
        Some(SessionUpdate::AgentMessageChunk(text_chunk("Run")))
    );
    let shell = r#"{"command":"ls"}"#;
    let logged = translator.logged(&event(
        3,
        reply(
            vec![
                keel_llm::ContentBlock::Text { text: "Run".into() },
                keel_llm::ContentBlock::ToolCall(keel_llm::ToolCall::new("c1", "shell", shell)),
            ],
            Usage::default(),
        ),
    ));
    let call = ToolCall::new("c1", "shell: ls")
        .kind(ToolKind::Execute)
        .status(ToolCallStatus::Pending)
        .raw_input(serde_json::json!({"command": "ls"}));
    assert_eq!(logged, vec![SessionUpdate::ToolCall(call)]);
    assert_eq!(translator.waiting_call("shell", shell), Some("c1".to_owned()));
    assert_eq!(translator.waiting_call("shell", r#"{"command":"pwd"}"#), None);
    let started = translator.started("c1");
    let in_progress = ToolCallUpdateFields::new().status(ToolCallStatus::InProgress);
    assert_eq!(started, SessionUpdate::ToolCallUpdate(ToolCallUpdate::new("c1", in_progress)));
    assert_eq!(translator.waiting_call("shell", shell), None);
    let mut failed = ToolResultData {
        call_id: "c1".into(),
        name: "shell".into(),
        source_seq: 3,
        content: String::new(),
        is_error: true,
        error_code: Some("denied".into()),
        concludes_turn: false,
        duration_ms: None,
        change: None,
        images: Vec::new(),
    };
    failed.content = "x".repeat(MAX_RESULT_CHARS + 5);
    let updates = translator.logged(&event(4, EventKind::ToolResult(failed)));
    let shown = format!("{}… (5 more characters)", "x".repeat(MAX_RESULT_CHARS));
    let fields = ToolCallUpdateFields::new()
        .status(ToolCallStatus::Failed)
        .content(vec![ToolCallContent::Content(Content::new(ContentBlock::Text(TextContent::new(shown))))]);
    assert_eq!(updates, vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new("c1", fields))]);
}

#[test]
fn a_created_file_has_no_old_text() {
    let change = FileChange {
        path: "src/new.rs".into(),
        created: true,
        added: 2,
        removed: 0,
        diff: "@@ -0,0 +1,2 @@\n+fn a() {}\n+fn b() {}\n".into(),
        cut_lines: 0,
    };
    assert_eq!(diff(&change, Path::new("/w")), Diff::new("/w/src/new.rs", "fn a() {}\nfn b() {}\n"));
}

/// A tool keel does not know by name (an MCP server's, say) that declares it reads one
/// file.
struct Lookup(keel_llm::ToolDefinition);

impl keel_agent::DynTool for Lookup {
    fn definition(&self) -> &keel_llm::ToolDefinition {
        &self.0
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }

    fn prepare(&self, _arguments: &str) -> Result<keel_agent::PreparedCall, keel_agent::ToolError> {
        Err(keel_agent::ToolError::msg("not runnable here"))
    }

    fn effect(&self, arguments: &str) -> Effect {
        let path = serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|v| v.get("page").and_then(Value::as_str).map(str::to_owned));
        Effect::Reads { path }
    }
}

/// A call's kind and locations come from the effect its tool declares, not its name: a
/// tool with any name that reads a file is a read of that file; a call of a tool the
/// translator does not have is `other` until its logged start says what it does, and
/// then the client is told again (a replay whose MCP servers are not running).
#[test]
fn kinds_and_locations_come_from_declared_and_logged_effects() {
    let mut tools = ToolRegistry::new();
    let parameters = serde_json::value::RawValue::from_string("{}".into()).unwrap();
    let definition =
        keel_llm::ToolDefinition { name: "docs__lookup".into(), description: String::new(), parameters };
    tools.register_dyn(std::sync::Arc::new(Lookup(definition)));
    let mut translator = Translator::new(Path::new("/w"), None, false);
    translator.set_tools(tools);
    let calls = vec![
        keel_llm::ContentBlock::ToolCall(keel_llm::ToolCall::new("l1", "docs__lookup", r#"{"page":"a.md"}"#)),
        keel_llm::ContentBlock::ToolCall(keel_llm::ToolCall::new("w1", "write_file", r#"{"path":"b.txt"}"#)),
    ];
    let updates = translator.logged(&event(1, reply(calls, Usage::default())));
    let lookup = ToolCall::new("l1", "docs__lookup")
        .kind(ToolKind::Read)
        .status(ToolCallStatus::Pending)
        .locations(vec![ToolCallLocation::new("/w/a.md")])
        .raw_input(serde_json::json!({"page": "a.md"}));
    let write = ToolCall::new("w1", "write_file: b.txt")
        .kind(ToolKind::Other)
        .status(ToolCallStatus::Pending)
        .raw_input(serde_json::json!({"path": "b.txt"}));
    assert_eq!(updates, vec![SessionUpdate::ToolCall(lookup), SessionUpdate::ToolCall(write)]);

    let started = |call_id: &str, name: &str, effect: Option<Effect>| {
        EventKind::ToolCall(keel_session::ToolCallStarted {
            call_id: call_id.into(),
            name: name.into(),
            arguments: String::new(),
            effect,
        })
    };
    // The same effect as announced, or none logged (an old log): nothing new to say.
    let same = started("l1", "docs__lookup", Some(Effect::Reads { path: Some("a.md".into()) }));
    assert_eq!(translator.logged(&event(2, same)), vec![]);
    assert_eq!(translator.logged(&event(3, started("w1", "write_file", None))), vec![]);
    let written = started("w1", "write_file", Some(Effect::Writes { path: "b.txt".into() }));
    let fields =
        ToolCallUpdateFields::new().kind(ToolKind::Edit).locations(vec![ToolCallLocation::new("/w/b.txt")]);
    assert_eq!(
        translator.logged(&event(4, written)),
        vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new("w1", fields))]
    );
}

/// Each effect's kind, so a new effect is given one on purpose.
#[test]
fn every_effect_has_a_kind() {
    let cases = [
        (Effect::Reads { path: Some("a".into()) }, ToolKind::Read),
        (Effect::Reads { path: None }, ToolKind::Search),
        (Effect::Writes { path: "a".into() }, ToolKind::Edit),
        (Effect::Runs, ToolKind::Execute),
        (Effect::Fetches { url: "https://example.com".into() }, ToolKind::Fetch),
        (Effect::Plans { steps: Vec::new() }, ToolKind::Think),
        (Effect::Concludes, ToolKind::Other),
        (Effect::Other, ToolKind::Other),
    ];
    for (effect, expected) in cases {
        assert_eq!(kind(&effect), expected, "{effect:?}");
    }
}

/// A result that concludes the turn (the small profile's `answer` tool) is the agent's
/// message too: a client that shows only messages must not end the turn showing nothing.
#[test]
fn a_concluding_result_is_also_the_agents_message() {
    let mut translator = Translator::new(Path::new("/w"), None, false);
    translator.logged(&event(
        1,
        reply(
            vec![keel_llm::ContentBlock::ToolCall(keel_llm::ToolCall::new(
                "a1",
                "answer",
                r#"{"text":"It says hi."}"#,
            ))],
            Usage::default(),
        ),
    ));
    let EventKind::ToolResult(mut answer) = result("a1", "answer", "It says hi.", None) else {
        unreachable!()
    };
    answer.concludes_turn = true;
    let updates = translator.logged(&event(2, EventKind::ToolResult(answer.clone())));
    assert_eq!(updates.last(), Some(&SessionUpdate::AgentMessageChunk(text_chunk("It says hi."))));
    answer.is_error = true;
    let updates = translator.logged(&event(3, EventKind::ToolResult(answer)));
    assert!(!updates.iter().any(|u| matches!(u, SessionUpdate::AgentMessageChunk(_))), "{updates:?}");
}
