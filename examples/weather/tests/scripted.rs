#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The weather demo against the scripted model: the trajectory a good model takes.

use keel_agent::{NullSink, Session, SessionContext};
use keel_example_weather::{TASK, agent, fake_celsius};
use keel_llm::{CancellationToken, Message};
use keel_session::TurnEndReason;
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

#[tokio::test]
async fn weather_task_runs_five_plus_calls_with_parallel_ones() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("cities.txt"), "Oslo\nCairo\nLima\n").unwrap();
    let (oslo, cairo, lima) = (fake_celsius("Oslo"), fake_celsius("Cairo"), fake_celsius("Lima"));
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path":"cities.txt"}"#),
        reply()
            .call("get_weather", r#"{"city":"Oslo"}"#)
            .call("get_weather", r#"{"city":"Cairo","unit":"celsius"}"#)
            .call("get_weather", r#"{"city":"Lima"}"#),
        reply().call("calculate", &format!(r#"{{"expression":"({oslo} + {cairo} + {lima}) / 3"}}"#)),
        reply().text("Average and coldest computed."),
    ]);
    let agent = agent(model.clone());
    let mut session = Session::in_memory(&workspace.path().display().to_string());
    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::new(workspace.path()),
            TASK,
            &NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(outcome.tool_calls, 5);
    let results: Vec<String> = session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => {
                assert!(!r.is_error, "{r:?}");
                Some(r.content.clone())
            }
            _ => None,
        })
        .collect();
    let average = (oslo + cairo + lima) / 3.0;
    assert_eq!(
        results,
        vec![
            "Oslo\nCairo\nLima\n".to_owned(),
            format!("Oslo: {oslo:.1} °C"),
            format!("Cairo: {cairo:.1} °C"),
            format!("Lima: {lima:.1} °C"),
            format!("{average}"),
        ]
    );
    // The three lookups went out together in one message.
    let second_request = &model.requests()[2].messages;
    let parallel = second_request
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a.tool_calls().count()),
            _ => None,
        })
        .max();
    assert_eq!(parallel, Some(3));
}

#[tokio::test]
async fn read_file_is_confined_to_the_workspace() {
    let workspace = tempfile::tempdir().unwrap();
    let model =
        ScriptedModel::new([reply().call("read_file", r#"{"path":"../../etc/passwd"}"#), reply().text("ok")]);
    let agent = agent(model);
    let mut session = Session::in_memory("/w");
    agent
        .run_turn(
            &mut session,
            &SessionContext::new(workspace.path()),
            "read it",
            &NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    match &session.messages()[2] {
        Message::ToolResult(r) => {
            assert!(r.is_error);
            assert!(r.content.contains("outside the workspace"), "{}", r.content);
        }
        other => panic!("{other:?}"),
    }
}
