#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A rename left half done when the turn would end (issue 29, rename-across-modules).

use std::sync::Arc;

use keel_agent::{Agent, NullSink, Session, SessionContext};
use keel_llm::{CancellationToken, Message};
use keel_testkit::{ScriptedModel, intent, reply};
use keel_tools::profile::small_with_editor;
use keel_tools::renames::{RENAME_LEFT, RenameCheck};
use keel_tools::{ToolsConfig, builtin};

fn nudges(session: &Session) -> Vec<String> {
    session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::User(u) if u.content.starts_with(RENAME_LEFT) => Some(u.content.clone()),
            _ => None,
        })
        .collect()
}

async fn turn(ws: &std::path::Path, wants: &str, script: Vec<keel_testkit::ReplyBuilder>) -> Session {
    let mut replies = vec![intent(wants, false, false), intent(wants, false, false)];
    replies.extend(script);
    let model = ScriptedModel::new(replies);
    let config = keel_agent::AgentConfig { read_intent: true, ..keel_agent::AgentConfig::default() };
    let agent = Agent::builder(model)
        .tools(builtin(Arc::new(ToolsConfig::default())))
        .config(config)
        .hooks(RenameCheck)
        .build();
    let mut session = Session::in_memory(&ws.display().to_string());
    agent
        .run_turn(
            &mut session,
            &SessionContext::new(ws),
            "Rename fmt_date to format_date.",
            &NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    session
}

fn project() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("dates.py"), "def fmt_date(d):\n    return str(d)\n").unwrap();
    std::fs::write(ws.path().join("emails.py"), "from dates import fmt_date\n\nprint(fmt_date(1))\n")
        .unwrap();
    ws
}

fn rename_in_emails() -> keel_testkit::ReplyBuilder {
    reply().call(
        "edit_file",
        r#"{"path": "emails.py", "old_text": "fmt_date", "new_text": "format_date", "replace_all": true}"#,
    )
}

#[tokio::test]
async fn a_change_turn_that_left_a_renamed_name_is_shown_where_once() {
    let ws = project();
    let read = reply().call("read_file", r#"{"path": "emails.py"}"#);
    let session = turn(
        ws.path(),
        "change",
        vec![read, rename_in_emails(), reply().text("Renamed."), reply().text("Done.")],
    )
    .await;
    assert_eq!(
        nudges(&session),
        [format!(
            "{RENAME_LEFT}\n`fmt_date` (renamed to `format_date`) is still here:\n\
             dates.py:1: def fmt_date(d):\n\
             If these mean the name you renamed, change them too; if not, answer."
        )]
    );
}

#[tokio::test]
async fn a_finished_rename_or_a_question_gets_no_nudge() {
    let ws = project();
    let script = vec![
        reply().call("read_file", r#"{"path": "emails.py"}"#),
        rename_in_emails(),
        reply().call("read_file", r#"{"path": "dates.py"}"#),
        reply().call(
            "edit_file",
            r#"{"path": "dates.py", "old_text": "def fmt_date", "new_text": "def format_date"}"#,
        ),
        reply().text("Renamed everywhere."),
    ];
    assert!(nudges(&turn(ws.path(), "change", script).await).is_empty());
    let ws = project();
    let read = reply().call("read_file", r#"{"path": "emails.py"}"#);
    let script = vec![read, rename_in_emails(), reply().text("Renamed.")];
    assert!(nudges(&turn(ws.path(), "answer", script).await).is_empty(), "not a change task");
}

/// change_file records its renames too (the small profile's only file tool): the editor's
/// reply renames in emails.py, and the turn's end shows the definition left in dates.py.
#[tokio::test]
async fn a_rename_made_through_change_file_is_followed_too() {
    let ws = project();
    let model = ScriptedModel::new([
        intent("change", false, false),
        intent("change", false, false),
        reply().call("change_file", r#"{"path": "emails.py", "change": "fmt_date -> format_date"}"#),
        reply().text("```python\nfrom dates import format_date\n\nprint(format_date(1))\n```"),
        reply().text("Renamed."),
        reply().text("Done."),
    ]);
    let config = keel_agent::AgentConfig { read_intent: true, ..keel_agent::AgentConfig::default() };
    let tools = small_with_editor(Arc::new(ToolsConfig::default()), Arc::new(model.clone()));
    let agent = Agent::builder(model).tools(tools).config(config).hooks(RenameCheck).build();
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let ctx = SessionContext::new(ws.path());
    let task = "Rename fmt_date to format_date.";
    agent.run_turn(&mut session, &ctx, task, &NullSink, &CancellationToken::new()).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("emails.py")).unwrap(),
        "from dates import format_date\n\nprint(format_date(1))\n"
    );
    assert_eq!(
        nudges(&session),
        [format!(
            "{RENAME_LEFT}\n`fmt_date` (renamed to `format_date`) is still here:\n\
             dates.py:1: def fmt_date(d):\n\
             If these mean the name you renamed, change them too; if not, answer."
        )]
    );
}
