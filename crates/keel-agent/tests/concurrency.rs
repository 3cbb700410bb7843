#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Safe calls run together in a bounded pool; exclusive calls are barriers; results keep
//! the model's order.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use keel_agent::{Agent, AgentConfig, NullSink, RecordedEvent, RecordingSink, SessionContext};
use keel_llm::CancellationToken;
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

fn sleep_args(label: &str, ms: u64) -> String {
    format!(r#"{{"ms":{ms},"label":"{label}"}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_safe_calls_overlap() {
    let timeline: Timeline = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new([
        reply()
            .call("safe_sleep", &sleep_args("a", 200))
            .call("safe_sleep", &sleep_args("b", 200))
            .call("safe_sleep", &sleep_args("c", 200)),
        reply().text("done"),
    ]);
    let agent = Agent::builder(model).tool(SafeSleep(timeline.clone())).build();
    let mut session = keel_agent::Session::in_memory("/w");
    agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    // They ran together: each started before any of them ended (read from the tools' own
    // clocks, not from a wall-clock bound a loaded machine can miss).
    let spans = timeline.lock().unwrap().clone();
    let last_start = spans.iter().map(|s| s.1).max().unwrap();
    let first_end = spans.iter().map(|s| s.2).min().unwrap();
    assert_eq!(spans.len(), 3, "{spans:?}");
    assert!(last_start < first_end, "the calls ran one after another: {spans:?}");
    let contents: Vec<String> = results(session.messages()).into_iter().map(|r| r.1).collect();
    assert_eq!(contents, vec!["a slept", "b slept", "c slept"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_call_waits_for_the_pool_and_runs_alone() {
    let timeline: Timeline = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new([
        reply()
            .call("safe_sleep", &sleep_args("a", 150))
            .call("safe_sleep", &sleep_args("b", 50))
            .call("exclusive_sleep", &sleep_args("x", 50))
            .call("safe_sleep", &sleep_args("c", 50))
            .call("safe_sleep", &sleep_args("d", 10)),
        reply().text("done"),
    ]);
    let agent = Agent::builder(model)
        .tool(SafeSleep(timeline.clone()))
        .tool(ExclusiveSleep(timeline.clone()))
        .build();
    let mut session = keel_agent::Session::in_memory("/w");
    agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    let spans = timeline.lock().unwrap().clone();
    let span = |label: &str| spans.iter().find(|s| s.0 == label).map(|s| (s.1, s.2)).unwrap();
    let (a, b, x, c, d) = (span("a"), span("b"), span("x"), span("c"), span("d"));
    assert!(x.0 >= a.1 && x.0 >= b.1, "exclusive started before the safe calls ended");
    assert!(c.0 >= x.1 && d.0 >= x.1, "later safe calls started before the exclusive one ended");
    assert!(b.0 < a.1, "a and b overlapped");
    // Results in call order even though b finished before a and d before c.
    let contents: Vec<String> = results(session.messages()).into_iter().map(|r| r.1).collect();
    assert_eq!(contents, vec!["a slept", "b slept", "x slept", "c slept", "d slept"]);
    assert_provider_valid(session.messages());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_is_bounded() {
    let timeline: Timeline = Arc::new(Mutex::new(Vec::new()));
    let mut first = reply();
    for i in 0..4 {
        first = first.call("safe_sleep", &sleep_args(&format!("s{i}"), 100));
    }
    let model = ScriptedModel::new([first, reply().text("done")]);
    let config = AgentConfig { max_parallel_tools: 2, ..AgentConfig::default() };
    let agent = Agent::builder(model).config(config).tool(SafeSleep(timeline.clone())).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let start = Instant::now();
    agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    // Two at a time: about 200 ms, never about 100.
    assert!(start.elapsed() >= Duration::from_millis(190), "took {:?}", start.elapsed());
    let spans = timeline.lock().unwrap().clone();
    for probe in &spans {
        let overlapping = spans.iter().filter(|s| s.1 < probe.2 && probe.1 < s.2).count();
        assert!(overlapping <= 2, "more than two ran at once: {spans:?}");
    }
}

#[tokio::test]
async fn progress_reaches_the_sink() {
    let timeline: Timeline = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new([reply().call("safe_sleep", &sleep_args("p", 1)), reply().text("done")]);
    let agent = Agent::builder(model).tool(SafeSleep(timeline)).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let sink = RecordingSink::new();
    agent
        .run_turn(&mut session, &SessionContext::default(), "go", &sink, &CancellationToken::new())
        .await
        .unwrap();
    let progress: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            RecordedEvent::ToolProgress { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(progress, vec!["p sleeping"]);
}
