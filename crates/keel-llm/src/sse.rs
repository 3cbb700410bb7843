//! A server-sent events parser that accepts bytes in any split.
//!
//! Lines end in `\n`, `\r\n` or `\r`; `:` lines are comments; `data:` lines accumulate
//! (joined by `\n`) until a blank line dispatches the event. A `\r` at the end of a chunk
//! waits for the next byte, so a `\r\n` split across reads is still one line end. One
//! event (or line) longer than a limit is an error: a server cannot make the parser
//! buffer without end.

/// The longest event (or line) [`SseParser::new`] accepts: 16 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, empty when absent.
    pub event: String,
    /// The joined `data:` lines.
    pub data: String,
}

/// An event or line went past the parser's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a server-sent event is longer than {limit} bytes")]
pub struct EventTooLarge {
    /// The limit in bytes.
    pub limit: usize,
}

/// Incremental SSE parser.
#[derive(Debug)]
pub struct SseParser {
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no line end: a long line arriving in
    /// many reads is scanned once, not once per read.
    scanned: usize,
    data: String,
    event: String,
    has_data: bool,
    max_event_bytes: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseParser {
    /// A fresh parser accepting events up to [`DEFAULT_MAX_EVENT_BYTES`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh parser accepting events (and lines) up to `limit` bytes.
    pub fn with_max_event_bytes(limit: usize) -> Self {
        SseParser {
            pending: Vec::new(),
            scanned: 0,
            data: String::new(),
            event: String::new(),
            has_data: false,
            max_event_bytes: limit,
        }
    }

    /// Feeds bytes; complete events are pushed to `out`. An event or line longer than
    /// the limit is an error, after which the parser holds nothing.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), EventTooLarge> {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        let mut from = self.scanned;
        loop {
            let Some(pos) = memchr::memchr2(b'\n', b'\r', &self.pending[from..]) else {
                from = self.pending.len();
                break;
            };
            let line_end = from + pos;
            let end_len = if self.pending[line_end] == b'\r' {
                match self.pending.get(line_end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A `\r` at the very end: it may be the first half of `\r\n`.
                    None => {
                        from = line_end;
                        break;
                    }
                }
            } else {
                1
            };
            let line = std::mem::take(&mut self.pending);
            self.line(&line[start..line_end], out);
            self.pending = line;
            start = line_end + end_len;
            from = start;
        }
        self.pending.drain(..start);
        self.scanned = from - start;
        if self.pending.len() + self.data.len() > self.max_event_bytes {
            self.pending = Vec::new();
            self.data = String::new();
            self.scanned = 0;
            self.has_data = false;
            return Err(EventTooLarge { limit: self.max_event_bytes });
        }
        Ok(())
    }

    /// Ends the stream: a trailing line and an undispatched event are delivered.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        self.scanned = 0;
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
            parser.feed(chunk, &mut out).unwrap();
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

    #[test]
    fn an_endless_line_is_an_error_not_a_buffer() {
        let mut parser = SseParser::with_max_event_bytes(64 << 10);
        let mut out = Vec::new();
        parser.feed(b"data: ", &mut out).unwrap();
        let chunk = [b'a'; 1024];
        let mut fed = 6;
        let error = loop {
            match parser.feed(&chunk, &mut out) {
                Ok(()) => fed += chunk.len(),
                Err(error) => break error,
            }
            assert!(fed <= 64 << 10, "accepted {fed} bytes");
        };
        assert_eq!(error, EventTooLarge { limit: 64 << 10 });
        assert!(parser.pending.capacity() == 0 && parser.data.is_empty(), "nothing is held");
    }

    #[test]
    fn one_event_of_many_lines_is_bounded_too() {
        let mut parser = SseParser::with_max_event_bytes(1000);
        let mut out = Vec::new();
        let line = format!("data: {}\n", "b".repeat(90));
        let mut result = Ok(());
        for _ in 0..20 {
            result = parser.feed(line.as_bytes(), &mut out);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(EventTooLarge { limit: 1000 }));
        assert!(out.is_empty());
        // Events under the limit pass, however many.
        let mut parser = SseParser::with_max_event_bytes(1000);
        for _ in 0..100 {
            parser.feed(line.as_bytes(), &mut out).unwrap();
            parser.feed(b"\n", &mut out).unwrap();
        }
        assert_eq!(out.len(), 100);
    }

    #[test]
    fn a_long_line_in_small_reads_is_scanned_once() {
        // 4 MiB in 64-byte reads: rescanning the pending line at every read would
        // scan 128 GiB; scanning once takes milliseconds.
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser.feed(b"data: ", &mut out).unwrap();
        let started = std::time::Instant::now();
        let chunk = [b'z'; 64];
        for _ in 0..(4 << 20) / 64 {
            parser.feed(&chunk, &mut out).unwrap();
        }
        parser.feed(b"\n\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.len(), 4 << 20);
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }

    /// Events, each as lines of one or two data fields.
    fn events_strategy() -> impl Strategy<Value = Vec<Vec<String>>> {
        let field = "[a-zA-Z0-9 {}\"\u{e9}\u{2713}:]{0,12}";
        proptest::collection::vec(proptest::collection::vec(field, 1..3), 1..8)
    }

    /// Keep-alive shapes servers send between (and inside) events.
    const COMMENTS: &[&[u8]] =
        &[b": ping\n", b":\n", b": OPENROUTER PROCESSING\r\n", b":keep-alive\r", b"\n"];

    proptest! {
        #[test]
        fn comments_anywhere_between_lines_change_nothing(
            events in events_strategy(),
            inserts in proptest::collection::vec((0usize..64, 0usize..COMMENTS.len()), 0..24),
            cuts in proptest::collection::vec(0usize..4000, 0..24),
        ) {
            // Lines of the stream, each with its end.
            let mut lines: Vec<Vec<u8>> = Vec::new();
            let mut expected = Vec::new();
            for event in &events {
                for data in event {
                    lines.push(format!("data: {data}\n").into_bytes());
                }
                lines.push(b"\n".to_vec());
                expected.push(data(&event.join("\n")));
            }
            // A comment line (or a stray blank line between events) anywhere at a line
            // start; a blank line inside an event would split it, so only comments go there.
            let mut stream = Vec::new();
            let mut inside = false;
            for (i, line) in lines.iter().enumerate() {
                for (at, which) in &inserts {
                    let comment = COMMENTS[*which];
                    // A comment ended by a lone `\r` before a blank line would make
                    // that blank line the second half of its `\r\n`.
                    let merges = comment.ends_with(b"\r") && line.starts_with(b"\n");
                    if at % lines.len() == i && !(inside && comment == b"\n") && !merges {
                        stream.extend_from_slice(comment);
                    }
                }
                stream.extend_from_slice(line);
                inside = line.as_slice() != b"\n";
            }
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
            cuts.sort();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut last = 0;
            for cut in cuts {
                chunks.push(&stream[last..cut]);
                last = cut;
            }
            chunks.push(&stream[last..]);
            prop_assert_eq!(parse_all(&chunks), expected);
        }
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
