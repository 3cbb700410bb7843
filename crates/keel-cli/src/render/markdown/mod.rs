//! Answers as Markdown on a terminal, block by block as they stream ([`layout`]: lists in
//! lists, quotes, wrapping at word boundaries; code colored and tables drawn by
//! `markdown-to-ansi`); raw text when stdout is not a terminal or `NO_COLOR` is set.

use std::io::IsTerminal;

#[cfg(test)]
mod corpus;
mod layout;
mod wrap;

/// Whether answers on stdout are rendered: a terminal, colors allowed.
pub fn enabled() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none()
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// `text` rendered for a terminal `width` columns wide; control characters and escape
/// sequences in it are shown, not obeyed.
pub fn render(text: &str, width: usize) -> String {
    let rendered = layout::render(&super::safe::plain(text), width);
    let trimmed = rendered.trim_end_matches('\n');
    format!("{trimmed}\n")
}

/// Streamed answer text, rendered whenever a block is complete (a blank line outside a
/// code fence), so a paragraph is never drawn twice.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    pending: String,
    /// Blocks were printed for this answer (the next one gets a blank line first).
    printed: bool,
}

impl MarkdownStream {
    /// Adds streamed text; returns what is ready to print.
    pub fn push(&mut self, delta: &str, width: usize) -> Option<String> {
        self.pending.push_str(delta);
        let end = complete_blocks(&self.pending)?;
        let ready: String = self.pending.drain(..end).collect();
        self.emit(&ready, width)
    }

    /// The answer ended: renders what is left.
    pub fn finish(&mut self, width: usize) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        let out = self.emit(&rest, width);
        self.printed = false;
        out
    }

    fn emit(&mut self, text: &str, width: usize) -> Option<String> {
        if text.trim().is_empty() {
            return None;
        }
        let rendered = render(text, width);
        let out = if self.printed { format!("\n{rendered}") } else { rendered };
        self.printed = true;
        Some(out)
    }
}

/// The byte offset just past the last block that is known to be complete: a blank line
/// (or a closing fence) outside a fence, followed by a line that starts at the margin. An
/// indented line after it continues a list item (a loose list, code inside an item), so
/// the item is not cut in two.
fn complete_blocks(text: &str) -> Option<usize> {
    let mut fence: Option<String> = None;
    let mut offset = 0;
    let mut end = None;
    let mut ended_at: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        offset += line.len();
        if fence.is_none()
            && !line.trim().is_empty()
            && let Some(at) = ended_at.take()
            && !line.starts_with([' ', '\t'])
        {
            end = Some(at);
        }
        if !line.ends_with('\n') {
            break;
        }
        let trimmed = line.trim_start();
        let marker: String = trimmed.chars().take_while(|c| *c == '`' || *c == '~').collect();
        match &fence {
            Some(open)
                if marker.len() >= open.len()
                    && marker.starts_with(&open[..1])
                    && trimmed.trim() == marker =>
            {
                fence = None;
                ended_at = Some(offset);
            }
            Some(_) => {}
            None if marker.len() >= 3 => {
                ended_at = None;
                fence = Some(marker);
            }
            None if line.trim().is_empty() => ended_at = Some(offset),
            None => {}
        }
    }
    end.filter(|e| *e > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> String {
        let mut out = String::new();
        let mut skip = false;
        for c in text.chars() {
            match c {
                '\x1b' => skip = true,
                'm' if skip => skip = false,
                _ if skip => {}
                c => out.push(c),
            }
        }
        out
    }

    #[test]
    fn blocks_render_when_complete_and_code_fences_stay_whole() {
        let mut stream = MarkdownStream::default();
        assert_eq!(stream.push("# Title\n\nSome **bold", 40), Some(render("# Title\n\n", 40)));
        assert_eq!(stream.push(" text** here.\n```rust\nfn main() {}\n\nlet x = 1;\n", 40), None);
        let code = stream.push("```\nAfter.", 40).unwrap();
        assert!(plain(&code).contains("Some bold text here."), "{code:?}");
        assert!(plain(&code).contains("fn main() {}") && plain(&code).contains("let x = 1;"), "{code:?}");
        assert!(!plain(&code).contains("**") && !plain(&code).contains("```"), "{code:?}");
        let rest = stream.finish(40).unwrap();
        assert_eq!(plain(&rest), "\nAfter.\n");
    }

    /// A loose list streamed in pieces: the blank line inside an item does not cut it
    /// (its code would lose the item's indentation); the next top-level block does.
    #[test]
    fn an_item_is_not_cut_at_its_own_blank_lines() {
        let mut stream = MarkdownStream::default();
        assert_eq!(stream.push("- Install:\n\n", 60), None);
        assert_eq!(stream.push("  ```sh\n  pip install x\n  ```\n\n", 60), None);
        let item = stream.push("Then run it.", 60).unwrap();
        assert_eq!(plain(&item), "• Install:\n\n  pip install x\n");
        assert_eq!(plain(&stream.finish(60).unwrap()), "\nThen run it.\n");
    }

    /// The walkthrough of issue 32: a title's first word was underlined, the others not
    /// (each word's style ended in a reset that ended the underline too).
    #[test]
    fn a_title_is_underlined_whole() {
        let rendered = render("# Where the config is read\n", 60);
        let title = rendered.lines().next().unwrap();
        let mut underlined = true;
        for (i, part) in title.split("\x1b[").enumerate().skip(1) {
            let (codes, text) = part.split_once('m').unwrap();
            if codes == "0" {
                underlined = false;
            } else if codes.split(';').any(|c| c == "4") {
                underlined = true;
            }
            assert!(text.is_empty() || underlined, "part {i} {text:?} is not underlined: {title:?}");
        }
        assert_eq!(plain(title), "Where the config is read");
    }

    #[test]
    fn long_lines_wrap_at_word_boundaries() {
        let text = "word ".repeat(30);
        let rendered = plain(&render(&text, 32));
        assert!(rendered.lines().count() > 3, "{rendered}");
        for line in rendered.lines() {
            assert!(line.chars().count() <= 32 && !line.starts_with("ord"), "{line:?}");
        }
    }
}
