#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A property of every history the log can give a provider — with aborted replies,
//! crashes closed by repair, forks, model switches, unsigned and foreign thinking,
//! reasoning items with and without encrypted content, ids other providers wrote:
//!
//! - the Anthropic request alternates user and assistant, and every `tool_use` is
//!   answered by exactly one `tool_result`, first in the very next user message, in
//!   order; no result without its call; thinking goes back only signed and only to the
//!   model that wrote it, and a tool loop is continued with thinking only when its last
//!   assistant message begins with thinking;
//! - the Responses input has exactly one `function_call_output` after each
//!   `function_call`, none without its call; a reasoning item goes back only with its
//!   encrypted content and only to its model; a call carries its `fc_` id only when
//!   a reasoning item of its reply went back too.

use std::collections::HashSet;

use keel_llm::{
    Api, AssistantMessage, ContentBlock, FinishReason, HttpClient, Message, ModelInfo, ModelRequest,
    ProviderConfig, Thinking, ToolCall, ToolDefinition,
};
use keel_session::{
    EventKind, JsonlStore, Session, SessionStore, StepEnd, StepStart, ToolCallStarted, ToolResultData,
    TurnEnd, TurnEndReason, TurnStart, UserInput,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Who wrote a reply.
const ORIGINS: [(&str, &str); 4] =
    [("anthropic", "claude-a"), ("anthropic", "claude-b"), ("openai", "gpt-x"), ("none", "none")];

fn origin(n: u8) -> Option<ModelInfo> {
    let (provider, model) = ORIGINS[usize::from(n) % ORIGINS.len()];
    (provider != "none").then(|| ModelInfo { provider: provider.into(), model: model.into() })
}

/// The label a signature or encrypted blob carries, so the checks know its writer.
fn label(origin: &Option<ModelInfo>) -> String {
    origin.as_ref().map_or("none".to_owned(), |o| format!("{}/{}", o.provider, o.model))
}

#[derive(Debug, Clone)]
struct CallOp {
    weird_id: bool,
    started: bool,
    answered: bool,
}

#[derive(Debug, Clone)]
enum Op {
    /// A reply: who wrote it, text, thinking (0 none, 1 signed, 2 unsigned, 3 redacted),
    /// a reasoning item (0 none, 1 encrypted, 2 plain), calls.
    Reply { origin: u8, text: bool, thinking: u8, reasoning: u8, calls: Vec<CallOp> },
    /// The user's input, starting a turn when none is open.
    Input,
    /// An aborted reply: partial thinking and text, the turn ends aborted.
    Abort,
    /// keel stops here; the next open repairs.
    Crash,
    /// Branch at this fraction of the log.
    Fork(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let call = (any::<bool>(), prop::bool::weighted(0.9), prop::bool::weighted(0.85))
        .prop_map(|(weird_id, started, answered)| CallOp { weird_id, started, answered });
    prop_oneof![
        5 => (0u8..4, any::<bool>(), 0u8..4, 0u8..3, prop::collection::vec(call, 0..4))
            .prop_map(|(origin, text, thinking, reasoning, calls)| Op::Reply { origin, text, thinking, reasoning, calls }),
        2 => Just(Op::Input),
        1 => Just(Op::Abort),
        1 => Just(Op::Crash),
        1 => any::<u8>().prop_map(Op::Fork),
    ]
}

/// Builds a log by the loop's rules from `ops`.
struct Recorder {
    store: JsonlStore,
    session: Session,
    turn: u32,
    open: bool,
    step: u32,
    next_id: u32,
}

impl Recorder {
    fn log(&mut self, kind: EventKind) -> u64 {
        self.session.append(kind).unwrap()
    }

    fn ensure_turn(&mut self) {
        if !self.open {
            self.turn += 1;
            self.step = 0;
            self.log(EventKind::TurnStart(TurnStart { turn: self.turn }));
            self.log(EventKind::UserMessage(UserInput {
                text: format!("task {}", self.turn),
                source: Default::default(),
                reason: None,
                images: Vec::new(),
            }));
            self.open = true;
        }
    }

    fn end_turn(&mut self, reason: TurnEndReason) {
        if self.open {
            let turn = self.turn;
            self.log(EventKind::TurnEnd(TurnEnd { turn, reason, message: None, usage: Default::default() }));
            self.open = false;
        }
    }

    fn reply(&mut self, who: u8, text: bool, thinking: u8, reasoning: u8, calls: &[CallOp]) {
        self.ensure_turn();
        self.step += 1;
        let step = self.step;
        self.log(EventKind::StepStart(StepStart { step }));
        let origin = origin(who);
        let tag = label(&origin);
        let n = self.next_id;
        let mut content = Vec::new();
        match thinking {
            1 => content.push(ContentBlock::Thinking {
                text: "plan".into(),
                signature: Some(format!("sig|{tag}|{n}")),
            }),
            2 => content.push(ContentBlock::Thinking { text: "unsigned".into(), signature: None }),
            3 => content.push(ContentBlock::RedactedThinking { data: format!("red|{tag}|{n}") }),
            _ => {}
        }
        if reasoning > 0 {
            let mut item = json!({"id": format!("rs_{n}"), "type": "reasoning", "summary": []});
            if reasoning == 1 {
                item["encrypted_content"] = json!(format!("enc|{tag}|{n}"));
            }
            content.push(ContentBlock::ProviderItem { api: "responses".into(), item });
        }
        if text {
            content.push(ContentBlock::Text { text: "working".into() });
        }
        let mut ids = Vec::new();
        for call in calls {
            self.next_id += 1;
            let id = if call.weird_id {
                format!("functions.read:{}", self.next_id)
            } else {
                format!("toolu_{}", self.next_id)
            };
            ids.push(id.clone());
            let item_id = Some(format!("fc_{}", self.next_id));
            content
                .push(ContentBlock::ToolCall(ToolCall { item_id, ..ToolCall::new(id, "read_file", "{}") }));
        }
        self.next_id += 1;
        let finish_reason = if calls.is_empty() { FinishReason::Stop } else { FinishReason::ToolUse };
        let message = AssistantMessage { content, finish_reason, origin, ..AssistantMessage::default() };
        let message_seq = self.log(EventKind::AssistantMessage(message));
        for (call, id) in calls.iter().zip(&ids) {
            let source_seq = if call.started {
                self.log(EventKind::ToolCall(ToolCallStarted {
                    call_id: id.clone(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                    effect: None,
                }))
            } else {
                message_seq
            };
            if call.answered {
                self.log(EventKind::ToolResult(ToolResultData {
                    call_id: id.clone(),
                    name: "read_file".into(),
                    source_seq,
                    content: "ok".into(),
                    is_error: false,
                    error_code: None,
                    concludes_turn: false,
                    duration_ms: Some(1),
                    change: None,
                    images: Vec::new(),
                }));
            }
        }
        if self.session.projection().pending_calls().is_empty() {
            self.log(EventKind::StepEnd(StepEnd { step, interrupted: false }));
            if calls.is_empty() {
                self.end_turn(TurnEndReason::Completed);
            }
        } else {
            // Calls without results: keel died while they ran.
            self.crash();
        }
    }

    fn abort(&mut self) {
        self.ensure_turn();
        self.step += 1;
        let step = self.step;
        self.log(EventKind::StepStart(StepStart { step }));
        let partial = AssistantMessage {
            content: vec![
                ContentBlock::Thinking { text: "half a thou".into(), signature: None },
                ContentBlock::Text { text: "Let me".into() },
            ],
            finish_reason: FinishReason::Aborted,
            interrupted: true,
            ..AssistantMessage::default()
        };
        self.log(EventKind::AssistantMessage(partial));
        self.log(EventKind::StepEnd(StepEnd { step, interrupted: true }));
        self.end_turn(TurnEndReason::Aborted);
    }

    fn crash(&mut self) {
        let id = self.session.id().to_owned();
        self.session.sync().unwrap();
        self.session = Session::in_memory("/w");
        self.session = self.store.open(&id).unwrap();
        self.session.repair().unwrap();
        self.open = false;
    }

    fn fork(&mut self, at: u8) {
        let last = self.session.next_seq().saturating_sub(1);
        if last == 0 {
            return;
        }
        let at = 1 + u64::from(at) * (last - 1) / 255;
        self.session.sync().unwrap();
        let id = self.session.id().to_owned();
        self.session = Session::in_memory("/w");
        self.session = self.store.fork(&id, Some(at)).unwrap();
        self.open = self.session.projection().open_turn().is_some();
        self.step = self.session.projection().open_turn().map_or(0, |t| t.last_step);
    }
}

/// The history a provider is given after `ops`: repaired like `run_turn` does, then
/// either a new prompt or (when the last reply's calls were all answered) the tool
/// loop continued.
fn history(ops: &[Op]) -> (tempfile::TempDir, Vec<Message>) {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let session = store.create("/w").unwrap();
    let mut recorder = Recorder { store, session, turn: 0, open: false, step: 0, next_id: 0 };
    for op in ops {
        match op {
            Op::Reply { origin, text, thinking, reasoning, calls } => {
                recorder.reply(*origin, *text, *thinking, *reasoning, calls)
            }
            Op::Input => {
                recorder.ensure_turn();
                recorder.log(EventKind::UserMessage(UserInput {
                    text: "more".into(),
                    source: Default::default(),
                    reason: None,
                    images: Vec::new(),
                }));
            }
            Op::Abort => recorder.abort(),
            Op::Crash => recorder.crash(),
            Op::Fork(at) => recorder.fork(*at),
        }
    }
    recorder.session.repair().unwrap();
    let mut messages = recorder.session.messages().to_vec();
    if !matches!(messages.last(), Some(Message::ToolResult(_))) {
        recorder.ensure_turn();
        messages = recorder.session.messages().to_vec();
    }
    (dir, messages)
}

fn tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: "read_file".into(),
        description: "Reads.".into(),
        parameters: serde_json::value::RawValue::from_string(r#"{"type":"object"}"#.into()).unwrap(),
    }]
}

fn body_of(api: Api, provider: &str, model: &str, messages: &[Message]) -> Value {
    let mut config = ProviderConfig::for_api(api, "http://127.0.0.1:9/v1", model);
    config.provider = provider.into();
    config.anthropic.thinking = Thinking::Adaptive;
    let tools = tools();
    let request = ModelRequest::new("sys", messages, &tools).cache_key("s");
    let body = HttpClient::new(config).unwrap().request_body(&request);
    serde_json::from_slice(&body.unwrap()).unwrap()
}

fn blocks(message: &Value) -> &Vec<Value> {
    message["content"].as_array().unwrap()
}

fn check_anthropic(body: &Value) {
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.first().map(|m| &m["role"]), Some(&json!("user")), "{body}");
    for (n, message) in messages.iter().enumerate() {
        assert!(!blocks(message).is_empty(), "empty message {n}: {body}");
        if n > 0 {
            assert_ne!(message["role"], messages[n - 1]["role"], "roles do not alternate at {n}: {body}");
        }
        for block in blocks(message) {
            if block["type"] == "text" {
                assert!(!block["text"].as_str().unwrap().trim().is_empty(), "blank text: {body}");
            }
            if block["type"] == "thinking" {
                let signature = block["signature"].as_str().unwrap();
                assert!(
                    signature.starts_with("sig|anthropic/claude-a|"),
                    "foreign or unsigned thinking: {body}"
                );
            }
            if block["type"] == "redacted_thinking" {
                assert!(block["data"].as_str().unwrap().starts_with("red|anthropic/claude-a|"), "{body}");
            }
            assert_ne!(block["type"], "reasoning", "{body}");
        }
        let uses: Vec<&Value> =
            blocks(message).iter().filter(|b| b["type"] == "tool_use").map(|b| &b["id"]).collect();
        let results: Vec<&Value> = blocks(message)
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| &b["tool_use_id"])
            .collect();
        if message["role"] == "assistant" {
            assert!(results.is_empty());
            if !uses.is_empty() {
                let next =
                    messages.get(n + 1).unwrap_or_else(|| panic!("tool_use without an answer: {body}"));
                let answered: Vec<&Value> =
                    blocks(next).iter().take(uses.len()).map(|b| &b["tool_use_id"]).collect();
                assert_eq!(answered, uses, "results are not first and in order: {body}");
            }
            let ids: HashSet<&Value> = uses.iter().copied().collect();
            assert_eq!(ids.len(), uses.len(), "duplicate tool_use ids: {body}");
        } else {
            assert!(uses.is_empty());
            if !results.is_empty() {
                let previous: Vec<&Value> = blocks(&messages[n - 1])
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|b| &b["id"])
                    .collect();
                assert_eq!(results, previous, "a result without its call: {body}");
                assert!(
                    blocks(message)[..results.len()].iter().all(|b| b["type"] == "tool_result"),
                    "{body}"
                );
            }
        }
    }
    let last = messages.last().unwrap();
    let continues = blocks(last).iter().any(|b| b["type"] == "tool_result");
    if continues && body.get("thinking").is_some() {
        let assistant = &messages[messages.len() - 2];
        let first = &blocks(assistant)[0]["type"];
        assert!(first == "thinking" || first == "redacted_thinking", "thinking on, loop without it: {body}");
    }
}

fn check_responses(body: &Value) {
    let input = body["input"].as_array().unwrap();
    let mut calls: Vec<&str> = Vec::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for (n, item) in input.iter().enumerate() {
        match item["type"].as_str().unwrap() {
            "function_call" => {
                let id = item["call_id"].as_str().unwrap();
                assert!(!calls.contains(&id), "call {id} twice: {body}");
                calls.push(id);
                if item.get("id").is_some() {
                    // The reply this call belongs to: the items since the last input.
                    let reasoned = input[..n]
                        .iter()
                        .rev()
                        .take_while(|i| i["type"] != "function_call_output" && i["role"] != "user")
                        .any(|i| i["type"] == "reasoning");
                    assert!(reasoned, "an fc_ id without its reasoning item: {body}");
                }
            }
            "function_call_output" => {
                let id = item["call_id"].as_str().unwrap();
                assert!(calls.contains(&id), "an output without its call: {body}");
                assert!(answered.insert(id), "two outputs for {id}: {body}");
            }
            "reasoning" => {
                let encrypted = item["encrypted_content"].as_str().unwrap_or_default();
                assert!(
                    encrypted.starts_with("enc|openai/gpt-x|"),
                    "foreign or unencrypted reasoning: {body}"
                );
            }
            "message" => {}
            other => panic!("unexpected item {other}: {body}"),
        }
    }
    assert_eq!(answered.len(), calls.len(), "a call without its output: {body}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_history_makes_valid_anthropic_and_responses_requests(ops in prop::collection::vec(op(), 1..14)) {
        let (_dir, messages) = history(&ops);
        check_anthropic(&body_of(Api::Anthropic, "anthropic", "claude-a", &messages));
        check_responses(&body_of(Api::Responses, "openai", "gpt-x", &messages));
    }
}

#[test]
fn a_loop_continued_across_a_model_switch_is_valid_for_both() {
    let ops = vec![
        Op::Reply {
            origin: 0,
            text: true,
            thinking: 1,
            reasoning: 0,
            calls: vec![CallOp { weird_id: false, started: true, answered: true }],
        },
        Op::Reply {
            origin: 2,
            text: false,
            thinking: 2,
            reasoning: 1,
            calls: vec![CallOp { weird_id: true, started: true, answered: true }],
        },
    ];
    let (_dir, messages) = history(&ops);
    assert!(matches!(messages.last(), Some(Message::ToolResult(_))));
    let anthropic = body_of(Api::Anthropic, "anthropic", "claude-a", &messages);
    check_anthropic(&anthropic);
    assert_eq!(anthropic.get("thinking"), None, "the reply being continued has no thinking of claude-a");
    check_responses(&body_of(Api::Responses, "openai", "gpt-x", &messages));
}
