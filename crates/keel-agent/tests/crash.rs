#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Crash safety: a session recorded by the loop, cut at every byte, always loads,
//! repairs, and continues with a provider-valid request.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use keel_agent::{Agent, NullSink, SessionContext};
use keel_llm::{CancellationToken, Message};
use keel_session::{JsonlStore, SessionStore};
use keel_testkit::{ScriptedModel, reply};
use proptest::prelude::*;

fn record() -> Vec<u8> {
    let timeline: Timeline = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new([
        reply().text("Looking.").call("read_file", r#"{"path":"a"}"#).call("read_file", r#"{"path":"b"}"#),
        reply().call("exclusive_sleep", r#"{"ms":1,"label":"x"}"#).call("read_file", r#"{"path":"c"}"#),
        reply().call("nope", "{}").call("read_file", "{bad json"),
        reply().text("Done with é and ✓."),
        reply().call("read_file", r#"{"path":"d"}"#),
        reply().text("Second turn done."),
    ]);
    let agent = Agent::builder(model).tool(FakeRead).tool(ExclusiveSleep(timeline)).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        agent
            .run_turn(&mut session, &SessionContext::default(), "first", &NullSink, &CancellationToken::new())
            .await
            .unwrap();
        agent
            .run_turn(
                &mut session,
                &SessionContext::default(),
                "second",
                &NullSink,
                &CancellationToken::new(),
            )
            .await
            .unwrap();
    });
    std::fs::read(store.path_of(session.id())).unwrap()
}

/// Original call order of every tool call in the history.
fn call_order(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant(a) => a.tool_calls().map(|c| c.id.clone()).collect(),
            _ => Vec::new(),
        })
        .collect()
}

#[test]
fn every_truncation_loads_and_repairs_into_a_valid_history() {
    let log = record();
    let full_order = {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path());
        std::fs::write(store.path_of("full"), &log).unwrap();
        call_order(store.open("full").unwrap().messages())
    };
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    for cut in 0..=log.len() {
        std::fs::write(store.path_of("s"), &log[..cut]).unwrap();
        let mut session = store.open("s").unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        session.repair().unwrap();
        assert_provider_valid(session.messages());
        // Order is preserved: the calls seen are a prefix of the full run's calls.
        let order = call_order(session.messages());
        assert_eq!(order[..], full_order[..order.len()], "cut {cut}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn a_repaired_session_takes_a_new_turn(cut_fraction in 0.0f64..=1.0) {
        let log = record();
        let cut = (log.len() as f64 * cut_fraction) as usize;
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path());
        std::fs::write(store.path_of("s"), &log[..cut]).unwrap();
        let mut session = store.open("s").unwrap();
        let model = ScriptedModel::new([reply().text("resumed")]);
        let agent = Agent::builder(model.clone()).tool(FakeRead).build();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let outcome = runtime
            .block_on(agent.run_turn(&mut session, &SessionContext::default(), "continue", &NullSink, &CancellationToken::new()))
            .unwrap();
        prop_assert_eq!(outcome.final_text, "resumed");
        assert_provider_valid(&model.requests()[0].messages);
    }
}
