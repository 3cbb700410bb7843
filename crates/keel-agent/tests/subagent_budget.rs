#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The token budget the children of one parent session share holds: children running
//! side by side cannot together spend more than it, and a resumed session starts with
//! what its children already spent.

mod common;
mod subagent_support;

use std::time::Duration;

use keel_agent::subagent::{BUDGET_SPENT, TaskLimits};
use keel_agent::{RecordingSink, SessionContext};
use keel_llm::CancellationToken;
use keel_session::{SessionStore, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;
use subagent_support::*;

#[tokio::test(start_paused = true)]
async fn children_side_by_side_never_spend_more_than_the_shared_budget() {
    let model = ScriptedModel::new([
        reply().call_id("ta", "task", r#"{"prompt": "A?", "agent": "a"}"#).call_id(
            "tb",
            "task",
            r#"{"prompt": "B?", "agent": "b"}"#,
        ),
        reply().text("Both done."),
    ]);
    // Each child asks twice for 50 tokens, at the same moments: alone, each fits its own
    // limit (100), but together they would spend 200 of the 150 the session has.
    let child = |answer: &str| {
        ScriptedModel::new([
            reply().call("read_file", r#"{"path": "a.txt"}"#).usage(40, 10).delay(Duration::from_secs(1)),
            reply().text(answer).usage(40, 10).delay(Duration::from_secs(1)),
        ])
    };
    let (model_a, model_b) = (child("answer A"), child("answer B"));
    let limits = TaskLimits { child_tokens: 100, session_tokens: 150, ..TaskLimits::default() };
    let defs = vec![def("a", "ma"), def("b", "mb")];
    let s = setup(&model, defs, &[("ma", &model_a), ("mb", &model_b)], limits, None);
    let mut session = s.store.create("/w").unwrap();
    let sink = RecordingSink::new();
    let outcome = s
        .agent
        .run_turn(&mut session, &SessionContext::new("/w"), "go", &sink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.final_text, "Both done.");

    let kids = children(&s.store);
    let spent: u64 = kids.iter().map(|(_, log)| tokens(log)).sum();
    assert!(spent <= 150, "the children spent {spent} of 150 tokens");
    // The first child had its whole limit and finished; the second had what was left
    // (50), and was stopped when that was spent.
    assert_eq!(turn_end(&kids[0].1), Some(TurnEndReason::Completed));
    assert_eq!(turn_end(&kids[1].1), Some(TurnEndReason::Error));
    assert_eq!((model_a.requests().len(), model_b.requests().len()), (2, 1));
    let results = results(&sink.logged());
    assert_eq!((results[0].content.lines().next(), results[0].is_error), (Some("answer A"), false));
    assert_eq!(results[1].is_error, true);
    assert!(
        results[1].content.contains(&format!(
            "{BUDGET_SPENT} (50 of 50 tokens, what was left of the 150 the subagents of this session share)"
        )),
        "{}",
        results[1].content
    );
}

#[tokio::test]
async fn a_resumed_session_starts_with_what_its_children_spent() {
    let limits = TaskLimits { session_tokens: 100, ..TaskLimits::default() };
    // Before: a child spends 120 tokens of the session's 100 (its last reply overshoots).
    let before = ScriptedModel::new([
        reply().call_id("t1", "task", r#"{"prompt": "Look."}"#),
        reply().call("read_file", r#"{"path": "a.txt"}"#).usage(50, 10),
        reply().text("Found it.").usage(50, 10),
        reply().text("Done."),
    ]);
    let Setup { agent, store, dir } = setup(&before, Vec::new(), &[], limits, None);
    let mut session = store.create("/w").unwrap();
    let id = session.id().to_owned();
    let ctx = SessionContext::new("/w");
    agent.run_turn(&mut session, &ctx, "go", &RecordingSink::new(), &CancellationToken::new()).await.unwrap();
    drop((session, agent, store));

    // Resumed, in a new agent and context: the budget is still spent.
    let after = ScriptedModel::new([
        reply().call_id("t2", "task", r#"{"prompt": "Look again."}"#),
        reply().text("Then not."),
    ]);
    let s = setup(&after, Vec::new(), &[], limits, Some(dir));
    let mut session = s.store.open(&id).unwrap();
    let sink = RecordingSink::new();
    let outcome = s
        .agent
        .run_turn(&mut session, &SessionContext::new("/w"), "again", &sink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.final_text, "Then not.");
    let result = &results(&sink.logged())[0];
    assert_eq!(
        (result.content.as_str(), result.is_error),
        (
            "Not started: the subagents of this session have spent their token budget (100 tokens). Go on \
without them.",
            true
        )
    );
    assert_eq!(children(&s.store).len(), 1);
}
