#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Long sessions: a task whose tool outputs overflow a small window is compacted (and
//! pruned) and finishes; every request fits and keeps the task; a provider's overflow
//! error gets one compaction and a retry; `/compact` works between turns; a crash at any
//! point of a compaction resumes to a valid, uncompacted-or-compacted history.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use futures::StreamExt;
use keel_agent::compact::plan::{self, SUMMARY_MARKER};
use keel_agent::{Agent, AgentConfig, NullSink, SessionContext, Tool, ToolContext, ToolError, ToolOutput};
use keel_llm::{
    AssistantMessage, ContentBlock, Message, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelInfo,
    ModelRequest, ModelStream, ToolChoice, Usage,
};
use keel_session::{CompactionOutcome, EventKind, JsonlStore, SessionStore, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

const TASK: &str = "TASK: read the eight chapters and report the word count of each";

/// A tool whose output is large: ~3,000 tokens a call.
struct BigRead;

impl Tool for BigRead {
    type Args = PathArgs;
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Reads a file."
    }
    fn effect(&self, arguments: &serde_json::Value) -> keel_agent::Effect {
        keel_agent::Effect::Reads { path: keel_agent::path_argument(arguments) }
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(&self, args: PathArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("{}: {}", args.path, "lorem ipsum ".repeat(850))))
    }
}

/// Arguments of the write tool.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WriteArgs {
    path: String,
    content: String,
}

/// A tool with large arguments and a small result (nothing to prune).
struct Write;

impl Tool for Write {
    type Args = WriteArgs;
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Writes a file."
    }
    fn effect(&self, arguments: &serde_json::Value) -> keel_agent::Effect {
        match keel_agent::path_argument(arguments) {
            Some(path) => keel_agent::Effect::Writes { path },
            None => keel_agent::Effect::Other,
        }
    }
    async fn call(&self, args: WriteArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("wrote {} ({} bytes)", args.path, args.content.len())))
    }
}

/// Twelve writes of ~1,500 tokens each, one per step, then the answer.
fn writing_script() -> ScriptedModel {
    let mut replies: Vec<_> = (1..=12)
        .map(|i| {
            let args =
                serde_json::json!({"path": format!("chapter{i}.txt"), "content": "lorem ipsum ".repeat(440)});
            reply().call("write_file", &args.to_string())
        })
        .collect();
    replies.push(reply().text("All twelve chapters written."));
    ScriptedModel::new(replies)
}

/// What a request looked like: its tool choice, estimated tokens and messages.
type Seen = (ToolChoice, u64, Vec<Message>);

/// A model with a context window: requests past it fail with `context_overflow`
/// (estimated as keel estimates); summary requests (no tools offered) are answered
/// with a fixed summary; everything else goes to the script.

#[derive(Clone)]
struct Windowed {
    script: ScriptedModel,
    window: u64,
    /// Every request: (tool choice, estimated tokens, messages).
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Windowed {
    fn new(script: ScriptedModel, window: u64) -> Self {
        Windowed { script, window, seen: Arc::default() }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl ModelClient for Windowed {
    fn info(&self) -> ModelInfo {
        self.script.info()
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let overhead: u64 = plan::text_tokens(request.system)
            + request
                .tools
                .iter()
                .map(|t| {
                    plan::text_tokens(&t.name)
                        + plan::text_tokens(&t.description)
                        + plan::text_tokens(t.parameters.get())
                })
                .sum::<u64>();
        let tokens = overhead + plan::messages_tokens(request.messages);
        self.seen.lock().unwrap().push((request.tool_choice, tokens, request.messages.to_vec()));
        if tokens > self.window {
            let error = ModelError::new(
                ModelErrorKind::ContextOverflow,
                format!("{tokens} tokens > {}", self.window),
            );
            return Box::pin(futures::stream::once(async move { Err(error) }));
        }
        if request.tool_choice == ToolChoice::None {
            let message = AssistantMessage {
                content: vec![ContentBlock::Text {
                    text: "## Task\nCount words per chapter.\n## Done\nRead some chapters.\n## Next step\nRead the next."
                        .into(),
                }],
                usage: Usage { input_tokens: tokens, output_tokens: 30, ..Usage::default() },
                ..AssistantMessage::default()
            };
            return Box::pin(futures::stream::once(async move { Ok(ModelEvent::Completed(message)) }));
        }
        // Report the prompt's size as a provider would.
        Box::pin(self.script.stream(request, cancel).map(move |event| match event {
            Ok(ModelEvent::Completed(mut message)) => {
                message.usage.input_tokens = tokens;
                message.usage.output_tokens = plan::message_tokens(&Message::Assistant(message.clone()));
                Ok(ModelEvent::Completed(message))
            }
            other => other,
        }))
    }
}

/// Eight reads, one per step, then the answer.
fn reading_script() -> ScriptedModel {
    let mut replies: Vec<_> =
        (1..=8).map(|i| reply().call("read_file", &format!(r#"{{"path": "chapter{i}.txt"}}"#))).collect();
    replies.push(reply().text("All eight chapters counted."));
    ScriptedModel::new(replies)
}

fn agent(model: Windowed, config: AgentConfig) -> Agent {
    Agent::builder(model).tool(BigRead).tool(Write).config(config).build()
}

fn kinds(events: &[keel_session::Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.type_name()).collect()
}

#[tokio::test]
async fn large_old_results_are_pruned_and_the_newest_is_never() {
    let model = Windowed::new(reading_script(), 8000);
    let agent = agent(model.clone(), AgentConfig { context_window: Some(8000), ..AgentConfig::default() });
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), TASK, &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed, "{:?}", outcome.message);
    for (_, tokens, messages) in model.seen() {
        assert!(tokens <= 8000, "a request of {tokens} tokens");
        assert_provider_valid(&messages);
        // The newest result always arrives whole.
        if let Some(Message::ToolResult(last)) = messages.last() {
            assert!(last.content.contains("lorem ipsum"), "{}", last.content);
        }
    }
    let stubs: Vec<(String, String, bool)> =
        results(session.messages()).into_iter().filter(|r| r.1.starts_with("[output of")).collect();
    assert!(stubs.len() >= 5, "{stubs:?}");
    assert!(stubs[0].1.starts_with("[output of read_file `chapter1.txt` pruned: "), "{stubs:?}");
}

fn first_user_text(messages: &[Message]) -> String {
    match messages.first() {
        Some(Message::User(user)) => user.content.clone(),
        other => panic!("first message is not user input: {other:?}"),
    }
}

#[tokio::test]
async fn a_task_overflowing_a_small_window_twice_is_compacted_and_finishes() {
    let model = Windowed::new(writing_script(), 8000);
    let config = AgentConfig { context_window: Some(8000), ..AgentConfig::default() };
    let agent = agent(model.clone(), config);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), TASK, &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed, "{:?}", outcome.message);
    assert_eq!(outcome.final_text, "All twelve chapters written.");

    let events = store.read(session.id()).unwrap();
    let compactions: Vec<CompactionOutcome> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::CompactionEnd(end) => Some(end.outcome),
            _ => None,
        })
        .collect();
    assert!(compactions.len() >= 2, "{compactions:?}");
    assert!(compactions.iter().all(|o| *o == CompactionOutcome::Compacted), "{compactions:?}");
    // Never two steps in a row: between two compactions there is at least one step.
    let kinds = kinds(&events);
    for pair in kinds.split(|k| *k == "compaction/end").skip(1) {
        if pair.contains(&"compaction/start") {
            assert!(pair.contains(&"step/start"), "{kinds:?}");
        }
    }

    let seen = model.seen();
    let mut compacted = false;
    for (choice, tokens, messages) in &seen {
        assert!(*tokens <= 8000, "a request of {tokens} tokens");
        assert_provider_valid(messages);
        let first = first_user_text(messages);
        compacted |= first.starts_with(SUMMARY_MARKER);
        if compacted && *choice != ToolChoice::None {
            assert!(first.contains(TASK), "the task is gone after a compaction: {first}");
        }
    }
    assert!(compacted);
    // What the model saw last is what the log derives.
    let id = session.id().to_owned();
    drop(session);
    let reopened = store.open(&id).unwrap();
    let last_request = &seen.last().unwrap().2;
    assert_eq!(&reopened.messages()[..last_request.len()], &last_request[..]);
}

#[tokio::test]
async fn an_overflow_error_gets_one_compaction_and_a_retry_without_a_known_window() {
    // No window configured and none known: only the provider's error triggers it.
    let model = Windowed::new(writing_script(), 9000);
    let agent = agent(model.clone(), AgentConfig::default());
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), TASK, &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    // Each overflow is answered by one compaction and a retry of the step.
    assert_eq!(outcome.reason, TurnEndReason::Completed, "{:?}", outcome.message);
    let seen = model.seen();
    let overflowed: Vec<usize> = (0..seen.len()).filter(|i| seen[*i].1 > 9000).collect();
    assert!(!overflowed.is_empty());
    for i in &overflowed {
        assert_eq!(seen[i + 1].0, ToolChoice::None, "no summary request after overflow {i}");
        assert!(seen[i + 2].1 <= 9000, "the retry after overflow {i} overflowed");
    }
    let summaries = session
        .messages()
        .iter()
        .filter(|m| matches!(m, Message::User(u) if u.content.starts_with(SUMMARY_MARKER)))
        .count();
    assert_eq!(summaries, 1, "one summary message at a time");
    assert_provider_valid(session.messages());
}

#[tokio::test]
async fn compact_between_turns_summarizes_with_a_focus_and_keeps_the_last_step() {
    let script = ScriptedModel::new([
        reply().call("read_file", r#"{"path": "a.txt"}"#),
        reply().call("read_file", r#"{"path": "b.txt"}"#),
        reply().text("read both"),
    ]);
    let model = Windowed::new(script, 100_000);
    let agent = agent(model.clone(), AgentConfig { context_window: Some(100_000), ..AgentConfig::default() });
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::default();
    let cancel = CancellationToken::new();
    agent.run_turn(&mut session, &ctx, TASK, &NullSink, &cancel).await.unwrap();
    let before = agent.context_usage(&session, &ctx);
    assert_eq!(before.window, Some(100_000));
    let end = agent
        .compact(&mut session, &ctx, Some("the word counts"), &NullSink, &cancel)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(end.outcome, CompactionOutcome::Compacted);
    assert_eq!(end.files_read, ["a.txt", "b.txt"]);
    let (_, _, request) = model.seen().last().unwrap().clone();
    match request.last().unwrap() {
        Message::User(u) => {
            assert!(u.content.contains("Pay particular attention to: the word counts"), "{}", u.content)
        }
        other => panic!("{other:?}"),
    }
    let messages = session.messages();
    assert!(first_user_text(messages).contains(TASK));
    assert!(matches!(messages.last(), Some(Message::Assistant(a)) if a.text() == "read both"));
    assert!(agent.context_usage(&session, &ctx).tokens < before.tokens);
    assert_provider_valid(messages);
}

/// A crash (the log cut) after any event of a compacting session resumes, after
/// repair, to a provider-valid history that either has the summary or has none, and
/// whose open compaction (if any) changed nothing.
#[tokio::test]
async fn a_crash_at_any_event_of_a_compaction_resumes_whole() {
    let model = Windowed::new(writing_script(), 8000);
    let agent = agent(model, AgentConfig { context_window: Some(8000), ..AgentConfig::default() });
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    agent
        .run_turn(&mut session, &SessionContext::default(), TASK, &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    let id = session.id().to_owned();
    drop(session);
    let path = dir.path().join(format!("{id}.jsonl"));
    let log = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let mut checked = 0;
    for cut in 1..=lines.len() {
        let kind = lines[cut - 1];
        if !(kind.contains("\"compaction/") || kind.contains("\"context/pruned\"")) {
            continue;
        }
        for at in [cut - 1, cut] {
            let crashed = tempfile::tempdir().unwrap();
            let crashed_store = JsonlStore::new(crashed.path());
            std::fs::write(crashed.path().join(format!("{id}.jsonl")), lines[..at].join("\n") + "\n")
                .unwrap();
            let mut resumed = crashed_store.open(&id).unwrap();
            let before = resumed.messages().to_vec();
            resumed.repair().unwrap();
            assert!(resumed.projection().open_compaction().is_none());
            assert_eq!(resumed.messages(), &before[..], "repair changed the history at line {at}");
            assert_provider_valid(resumed.messages());
            checked += 1;
        }
    }
    assert!(checked >= 4, "{checked}");
}

/// A turn (which may compact) and a compaction can be spawned on a multi-threaded
/// runtime: their futures are `Send`.
#[test]
fn turn_and_compaction_futures_are_send() {
    fn send<T: Send>(_: T) {}
    let model = Windowed::new(reading_script(), 8000);
    let agent = agent(model, AgentConfig::default());
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::default();
    let cancel = CancellationToken::new();
    send(agent.run_turn(&mut session, &ctx, "x", &NullSink, &cancel));
    send(agent.compact(&mut session, &ctx, None, &NullSink, &cancel));
}

fn unwindowed_agent(model: ScriptedModel) -> Agent {
    Agent::builder(model).tool(BigRead).tool(Write).config(AgentConfig::default()).build()
}

/// Issue 32: `/compact` with the window unknown (a custom server without
/// `context_window`) took the context in use as the window, so no summary could fit and
/// the older steps were dropped. Now a window is assumed that leaves the summary room.
#[tokio::test]
async fn compact_with_an_unknown_window_summarizes() {
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path": "a.txt"}"#),
        reply().call("read_file", r#"{"path": "b.txt"}"#),
        reply().text("read both"),
        reply().text("Read a.txt and b.txt; both are lorem ipsum."),
    ]);
    let agent = unwindowed_agent(model);
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::default();
    let cancel = CancellationToken::new();
    agent.run_turn(&mut session, &ctx, TASK, &NullSink, &cancel).await.unwrap();
    assert_eq!(agent.context_usage(&session, &ctx).window, None);
    let messages_before = session.messages().len();
    let end = agent.compact(&mut session, &ctx, None, &NullSink, &cancel).await.unwrap().unwrap();
    assert_eq!((end.outcome, end.failure.as_deref()), (CompactionOutcome::Compacted, None));
    assert!(end.summary.contains("Read a.txt and b.txt"), "{}", end.summary);
    let messages = session.messages();
    assert!(messages.len() < messages_before, "{messages:?}");
    assert!(first_user_text(messages).starts_with(SUMMARY_MARKER));
    assert_provider_valid(session.messages());
}

/// A compaction the user asks for whose summary fails drops nothing: the conversation
/// stays as it was and the log says why.
#[tokio::test]
async fn a_compaction_asked_for_whose_summary_fails_changes_nothing_and_says_why() {
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path": "a.txt"}"#),
        reply().call("read_file", r#"{"path": "b.txt"}"#),
        reply().text("read both"),
        reply().fail(ModelError::new(ModelErrorKind::InvalidRequest, "the request was refused")),
    ]);
    let agent = unwindowed_agent(model);
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::default();
    let cancel = CancellationToken::new();
    agent.run_turn(&mut session, &ctx, TASK, &NullSink, &cancel).await.unwrap();
    let messages = session.messages().to_vec();
    let end = agent.compact(&mut session, &ctx, None, &NullSink, &cancel).await.unwrap().unwrap();
    assert_eq!(end.outcome, CompactionOutcome::Aborted);
    let failure = end.failure.unwrap_or_default();
    assert!(failure.contains("the summary request failed: the request was refused"), "{failure}");
    assert_eq!(session.messages(), &messages[..]);
}
