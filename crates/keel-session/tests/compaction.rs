#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Long-session events: pruned results and compaction, applied by the projection the
//! same way live and on reopen, and closed by repair after a crash.

mod common;

use common::*;
use keel_llm::{Message, UserMessage};
use keel_session::{
    CompactionEnd, CompactionOutcome, CompactionReason, CompactionStart, EventKind, JsonlStore, Pruned,
    PrunedResult, SessionStore, validate,
};
use pretty_assertions::assert_eq;

fn start() -> EventKind {
    EventKind::CompactionStart(CompactionStart {
        reason: CompactionReason::Threshold,
        tokens_before: 900,
        instruction: "summarize".into(),
    })
}

fn end(outcome: CompactionOutcome, summary: &str, first_kept_seq: u64) -> EventKind {
    EventKind::CompactionEnd(CompactionEnd {
        outcome,
        summary: summary.into(),
        first_kept_seq,
        tokens_before: 900,
        tokens_after: 300,
        files_read: vec!["a.txt".into()],
        files_changed: vec![],
        usage: Default::default(),
        failure: None,
    })
}

fn result_content(messages: &[Message], id: &str) -> String {
    messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) if r.call_id == id => Some(r.content.clone()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn a_pruned_result_shows_its_stub_live_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    record_multi_step(&mut session);
    session
        .append(EventKind::ContextPruned(Pruned {
            results: vec![PrunedResult { call_id: "b".into(), stub: "[output of read_file pruned]".into() }],
            tokens_freed: 10,
        }))
        .unwrap();
    assert_eq!(result_content(session.messages(), "b"), "[output of read_file pruned]");
    assert_eq!(result_content(session.messages(), "a"), "result of a");
    let live = session.messages().to_vec();
    let id = session.id().to_owned();
    drop(session);
    assert_eq!(store.open(&id).unwrap().messages(), &live[..]);
}

#[test]
fn compaction_replaces_the_older_part_with_the_summary_and_keeps_the_rest_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    record_multi_step(&mut session);
    let before = session.messages().to_vec();
    // Keep from the second step's reply (the call to `d` and its result).
    let kept_from = store
        .read(session.id())
        .unwrap()
        .into_iter()
        .find(|e| matches!(&e.kind, EventKind::AssistantMessage(m) if m.tool_calls().any(|c| c.id == "d")))
        .unwrap()
        .seq;
    session.append(start()).unwrap();
    assert!(session.projection().open_compaction().is_some());
    session.append(end(CompactionOutcome::Compacted, "SUMMARY", kept_from)).unwrap();
    assert_eq!(session.projection().open_compaction(), None);

    let after = session.messages().to_vec();
    let kept_index = before
        .iter()
        .position(|m| matches!(m, Message::Assistant(a) if a.tool_calls().any(|c| c.id == "d")))
        .unwrap();
    let mut expected = vec![Message::User(UserMessage::text("SUMMARY"))];
    expected.extend(before[kept_index..].iter().cloned());
    assert_eq!(after, expected);
    validate(&after).unwrap();

    let id = session.id().to_owned();
    drop(session);
    assert_eq!(store.open(&id).unwrap().messages(), &after[..]);
}

#[test]
fn a_summary_keeping_nothing_replaces_everything() {
    let mut session = keel_session::Session::in_memory("/w");
    record_multi_step(&mut session);
    session.append(start()).unwrap();
    let next = session.next_seq();
    session.append(end(CompactionOutcome::Compacted, "ALL OF IT", next + 100)).unwrap();
    assert_eq!(session.messages(), &[Message::User(UserMessage::text("ALL OF IT"))]);
}

#[test]
fn a_compaction_that_would_part_a_result_from_its_call_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    record_multi_step(&mut session);
    let result_seq = store
        .read(session.id())
        .unwrap()
        .into_iter()
        .find(|e| matches!(&e.kind, EventKind::ToolResult(r) if r.call_id == "d"))
        .unwrap()
        .seq;
    session.append(start()).unwrap();
    let before = session.messages().to_vec();
    let err = session.append(end(CompactionOutcome::Compacted, "S", result_seq)).unwrap_err();
    assert!(err.to_string().contains("part a tool result from its call"), "{err}");
    assert_eq!(session.messages(), &before[..]);
}

#[test]
fn compaction_is_refused_while_calls_wait_and_an_end_needs_a_start() {
    let mut session = keel_session::Session::in_memory("/w");
    session.append(user("go")).unwrap();
    let err = session.append(end(CompactionOutcome::Compacted, "S", 0)).unwrap_err();
    assert!(err.to_string().contains("without compaction/start"), "{err}");
    session.append(assistant_calls(&[("a", "shell")])).unwrap();
    let err = session.append(start()).unwrap_err();
    assert!(err.to_string().contains("a"), "{err}");
}

#[test]
fn a_crash_mid_compaction_leaves_the_history_as_if_it_never_ran() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    record_multi_step(&mut session);
    let before = session.messages().to_vec();
    session.append(start()).unwrap();
    let id = session.id().to_owned();
    drop(session); // crash while the summary was being written

    let mut session = store.open(&id).unwrap();
    assert!(session.projection().needs_repair());
    let report = session.repair().unwrap();
    assert!(report.closed_compaction);
    assert_eq!(session.messages(), &before[..]);
    match store.read(&id).unwrap().last().map(|e| &e.kind) {
        Some(EventKind::CompactionEnd(end)) => assert_eq!(end.outcome, CompactionOutcome::Aborted),
        other => panic!("unexpected last event {other:?}"),
    }
    assert!(session.repair().unwrap().is_clean());
    // And another compaction may start.
    session.append(start()).unwrap();
}

/// One step of a random log: a reply with this many calls (0 ends with text), then
/// optionally a prune of some earlier result and a compaction keeping from a random
/// point.
#[derive(Debug, Clone)]
struct RandomStep {
    calls: usize,
    prune: Option<usize>,
    compact_at: Option<u64>,
}

fn random_step() -> impl proptest::strategy::Strategy<Value = RandomStep> {
    use proptest::prelude::*;
    (0usize..4, proptest::option::of(0usize..20), proptest::option::of(0u64..200))
        .prop_map(|(calls, prune, compact_at)| RandomStep { calls, prune, compact_at })
}

proptest::proptest! {
    /// Whatever pruning and compaction events a log holds (those the projection
    /// accepts), the derived history never parts a call from its result, and a reopen
    /// derives the same history.
    #[test]
    fn pruning_and_compaction_never_part_a_call_from_its_result(
        steps in proptest::collection::vec(random_step(), 1..12)
    ) {
        let writer = keel_session::MemoryWriter::new();
        let mut session = keel_session::Session::create("s".into(), "/w", None, Box::new(writer.clone())).unwrap();
        session.append(user("go")).unwrap();
        let mut ids = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            if step.calls == 0 {
                session.append(assistant_text("thinking")).unwrap();
                session.append(user("more")).unwrap();
            } else {
                let calls: Vec<(String, &str)> = (0..step.calls).map(|c| (format!("c{i}_{c}"), "read_file")).collect();
                let borrowed: Vec<(&str, &str)> = calls.iter().map(|(id, n)| (id.as_str(), *n)).collect();
                session.append(assistant_calls(&borrowed)).unwrap();
                for (id, name) in &calls {
                    let seq = session.append(call(id, name)).unwrap();
                    session.append(result(id, name, seq)).unwrap();
                    ids.push(id.clone());
                }
            }
            if let Some(which) = step.prune.filter(|_| !ids.is_empty()) {
                let id = ids[which % ids.len()].clone();
                session.append(EventKind::ContextPruned(Pruned {
                    results: vec![PrunedResult { call_id: id, stub: "[pruned]".into() }],
                    tokens_freed: 1,
                })).unwrap();
            }
            if let Some(at) = step.compact_at {
                session.append(start()).unwrap();
                let kept = at.min(session.next_seq());
                // A cut that would part a result from its call is refused; then the
                // compaction is closed as aborted.
                if session.append(end(CompactionOutcome::Compacted, "SUMMARY", kept)).is_err() {
                    session.append(end(CompactionOutcome::Aborted, "", 0)).unwrap();
                }
            }
            validate(session.messages()).unwrap();
        }
        let derived = keel_session::derive_messages(writer.events().iter()).unwrap();
        proptest::prop_assert_eq!(&derived[..], session.messages());
    }
}
