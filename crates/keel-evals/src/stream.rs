//! Reading a `keel --json` stream, line by line as it grows or whole once keel is done,
//! into a [`RunRecord`], telling each nudge as it is read.

use serde_json::Value;

use crate::nudge::Nudge;
use crate::record::RunRecord;

/// Reads a `keel --json` stream one line at a time.
#[derive(Debug, Default)]
pub struct StreamReader {
    record: RunRecord,
    /// The answer the turn would end with now (see [`Nudge::answer`]).
    answer: String,
}

impl StreamReader {
    /// A reader at the start of a stream.
    pub fn new() -> StreamReader {
        StreamReader::default()
    }

    /// Reads one line (without its line break); returns the nudge it is, if it is one.
    /// Lines that are not JSON are skipped.
    pub fn line(&mut self, line: &str) -> Option<Nudge> {
        let Ok(event) = serde_json::from_str::<Value>(line) else { return None };
        let data = &event["data"];
        let record = &mut self.record;
        match event["type"].as_str().unwrap_or_default() {
            "step/start" => record.steps += 1,
            "user/message" if data["source"] == "hook" => {
                record.nudges += 1;
                return Some(Nudge {
                    seq: event["seq"].as_u64().unwrap_or_default(),
                    reason: data["reason"].as_str().unwrap_or_default().to_owned(),
                    answer: self.answer.clone(),
                });
            }
            "compaction/start" if data["reason"] == "restart" => record.restarts += 1,
            "assistant/message" => {
                self.answer.clear();
                for block in data["content"].as_array().into_iter().flatten() {
                    match block["type"].as_str() {
                        Some("text") => self.answer.push_str(block["text"].as_str().unwrap_or_default()),
                        Some("tool_call")
                            if block["id"].as_str().is_some_and(|id| id.starts_with("call_text_")) =>
                        {
                            record.text_calls += 1;
                        }
                        _ => {}
                    }
                }
            }
            "tool/result" => {
                let name = data["name"].as_str().unwrap_or("?").to_owned();
                *record.tools.entry(name).or_default() += 1;
                if data["is_error"] == true {
                    record.tool_errors += 1;
                    let code = data["error_code"].as_str().unwrap_or("tool_error").to_owned();
                    *record.error_codes.entry(code).or_default() += 1;
                } else if data["concludes_turn"] == true {
                    // A concluding tool (`answer`) delivers the turn's answer.
                    let content = data["content"].as_str().unwrap_or_default();
                    if !content.trim().is_empty() {
                        content.clone_into(&mut self.answer);
                    }
                }
            }
            "keel/done" => {
                record.reason = data["reason"].as_str().unwrap_or_default().to_owned();
                record.answer = data["final_text"].as_str().unwrap_or_default().to_owned();
                record.tool_calls = data["tool_calls"].as_u64().unwrap_or_default() as u32;
                let usage = &data["usage"];
                record.input_tokens = usage["input_tokens"].as_u64().unwrap_or_default();
                record.cached_tokens = usage["cached_tokens"].as_u64().unwrap_or_default();
                record.output_tokens = usage["output_tokens"].as_u64().unwrap_or_default();
            }
            "keel/error" => {
                record.error = data["message"].as_str().map(str::to_owned);
            }
            _ => {}
        }
        None
    }

    /// The record read so far (task fields left empty).
    pub fn finish(self) -> RunRecord {
        self.record
    }
}

/// True when `line` is a `tool/call` event: keel logs (and prints) one before it runs a
/// tool, so a stream with none after a nudge shows keel changed nothing since.
pub fn is_tool_call(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|event| event["type"] == "tool/call")
}

/// Reads a whole `keel --json` stream into a record (task fields left empty).
pub fn read_events(stream: &str) -> RunRecord {
    let mut reader = StreamReader::new();
    for line in stream.lines() {
        reader.line(line);
    }
    reader.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_stream_becomes_a_record() {
        let stream = r#"{"seq":1,"time":"t","type":"step/start","data":{"step":1}}
{"seq":2,"time":"t","type":"assistant/message","data":{"content":[{"type":"tool_call","id":"call_text_0","name":"shell","arguments":"{}"}]}}
{"type":"delta/text","data":{"text":"x"}}
{"seq":3,"time":"t","type":"tool/result","data":{"call_id":"call_text_0","name":"shell","source_seq":2,"content":"no","is_error":true,"error_code":"invalid_arguments"}}
{"seq":4,"time":"t","type":"step/start","data":{"step":2}}
{"seq":5,"time":"t","type":"user/message","data":{"text":"go on","source":"hook"}}
{"seq":6,"time":"t","type":"compaction/start","data":{"reason":"restart","tokens_before":900,"instruction":""}}
{"seq":7,"time":"t","type":"compaction/start","data":{"reason":"threshold","tokens_before":900,"instruction":"x"}}
not json
{"type":"keel/done","data":{"reason":"completed","final_text":"done","steps":2,"tool_calls":1,"usage":{"input_tokens":100,"output_tokens":7,"cached_tokens":60}}}"#;
        let record = read_events(stream);
        assert_eq!(
            record,
            RunRecord {
                reason: "completed".into(),
                steps: 2,
                tool_calls: 1,
                tool_errors: 1,
                error_codes: [("invalid_arguments".to_owned(), 1)].into(),
                tools: [("shell".to_owned(), 1)].into(),
                text_calls: 1,
                nudges: 1,
                restarts: 1,
                input_tokens: 100,
                cached_tokens: 60,
                output_tokens: 7,
                answer: "done".into(),
                ..RunRecord::default()
            }
        );
    }

    #[test]
    fn a_nudge_is_told_with_its_reason_and_the_answer_it_interrupted() {
        let mut reader = StreamReader::new();
        let lines = [
            r#"{"seq":1,"type":"user/message","data":{"text":"Fix it"}}"#,
            r#"{"seq":2,"type":"assistant/message","data":{"content":[{"type":"thinking","text":"hm"},{"type":"text","text":"It is "},{"type":"text","text":"fixed."}]}}"#,
            r#"{"seq":3,"type":"user/message","data":{"text":"Run the tests.","source":"hook","reason":"finish_check/not_verified"}}"#,
            r#"{"seq":4,"type":"assistant/message","data":{"content":[{"type":"tool_call","id":"c1","name":"answer","arguments":"{}"}]}}"#,
            r#"{"seq":5,"type":"tool/call","data":{"call_id":"c1","name":"answer","arguments":"{}"}}"#,
            r#"{"seq":6,"type":"tool/result","data":{"call_id":"c1","name":"answer","source_seq":4,"content":"42","concludes_turn":true}}"#,
            r#"{"seq":7,"type":"user/message","data":{"text":"Really?","source":"hook"}}"#,
            r#"{"seq":8,"type":"user/message","data":{"text":"Summarize.","source":"harness"}}"#,
        ];
        let nudges: Vec<Nudge> = lines.iter().filter_map(|line| reader.line(line)).collect();
        assert_eq!(
            nudges,
            [
                Nudge { seq: 3, reason: "finish_check/not_verified".into(), answer: "It is fixed.".into() },
                Nudge { seq: 7, reason: String::new(), answer: "42".into() },
            ]
        );
        assert_eq!(reader.finish().nudges, 2);
        assert!(is_tool_call(lines[4]));
        assert!(!is_tool_call(lines[3]) && !is_tool_call("{\"type\":\"tool/call\""));
    }
}
