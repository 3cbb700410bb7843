#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A stuck turn starts again once from its task with a fresh context (`fresh_start`).

mod common;

use common::*;
use keel_agent::{Agent, AgentConfig, NullSink, SessionContext};
use keel_llm::{CancellationToken, Message, UserMessage};
use keel_session::{CompactionOutcome, CompactionReason, EventKind, JsonlStore, SessionStore, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

const ENVIRONMENT: &str = "<environment>\nFolder: .\nEntries: a.txt\n</environment>";

fn read(path: &str) -> keel_testkit::ReplyBuilder {
    reply().call("read_file", &format!(r#"{{"path": "{path}"}}"#))
}

fn agent(model: ScriptedModel, max_steps: u32) -> Agent {
    let config = AgentConfig { fresh_start: true, max_steps, ..AgentConfig::default() };
    Agent::builder(model).tool(FakeRead).config(config).build()
}

fn context() -> SessionContext {
    SessionContext { environment: Some(ENVIRONMENT.into()), ..SessionContext::default() }
}

/// The restart events of a session: (reason of each start, outcome of each end).
fn restarts(events: &[keel_session::Event]) -> (Vec<CompactionReason>, Vec<CompactionOutcome>) {
    let starts = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::CompactionStart(start) => Some(start.reason),
            _ => None,
        })
        .collect();
    let ends = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::CompactionEnd(end) => Some(end.outcome),
            _ => None,
        })
        .collect();
    (starts, ends)
}

#[tokio::test]
async fn a_turn_repeating_itself_starts_again_once_from_its_task() {
    let mut script: Vec<_> = (0..8).map(|_| read("a.txt")).collect();
    script.push(reply().text("a.txt holds its contents."));
    let model = ScriptedModel::new(script);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let ctx = context();
    ctx.tool_state.with(|seen: &mut Vec<String>| seen.push("a.txt".into()));
    let outcome = agent(model.clone(), 50)
        .run_turn(&mut session, &ctx, "What is in a.txt?", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed, "{:?}", outcome.message);
    assert_eq!(outcome.final_text, "a.txt holds its contents.");
    assert_eq!(outcome.steps, 9);
    // The eighth call was refused as a repeat; the ninth request starts from the task alone.
    let requests = model.requests();
    assert_eq!(requests.len(), 9);
    let fresh = format!(
        "{ENVIRONMENT}\n\nWhat is in a.txt?\n\n(A first attempt at this request stopped without finishing: it \
made the same calls over and over. This is a fresh start. It wrote and edited no file. Look at a file's \
current content before you change it.)"
    );
    assert_eq!(requests[8].messages, vec![Message::User(UserMessage::text(fresh))]);
    // The session's tool state stays: hooks keep their memory of the turn there too.
    assert_eq!(ctx.tool_state.with(|seen: &mut Vec<String>| seen.clone()), vec!["a.txt".to_owned()]);
    let events = store.read(session.id()).unwrap();
    assert_eq!(restarts(&events), (vec![CompactionReason::Restart], vec![CompactionOutcome::Restarted]));
    // The log derives what the model saw, live and after reopening.
    let live = session.messages().to_vec();
    let id = session.id().to_owned();
    drop(session);
    let reopened = store.open(&id).unwrap();
    assert_eq!(reopened.messages(), live);
    assert_eq!(reopened.messages()[..1], requests[8].messages[..]);
    assert_provider_valid(&live);
}

/// Arguments of [`FakeWrite`].
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WriteArgs {
    /// File path.
    path: String,
    /// Content.
    #[allow(dead_code)]
    content: String,
}

/// A write that succeeds without writing.
struct FakeWrite;

impl keel_agent::Tool for FakeWrite {
    type Args = WriteArgs;
    fn name(&self) -> &str {
        "save_note"
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
    async fn call(
        &self,
        args: WriteArgs,
        _ctx: keel_agent::ToolContext,
    ) -> Result<keel_agent::ToolOutput, keel_agent::ToolError> {
        Ok(keel_agent::ToolOutput::text(format!("wrote {}", args.path)))
    }
}

/// Records the task each stopping turn reports.
#[derive(Default)]
struct Tasks(std::sync::Mutex<Vec<String>>);

impl keel_agent::Hooks for Tasks {
    fn turn_stopping<'a>(
        &'a self,
        state: keel_agent::TurnStopping<'a>,
    ) -> futures::future::BoxFuture<'a, Option<keel_agent::Nudge>> {
        self.0.lock().unwrap().push(state.task().to_owned());
        Box::pin(async { None })
    }
}

#[tokio::test]
async fn hooks_see_the_users_request_after_a_fresh_start_not_the_note() {
    let mut script: Vec<_> = (0..8).map(|_| read("a.txt")).collect();
    script.push(reply().text("It holds its contents."));
    let config = AgentConfig { fresh_start: true, ..AgentConfig::default() };
    let tasks = std::sync::Arc::new(Tasks::default());
    let agent = Agent::builder(ScriptedModel::new(script))
        .tool(FakeRead)
        .config(config)
        .hooks_shared(tasks.clone())
        .build();
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = context();
    agent
        .run_turn(&mut session, &ctx, "What is in a.txt?", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(*tasks.0.lock().unwrap(), vec!["What is in a.txt?".to_owned()]);
}

#[tokio::test]
async fn a_turn_out_of_steps_starts_again_with_half_its_steps_and_only_once() {
    // Two steps, a fresh start, one more step (half of two), then the limit for good.
    let model = ScriptedModel::new([read("a.txt"), read("b.txt"), read("c.txt"), read("d.txt")]);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let outcome = agent(model.clone(), 2)
        .run_turn(&mut session, &context(), "Read the files.", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::MaxSteps);
    assert_eq!(outcome.steps, 3);
    assert_eq!(outcome.tool_calls, 3);
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let Some(Message::User(fresh)) = requests[2].messages.first() else {
        panic!("{:?}", requests[2].messages)
    };
    assert!(fresh.content.contains("Read the files.\n\n(A first attempt"), "{}", fresh.content);
    assert!(fresh.content.contains("it used all 2 steps."), "{}", fresh.content);
    assert_eq!(requests[2].messages.len(), 1);
    let events = store.read(session.id()).unwrap();
    assert_eq!(restarts(&events), (vec![CompactionReason::Restart], vec![CompactionOutcome::Restarted]));
    assert_provider_valid(session.messages());
}

/// Issue 29: the note knew write_file and edit_file by name, so after change_file it said
/// "It wrote and edited no file". A tool of any name that declares it writes a file is
/// named (`save_note` here).
#[tokio::test]
async fn the_note_names_the_files_the_first_attempt_changed() {
    let model = ScriptedModel::new([
        reply().call("finish", "{}"),
        reply().call("save_note", r#"{"path": "b.txt", "content": "x"}"#),
        reply().text("done"),
    ]);
    let config = AgentConfig { fresh_start: true, max_steps: 2, ..AgentConfig::default() };
    let agent = Agent::builder(model.clone()).tool(FakeRead).tool(FakeWrite).config(config).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &context(), "Write b.txt.", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let Some(Message::User(fresh)) = model.requests()[2].messages.first().cloned() else { panic!() };
    assert!(
        fresh.content.contains("It wrote or edited `b.txt`; they are as it left them, so look at them first"),
        "{}",
        fresh.content
    );
}

#[tokio::test]
async fn without_fresh_start_a_stuck_turn_ends_as_before() {
    let mut script: Vec<_> = (0..8).map(|_| read("a.txt")).collect();
    script.push(reply().text("stuck"));
    let model = ScriptedModel::new(script);
    let agent = Agent::builder(model.clone()).tool(FakeRead).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let outcome =
        agent.run_turn(&mut session, &context(), "go", &NullSink, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Looping);
    assert_eq!(restarts(&store.read(session.id()).unwrap()), (vec![], vec![]));
}
