//! Tests of the event vocabulary: every kind round-trips, the wire shape, unknown types.

use super::*;
use keel_llm::{ContentBlock, FinishReason};
use pretty_assertions::assert_eq;

fn round_trip(kind: EventKind) {
    let event = Event { seq: 7, time: "2026-11-30T05:00:00.000Z".into(), kind };
    let mut line = Vec::new();
    event.write_line(&mut line).unwrap();
    let text = std::str::from_utf8(&line).unwrap();
    assert!(text.ends_with('\n'));
    assert_eq!(Event::parse(text.trim_end()).unwrap(), event);
    let via_serde: Event = serde_json::from_str(text).unwrap();
    assert_eq!(via_serde, event);
}

#[test]
fn every_kind_round_trips() {
    round_trip(EventKind::SessionHeader(SessionHeader {
        spawned_by: None,
        version: FORMAT_VERSION,
        id: "s".into(),
        created: "t".into(),
        cwd: "/w".into(),
        parent: Some(ParentRef { id: "p".into(), seq: 3 }),
    }));
    round_trip(EventKind::RequestHeader(RequestHeader {
        provider: "p".into(),
        model: "m".into(),
        system_prompt: "be brief".into(),
        tools: vec![ToolDefinition {
            name: "t".into(),
            description: "d".into(),
            parameters: RawValue::from_string(r#"{"type":"object"}"#.into()).unwrap(),
        }],
        profile: Some("small: 1.5B parameters (the server's model list)".into()),
    }));
    round_trip(EventKind::TurnStart(TurnStart { turn: 1 }));
    round_trip(EventKind::TurnEnd(TurnEnd {
        turn: 1,
        reason: TurnEndReason::MaxSteps,
        message: Some("limit".into()),
        usage: Usage { input_tokens: 1, ..Usage::default() },
    }));
    round_trip(EventKind::StepStart(StepStart { step: 2 }));
    round_trip(EventKind::ModelAside(crate::ModelAside {
        purpose: "intent".into(),
        call_id: Some("c".into()),
        system: "s".into(),
        prompt: "哪个文件？".into(),
        tools: vec![ToolDefinition {
            name: "classify".into(),
            description: "d".into(),
            parameters: RawValue::from_string(r#"{"type":"object"}"#.into()).unwrap(),
        }],
        tool_choice: keel_llm::ToolChoice::Required,
        temperature: serde_json::Number::from_f64(0.2),
        max_tokens: Some(256),
        reply: Some(AssistantMessage {
            content: vec![ContentBlock::Text { text: "x".into() }],
            usage: Usage { input_tokens: 3, ..Usage::default() },
            ..AssistantMessage::default()
        }),
        error: Some("e".into()),
    }));
    round_trip(EventKind::TurnIntent(crate::TaskIntent {
        wants: Some(crate::Wants::Both),
        check: Some(true),
        layout: None,
    }));
    round_trip(EventKind::UserMessage(UserInput {
        text: "go on".into(),
        source: InputSource::Hook,
        reason: Some("finish_check/not_verified".into()),
        images: Vec::new(),
    }));
    round_trip(EventKind::StepEnd(StepEnd { step: 2, interrupted: true }));
    round_trip(EventKind::HookRun(crate::HookRun {
        event: "PreToolUse".into(),
        command: "~/.config/keel/hooks/check.sh".into(),
        tool: Some("shell".into()),
        call_id: Some("c".into()),
        outcome: crate::HookOutcome::Ok,
        exit_code: Some(2),
        duration_ms: 41,
        decision: Some(crate::HookVerdict::Deny),
        reason: Some("no pushes".into()),
        error: None,
    }));
    round_trip(EventKind::HookRun(crate::HookRun {
        event: "Stop".into(),
        command: "sleep 90".into(),
        tool: None,
        call_id: None,
        outcome: crate::HookOutcome::TimedOut,
        exit_code: None,
        duration_ms: 60_000,
        decision: None,
        reason: None,
        error: Some("did not finish within 60 s".into()),
    }));
    round_trip(EventKind::UserMessage(UserInput {
        text: "hi".into(),
        source: InputSource::Steer,
        reason: None,
        images: Vec::new(),
    }));
    round_trip(EventKind::AssistantMessage(AssistantMessage {
        content: vec![ContentBlock::Text { text: "x".into() }],
        finish_reason: FinishReason::Stop,
        ..AssistantMessage::default()
    }));
    round_trip(EventKind::ToolCall(ToolCallStarted {
        call_id: "c".into(),
        name: "n".into(),
        arguments: "{".into(),
        effect: None,
    }));
    round_trip(EventKind::ToolResult(ToolResultData {
        call_id: "c".into(),
        name: "n".into(),
        source_seq: 5,
        content: "ok".into(),
        is_error: true,
        error_code: Some("tool_error".into()),
        concludes_turn: true,
        duration_ms: Some(12),
        change: Some(crate::FileChange {
            path: "a.txt".into(),
            created: false,
            added: 1,
            removed: 1,
            diff: "@@ -1 +1 @@\n-a\n+b\n".into(),
            cut_lines: 0,
        }),
        images: Vec::new(),
    }));
    round_trip(EventKind::ImagesWithdrawn(crate::ImagesWithdrawn {
        sha256: vec!["ab".repeat(32)],
        reason: "custom rejected the request (HTTP 400): image format not supported".into(),
    }));
}

#[test]
fn a_withdrawal_is_written_as_its_shas_and_reason() {
    let kind = EventKind::ImagesWithdrawn(crate::ImagesWithdrawn {
        sha256: vec!["ab".repeat(32)],
        reason: "refused".into(),
    });
    let event = Event { seq: 9, time: "T".into(), kind };
    let mut line = Vec::new();
    event.write_line(&mut line).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"seq": 9, "time": "T", "type": "images/withdrawn",
            "data": {"sha256": ["ab".repeat(32)], "reason": "refused"}})
    );
}

#[test]
fn wire_shape_is_seq_time_type_data() {
    let event = Event { seq: 1, time: "T".into(), kind: EventKind::TurnStart(TurnStart { turn: 1 }) };
    let mut line = Vec::new();
    event.write_line(&mut line).unwrap();
    assert_eq!(
        String::from_utf8(line).unwrap(),
        "{\"seq\":1,\"time\":\"T\",\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n"
    );
}

#[test]
fn unknown_type_is_a_clear_error() {
    let err = Event::parse(r#"{"seq":1,"time":"T","type":"future/thing","data":{}}"#).unwrap_err();
    assert!(err.message.contains("future/thing"), "{}", err.message);
}
