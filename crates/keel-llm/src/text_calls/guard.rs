//! Streamed text with the calls written in it held back: a model that writes its calls
//! as text (`<tool_call>{…}</tool_call>`, or a reply that opens with a call object)
//! streams them as text deltas, and whoever shows the stream (a terminal, an editor over
//! ACP, a server's clients) would show the markup. The guard passes prose through as it
//! arrives and holds what may be a call; the finished message, where the calls are read
//! (see [`super::apply_text_tool_calls`]), has everything.

use super::TAGS;

/// Where the guard is in the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but blanks yet: whether the reply opens with a call is not known.
    Start,
    /// Prose: passed through, up to a `<` that may open a call tag.
    Prose,
    /// Inside a call tag: held until its closing tag.
    Inside(&'static str),
    /// The reply opens like a call (an object, a list, a fence, an element): all of it
    /// is held for the finished message.
    Held,
}

/// Holds back the calls in a reply's streamed text. One per reply; [`CallTextGuard::push`]
/// each delta, [`CallTextGuard::flush`] at the end.
#[derive(Debug)]
pub struct CallTextGuard {
    pending: String,
    /// What was held back as a possible call since the last prose shown: the caller
    /// shows it after all ([`CallTextGuard::flush`]) when the reply held no call.
    held: String,
    state: State,
}

impl Default for CallTextGuard {
    fn default() -> Self {
        CallTextGuard { pending: String::new(), held: String::new(), state: State::Start }
    }
}

/// What the text at a `<` is.
enum AtAngle {
    /// An opening call tag of this many bytes, closed by this tag.
    Opens(usize, &'static str),
    /// It may still become one: wait for more.
    Undecided,
    /// Prose.
    Prose,
}

fn at_angle(text: &str) -> AtAngle {
    for tag in TAGS {
        let open = ["<", tag, ">"].concat();
        if text.starts_with(&open) {
            let close: &'static str = match tag {
                "tool_call" => "</tool_call>",
                "tools" => "</tools>",
                "function_call" => "</function_call>",
                _ => "</tool_response>",
            };
            return AtAngle::Opens(open.len(), close);
        }
        if open.starts_with(text) {
            return AtAngle::Undecided;
        }
    }
    AtAngle::Prose
}

/// Whether a reply that opens with `text` (blanks trimmed) may be a call written as text
/// (the shapes [`super::extract_text_tool_calls`] reads at a reply's start).
fn opens_like_a_call(text: &str) -> bool {
    text.starts_with(['{', '['])
        || text.starts_with("```")
        || text.strip_prefix('<').is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic()))
}

impl CallTextGuard {
    /// At the reply's end: what was held back and not shown. The caller shows it when the
    /// finished reply turned out to hold no call written as text (a code block, a JSON
    /// answer, a literal `<tools>` in prose), and drops it otherwise.
    pub fn flush(&mut self) -> String {
        let mut rest = std::mem::take(&mut self.held);
        rest.push_str(&std::mem::take(&mut self.pending));
        rest
    }

    /// Takes a delta; returns the text that may be shown now (possibly empty).
    pub fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        let mut out = String::new();
        loop {
            match self.state {
                State::Held => {
                    self.held.push_str(&self.pending);
                    self.pending.clear();
                    return out;
                }
                State::Start => {
                    let start = self.pending.trim_start();
                    if start.is_empty() {
                        return out;
                    }
                    // A tag opening the reply is read below, as anywhere else; one that may
                    // still become a tag or an element waits for more.
                    let tag = match at_angle(start) {
                        AtAngle::Undecided => return out,
                        AtAngle::Opens(..) => true,
                        AtAngle::Prose => false,
                    };
                    self.state = if !tag && opens_like_a_call(start) { State::Held } else { State::Prose };
                }
                State::Prose => {
                    let Some(at) = self.pending.find('<') else {
                        out.push_str(&self.pending);
                        self.pending.clear();
                        return out;
                    };
                    out.push_str(&self.pending[..at]);
                    match at_angle(&self.pending[at..]) {
                        AtAngle::Opens(len, close) => {
                            self.held.push_str(&self.pending[at..at + len]);
                            self.pending.drain(..at + len);
                            self.state = State::Inside(close);
                        }
                        AtAngle::Undecided => {
                            self.pending.drain(..at);
                            return out;
                        }
                        AtAngle::Prose => {
                            out.push('<');
                            self.pending.drain(..=at);
                        }
                    }
                }
                State::Inside(close) => match self.pending.find(close) {
                    Some(at) => {
                        // A closed call: the finished reply reads it; it is not shown.
                        self.pending.drain(..at + close.len());
                        self.held.clear();
                        self.state = State::Prose;
                    }
                    None => {
                        // Keep only what may be the start of the closing tag.
                        let keep = (0..close.len())
                            .rev()
                            .map(|n| self.pending.len().saturating_sub(n))
                            .find(|&from| {
                                self.pending.is_char_boundary(from)
                                    && close.starts_with(&self.pending[from..])
                            })
                            .unwrap_or(self.pending.len());
                        self.held.extend(self.pending.drain(..keep));
                        return out;
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shown(deltas: &[&str]) -> String {
        let mut guard = CallTextGuard::default();
        deltas.iter().map(|d| guard.push(d)).collect()
    }

    #[test]
    fn a_tagged_call_is_held_in_any_split_and_prose_around_it_shows() {
        let reply = "Let me look. <tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a<b\"}}</tool_call> done";
        let tokens: Vec<String> = reply.chars().map(String::from).collect();
        let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
        assert_eq!(shown(&tokens), "Let me look.  done");
        assert_eq!(shown(&[reply]), "Let me look.  done");
        assert_eq!(shown(&["<tool", "_call> {\"name\":", "\"x\"} </tool_", "call>"]), "");
    }

    #[test]
    fn a_reply_opening_like_a_call_is_held_whole_and_prose_with_angles_is_not() {
        assert_eq!(shown(&["  ", "{\"name\": \"shell\"", ", \"arguments\": {}}"]), "");
        assert_eq!(shown(&["```json\n{}", "\n```"]), "");
        assert_eq!(shown(&["<function name=\"x\"/>"]), "");
        assert_eq!(shown(&["a < b and ", "<b>bold</b> x <tool"]), "a < b and <b>bold</b> x ");
        assert_eq!(shown(&["Vec<T>", " is fine"]), "Vec<T> is fine");
    }

    #[test]
    fn what_was_held_comes_back_at_the_end_for_the_caller_to_show_when_no_call_was_there() {
        // A code-block answer is held whole while it streams, and handed back at the end.
        let mut guard = CallTextGuard::default();
        assert_eq!(guard.push("```python\nprint(1)"), "");
        assert_eq!(guard.push("\n```"), "");
        assert_eq!(guard.flush(), "```python\nprint(1)\n```");
        // A literal tag in prose that is never closed: the rest comes back at the end.
        let mut guard = CallTextGuard::default();
        assert_eq!(guard.push("Add a <tools> section, "), "Add a ");
        assert_eq!(guard.push("then run it."), "");
        assert_eq!(guard.flush(), "<tools> section, then run it.");
        // A closed call is not handed back; prose after it was shown.
        let mut guard = CallTextGuard::default();
        assert_eq!(guard.push("<tool_call>{}</tool_call> ok"), " ok");
        assert_eq!(guard.flush(), "");
        // A reply cut at `<`: the `<` comes back.
        let mut guard = CallTextGuard::default();
        assert_eq!(guard.push("a <"), "a ");
        assert_eq!(guard.flush(), "<");
    }

    #[test]
    fn an_element_call_split_at_its_angle_is_held_too() {
        assert_eq!(shown(&["<", "function", " name=\"read_file\"/>"]), "");
        assert_eq!(shown(&["<", "b>bold</b>"]), "");
        let mut guard = CallTextGuard::default();
        assert_eq!(guard.push("<"), "");
        assert_eq!(guard.push(" is less"), "< is less");
    }

    proptest! {
        /// Whatever the split, prose without call markup shows whole, in order.
        #[test]
        fn prose_shows_whole_in_any_split(words in proptest::collection::vec("[a-z <>=]{0,8}", 0..20), cut in 0usize..40) {
            let text: String = words.concat();
            let text = format!("x{}", text.replace("<t", "< t").replace("<f", "< f"));
            let cut = text.char_indices().map(|(i, _)| i).nth(cut).unwrap_or(text.len());
            let mut guard = CallTextGuard::default();
            let mut out = guard.push(&text[..cut]);
            out.push_str(&guard.push(&text[cut..]));
            // What may still open a tag at the very end is held until more arrives.
            let held = text.len() - out.len();
            prop_assert!(text.starts_with(&out));
            prop_assert!(held == 0 || text[out.len()..].starts_with('<'), "{text:?} showed {out:?}");
        }
    }
}
