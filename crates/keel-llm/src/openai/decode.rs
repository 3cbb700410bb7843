//! Turning Chat Completions chunks into keel's deltas and one assistant message.

use crate::assemble::MessageBuilder;
use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::{AssistantMessage, FinishReason, Usage};
use crate::sse::SseEvent;
use crate::text_calls::apply_text_tool_calls;
use crate::transport::errors::classify_error_object;
use crate::transport::{CALL_COST, Events, OutputMeter};

use super::wire::{self, Chunk, Delta};

/// Maps a provider finish reason to keel's.
pub(crate) fn map_finish_reason(raw: &str) -> FinishReason {
    match raw {
        "stop" | "end_turn" | "eos" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolUse,
        "content_filter" | "error" => FinishReason::Error,
        _ => FinishReason::Unknown,
    }
}

/// A fragment with a name and no arguments, kept while it is unclear whether it
/// repeats the name of the call at `slot` or opens another call.
#[derive(Debug)]
struct Header {
    slot: usize,
    id: Option<String>,
    name: String,
}

/// Accumulates one reply.
#[derive(Debug)]
pub(crate) struct Decoder {
    builder: MessageBuilder,
    finish: Option<String>,
    usage: Option<Usage>,
    /// Whether any content delta was produced (retries stop once output has streamed).
    pub emitted: bool,
    /// Usage arrived in a chunk after the one with the finish reason: the reply is
    /// whole, whatever the connection does next.
    settled: bool,
    /// Provider index → call slot (the builder's index).
    slots: Vec<(usize, usize)>,
    last_slot: Option<usize>,
    next_slot: usize,
    /// A name without arguments that reached a finished call: a repeated name, or the
    /// head of another call. The next fragment tells.
    header: Option<Header>,
    /// Per call slot: whether its arguments so far are one closed object.
    scans: Vec<ObjectScan>,
    /// Output so far against the bound.
    meter: OutputMeter,
}

impl Default for Decoder {
    /// A decoder without an output limit.
    fn default() -> Self {
        Decoder::with_output_limit(u64::MAX)
    }
}

impl Decoder {
    /// A decoder accepting at most `max_output` bytes of output.
    pub fn with_output_limit(max_output: u64) -> Self {
        Decoder {
            builder: MessageBuilder::new(),
            finish: None,
            usage: None,
            emitted: false,
            settled: false,
            slots: Vec::new(),
            last_slot: None,
            next_slot: 0,
            header: None,
            scans: Vec::new(),
            meter: OutputMeter::new(max_output),
        }
    }

    /// Counts `bytes` of output against the limit.
    fn charge(&mut self, bytes: usize) -> Result<(), ModelError> {
        self.meter.charge(bytes)
    }

    /// Applies one chunk, pushing the deltas it carried to `out`.
    pub fn on_chunk(&mut self, chunk: Chunk, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if let Some(error) = chunk.error {
            return Err(classify_error_object(&error, None));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.to_usage());
            self.settled |= self.finish.is_some();
        }
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(delta) = choice.delta.or(choice.message) {
                self.on_delta(delta, out)?;
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(reason);
            }
        }
        Ok(())
    }

    fn on_delta(&mut self, delta: Delta, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        for thinking in [delta.reasoning_content, delta.reasoning].into_iter().flatten() {
            if !thinking.is_empty() {
                self.charge(thinking.len())?;
                self.builder.push_thinking(&thinking);
                self.emitted = true;
                out.push(ModelEvent::ThinkingDelta(thinking));
            }
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            self.charge(text.len())?;
            self.builder.push_text(&text);
            self.emitted = true;
            out.push(ModelEvent::TextDelta(text));
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let (name, arguments) = match call.function {
                Some(function) => (function.name, function.arguments.unwrap_or_default()),
                None => (None, String::new()),
            };
            let id_len = call.id.as_ref().map_or(0, String::len);
            self.charge(id_len + name.as_ref().map_or(0, String::len) + arguments.len())?;
            let (index, header) =
                self.call_slot(call.index, call.id.as_deref(), name.as_deref(), &arguments)?;
            if let Some(Header { id, name, .. }) = header {
                self.builder.push_tool_call(index, id.as_deref(), Some(&name), "");
                out.push(ModelEvent::ToolCallDelta { index, id, name: Some(name), arguments: String::new() });
            }
            self.builder.push_tool_call(index, call.id.as_deref(), name.as_deref(), &arguments);
            if let Some(scan) = self.scans.get_mut(index) {
                scan.feed(&arguments);
            }
            self.emitted = true;
            out.push(ModelEvent::ToolCallDelta { index, id: call.id, name, arguments });
        }
        Ok(())
    }

    /// The call a fragment belongs to, and the head (id and name) it was announced
    /// with when that came in a fragment of its own. The provider's `index` decides;
    /// without one, a new id starts a call and anything else continues the last. Either
    /// way, a fragment that starts another function after a finished call starts a new
    /// call: some servers give every call the same id, or index 0.
    fn call_slot(
        &mut self,
        index: Option<usize>,
        id: Option<&str>,
        name: Option<&str>,
        arguments: &str,
    ) -> Result<(usize, Option<Header>), ModelError> {
        let id = id.filter(|id| !id.is_empty());
        let name = name.filter(|name| !name.is_empty());
        let candidate = match index {
            Some(index) => self.slots.iter().rev().find(|(i, _)| *i == index).map(|&(_, slot)| slot),
            None => match (id, self.last_slot) {
                (Some(id), Some(last)) => {
                    self.builder.tool_call(last).is_some_and(|call| call.id == id).then_some(last)
                }
                (None, last) => last,
                (Some(_), None) => None,
            },
        };
        let header = self.header.take();
        let mut opened = None;
        let slot = match candidate {
            Some(slot) if !self.starts_another_call(slot, id, name, arguments) => {
                if let Some(name) = name
                    && arguments.trim().is_empty()
                    && self.is_whole(slot)
                {
                    self.header = Some(Header { slot, id: id.map(str::to_owned), name: name.to_owned() });
                }
                slot
            }
            _ => {
                // Each call costs output, so a flood of empty calls meets the limit.
                self.charge(CALL_COST)?;
                self.next_slot += 1;
                self.scans.push(ObjectScan::default());
                opened = header.filter(|h| name.is_none() && Some(h.slot) == candidate);
                self.next_slot - 1
            }
        };
        if let Some(index) = index {
            match self.slots.iter_mut().find(|(i, _)| *i == index) {
                Some(entry) => entry.1 = slot,
                None => self.slots.push((index, slot)),
            }
        }
        self.last_slot = Some(slot);
        Ok((slot, opened))
    }

    /// Whether a fragment for the call at `slot` is really the start of another: the
    /// call so far is whole (a name and complete JSON object arguments), and the
    /// fragment brings a different id or function name, or arguments that open an
    /// object (which could never continue a whole one). A plain fragment, a name split
    /// in pieces, or a name repeated on every fragment continues the call.
    fn starts_another_call(
        &mut self,
        slot: usize,
        id: Option<&str>,
        name: Option<&str>,
        arguments: &str,
    ) -> bool {
        let Some(call) = self.builder.tool_call(slot) else { return false };
        let new_id = id.is_some_and(|id| !call.id.is_empty() && id != call.id);
        let new_name = name.is_some_and(|name| name != call.name);
        let opens_object = arguments.trim_start().starts_with('{');
        (new_id || new_name || opens_object) && self.is_whole(slot)
    }

    /// Whether the call at `slot` has a name and arguments that are one complete JSON
    /// object. The scan decides in constant time; the parse that confirms it runs once
    /// per call, so no fragment pattern makes this quadratic.
    fn is_whole(&mut self, slot: usize) -> bool {
        let Some(call) = self.builder.tool_call(slot).filter(|call| !call.name.is_empty()) else {
            return false;
        };
        let Some(scan) = self.scans.get_mut(slot).filter(|scan| scan.state == Scan::Closed) else {
            return false;
        };
        *scan.valid.get_or_insert_with(|| is_complete_object(&call.arguments))
    }

    /// True once a finish reason arrived.
    pub fn has_finish_reason(&self) -> bool {
        self.finish.is_some()
    }

    /// True when nothing at all arrived: no delta, no finish reason, no usage.
    pub fn is_blank(&self) -> bool {
        !self.emitted && self.finish.is_none() && self.usage.is_none()
    }

    /// The finished message. With `text_tools`, a tool call written as text is turned
    /// into a real call.
    pub fn finish(self, text_tools: Option<&[&str]>) -> AssistantMessage {
        let reason = match self.finish.as_deref() {
            Some(raw) => map_finish_reason(raw),
            None => FinishReason::Stop,
        };
        let mut message = self.builder.finish(reason, self.finish, self.usage.unwrap_or_default());
        if let Some(tools) = text_tools {
            apply_text_tool_calls(&mut message, tools);
        }
        if message.finish_reason == FinishReason::Stop
            && message.has_tool_calls()
            && message.raw_finish_reason.is_none()
        {
            message.finish_reason = FinishReason::ToolUse;
        }
        message
    }
}

/// Whether `arguments` is one complete JSON object.
fn is_complete_object(arguments: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(arguments.trim()).is_ok()
}

/// Where a call's arguments stand, read one fragment at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Scan {
    /// Nothing but whitespace yet.
    #[default]
    Empty,
    /// Inside the top-level object.
    Open,
    /// The object closed, followed by whitespace at most.
    Closed,
    /// Not one object (another start, or text after the end).
    Other,
}

/// Tracks whether arguments are one balanced JSON object, so that telling a finished
/// call from an unfinished one costs a pass over each fragment, not a parse of the
/// whole arguments at every fragment.
#[derive(Debug, Clone, Copy, Default)]
struct ObjectScan {
    state: Scan,
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// Whether the closed object parses, once asked.
    valid: Option<bool>,
}

impl ObjectScan {
    fn feed(&mut self, fragment: &str) {
        for &byte in fragment.as_bytes() {
            match self.state {
                Scan::Other => return,
                Scan::Empty | Scan::Closed if byte.is_ascii_whitespace() => {}
                Scan::Empty if byte == b'{' => {
                    self.state = Scan::Open;
                    self.depth = 1;
                }
                Scan::Empty | Scan::Closed => self.state = Scan::Other,
                Scan::Open if self.in_string => match byte {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                },
                Scan::Open => match byte {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth -= 1;
                        if self.depth == 0 {
                            self.state = Scan::Closed;
                        }
                    }
                    _ => {}
                },
            }
        }
    }
}

impl Events for Decoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        match wire::parse_chunk(event.data.trim().as_bytes()) {
            Ok(chunk) => self.on_chunk(chunk, out).map(|()| false),
            Err(e) => {
                tracing::warn!(error = %e, "skipping an unreadable stream chunk");
                Ok(false)
            }
        }
    }

    fn on_whole(&mut self, body: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let chunk = wire::parse_chunk(body).map_err(|e| {
            ModelError::new(ModelErrorKind::InvalidResponse, format!("unreadable response: {e}"))
        })?;
        self.on_chunk(chunk, out)
    }

    fn has_output(&self) -> bool {
        self.emitted
    }

    fn has_finish_reason(&self) -> bool {
        Decoder::has_finish_reason(self)
    }

    fn is_settled(&self) -> bool {
        self.settled
    }

    fn is_blank(&self) -> bool {
        Decoder::is_blank(self)
    }

    fn finish(self) -> Result<AssistantMessage, ModelError> {
        // Text tool calls are the transport's to apply, for every API alike.
        Ok(Decoder::finish(self, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ContentBlock, ToolCall};
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn feed(decoder: &mut Decoder, chunks: &[&str]) -> Vec<ModelEvent> {
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.on_chunk(serde_json::from_str(chunk).unwrap(), &mut out).unwrap();
        }
        out
    }

    #[test]
    fn missing_indexes_follow_ids() {
        let mut decoder = Decoder::default();
        feed(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{\"p\""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
            ],
        );
        let message = decoder.finish(None);
        assert_eq!(
            message.content,
            vec![
                ContentBlock::ToolCall(ToolCall::new("a", "x", "{\"p\":1}")),
                ContentBlock::ToolCall(ToolCall::new("b", "y", "{}")),
            ]
        );
        assert_eq!(message.finish_reason, FinishReason::ToolUse);
    }

    fn calls(message: &AssistantMessage) -> Vec<(String, String, String)> {
        message.tool_calls().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())).collect()
    }

    fn triple(id: &str, name: &str, arguments: &str) -> (String, String, String) {
        (id.into(), name.into(), arguments.into())
    }

    #[test]
    fn two_calls_with_one_id_and_no_index_stay_two() {
        // Attack: both calls `id: "call_0"`, no index; they became one call
        // `read_fileglob` with arguments `{…}{…}`.
        let mut decoder = Decoder::default();
        feed(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"id":"call_0","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"id":"call_0","type":"function","function":{"name":"glob","arguments":"{\"pattern\":\"*\"}"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"id":"call_0","type":"function","function":{"name":"glob","arguments":"{\"pattern\":\"b*\"}"}}]}}]}"#,
            ],
        );
        assert_eq!(
            calls(&decoder.finish(None)),
            vec![
                triple("call_0", "read_file", r#"{"path":"a"}"#),
                triple("call_0", "glob", r#"{"pattern":"*"}"#),
                triple("call_0", "glob", r#"{"pattern":"b*"}"#),
            ]
        );
    }

    #[test]
    fn index_zero_for_every_call_does_not_merge_them() {
        let mut decoder = Decoder::default();
        feed(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":"{\"p\""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"y","arguments":""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            ],
        );
        assert_eq!(
            calls(&decoder.finish(None)),
            vec![triple("a", "x", r#"{"p":1}"#), triple("b", "y", "{}")]
        );
    }

    #[test]
    fn split_names_repeated_names_and_unfinished_calls_continue() {
        let mut decoder = Decoder::default();
        feed(
            &mut decoder,
            &[
                // A name in pieces.
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"read_"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"file","arguments":"{\"path\":"}}]}}]}"#,
                // A new id on a fragment of an unfinished call (servers that mint an
                // id per chunk) continues it.
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"zz","function":{"arguments":"\"a\"}"}}]}}]}"#,
                // The name repeated on every fragment, an empty one after the end too.
                r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"ls","arguments":"{\"d\":"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"name":"ls","arguments":"{\"x\":1}}"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"name":"ls","arguments":""}}]}}]}"#,
            ],
        );
        assert_eq!(
            calls(&decoder.finish(None)),
            vec![triple("zz", "read_file", r#"{"path":"a"}"#), triple("b", "ls", r#"{"d":{"x":1}}"#)]
        );
    }

    #[test]
    fn a_flood_of_empty_calls_meets_the_output_limit() {
        let mut decoder = Decoder::with_output_limit(100 * CALL_COST as u64);
        let mut out = Vec::new();
        let mut error = None;
        for i in 0..1000 {
            let chunk = format!(r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{i}}}]}}}}]}}"#);
            if let Err(e) = decoder.on_chunk(serde_json::from_str(&chunk).unwrap(), &mut out) {
                error = Some((i, e));
                break;
            }
        }
        let (at, error) = error.unwrap();
        assert_eq!(at, 100);
        assert_eq!(error.kind, ModelErrorKind::LimitExceeded);
    }

    #[test]
    fn telling_finished_calls_apart_stays_linear() {
        // Attack: arguments that keep looking almost finished (an open string full of
        // braces), each fragment opening an object: parsing the whole arguments at
        // every fragment would be quadratic.
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        let first = r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":"{\"s\":\""}}]}}]}"#;
        decoder.on_chunk(serde_json::from_str(first).unwrap(), &mut out).unwrap();
        let fragment = r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"x","arguments":"{}}"}}]}}]}"#;
        let started = std::time::Instant::now();
        for _ in 0..40_000 {
            decoder.on_chunk(serde_json::from_str(fragment).unwrap(), &mut out).unwrap();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(3), "{:?}", started.elapsed());
        assert_eq!(decoder.finish(None).tool_calls().count(), 1);
    }

    /// Complete calls: a name and JSON object arguments.
    fn calls_strategy() -> impl Strategy<Value = Vec<(String, String)>> {
        let name =
            prop_oneof![Just("read_file"), Just("glob"), Just("shell"), Just("x")].prop_map(String::from);
        let value = prop_oneof![
            "[a-z{}\\[\\] \":,]{0,8}".prop_map(serde_json::Value::from),
            any::<i32>().prop_map(serde_json::Value::from),
            "[a-z]{0,4}".prop_map(|s| serde_json::json!({"inner": s, "list": [1, {"k": "}"}]})),
        ];
        let arguments = proptest::collection::btree_map("[a-z]{1,5}", value, 0..4)
            .prop_map(|m| serde_json::to_string(&m).unwrap());
        proptest::collection::vec((name, arguments), 1..5)
    }

    /// `text` in pieces at the given cut points (on char boundaries).
    fn pieces(text: &str, cuts: &[usize]) -> Vec<String> {
        let mut bounds: Vec<usize> =
            cuts.iter().map(|c| c % (text.len() + 1)).filter(|c| text.is_char_boundary(*c)).collect();
        bounds.push(0);
        bounds.push(text.len());
        bounds.sort();
        bounds.dedup();
        bounds.windows(2).map(|w| text[w[0]..w[1]].to_owned()).collect()
    }

    proptest! {
        #[test]
        fn every_server_shape_gives_back_the_same_calls(
            calls in calls_strategy(),
            cuts in proptest::collection::vec(0usize..200, 0..6),
            shape in 0usize..6,
        ) {
            let mut chunks = Vec::new();
            for (n, (name, arguments)) in calls.iter().enumerate() {
                let id = match shape {
                    // One id for every call.
                    1 | 4 | 5 => "call_0".to_owned(),
                    _ => format!("call_{n}"),
                };
                if shape == 5 {
                    let head = serde_json::json!({"id": id, "function": {"name": name, "arguments": ""}});
                    chunks.push(serde_json::json!({"choices": [{"delta": {"tool_calls": [head]}}]}).to_string());
                }
                for (k, piece) in pieces(arguments, &cuts).into_iter().enumerate() {
                    let first = k == 0;
                    let mut call = serde_json::json!({"function": {"arguments": piece}});
                    match shape {
                        // OpenAI: index always, id and name on the first fragment.
                        0 => call["index"] = n.into(),
                        // No index, the same id for every call, on every fragment.
                        1 => call["id"] = id.clone().into(),
                        // Index 0 for every call.
                        2 => call["index"] = 0.into(),
                        // No index, distinct ids on first fragments only.
                        3 => {}
                        // No index, one id; each call opens with a fragment of its own
                        // (id and name, no arguments).
                        5 => {}
                        // Index given, the same id and the name on every fragment.
                        _ => {
                            call["index"] = n.into();
                            call["id"] = id.clone().into();
                            call["function"]["name"] = name.clone().into();
                        }
                    }
                    if first && shape != 5 {
                        call["id"] = id.clone().into();
                        call["function"]["name"] = name.clone().into();
                    }
                    chunks.push(serde_json::json!({"choices": [{"delta": {"tool_calls": [call]}}]}).to_string());
                }
            }
            let mut decoder = Decoder::default();
            let chunks: Vec<&str> = chunks.iter().map(String::as_str).collect();
            feed(&mut decoder, &chunks);
            let got: Vec<(String, String)> =
                decoder.finish(None).tool_calls().map(|c| (c.name.clone(), c.arguments.clone())).collect();
            prop_assert_eq!(got, calls);
        }
    }

    #[test]
    fn finish_reasons_map_and_keep_raw() {
        assert_eq!(map_finish_reason("tool_calls"), FinishReason::ToolUse);
        assert_eq!(map_finish_reason("content_filter"), FinishReason::Error);
        assert_eq!(map_finish_reason("length"), FinishReason::Length);
        let mut decoder = Decoder::default();
        feed(
            &mut decoder,
            &[r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"insufficient_system_resource"}]}"#],
        );
        let message = decoder.finish(None);
        assert_eq!(message.finish_reason, FinishReason::Unknown);
        assert_eq!(message.raw_finish_reason.as_deref(), Some("insufficient_system_resource"));
    }

    #[test]
    fn error_chunk_is_an_error() {
        let mut decoder = Decoder::default();
        let chunk =
            serde_json::from_str(r#"{"error":{"message":"upstream overloaded","code":502}}"#).unwrap();
        let err = decoder.on_chunk(chunk, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind, ModelErrorKind::Server);
        assert!(err.message.contains("upstream overloaded"));
    }
}
