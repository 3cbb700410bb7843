//! The JSONL store: round trips, torn lines, corruption, locking, repair, fork, listing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;

use common::*;
use keel_llm::{Message, ToolResultMessage, UserMessage};
use keel_session::{
    EventKind, JsonlStore, NOT_STARTED, OUTCOME_UNKNOWN, SessionErrorKind, SessionStore, StepStart,
    TurnEndReason, TurnStart, derive_messages,
};
use pretty_assertions::assert_eq;

#[test]
fn reopened_session_derives_the_same_messages() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/work").unwrap();
    record_multi_step(&mut session);
    let id = session.id().to_owned();
    let live = session.messages().to_vec();
    drop(session);

    let reopened = store.open(&id).unwrap();
    assert_eq!(reopened.messages(), live.as_slice());
    assert!(!reopened.projection().needs_repair());
    let events = store.read(&id).unwrap();
    assert_eq!(derive_messages(&events).unwrap(), live);
    assert_eq!(reopened.next_seq(), events.last().unwrap().seq + 1);
    // turn 1: user, assistant, 3 results, assistant, result, assistant; turn 2: user, assistant, 2 results, assistant
    assert_eq!(live.len(), 13);
}

#[test]
fn second_writer_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let session = store.create("/w").unwrap();
    let err = store.open(session.id()).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Locked);
    assert!(err.message.contains("another keel process"), "{err}");
    drop(session);
    store.open(&err.path.unwrap().file_stem().unwrap().to_string_lossy()).unwrap();
}

#[test]
fn torn_last_line_is_dropped_and_the_log_stays_appendable() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    session.append(user("hello")).unwrap();
    let id = session.id().to_owned();
    drop(session);
    let path = store.path_of(&id);
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"seq":2,"time":"T","type":"user/mess"#).unwrap();
    drop(file);

    let mut session = store.open(&id).unwrap();
    assert_eq!(session.messages().len(), 1);
    assert_eq!(session.next_seq(), 2);
    session.append(user("again")).unwrap();
    drop(session);
    let events = store.read(&id).unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![0, 1, 2]);
    // Consecutive user input is one message.
    assert_eq!(derive_messages(&events).unwrap(), vec![Message::User(UserMessage::text("hello\n\nagain"))]);
}

#[test]
fn complete_last_line_without_newline_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    session.append(user("hello")).unwrap();
    let id = session.id().to_owned();
    drop(session);
    let path = store.path_of(&id);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.trim_end()).unwrap();

    let mut session = store.open(&id).unwrap();
    session.append(user("more")).unwrap();
    drop(session);
    assert_eq!(store.read(&id).unwrap().len(), 3);
}

#[test]
fn corrupt_middle_line_reports_its_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    session.append(user("one")).unwrap();
    session.append(user("two")).unwrap();
    let id = session.id().to_owned();
    drop(session);
    let path = store.path_of(&id);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1] = "{not json";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let err = store.open(&id).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Corrupt);
    assert_eq!(err.line, Some(2));
    assert!(err.to_string().contains(":2: "), "{err}");
}

#[test]
fn repair_closes_started_and_unstarted_calls_then_step_and_turn() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    session.append(EventKind::TurnStart(TurnStart { turn: 1 })).unwrap();
    session.append(user("go")).unwrap();
    session.append(EventKind::StepStart(StepStart { step: 1 })).unwrap();
    let message_seq =
        session.append(assistant_calls(&[("a", "shell"), ("b", "shell"), ("c", "read_file")])).unwrap();
    let sa = session.append(call("a", "shell")).unwrap();
    session.append(result("a", "shell", sa)).unwrap();
    let sb = session.append(call("b", "shell")).unwrap();
    let id = session.id().to_owned();
    drop(session); // crash while b runs; c never started

    let mut session = store.open(&id).unwrap();
    assert!(session.projection().needs_repair());
    let report = session.repair().unwrap();
    assert_eq!(
        (report.outcome_unknown, report.not_started, report.closed_step, report.closed_turn),
        (1, 1, true, true)
    );
    let tail: Vec<EventKind> =
        store.read(&id).unwrap().into_iter().rev().take(4).rev().map(|e| e.kind).collect();
    match &tail[..] {
        [
            EventKind::ToolResult(b),
            EventKind::ToolResult(c),
            EventKind::StepEnd(step),
            EventKind::TurnEnd(end),
        ] => {
            assert_eq!(
                (b.call_id.as_str(), b.source_seq, b.content.as_str(), b.is_error),
                ("b", sb, OUTCOME_UNKNOWN, true)
            );
            assert_eq!(
                (c.call_id.as_str(), c.source_seq, c.content.as_str()),
                ("c", message_seq, NOT_STARTED)
            );
            assert!(step.interrupted);
            assert_eq!(end.reason, TurnEndReason::Interrupted);
        }
        other => panic!("unexpected tail {other:?}"),
    }
    let results: Vec<&str> = session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(ToolResultMessage { call_id, .. }) => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec!["a", "b", "c"]);
    // Repair is idempotent.
    assert!(session.repair().unwrap().is_clean());
}

#[test]
fn fork_cites_parent_and_closes_an_open_turn_at_the_fork_point() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    record_multi_step(&mut session);
    let parent_id = session.id().to_owned();
    drop(session);
    let parent = store.read(&parent_id).unwrap();
    // Fork right after the first assistant message with three calls.
    let at = parent
        .iter()
        .find(|e| matches!(&e.kind, EventKind::AssistantMessage(m) if m.has_tool_calls()))
        .unwrap()
        .seq;

    let fork = store.fork(&parent_id, Some(at)).unwrap();
    let fork_id = fork.id().to_owned();
    assert_ne!(fork_id, parent_id);
    drop(fork);
    let events = store.read(&fork_id).unwrap();
    match &events[0].kind {
        EventKind::SessionHeader(h) => {
            let parent = h.parent.as_ref().unwrap();
            assert_eq!((parent.id.as_str(), parent.seq), (parent_id.as_str(), at));
        }
        other => panic!("first event {other:?}"),
    }
    assert_eq!(&events[1..=at as usize], &parent[1..=at as usize]);
    let messages = derive_messages(&events).unwrap();
    let not_started =
        messages.iter().filter(|m| matches!(m, Message::ToolResult(r) if r.content == NOT_STARTED)).count();
    assert_eq!(not_started, 3);

    let err = store.fork(&parent_id, Some(10_000)).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Invalid);
}

#[test]
fn list_summarizes_sessions_and_ids_resolve_by_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/project").unwrap();
    record_multi_step(&mut session);
    let id = session.id().to_owned();
    drop(session);
    let list = store.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].id, id);
    assert_eq!(list[0].cwd, "/project");
    assert_eq!(list[0].turns, 2);
    assert_eq!(list[0].first_prompt.as_deref(), Some("read the files"));
    assert_eq!(list[0].usage.input_tokens, 50);
    assert_eq!(store.resolve_id(&id[..id.len() - 2]).unwrap(), id);
    assert_eq!(store.resolve_id("nope").unwrap_err().kind, SessionErrorKind::NotFound);
    assert_eq!(store.resolve_id("../etc").unwrap_err().kind, SessionErrorKind::Invalid);
}

#[test]
fn newer_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    std::fs::write(
        store.path_of("future"),
        "{\"seq\":0,\"time\":\"T\",\"type\":\"session/header\",\"data\":{\"version\":99,\"id\":\"future\",\"created\":\"T\",\"cwd\":\"/\"}}\n",
    )
    .unwrap();
    let err = store.open("future").unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Version);
    assert!(err.message.contains("upgrade keel"));
}

#[test]
fn latest_in_finds_the_newest_session_of_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let a = store.create("/project").unwrap().id().to_owned();
    let _other = store.create("/elsewhere").unwrap().id().to_owned();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut b = store.create("/project").unwrap();
    b.append(user("newer")).unwrap();
    let b = b.id().to_owned();
    assert_ne!(a, b);
    assert_eq!(store.latest_in("/project").unwrap(), Some(b));
    assert_eq!(store.latest_in("/nowhere").unwrap(), None);
}

/// Writes `lines` (events after a header) as a log file for session `s` and opens it.
fn open_raw(
    lines: &[&str],
) -> (tempfile::TempDir, Result<keel_session::Session, keel_session::SessionError>) {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut text = String::from(
        r#"{"seq":0,"time":"T","type":"session/header","data":{"version":1,"id":"s","created":"T","cwd":"/w"}}"#,
    );
    text.push('\n');
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(dir.path().join("s.jsonl"), text).unwrap();
    let opened = store.open("s");
    (dir, opened)
}

const CALL_A: &str = r#"{"seq":2,"time":"T","type":"assistant/message","data":{"content":[{"type":"tool_call","id":"a","name":"t","arguments":"{}"}]}}"#;

#[test]
fn an_orphan_result_is_refused_on_load_with_file_and_line() {
    let (_dir, opened) = open_raw(&[
        r#"{"seq":1,"time":"T","type":"user/message","data":{"text":"go"}}"#,
        CALL_A,
        r#"{"seq":3,"time":"T","type":"tool/result","data":{"call_id":"zzz","name":"t","source_seq":2,"content":"x"}}"#,
    ]);
    let err = opened.unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Corrupt);
    assert_eq!(err.line, Some(4));
    assert!(err.message.contains("tool/result for `zzz`, which no unanswered reply asked for"), "{err}");
}

#[test]
fn a_reply_while_calls_wait_for_results_is_refused_so_repair_never_follows_an_answer() {
    let (_dir, opened) = open_raw(&[
        r#"{"seq":1,"time":"T","type":"user/message","data":{"text":"go"}}"#,
        CALL_A,
        r#"{"seq":3,"time":"T","type":"assistant/message","data":{"content":[{"type":"text","text":"done"}]}}"#,
    ]);
    let err = opened.unwrap_err();
    assert_eq!(err.line, Some(4));
    assert!(err.message.contains("assistant/message while calls a have no result"), "{err}");
    // Answered in order, the same log loads, and a second result for the call is refused.
    let (_dir, opened) = open_raw(&[
        r#"{"seq":1,"time":"T","type":"user/message","data":{"text":"go"}}"#,
        CALL_A,
        r#"{"seq":3,"time":"T","type":"tool/result","data":{"call_id":"a","name":"t","source_seq":2,"content":"x"}}"#,
        r#"{"seq":4,"time":"T","type":"tool/result","data":{"call_id":"a","name":"t","source_seq":2,"content":"y"}}"#,
    ]);
    assert!(opened.unwrap_err().message.contains("tool/result for `a`"));
}

#[test]
fn a_live_append_that_would_break_the_log_is_refused_and_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    session.append(user("go")).unwrap();
    let err = session.append(result("nope", "t", 1)).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Invalid);
    let id = session.id().to_owned();
    drop(session);
    let events = store.read(&id).unwrap();
    assert_eq!(events.len(), 2, "the refused event was not written");
    store.open(&id).unwrap();
}
