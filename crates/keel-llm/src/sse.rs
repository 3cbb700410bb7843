//! A server-sent events parser that accepts bytes in any split.
//!
//! Lines end in `\n`, `\r\n` or `\r`; `:` lines are comments; `data:` lines accumulate
//! (joined by `\n`) until a blank line dispatches the event. A `\r` at the end of a chunk
//! waits for the next byte, so a `\r\n` split across reads is still one line end.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, empty when absent.
    pub event: String,
    /// The joined `data:` lines.
    pub data: String,
}

/// Incremental SSE parser.
#[derive(Debug, Default)]
pub struct SseParser {
    pending: Vec<u8>,
    data: String,
    event: String,
    has_data: bool,
}

impl SseParser {
    /// A fresh parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; complete events are pushed to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        loop {
            let rest = &self.pending[start..];
            let Some(pos) = memchr::memchr2(b'\n', b'\r', rest) else { break };
            let end_len = if rest[pos] == b'\r' {
                match rest.get(pos + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A `\r` at the very end: it may be the first half of `\r\n`.
                    None => break,
                }
            } else {
                1
            };
            let line_end = start + pos;
            let next = line_end + end_len;
            let line = std::mem::take(&mut self.pending);
            self.line(&line[start..line_end], out);
            self.pending = line;
            start = next;
        }
        self.pending.drain(..start);
    }

    /// Ends the stream: a trailing line and an undispatched event are delivered.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if self.pending.last() == Some(&b'\r') {
            self.pending.pop();
        }
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(&line, out);
        }
        self.dispatch(out);
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        // Valid UTF-8 is the norm; `from_utf8` checks it far faster than the lossy path.
        let value = match std::str::from_utf8(value) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(value),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"event" => self.event = value.into_owned(),
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(SseEvent {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data),
            });
        }
        self.event.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out);
        }
        parser.finish(&mut out);
        out
    }

    fn data(text: &str) -> SseEvent {
        SseEvent { event: String::new(), data: text.into() }
    }

    #[test]
    fn comments_keepalives_and_line_endings() {
        let stream = b": OPENROUTER PROCESSING\n\ndata: {\"a\":1}\r\n\r\n\r\ndata: one\rdata: two\r\revent: ping\ndata: x\n\ndata: [DONE]\n\n";
        assert_eq!(
            parse_all(&[stream]),
            vec![
                data("{\"a\":1}"),
                data("one\ntwo"),
                SseEvent { event: "ping".into(), data: "x".into() },
                data("[DONE]")
            ]
        );
    }

    #[test]
    fn missing_final_blank_line_still_dispatches() {
        assert_eq!(parse_all(&[b"data: last"]), vec![data("last")]);
        assert_eq!(parse_all(&[b"data: last\r"]), vec![data("last")]);
    }

    #[test]
    fn field_without_space_and_unknown_fields() {
        assert_eq!(parse_all(&[b"id: 3\nretry: 10\ndata:tight\n\n"]), vec![data("tight")]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(parse_all(&[b"data: \xff\n\n"]), vec![data("\u{fffd}")]);
    }

    fn sample() -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(b": comment\r\n\r\n");
        for i in 0..20 {
            s.extend_from_slice(
                format!("data: {{\"i\":{i},\"t\":\"h\u{e9}llo \u{2713}\"}}\r\n\r\n").as_bytes(),
            );
        }
        s.extend_from_slice(b"event: done\ndata: a\ndata: b\n\n\r\r");
        s.extend_from_slice(b"data: [DONE]\n\n");
        s
    }

    proptest! {
        #[test]
        fn any_split_yields_the_same_events(cuts in proptest::collection::vec(0usize..2000, 0..40)) {
            let stream = sample();
            let whole = parse_all(&[&stream]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
            cuts.sort();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut last = 0;
            for cut in cuts {
                chunks.push(&stream[last..cut]);
                last = cut;
            }
            chunks.push(&stream[last..]);
            prop_assert_eq!(parse_all(&chunks), whole);
        }

        #[test]
        fn byte_by_byte_equals_whole(_seed in 0u8..1) {
            let stream = sample();
            let chunks: Vec<&[u8]> = stream.chunks(1).collect();
            prop_assert_eq!(parse_all(&chunks), parse_all(&[&stream]));
        }
    }
}
