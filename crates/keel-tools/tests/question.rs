#![allow(clippy::unwrap_used, clippy::expect_used)]
//! "A question gets an answer" in the loop: during a question, changes are refused with
//! a reason; reading, shell and the next turn's change are not.

use std::sync::Arc;

use keel_agent::{Agent, NullSink, Session, SessionContext};
use keel_llm::{CancellationToken, Message, ToolResultMessage};
use keel_testkit::{ScriptedModel, intent, reply};

fn reading_intent() -> keel_agent::AgentConfig {
    keel_agent::AgentConfig { read_intent: true, ..keel_agent::AgentConfig::default() }
}
use keel_tools::question::{QUESTION_NOT_CHANGE, QuestionGuard};
use keel_tools::{ToolsConfig, builtin};

fn results(session: &Session) -> Vec<(String, bool)> {
    session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(ToolResultMessage { name, is_error, .. }) => Some((name.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_question_cannot_change_files_but_the_next_change_request_can() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("codec.py"), "def parse_header(h):\n    return h\n").unwrap();
    let model = ScriptedModel::new([
        intent("answer", false, false),
        intent("answer", false, false),
        reply().call("write_file", r#"{"path": "parse_header.py", "content": "def parse_header(): pass"}"#),
        reply().call("read_file", r#"{"path": "codec.py"}"#),
        reply().call("shell", r#"{"command": "grep -l parse_header *.py"}"#),
        reply().text("codec.py"),
        // The next turn asks for a change: writing is offered and allowed again.
        intent("change", false, false),
        intent("change", false, false),
        reply().call("write_file", r#"{"path": "notes.txt", "content": "codec.py"}"#),
        reply().text("Written."),
    ]);
    let tools = builtin(Arc::new(ToolsConfig::default()));
    let agent = Agent::builder(model.clone())
        .tools(tools)
        .config(reading_intent())
        .hooks(QuestionGuard::new())
        .build();
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let ctx = SessionContext::new(ws.path());
    // A question in any language: what it wants is the model's reading, not its words.
    let task = "哪个文件定义了 parse_header？";
    let outcome =
        agent.run_turn(&mut session, &ctx, task, &NullSink, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.final_text, "codec.py");
    assert!(!ws.path().join("parse_header.py").exists());
    assert_eq!(
        results(&session),
        vec![("write_file".into(), true), ("read_file".into(), false), ("shell".into(), false)]
    );
    // The question's requests offer only reading tools and shell; a change tool the model
    // names anyway is not one of them.
    let offered = |n: usize| model.requests()[n].tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(offered(2), ["shell", "read_file", "list_files", "grep", "glob", "update_plan"]);
    let refusal = session.messages().iter().find_map(|m| match m {
        Message::ToolResult(r) if r.is_error => Some(r.content.clone()),
        _ => None,
    });
    assert_eq!(
        refusal.as_deref(),
        Some(
            "Unknown tool `write_file`. Available tools: shell, read_file, list_files, grep, glob, update_plan."
        )
    );

    let outcome = agent
        .run_turn(&mut session, &ctx, "Write that path into notes.txt", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.final_text, "Written.");
    assert_eq!(std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(), "codec.py");
    assert_eq!(
        offered(8),
        ["shell", "read_file", "write_file", "edit_file", "list_files", "grep", "glob", "update_plan"]
    );
}

#[tokio::test]
async fn a_question_that_sees_every_tool_still_cannot_change_files() {
    // Tools offered by the session, past the hooks' narrowing (as a server-side model
    // that ignores the list might call them): the guard still refuses with its reason.
    let ws = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new([
        intent("answer", false, false),
        intent("answer", false, false),
        reply().call("write_file", r#"{"path": "parse_header.py", "content": "def parse_header(): pass"}"#),
        reply().text("codec.py"),
    ]);
    let guard = QuestionGuard::new();
    let tools = builtin(Arc::new(ToolsConfig::default()));
    let hooks = keel_agent::HookChain::new().with(Unnarrowed(guard));
    let agent = Agent::builder(model.clone()).tools(tools).config(reading_intent()).hooks(hooks).build();
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let task = "Which file defines the function parse_header? Answer with its path.";
    agent
        .run_turn(&mut session, &SessionContext::new(ws.path()), task, &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert!(!ws.path().join("parse_header.py").exists());
    let refusal = session.messages().iter().find_map(|m| match m {
        Message::ToolResult(r) if r.is_error => Some(r.content.clone()),
        _ => None,
    });
    assert_eq!(
        refusal.as_deref(),
        Some(
            format!(
                "{QUESTION_NOT_CHANGE} The task: \"{task}\". Find the answer by reading (read_file, grep, list_files or shell), then answer it."
            )
            .as_str()
        )
    );
}

/// The guard's refusals without its narrowing of the tools.
struct Unnarrowed(QuestionGuard);

impl keel_agent::Hooks for Unnarrowed {
    fn before_tool_call<'a>(
        &'a self,
        request: keel_agent::ToolCallRequest<'a>,
    ) -> futures::future::BoxFuture<'a, keel_agent::HookDecision> {
        self.0.before_tool_call(request)
    }

    fn turn_started<'a>(&'a self, state: keel_agent::TurnStarted<'a>) -> futures::future::BoxFuture<'a, ()> {
        self.0.turn_started(state)
    }
}

#[tokio::test]
async fn the_task_is_read_after_the_environment_block() {
    let ws = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new([
        intent("answer", false, false),
        intent("answer", false, false),
        reply().call("write_file", r#"{"path": "a.txt", "content": "x"}"#),
        reply().text("No file changed."),
    ]);
    let agent = Agent::builder(model.clone())
        .tools(builtin(Arc::new(ToolsConfig::default())))
        .config(reading_intent())
        .hooks(QuestionGuard::new())
        .build();
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let mut ctx = SessionContext::new(ws.path());
    // The block comes first and joins the prompt in one message; only the prompt counts.
    ctx.environment = Some("<environment>\nProject folder: ws\nRename files here.\n</environment>".into());
    agent
        .run_turn(&mut session, &ctx, "What is in this folder?", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(results(&session), vec![("write_file".into(), true)]);
    assert!(!ws.path().join("a.txt").exists());
    // The intent is read from the request alone, not the environment block.
    let asked = &model.requests()[0];
    let Message::User(user) = &asked.messages[0] else { panic!("{:?}", asked.messages) };
    assert!(user.content.contains("What is in this folder?") && !user.content.contains("Rename files"));
}
