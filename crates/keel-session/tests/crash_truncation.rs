#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Crash safety as a property: a log cut at any byte loads, repairs, and yields a history
//! in which every tool call has exactly one result, in order.

mod common;

use std::collections::HashMap;

use keel_llm::Message;
use keel_session::{JsonlStore, SessionStore};
use proptest::prelude::*;

/// Every tool call is answered exactly once, by results that follow it in call order,
/// before any later user or assistant message.
pub fn assert_calls_answered_in_order(messages: &[Message]) {
    let mut expected: Vec<String> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for message in messages {
        match message {
            Message::Assistant(a) => {
                assert!(expected.is_empty(), "calls {expected:?} unanswered before next assistant message");
                expected = a.tool_calls().map(|c| c.id.clone()).collect();
            }
            Message::User(_) => {
                assert!(expected.is_empty(), "calls {expected:?} unanswered before user message")
            }
            Message::ToolResult(r) => {
                *seen.entry(r.call_id.clone()).or_default() += 1;
                assert_eq!(expected.first(), Some(&r.call_id), "result out of order");
                expected.remove(0);
            }
        }
    }
    assert!(expected.is_empty(), "calls {expected:?} unanswered at end");
    assert!(seen.values().all(|n| *n == 1));
}

fn recorded_log() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    common::record_multi_step(&mut session);
    std::fs::read(store.path_of(session.id())).unwrap()
}

fn check_cut(log: &[u8], cut: usize) {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    std::fs::write(store.path_of("s"), &log[..cut]).unwrap();
    let mut session = store.open("s").unwrap();
    session.repair().unwrap();
    assert!(!session.projection().needs_repair());
    assert_calls_answered_in_order(session.messages());
    // What was appended by repair reads back identically.
    let reread = keel_session::derive_messages(&store.read("s").unwrap()).unwrap();
    assert_eq!(reread, session.messages());
}

#[test]
fn every_byte_offset_loads_and_repairs() {
    let log = recorded_log();
    for cut in 0..=log.len() {
        check_cut(&log, cut);
    }
}

proptest! {
    #[test]
    fn random_cut_plus_garbage_tail_repairs(cut in 0usize..4000, garbage in "[a-z{}\":,]{0,30}") {
        let mut log = recorded_log();
        let cut = cut.min(log.len());
        log.truncate(cut);
        // A torn write: bytes without a newline.
        log.extend_from_slice(garbage.as_bytes());
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path());
        std::fs::write(store.path_of("s"), &log).unwrap();
        // A partial line that happens to follow a complete one is a torn tail, never fatal.
        if let Ok(mut session) = store.open("s") {
            session.repair().unwrap();
            assert_calls_answered_in_order(session.messages());
        } else {
            // Only possible when garbage completed a line into something that is not an event,
            // which cannot happen without a newline.
            prop_assert!(false, "open failed for cut {cut}");
        }
    }
}
