//! What differs between the recording and the replay, found and told compactly: the
//! first line that differs of a text, the tools added, removed or changed, the messages
//! of a request that differ.

use keel_llm::{Message, ToolDefinition};

use super::script::Place;

/// One difference, where the recording has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Where in the recording.
    pub at: Place,
    /// What differs (`result of read_file app.py (call_1)`, `request: system prompt`).
    pub what: String,
    /// The recorded side, shortened (may be empty).
    pub recorded: String,
    /// The replayed side, shortened (may be empty).
    pub now: String,
}

impl Difference {
    /// A difference with no excerpts.
    pub fn note(at: Place, what: impl Into<String>) -> Difference {
        Difference { at, what: what.into(), recorded: String::new(), now: String::new() }
    }

    /// `turn 1 step 2 (event 14): what`, then the two sides, indented.
    pub fn render(&self) -> String {
        let place = match (self.at.turn, self.at.step) {
            (0, _) => "between turns".to_owned(),
            (turn, 0) => format!("turn {turn} before step 1"),
            (turn, step) => format!("turn {turn} step {step}"),
        };
        let mut out = format!("{place} (event {}): {}", self.at.seq, self.what);
        if !self.recorded.is_empty() || !self.now.is_empty() {
            out.push_str(&format!("\n    recorded: {}\n    now:      {}", self.recorded, self.now));
        }
        out
    }
}

/// The replay's folders shown as the recording's (the copy of the workspace as the
/// workspace, the replay's artifacts folder as the session's), so a replay in a copy
/// compares equal to the recording.
#[derive(Debug, Clone, Default)]
pub struct Paths {
    /// (the replay's, the recording's), longest first.
    pairs: Vec<(String, String)>,
}

impl Paths {
    /// Paths that show each `(replay's, recording's)` pair's first as its second.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Paths {
        let mut pairs: Vec<(String, String)> =
            pairs.into_iter().filter(|(now, then)| !now.is_empty() && now != then).collect();
        pairs.sort_by_key(|(now, _)| std::cmp::Reverse(now.len()));
        Paths { pairs }
    }

    /// `text` with the replay's paths replaced by the recording's.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (now, then) in &self.pairs {
            if out.contains(now.as_str()) {
                out = out.replace(now.as_str(), then);
            }
        }
        out
    }

    /// `message` as JSON, the replay's paths replaced (as JSON-escaped text).
    pub fn message(&self, message: &Message) -> String {
        let mut json = serde_json::to_string(message).unwrap_or_default();
        let escaped = |s: &str| serde_json::to_string(s).unwrap_or_default().trim_matches('"').to_owned();
        for (now, then) in &self.pairs {
            let now = escaped(now);
            if json.contains(now.as_str()) {
                json = json.replace(now.as_str(), &escaped(then));
            }
        }
        json
    }
}

/// Most characters of a side shown.
const EXCERPT: usize = 110;

/// One line, at most [`EXCERPT`] characters, control characters shown.
pub fn excerpt(text: &str) -> String {
    let line = crate::render::safe::visible(text).replace('\n', "⏎");
    if line.chars().count() <= EXCERPT {
        return line;
    }
    let cut: String = line.chars().take(EXCERPT - 1).collect();
    format!("{cut}…")
}

/// The first line where `recorded` and `now` differ, as two excerpts (`line 3: …`).
pub fn first_difference(recorded: &str, now: &str) -> (String, String) {
    let (a, b): (Vec<&str>, Vec<&str>) = (recorded.lines().collect(), now.lines().collect());
    let index = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i));
    let Some(i) = index else {
        // Only line endings or a last newline differ.
        return (excerpt(&format!("{recorded:?}")), excerpt(&format!("{now:?}")));
    };
    let side = |lines: &[&str]| match lines.get(i) {
        Some(line) if a.len().max(b.len()) == 1 => excerpt(line),
        Some(line) => format!("line {}: {}", i + 1, excerpt(line)),
        None => format!("(ends after {} lines)", lines.len()),
    };
    (side(&a), side(&b))
}

/// A difference between two texts, if they differ.
pub fn text(at: Place, what: &str, recorded: &str, now: &str) -> Option<Difference> {
    if recorded == now {
        return None;
    }
    let (recorded, now) = first_difference(recorded, now);
    Some(Difference { at, what: what.to_owned(), recorded, now })
}

/// How two tool lists differ: names added and removed, definitions changed.
pub fn tools(
    at: Place,
    what: &str,
    recorded: &[ToolDefinition],
    now: &[ToolDefinition],
) -> Option<Difference> {
    let parameters = |t: &ToolDefinition| serde_json::from_str::<serde_json::Value>(t.parameters.get()).ok();
    let mut parts = Vec::new();
    let added: Vec<&str> =
        now.iter().filter(|t| !recorded.iter().any(|r| r.name == t.name)).map(|t| t.name.as_str()).collect();
    let removed: Vec<&str> =
        recorded.iter().filter(|r| !now.iter().any(|t| t.name == r.name)).map(|t| t.name.as_str()).collect();
    let changed: Vec<String> = recorded
        .iter()
        .filter_map(|r| {
            let t = now.iter().find(|t| t.name == r.name)?;
            let mut how = Vec::new();
            if t.description != r.description {
                how.push("description");
            }
            if parameters(t) != parameters(r) {
                how.push("parameters");
            }
            (!how.is_empty()).then(|| format!("{} ({})", r.name, how.join(", ")))
        })
        .collect();
    if !added.is_empty() {
        parts.push(format!("added {}", added.join(", ")));
    }
    if !removed.is_empty() {
        parts.push(format!("removed {}", removed.join(", ")));
    }
    if !changed.is_empty() {
        parts.push(format!("changed {}", changed.join(", ")));
    }
    if parts.is_empty() && names(recorded) != names(now) {
        parts.push("the same tools in another order".to_owned());
    }
    if parts.is_empty() {
        return None;
    }
    Some(Difference {
        at,
        what: format!("{what}: {}", parts.join("; ")),
        recorded: excerpt(&names(recorded).join(", ")),
        now: excerpt(&names(now).join(", ")),
    })
}

fn names(list: &[ToolDefinition]) -> Vec<&str> {
    list.iter().map(|t| t.name.as_str()).collect()
}

/// What a message is, for a headline: `user message 3`, `result of shell (call_2)`.
pub fn describe(index: usize, message: &Message) -> String {
    match message {
        Message::User(_) => format!("user message (message {})", index + 1),
        Message::Assistant(_) => format!("model reply (message {})", index + 1),
        Message::ToolResult(result) => format!("result of {} ({})", result.name, result.call_id),
    }
}

/// The text of a message that people compare.
pub fn body(message: &Message) -> String {
    match message {
        Message::User(user) => user.content.clone(),
        Message::Assistant(reply) => {
            let calls: Vec<String> =
                reply.tool_calls().map(|c| format!("{}({})", c.name, c.arguments)).collect();
            format!("{}{}", reply.text(), calls.join(" "))
        }
        Message::ToolResult(result) => {
            if result.is_error {
                format!("(error) {}", result.content)
            } else {
                result.content.clone()
            }
        }
    }
}

/// A message that differs between a recorded request and the replayed one.
#[derive(Debug, Clone)]
pub struct MessageDifference {
    /// Its index in the request.
    pub index: usize,
    /// The recorded message (its JSON, paths as recorded) and the message.
    pub recorded: Option<(String, Message)>,
    /// The replayed one.
    pub now: Option<(String, Message)>,
}

/// The messages that differ, in order. When one was added or left out, the messages after
/// it no longer line up: only the first difference is kept, and the counts.
pub fn messages(recorded: &[Message], now: &[Message], paths: &Paths) -> Vec<MessageDifference> {
    let mut out = Vec::new();
    for index in 0..recorded.len().max(now.len()) {
        let r = recorded.get(index).map(|m| (serde_json::to_string(m).unwrap_or_default(), m.clone()));
        let n = now.get(index).map(|m| (paths.message(m), m.clone()));
        if r.as_ref().map(|r| &r.0) == n.as_ref().map(|n| &n.0) {
            continue;
        }
        out.push(MessageDifference { index, recorded: r, now: n });
        if recorded.len() != now.len() {
            break;
        }
    }
    out
}

/// A [`MessageDifference`] as a [`Difference`] of a request made at `at`.
pub fn message_difference(
    at: Place,
    found: &MessageDifference,
    counts: (usize, usize),
    paths: &Paths,
) -> Difference {
    let (recorded_count, now_count) = counts;
    let shown = found.recorded.as_ref().or(found.now.as_ref()).map(|(_, m)| describe(found.index, m));
    let mut what = format!("request: {}", shown.unwrap_or_else(|| format!("message {}", found.index + 1)));
    if recorded_count != now_count {
        what.push_str(&format!(" ({recorded_count} messages recorded, {now_count} now)"));
    }
    let side = |m: Option<&(String, Message)>| m.map(|(_, m)| paths.text(&body(m)));
    match (side(found.recorded.as_ref()), side(found.now.as_ref())) {
        (Some(r), Some(n)) if r != n => {
            let (recorded, now) = first_difference(&r, &n);
            Difference { at, what, recorded, now }
        }
        (Some(_), Some(_)) => {
            let (recorded, now) = match (&found.recorded, &found.now) {
                (Some((r, _)), Some((n, _))) => fields(r, n),
                _ => (String::new(), String::new()),
            };
            Difference { at, what: format!("{what}: the same text, other fields differ"), recorded, now }
        }
        (r, n) => Difference {
            at,
            what,
            recorded: r.map_or_else(|| "(none)".to_owned(), |r| excerpt(&r)),
            now: n.map_or_else(|| "(none)".to_owned(), |n| excerpt(&n)),
        },
    }
}

/// The fields in which two JSON objects differ, each side as `field=value …`.
fn fields(recorded: &str, now: &str) -> (String, String) {
    let parse = |text: &str| match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (r, n) = (parse(recorded), parse(now));
    let mut keys: Vec<&String> = r.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    let side = |map: &serde_json::Map<String, serde_json::Value>| {
        let shown: Vec<String> = keys
            .iter()
            .filter(|k| r.get(k.as_str()) != n.get(k.as_str()))
            .map(|k| format!("{k}={}", map.get(k.as_str()).map_or("(none)".to_owned(), |v| v.to_string())))
            .collect();
        excerpt(&shown.join(" "))
    };
    (side(&r), side(&n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_differing_line_is_shown() {
        assert_eq!(first_difference("a\nb\nc", "a\nB\nc"), ("line 2: b".to_owned(), "line 2: B".to_owned()));
        assert_eq!(first_difference("one", "two"), ("one".to_owned(), "two".to_owned()));
        assert_eq!(
            first_difference("a\nb", "a"),
            ("line 2: b".to_owned(), "(ends after 1 lines)".to_owned())
        );
        assert_eq!(first_difference("a\n", "a"), ("\"a\\n\"".to_owned(), "\"a\"".to_owned()));
        let paths = Paths::new([
            ("/tmp/r/ws".to_owned(), "/home/me/ws".to_owned()),
            ("/tmp/r/artifacts".to_owned(), "/home/me/.local/share/keel/sessions/s".to_owned()),
        ]);
        assert_eq!(paths.text("cd /tmp/r/ws/src"), "cd /home/me/ws/src");
        assert_eq!(
            paths.text("saved to /tmp/r/artifacts/x"),
            "saved to /home/me/.local/share/keel/sessions/s/x"
        );
    }
}
