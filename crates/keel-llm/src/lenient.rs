//! A forgiving reader for the JSON-like text small models write: Python literals
//! (`True`, `None`, `'single quotes'`), bare keys, trailing commas, raw newlines inside
//! strings. Used only to recover tool calls written as text; strict JSON parses the same.

use serde_json::{Map, Number, Value};

/// Deepest nesting accepted (a hostile input cannot overflow the stack).
const MAX_DEPTH: usize = 64;

/// Reads one value at the start of `text` (leading whitespace allowed). Returns it and
/// the number of bytes consumed, or `None` when `text` does not start with a value.
pub fn parse_prefix(text: &str) -> Option<(Value, usize)> {
    let mut reader = Reader { bytes: text.as_bytes(), text, pos: 0 };
    reader.skip_ws();
    let value = reader.value(0)?;
    Some((value, reader.pos))
}

/// Reads `text` as exactly one value (whitespace around it allowed).
pub fn parse(text: &str) -> Option<Value> {
    let (value, consumed) = parse_prefix(text)?;
    text[consumed..].trim().is_empty().then_some(value)
}

struct Reader<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' | b'\'' => self.string().map(Value::String),
            b'-' | b'0'..=b'9' => self.number(),
            _ => {
                let word = self.identifier()?;
                match word {
                    "true" | "True" => Some(Value::Bool(true)),
                    "false" | "False" => Some(Value::Bool(false)),
                    "null" | "None" => Some(Value::Null),
                    _ => None,
                }
            }
        }
    }

    fn object(&mut self, depth: usize) -> Option<Value> {
        self.pos += 1; // {
        let mut map = Map::new();
        loop {
            self.skip_ws();
            if self.eat(b'}') {
                return Some(Value::Object(map));
            }
            let key = match self.peek()? {
                b'"' | b'\'' => self.string()?,
                _ => self.identifier()?.to_owned(),
            };
            self.skip_ws();
            if !self.eat(b':') {
                return None;
            }
            self.skip_ws();
            let value = self.value(depth + 1)?;
            map.insert(key, value);
            self.skip_ws();
            if !self.eat(b',') {
                self.skip_ws();
                return self.eat(b'}').then_some(Value::Object(map));
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<Value> {
        self.pos += 1; // [
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.eat(b']') {
                return Some(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            if !self.eat(b',') {
                self.skip_ws();
                return self.eat(b']').then_some(Value::Array(items));
            }
        }
    }

    fn identifier(&mut self) -> Option<&str> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
            self.pos += 1;
        }
        (self.pos > start).then(|| &self.text[start..self.pos])
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.pos;
        self.eat(b'-');
        while self.peek().is_some_and(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        {
            self.pos += 1;
        }
        let text = &self.text[start..self.pos];
        if let Ok(n) = text.parse::<i64>() {
            return Some(Value::Number(n.into()));
        }
        text.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number)
    }

    /// A string in double or single quotes. Escapes are JSON's plus `\'`; an unknown
    /// escape keeps its backslash; raw newlines are kept.
    fn string(&mut self) -> Option<String> {
        let quote = self.peek()?;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = &self.text[self.pos..];
            let stop = rest.find([quote as char, '\\'])?;
            out.push_str(&rest[..stop]);
            self.pos += stop;
            if self.eat(quote) {
                return Some(out);
            }
            self.pos += 1; // backslash
            let escaped = self.peek()?;
            self.pos += 1;
            match escaped {
                b'n' => out.push('\n'),
                b't' => out.push('\t'),
                b'r' => out.push('\r'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'/' => out.push('/'),
                b'"' => out.push('"'),
                b'\'' => out.push('\''),
                b'\\' => out.push('\\'),
                b'u' => out.push(self.unicode_escape()?),
                _ => {
                    out.push('\\');
                    // Re-read the byte as text (it may start a multi-byte character).
                    self.pos -= 1;
                    let ch = self.text[self.pos..].chars().next()?;
                    self.pos += ch.len_utf8();
                    out.push(ch);
                }
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.pos..self.pos + 4)?;
        let value = u32::from_str_radix(digits, 16).ok()?;
        self.pos += 4;
        Some(value)
    }

    /// `\uXXXX`, with surrogate pairs joined; a lone surrogate becomes U+FFFD.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) && self.text[self.pos..].starts_with("\\u") {
            let save = self.pos;
            self.pos += 2;
            if let Some(second) = self.hex4()
                && (0xDC00..0xE000).contains(&second)
            {
                let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Some(char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            self.pos = save;
        }
        Some(char::from_u32(first).unwrap_or('\u{FFFD}'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn strict_json_reads_the_same() {
        for text in [
            r#"{"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "d\n\"e\" \u00e9 \ud83d\ude00"}}"#,
            r#"[]"#,
            r#""x""#,
            "0",
        ] {
            let strict: Value = serde_json::from_str(text).unwrap();
            assert_eq!(parse(text), Some(strict), "{text}");
        }
    }

    #[test]
    fn python_literals_quotes_bare_keys_and_trailing_commas() {
        assert_eq!(
            parse("{'name': 'shell', 'arguments': {'command': 'ls -la', 'quiet': True, 'n': None,},}"),
            Some(json!({"name": "shell", "arguments": {"command": "ls -la", "quiet": true, "n": null}}))
        );
        assert_eq!(parse("{name: \"x\", args: [1, 2,]}"), Some(json!({"name": "x", "args": [1, 2]})));
        assert_eq!(parse(r#"{'s': 'it\'s "fine"'}"#), Some(json!({"s": "it's \"fine\""})));
    }

    #[test]
    fn raw_newlines_and_unknown_escapes_are_kept() {
        assert_eq!(
            parse("{\"content\": \"line 1\nline 2 \\d+\"}"),
            Some(json!({"content": "line 1\nline 2 \\d+"}))
        );
    }

    #[test]
    fn prefix_reports_what_it_consumed() {
        let text = "  {\"a\": 1}}} trailing";
        let (value, consumed) = parse_prefix(text).unwrap();
        assert_eq!(value, json!({"a": 1}));
        assert_eq!(&text[consumed..], "}} trailing");
        assert_eq!(parse(text), None);
    }

    #[test]
    fn broken_input_is_none_not_a_panic() {
        for text in ["{", "{\"a\":", "{\"a\" 1}", "[1 2]", "'open", "\"\\u12", "nope", "{\"a\": 1,,}", ""] {
            assert_eq!(parse(text), None, "{text:?}");
        }
        let deep = "[".repeat(10_000);
        assert_eq!(parse(&deep), None);
        assert_eq!(parse("\"\\ud800\""), Some(json!("\u{FFFD}")));
    }
}
