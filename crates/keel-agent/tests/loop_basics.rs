#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The loop end to end with the scripted model: history, finish reasons, usage, events.

mod common;

use common::*;
use keel_agent::{Agent, NullSink, RecordedEvent, RecordingSink, SessionContext};
use keel_llm::{CancellationToken, ContentBlock, FinishReason, Message, ToolChoice, Usage, UserMessage};
use keel_session::{EventKind, JsonlStore, SessionStore, TurnEndReason, derive_messages};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

#[tokio::test]
async fn five_step_task_requests_are_exactly_the_derived_history() {
    let model = ScriptedModel::new([
        reply().text("Reading the index first.").call("read_file", r#"{"path":"index.txt"}"#),
        reply()
            .call("read_file", r#"{"path":"a.txt"}"#)
            .call("read_file", r#"{"path":"b.txt"}"#)
            .call("read_file", r#"{"path":"c.txt"}"#),
        reply().thinking("b looks relevant").call("read_file", r#"{"path":"b2.txt"}"#),
        reply().call("read_file", r#"{"path":"missing.txt"}"#),
        reply().text("All files read: a, b, c.").usage(300, 20),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/work").unwrap();
    let agent = Agent::builder(model.clone()).system_prompt("Be precise.").tool(FakeRead).build();

    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::default(),
            "Summarize the files",
            &NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(outcome.final_text, "All files read: a, b, c.");
    assert_eq!(outcome.steps, 5);
    assert_eq!(outcome.tool_calls, 6);
    assert_eq!(outcome.usage, Usage { input_tokens: 700, output_tokens: 60, ..Usage::default() });

    let events = store.read(session.id()).unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 5);
    // Each request carries exactly the history derived from the log up to its step/start.
    let rebuilt = requests_from_log(&events);
    assert_eq!(requests.iter().map(|r| r.messages.clone()).collect::<Vec<_>>(), rebuilt);
    for request in &requests {
        assert_eq!(request.system, "Be precise.");
        assert_eq!(request.tool_choice, ToolChoice::Auto);
        // The session is the conversation's cache key (Responses `prompt_cache_key`).
        assert_eq!(request.cache_key.as_deref(), Some(session.id()));
        assert_eq!(request.tools.len(), 1);
    }
    assert_eq!(session.messages(), derive_messages(&events).unwrap().as_slice());
    assert_provider_valid(session.messages());
    assert_eq!(
        results(session.messages()).iter().map(|r| (r.1.as_str(), r.2)).collect::<Vec<_>>(),
        vec![
            ("contents of index.txt", false),
            ("contents of a.txt", false),
            ("contents of b.txt", false),
            ("contents of c.txt", false),
            ("contents of b2.txt", false),
            ("missing.txt does not exist. Did you mean notes.txt?", true),
        ]
    );
    // The header is logged once, before the first step.
    let headers = events.iter().filter(|e| matches!(e.kind, EventKind::RequestHeader(_))).count();
    assert_eq!(headers, 1);
}

#[tokio::test]
async fn content_decides_control_flow_not_the_finish_reason() {
    let model = ScriptedModel::new([
        // Calls with finish reason `stop` still run.
        reply().call("read_file", r#"{"path":"x"}"#).finish(FinishReason::Stop),
        // No calls with finish reason `tool_use` ends the turn.
        reply().text("done").finish(FinishReason::ToolUse),
    ]);
    let agent = Agent::builder(model.clone()).tool(FakeRead).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(outcome.steps, 2);
    assert_eq!(results(session.messages()), vec![("call_read_file_0".into(), "contents of x".into(), false)]);
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn sink_sees_every_logged_event_and_tool_lines() {
    let model = ScriptedModel::new([reply().call("read_file", r#"{"path":"x"}"#), reply().text("ok")]);
    let agent = Agent::builder(model).tool(FakeRead).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let sink = RecordingSink::new();
    agent
        .run_turn(&mut session, &SessionContext::default(), "go", &sink, &CancellationToken::new())
        .await
        .unwrap();

    let recorded = sink.events();
    let logged: Vec<_> = recorded
        .iter()
        .filter_map(|e| match e {
            RecordedEvent::Logged(event) => Some(event.clone()),
            _ => None,
        })
        .collect();
    let on_disk = store.read(session.id()).unwrap();
    assert_eq!(logged, on_disk[1..].to_vec(), "every appended event reaches the sink");
    let finished: Vec<_> = recorded
        .iter()
        .filter_map(|e| match e {
            RecordedEvent::ToolFinished { step, call, result, .. } => {
                Some((*step, call.name.clone(), result.content.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(finished, vec![(1, "read_file".to_owned(), "contents of x".to_owned())]);
    assert!(
        recorded
            .iter()
            .any(|e| matches!(e, RecordedEvent::Model(keel_llm::ModelEvent::TextDelta(t)) if t == "ok"))
    );
}

#[tokio::test]
async fn usage_is_summed_per_turn_and_per_session() {
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path":"x"}"#).usage(100, 10),
        reply().text("a").usage(150, 5),
        reply().text("b").usage(200, 7),
    ]);
    let agent = Agent::builder(model).tool(FakeRead).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let first = agent
        .run_turn(&mut session, &SessionContext::default(), "one", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    let second = agent
        .run_turn(&mut session, &SessionContext::default(), "two", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(first.usage, Usage { input_tokens: 250, output_tokens: 15, ..Usage::default() });
    assert_eq!(second.usage, Usage { input_tokens: 200, output_tokens: 7, ..Usage::default() });
    assert_eq!(second.turn, 2);
    assert_eq!(
        session.projection().usage(),
        Usage { input_tokens: 450, output_tokens: 22, ..Usage::default() }
    );
}

#[tokio::test]
async fn a_concluding_result_ends_the_turn_after_its_step() {
    let model = ScriptedModel::new([reply().call("finish", "{}"), reply().text("never requested")]);
    let agent = Agent::builder(model.clone()).tool(Finish).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!((outcome.reason, outcome.steps), (TurnEndReason::Completed, 1));
    assert_eq!(model.remaining(), 1);
}

#[tokio::test]
async fn model_errors_end_the_turn_and_keep_the_partial_reply() {
    let error = keel_llm::ModelError::new(keel_llm::ModelErrorKind::Auth, "401: set DEEPSEEK_API_KEY");
    let model = ScriptedModel::new([reply().text("I will start by").fail(error), reply().text("recovered")]);
    let agent = Agent::builder(model).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Error);
    assert!(outcome.message.as_deref().unwrap().contains("DEEPSEEK_API_KEY"));
    match &session.messages()[1] {
        Message::Assistant(partial) => {
            assert!(partial.interrupted);
            assert_eq!(partial.content, vec![ContentBlock::Text { text: "I will start by".into() }]);
        }
        other => panic!("{other:?}"),
    }
    let next = agent
        .run_turn(&mut session, &SessionContext::default(), "again", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(next.reason, TurnEndReason::Completed);
    assert_provider_valid(session.messages());
}

#[tokio::test]
async fn changing_the_model_logs_a_new_request_header() {
    let model = ScriptedModel::new([reply().text("a"), reply().text("b"), reply().text("c")]);
    let agent = Agent::builder(model.clone()).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    agent
        .run_turn(&mut session, &SessionContext::default(), "one", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    agent
        .run_turn(&mut session, &SessionContext::default(), "two", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    let renamed = ScriptedModel::new([reply().text("c")]);
    renamed.set_model_name("bigger");
    let switched = SessionContext::default().model(std::sync::Arc::new(renamed));
    agent.run_turn(&mut session, &switched, "three", &NullSink, &CancellationToken::new()).await.unwrap();
    let models: Vec<String> = store
        .read(session.id())
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::RequestHeader(h) => Some(h.model),
            _ => None,
        })
        .collect();
    assert_eq!(models, vec!["script", "bigger"]);
    assert_eq!(session.messages()[2], Message::User(UserMessage::text("two")));
}

#[tokio::test]
async fn tool_first_requires_a_call_in_steps_that_answer_user_input() {
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path":"a"}"#),
        reply().text("done?"),
        reply().call("read_file", r#"{"path":"b"}"#),
        reply().text("done"),
        reply().text("second turn"),
    ]);
    let config = keel_agent::AgentConfig { tool_first: true, ..keel_agent::AgentConfig::default() };
    let hooks = OnceMore::new("finish it");
    let agent = Agent::builder(model.clone()).config(config).tool(FakeRead).hooks(hooks).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::default();
    agent.run_turn(&mut session, &ctx, "go", &NullSink, &CancellationToken::new()).await.unwrap();
    agent.run_turn(&mut session, &ctx, "again", &NullSink, &CancellationToken::new()).await.unwrap();
    let choices: Vec<ToolChoice> = model.requests().iter().map(|r| r.tool_choice).collect();
    // prompt, after a result, after the hook's request, after a result; the next prompt.
    assert_eq!(
        choices,
        vec![
            ToolChoice::Required,
            ToolChoice::Auto,
            ToolChoice::Required,
            ToolChoice::Auto,
            ToolChoice::Required
        ]
    );
    // Without tools there is nothing to require.
    let bare = ScriptedModel::new([reply().text("hi")]);
    let config = keel_agent::AgentConfig { tool_first: true, ..keel_agent::AgentConfig::default() };
    let agent = Agent::builder(bare.clone()).config(config).build();
    agent.run_turn(&mut session, &ctx, "hi", &NullSink, &CancellationToken::new()).await.unwrap();
    assert_eq!(bare.requests()[0].tool_choice, ToolChoice::Auto);
}

#[tokio::test]
async fn call_ids_reused_by_a_server_across_steps_are_made_unique_in_the_session() {
    // Servers without ids of their own number calls from call_0 in every reply; spill
    // files and results are keyed by id, so step 2's call must not reuse step 1's id.
    let model = ScriptedModel::new([
        reply().call_id("call_0", "read_file", r#"{"path":"a"}"#),
        reply().call_id("call_0", "read_file", r#"{"path":"b"}"#),
        reply().text("done"),
    ]);
    let agent = Agent::builder(model.clone()).tool(FakeRead).build();
    let mut session = keel_agent::Session::in_memory("/w");
    agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    let ids: Vec<String> = results(session.messages()).into_iter().map(|r| r.0).collect();
    assert_eq!(ids, vec!["call_0", "call_0_2"]);
    assert_provider_valid(session.messages());
}

/// Issue 29: what a task wants is read by the model at the turn's start (one forced
/// `classify` call), logged with its request (`model/aside`, replayable) and result
/// (`turn/intent`); the finish check acts on it, and its nudge is logged with the reason.
#[tokio::test]
async fn the_intent_is_read_logged_and_acted_on() {
    let model = ScriptedModel::new([
        reply()
            .call("classify", r#"{"change": true, "question": false, "check": false, "layout": false}"#)
            .usage(40, 9),
        reply()
            .call("classify", r#"{"question": false, "change": true, "check": false, "layout": false}"#)
            .usage(40, 9),
        reply().text("Change it to:\n```python\nx = 2\n```"),
        reply().text("ok"),
    ]);
    let config = keel_agent::AgentConfig { read_intent: true, ..keel_agent::AgentConfig::default() };
    let agent = Agent::builder(model.clone())
        .tool(FakeRead)
        .config(config)
        .hooks(keel_agent::FinishCheck::new())
        .build();
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::new("/w").environment("<environment>\nfolder /w\n</environment>");
    let sink = RecordingSink::new();
    let outcome = agent
        .run_turn(&mut session, &ctx, "Set x to 2 in a.py", &sink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.steps, 2);
    assert!(outcome.usage.input_tokens >= 80, "the intent requests count in the turn: {:?}", outcome.usage);
    let requests = model.requests();
    // The first request reads the intent: the task alone, one tool, a call required.
    let classify = &requests[0];
    assert_eq!(classify.tool_choice, ToolChoice::Required);
    assert_eq!(classify.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["classify"]);
    assert_eq!(classify.temperature, Some(0.0));
    // It replays from the log exactly.
    let events = sink.logged();
    let aside = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ModelAside(aside) => Some(aside.clone()),
            _ => None,
        })
        .expect("a model/aside event");
    assert_eq!(
        (aside.system.as_str(), &classify.messages[..], &aside.tools[..]),
        (
            classify.system.as_str(),
            &[Message::User(UserMessage::text(aside.prompt.clone()))][..],
            &classify.tools[..]
        )
    );
    assert!(aside.prompt.contains("Set x to 2 in a.py") && !aside.prompt.contains("<environment>"));
    assert_eq!(aside.reply.as_ref().map(|r| r.usage.input_tokens), Some(40));
    let intent = events.iter().find_map(|e| match &e.kind {
        EventKind::TurnIntent(intent) => Some(*intent),
        _ => None,
    });
    assert_eq!(intent.and_then(|i| i.wants), Some(keel_session::Wants::Change));
    // The conversation itself never sees the aside.
    let nudge = match &requests[3].messages[2] {
        Message::User(user) => user.content.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(requests[2].messages.len(), 1);
    assert!(nudge.contains("The task: \"Set x to 2 in a.py\"."), "{nudge}");
    assert!(nudge.starts_with("You described a change instead of making it."), "{nudge}");
    let reason = events.iter().find_map(|e| match &e.kind {
        EventKind::UserMessage(input) => input.reason.clone(),
        _ => None,
    });
    assert!(reason.is_some_and(|r| r.starts_with("finish_check/described_not_done")));
    assert_eq!(
        session.projection().usage().input_tokens,
        outcome.usage.input_tokens,
        "asides count in totals"
    );
}

/// Without a reading of the intent, the rules that need it stay silent: the same answer
/// ends the turn.
#[tokio::test]
async fn without_an_intent_the_finish_check_asks_nothing() {
    let model = ScriptedModel::new([reply().text("Change it to:\n```python\nx = 2\n```")]);
    let agent = Agent::builder(model.clone()).tool(FakeRead).hooks(keel_agent::FinishCheck::new()).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::new("/w"),
            "Set x to 2",
            &NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.steps, 1);
}

/// The tools of a turn are read once when it starts: a session may offer its own (e.g.
/// with MCP tools that joined late), changed only between turns.
#[tokio::test]
async fn a_session_offers_its_own_tools_fixed_for_each_turn() {
    let model = ScriptedModel::new([
        reply().call("finish", "{}"),
        reply().text("first"),
        reply().call("finish", "{}"),
    ]);
    let agent = Agent::builder(model.clone()).tool(FakeRead).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let mut tools = agent.tools().clone();
    let mut ctx = SessionContext::default();
    let cancel = CancellationToken::new();
    // The agent's tools: `finish` is unknown.
    agent.run_turn(&mut session, &ctx, "one", &NullSink, &cancel).await.unwrap();
    tools.register(Finish);
    ctx.tools = Some(tools);
    let outcome = agent.run_turn(&mut session, &ctx, "two", &NullSink, &cancel).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let names = |i: usize| model.requests()[i].tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(0), ["read_file"]);
    assert_eq!(names(2), ["read_file", "finish"]);
    let results = results(session.messages());
    assert!(results[0].1.starts_with("Unknown tool `finish`"), "{:?}", results[0]);
    assert_eq!(results[1], ("call_finish_0_2".into(), "final answer delivered".into(), false));
    // The request header follows the session's tools.
    assert_eq!(session.projection().request_header().unwrap().tools.len(), 2);
}

#[tokio::test]
async fn with_always_call_every_step_calls_and_a_concluding_tool_answers() {
    /// Arguments of the answer tool.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct AnswerArgs {
        text: String,
    }
    struct Answer;
    impl keel_agent::Tool for Answer {
        type Args = AnswerArgs;
        fn name(&self) -> &str {
            "answer"
        }
        fn description(&self) -> &str {
            "Final answer."
        }
        async fn call(
            &self,
            args: AnswerArgs,
            _ctx: keel_agent::ToolContext,
        ) -> Result<keel_agent::ToolOutput, keel_agent::ToolError> {
            Ok(keel_agent::ToolOutput::text(args.text).concluding())
        }
    }
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path":"a"}"#),
        reply().call("answer", r#"{"text":"a says hello"}"#),
    ]);
    let config = keel_agent::AgentConfig { always_call: true, ..keel_agent::AgentConfig::default() };
    let agent = Agent::builder(model.clone()).config(config).tool(FakeRead).tool(Answer).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        (outcome.reason, outcome.final_text.as_str(), outcome.steps),
        (TurnEndReason::Completed, "a says hello", 2)
    );
    let choices: Vec<ToolChoice> = model.requests().iter().map(|r| r.tool_choice).collect();
    assert_eq!(choices, vec![ToolChoice::Required, ToolChoice::Required]);
    // A hook can still send a concluded turn back to work.
    let model = ScriptedModel::new([
        reply().call("answer", r#"{"text":"done"}"#),
        reply().call("read_file", r#"{"path":"a"}"#),
        reply().call("answer", r#"{"text":"really done"}"#),
    ]);
    let config = keel_agent::AgentConfig { always_call: true, ..keel_agent::AgentConfig::default() };
    let agent = Agent::builder(model.clone())
        .config(config)
        .tool(FakeRead)
        .tool(Answer)
        .hooks(OnceMore::new("check a first"))
        .build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "Look at a", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.final_text, "really done");
    assert_provider_valid(session.messages());
}

/// Issue 33, item 2: what hooks give the model (context for a prompt, context after a
/// call, a stop's request to go on) is logged user input from a hook, so every request is
/// still exactly the history derived from the log before its step; each hook's run is a
/// `hook/run` beside it.
#[tokio::test]
async fn requests_with_hook_input_are_exactly_the_derived_history() {
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path":"a.txt"}"#).call("read_file", r#"{"path":"b.txt"}"#),
        reply().text("a and b read."),
        reply().call("read_file", r#"{"path":"b.txt"}"#),
        reply().text("b checked."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/work").unwrap();
    let agent = Agent::builder(model.clone()).tool(FakeRead).hooks(UserLikeHooks::default()).build();
    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::default(),
            "Read a and b",
            &NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(outcome.final_text, "b checked.");

    let events = store.read(session.id()).unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests.iter().map(|r| r.messages.clone()).collect::<Vec<_>>(), requests_from_log(&events));
    let last_user = |i: usize| match requests[i].messages.last() {
        Some(Message::User(user)) => user.content.clone(),
        other => panic!("request {i} ends with {other:?}"),
    };
    assert_eq!(last_user(0), "Read a and b\n\nThe build is at v2.");
    assert_eq!(last_user(1), "b.txt is generated.");
    assert_eq!(last_user(2), "Stop hook feedback: check b.txt again");
    assert_eq!(last_user(3), "b.txt is generated.");
    // Each piece is user input from a hook, with the hook's reason.
    let from_hooks: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::UserMessage(input) if input.source == keel_session::InputSource::Hook => {
                input.reason.as_deref()
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        from_hooks,
        [
            "hook/UserPromptSubmit: version.sh",
            "hook/PostToolUse: gen.sh",
            "hook/Stop: again.sh",
            "hook/PostToolUse: gen.sh"
        ]
    );
    let runs: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::HookRun(run) => Some(run.event.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        runs,
        [
            "UserPromptSubmit",
            "PreToolUse",
            "PreToolUse",
            "PostToolUse",
            "Stop",
            "PreToolUse",
            "PostToolUse",
            "Stop"
        ]
    );
    assert_eq!(session.messages(), derive_messages(&events).unwrap().as_slice());
    assert_provider_valid(session.messages());
}

/// A changing tool that fails with the kind its path names (`.git/…`: a refusal on
/// principle; anything else: a mistake to fix).
struct FailingWrite;

impl keel_agent::Tool for FailingWrite {
    type Args = PathArgs;
    fn name(&self) -> &str {
        "write"
    }
    fn description(&self) -> &str {
        "Writes a file."
    }
    async fn call(
        &self,
        args: PathArgs,
        _ctx: keel_agent::ToolContext,
    ) -> Result<keel_agent::ToolOutput, keel_agent::ToolError> {
        let kind = match args.path.starts_with(".git/") {
            true => keel_agent::ToolErrorKind::GitInternals,
            false => keel_agent::ToolErrorKind::NotFound,
        };
        Err(keel_agent::ToolError::new(kind, format!("`{}` was not written", args.path)))
    }
}

/// Issue 29: the finish check learns from the loop what kind each failed call was
/// (`TurnStopping::failures`), so a refusal on principle (`.git`) is not answered with
/// "Fix the call … and make it again now"; a mistake still is.
#[tokio::test]
async fn the_finish_check_tells_a_refusal_from_a_mistake() {
    for (path, nudged) in [(".git/config", false), ("src/a.py", true)] {
        let model = ScriptedModel::new([
            reply()
                .call("classify", r#"{"change": true, "question": false, "check": false, "layout": false}"#),
            reply()
                .call("classify", r#"{"question": false, "change": true, "check": false, "layout": false}"#),
            reply().call("write", &format!(r#"{{"path":"{path}"}}"#)),
            reply().text("I could not do it."),
            reply().text("Still not."),
        ]);
        let config = keel_agent::AgentConfig { read_intent: true, ..keel_agent::AgentConfig::default() };
        let agent = Agent::builder(model.clone())
            .tool(FailingWrite)
            .config(config)
            .hooks(keel_agent::FinishCheck::new())
            .build();
        let mut session = keel_agent::Session::in_memory("/w");
        let outcome = agent
            .run_turn(
                &mut session,
                &SessionContext::new("/w"),
                "Change the setting",
                &NullSink,
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        let asked = session.messages().iter().any(|m| match m {
            Message::User(user) => user.content.starts_with("Your last tool call failed:"),
            _ => false,
        });
        assert_eq!((path, asked, outcome.steps), (path, nudged, if nudged { 3 } else { 2 }));
    }
}
