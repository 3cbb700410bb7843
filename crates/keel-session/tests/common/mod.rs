#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! Builders for realistic logs.

use keel_llm::{AssistantMessage, ContentBlock, FinishReason, ToolCall, Usage};
use keel_session::{
    EventKind, Session, StepEnd, StepStart, ToolCallStarted, ToolResultData, TurnEnd, TurnEndReason,
    TurnStart, UserInput,
};

pub fn user(text: &str) -> EventKind {
    EventKind::UserMessage(UserInput {
        text: text.into(),
        source: Default::default(),
        reason: None,
        images: Vec::new(),
    })
}

pub fn assistant_text(text: &str) -> EventKind {
    EventKind::AssistantMessage(AssistantMessage {
        content: vec![ContentBlock::Text { text: text.into() }],
        finish_reason: FinishReason::Stop,
        usage: Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() },
        ..AssistantMessage::default()
    })
}

pub fn assistant_calls(calls: &[(&str, &str)]) -> EventKind {
    EventKind::AssistantMessage(AssistantMessage {
        content: calls
            .iter()
            .map(|(id, name)| ContentBlock::ToolCall(ToolCall::new(*id, *name, "{}")))
            .collect(),
        finish_reason: FinishReason::ToolUse,
        usage: Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() },
        ..AssistantMessage::default()
    })
}

pub fn call(id: &str, name: &str) -> EventKind {
    EventKind::ToolCall(ToolCallStarted {
        call_id: id.into(),
        name: name.into(),
        arguments: "{}".into(),
        effect: None,
    })
}

pub fn result(id: &str, name: &str, source_seq: u64) -> EventKind {
    EventKind::ToolResult(ToolResultData {
        call_id: id.into(),
        name: name.into(),
        source_seq,
        content: format!("result of {id}"),
        is_error: false,
        error_code: None,
        concludes_turn: false,
        duration_ms: Some(1),
        change: None,
        images: Vec::new(),
    })
}

/// Appends a two-turn, multi-step conversation with parallel calls.
pub fn record_multi_step(session: &mut Session) {
    session.append(EventKind::TurnStart(TurnStart { turn: 1 })).unwrap();
    session.append(user("read the files")).unwrap();
    session.append(EventKind::StepStart(StepStart { step: 1 })).unwrap();
    session.append(assistant_calls(&[("a", "read_file"), ("b", "read_file"), ("c", "grep")])).unwrap();
    let sa = session.append(call("a", "read_file")).unwrap();
    let sb = session.append(call("b", "read_file")).unwrap();
    let sc = session.append(call("c", "grep")).unwrap();
    session.append(result("a", "read_file", sa)).unwrap();
    session.append(result("b", "read_file", sb)).unwrap();
    session.append(result("c", "grep", sc)).unwrap();
    session.append(EventKind::StepEnd(StepEnd { step: 1, interrupted: false })).unwrap();
    session.append(EventKind::StepStart(StepStart { step: 2 })).unwrap();
    session.append(assistant_calls(&[("d", "shell")])).unwrap();
    let sd = session.append(call("d", "shell")).unwrap();
    session.append(result("d", "shell", sd)).unwrap();
    session.append(EventKind::StepEnd(StepEnd { step: 2, interrupted: false })).unwrap();
    session.append(EventKind::StepStart(StepStart { step: 3 })).unwrap();
    session.append(assistant_text("done")).unwrap();
    session.append(EventKind::StepEnd(StepEnd { step: 3, interrupted: false })).unwrap();
    session
        .append(EventKind::TurnEnd(TurnEnd {
            turn: 1,
            reason: TurnEndReason::Completed,
            message: None,
            usage: Usage::default(),
        }))
        .unwrap();
    session.append(EventKind::TurnStart(TurnStart { turn: 2 })).unwrap();
    session.append(user("now edit")).unwrap();
    session.append(EventKind::StepStart(StepStart { step: 1 })).unwrap();
    session.append(assistant_calls(&[("e", "edit_file"), ("f", "shell")])).unwrap();
    let se = session.append(call("e", "edit_file")).unwrap();
    session.append(result("e", "edit_file", se)).unwrap();
    let sf = session.append(call("f", "shell")).unwrap();
    session.append(result("f", "shell", sf)).unwrap();
    session.append(EventKind::StepEnd(StepEnd { step: 1, interrupted: false })).unwrap();
    session.append(EventKind::StepStart(StepStart { step: 2 })).unwrap();
    session.append(assistant_text("edited")).unwrap();
    session.append(EventKind::StepEnd(StepEnd { step: 2, interrupted: false })).unwrap();
    session
        .append(EventKind::TurnEnd(TurnEnd {
            turn: 2,
            reason: TurnEndReason::Completed,
            message: None,
            usage: Usage::default(),
        }))
        .unwrap();
}
