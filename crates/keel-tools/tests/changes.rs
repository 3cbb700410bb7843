#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The "nothing changed" rule in the loop.

use std::sync::Arc;

use keel_agent::{Agent, NullSink, Session, SessionContext};
use keel_llm::{CancellationToken, Message};
use keel_testkit::{ScriptedModel, intent, reply};
use keel_tools::changes::{ChangeCheck, NOTHING_CHANGED};
use keel_tools::{ToolsConfig, builtin};

fn user_messages(session: &Session) -> Vec<String> {
    session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::User(u) => Some(u.content.clone()),
            _ => None,
        })
        .collect()
}

/// An agent that reads the task's intent and has ChangeCheck, with `tools`.
fn checked_agent(model: &ScriptedModel, tools: keel_agent::ToolRegistry) -> Agent {
    let config = keel_agent::AgentConfig { read_intent: true, ..keel_agent::AgentConfig::default() };
    Agent::builder(model.clone()).tools(tools).config(config).hooks(ChangeCheck).build()
}

#[tokio::test]
async fn a_change_task_that_changed_nothing_is_asked_once_to_make_the_change() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "port = 3000\n").unwrap();
    let model = ScriptedModel::new([
        intent("change", false, false),
        intent("change", false, false),
        reply().text("I changed the port to 8080."),
        reply().call("write_file", r#"{"path": "b.txt", "content": "new"}"#),
        reply().text("Done now."),
        // A second turn that claims success again is asked again (once per turn).
        intent("change", false, false),
        intent("change", false, false),
        reply().text("Changed."),
        reply().text("Really."),
    ]);
    let agent = checked_agent(&model, builtin(Arc::new(ToolsConfig::default())));
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let ctx = SessionContext::new(ws.path());
    let outcome = agent
        .run_turn(&mut session, &ctx, "Set the port in a.txt to 8080", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.final_text, "Done now.");
    let asked: Vec<String> =
        user_messages(&session).into_iter().filter(|m| m.starts_with(NOTHING_CHANGED)).collect();
    assert_eq!(
        asked,
        vec![format!(
            "{NOTHING_CHANGED} \"Set the port in a.txt to 8080\". Make the change now with your tools (a file tool or the shell), then check it."
        )]
    );
    let outcome = agent
        .run_turn(&mut session, &ctx, "Now set it to 9090", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!((outcome.steps, outcome.final_text.as_str()), (2, "Really."));
}

/// Regression (count-errors-to-file, embedded route, local-spot-z1): a task read as
/// wanting an answer and a file ran `grep -c` and answered that the count was saved,
/// writing nothing. A task that wants both is asked to make its change too.
#[tokio::test]
async fn a_task_that_wants_an_answer_and_a_file_is_asked_for_the_file() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("server.log"), "ERROR a\nINFO b\n").unwrap();
    let model = ScriptedModel::new([
        intent("both", false, false),
        intent("both", false, false),
        reply().text("There is 1 ERROR line; I saved it in count.txt."),
        reply().call("write_file", r#"{"path": "count.txt", "content": "1\n"}"#),
        reply().text("There is 1 ERROR line, saved in count.txt."),
    ]);
    let agent = checked_agent(&model, builtin(Arc::new(ToolsConfig::default())));
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let task = "How many ERROR lines are in server.log? Also save the number in count.txt.";
    let outcome = agent
        .run_turn(&mut session, &SessionContext::new(ws.path()), task, &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    let asked: Vec<String> =
        user_messages(&session).into_iter().filter(|m| m.starts_with(NOTHING_CHANGED)).collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(outcome.final_text, "There is 1 ERROR line, saved in count.txt.");
    assert_eq!(std::fs::read_to_string(ws.path().join("count.txt")).unwrap(), "1\n");
}

#[tokio::test]
async fn questions_are_left_alone() {
    let ws = tempfile::tempdir().unwrap();
    // A question, in any language, as the model reads it.
    let model = ScriptedModel::new([intent("answer", false, false), reply().text("main")]);
    let agent = checked_agent(&model, builtin(Arc::new(ToolsConfig::default())));
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::new(ws.path()),
            "现在是哪个分支？",
            &NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.steps, 1);
}

/// Regression (en-blank-lines, full-p3): `sed -i` had changed todo.txt; change_file with
/// the same sed command as its words came back the same, and "was not changed … call
/// change_file again" had the model repeat it twice, then answer that todo.txt was not
/// changed. A file changed earlier in the turn, by any tool, that the editor gives back
/// as it is already has what the words ask; in a later turn it is an error as before.
#[tokio::test]
async fn a_file_changed_earlier_in_the_turn_that_comes_back_the_same_needs_no_change() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("todo.txt"), "a\n\n\nb\n").unwrap();
    let call = r#"{"path": "todo.txt", "change": "sed -i '/^$/d' todo.txt"}"#;
    let same = "```\na\nb\n```";
    let model = ScriptedModel::new([
        intent("change", false, false),
        intent("change", false, false),
        reply().call("read_file", r#"{"path": "todo.txt"}"#),
        reply().call("write_file", r#"{"path": "todo.txt", "content": "a\nb\n"}"#),
        reply().call("change_file", call),
        reply().text(same),
        reply().text(same),
        reply().text("Done."),
        intent("change", false, false),
        intent("change", false, false),
        reply().call("change_file", call),
        reply().text(same),
        reply().text(same),
        reply().text("Done again."),
        reply().text("Really."),
    ]);
    let config = Arc::new(ToolsConfig::default());
    let mut tools = builtin(Arc::clone(&config));
    tools.register(keel_tools::change::ChangeFile::new(config, Arc::new(model.clone())));
    let agent = checked_agent(&model, tools);
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let ctx = SessionContext::new(ws.path());
    for task in ["Delete the extra blank lines in todo.txt", "Delete them again"] {
        agent.run_turn(&mut session, &ctx, task, &NullSink, &CancellationToken::new()).await.unwrap();
    }
    let results: Vec<(bool, String)> = session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) if r.name == "change_file" => Some((r.is_error, r.content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        results[0],
        (
            false,
            "No change needed: `todo.txt` was already changed earlier in this task (by another tool or a command), and it already has what your words ask for. Do not repeat it; go on with the next step of the task.".to_owned()
        )
    );
    assert!(results[1].0 && results[1].1.contains("came back the same as the old"), "{:?}", results[1]);
}
