//! Repairing the one JSON defect servers commonly send: a `\u` escape of a lone UTF-16
//! surrogate (`"\ud800"`), written when a token ends inside a character outside the
//! Basic Multilingual Plane. serde_json rejects the whole document for it; the repair
//! writes each lone surrogate as `\ufffd` (the replacement character) and keeps the rest.

/// `\ufffd`, the escape written in place of a lone surrogate.
const REPLACEMENT: &[u8] = br"\ufffd";

/// The value of the four hex digits at `at`, if there are four.
fn hex4(json: &[u8], at: usize) -> Option<u16> {
    let digits = json.get(at..at + 4)?;
    let mut value = 0u16;
    for &digit in digits {
        let nibble = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            b'A'..=b'F' => digit - b'A' + 10,
            _ => return None,
        };
        value = value << 4 | u16::from(nibble);
    }
    Some(value)
}

fn is_high(unit: u16) -> bool {
    (0xD800..=0xDBFF).contains(&unit)
}

fn is_low(unit: u16) -> bool {
    (0xDC00..=0xDFFF).contains(&unit)
}

/// Parses one JSON document (a stream event, a whole body). A document serde_json
/// refuses is tried again with its lone surrogate escapes replaced, so one split emoji
/// does not lose the event; valid documents take the fast path unchanged.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(data: &[u8]) -> serde_json::Result<T> {
    serde_json::from_slice(data).or_else(|error| {
        let fixed = replace_lone_surrogates(data).ok_or(error)?;
        serde_json::from_slice(&fixed)
    })
}

/// `json` with every lone surrogate escape replaced by `\ufffd`, or `None` when it has
/// none. A high surrogate followed by a low one is a valid pair and kept. Outside
/// strings JSON has no backslash, so escapes are found without tracking strings; an
/// escaped backslash (`\\`) is stepped over whole, so `\\ud800` is text, not an escape.
pub(crate) fn replace_lone_surrogates(json: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(pos) = json.get(i..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        let at = i + pos;
        if json.get(at + 1) != Some(&b'u') {
            // Any other escape, `\\` included: both bytes are stepped over.
            i = at + 2;
            continue;
        }
        let Some(unit) = hex4(json, at + 2) else {
            i = at + 2;
            continue;
        };
        let paired = is_high(unit)
            && json.get(at + 6..at + 8) == Some(br"\u".as_slice())
            && hex4(json, at + 8).is_some_and(is_low);
        if paired {
            i = at + 12;
        } else if is_high(unit) || is_low(unit) {
            let fixed = out.get_or_insert_with(|| Vec::with_capacity(json.len()));
            fixed.extend_from_slice(&json[copied..at]);
            fixed.extend_from_slice(REPLACEMENT);
            copied = at + 6;
            i = at + 6;
        } else {
            i = at + 6;
        }
    }
    let mut fixed = out?;
    fixed.extend_from_slice(&json[copied..]);
    Some(fixed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn repaired(json: &str) -> Option<String> {
        replace_lone_surrogates(json.as_bytes()).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        assert_eq!(repaired(r#""a\ud800b""#).as_deref(), Some(r#""a\ufffdb""#));
        assert_eq!(repaired(r#""\uDC00""#).as_deref(), Some(r#""\ufffd""#));
        // A high surrogate followed by another high one that has its pair.
        assert_eq!(repaired(r#""\ud83d\ud83d\ude00""#).as_deref(), Some(r#""\ufffd\ud83d\ude00""#));
        // Followed by a plain escape, not a low surrogate.
        assert_eq!(repaired(r#""\ud800\u0041""#).as_deref(), Some(r#""\ufffd\u0041""#));
        // At the very end of the text.
        assert_eq!(repaired(r"\ud800").as_deref(), Some(r"\ufffd"));
    }

    #[test]
    fn valid_text_and_escaped_backslashes_are_left_alone() {
        assert_eq!(repaired(r#""\ud83d\ude00 \u00e9 \n \"""#), None);
        // `\\ud800` is a backslash and the letters ud800.
        assert_eq!(repaired(r#""\\ud800""#), None);
        // A backslash, then a real lone surrogate.
        assert_eq!(repaired(r#""\\\ud800""#).as_deref(), Some(r#""\\\ufffd""#));
        // Broken escapes are not this repair's business.
        assert_eq!(repaired(r#""\ud8""#), None);
        assert_eq!(repaired("\\"), None);
    }

    /// A piece of a JSON string literal and the UTF-16 units it stands for.
    #[derive(Debug, Clone)]
    enum Piece {
        Text(String),
        Escape(u16, bool),
        Backslash,
        Quote,
    }

    fn piece() -> impl Strategy<Value = Piece> {
        prop_oneof![
            "[a-z u\u{e9}\u{1F600}\u{4e2d}0-9]{0,6}".prop_map(Piece::Text),
            // Any unit, surrogates often, in either case.
            (prop_oneof![0xD800u16..0xE000, any::<u16>()], any::<bool>())
                .prop_map(|(u, upper)| Piece::Escape(u, upper)),
            Just(Piece::Backslash),
            Just(Piece::Quote),
        ]
    }

    proptest! {
        #[test]
        fn repaired_json_decodes_like_a_lossy_utf16_decoder(pieces in proptest::collection::vec(piece(), 0..24)) {
            let mut literal = String::from("\"");
            let mut units: Vec<u16> = Vec::new();
            for piece in &pieces {
                match piece {
                    Piece::Text(text) => {
                        literal.push_str(text);
                        units.extend(text.encode_utf16());
                    }
                    Piece::Escape(unit, upper) => {
                        literal.push_str(&if *upper { format!("\\u{unit:04X}") } else { format!("\\u{unit:04x}") });
                        units.push(*unit);
                    }
                    Piece::Backslash => {
                        literal.push_str(r"\\");
                        units.push(u16::from(b'\\'));
                    }
                    Piece::Quote => {
                        literal.push_str("\\\"");
                        units.push(u16::from(b'"'));
                    }
                }
            }
            literal.push('"');
            let fixed = replace_lone_surrogates(literal.as_bytes()).unwrap_or_else(|| literal.clone().into_bytes());
            let decoded: String = serde_json::from_slice(&fixed).unwrap();
            prop_assert_eq!(decoded, String::from_utf16_lossy(&units));
        }

        #[test]
        fn any_bytes_are_safe(bytes in proptest::collection::vec(prop_oneof![Just(b'\\'), Just(b'u'), Just(b'd'), Just(b'8'), any::<u8>()], 0..64)) {
            let _ = replace_lone_surrogates(&bytes);
        }
    }
}
