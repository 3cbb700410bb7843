//! Markdown laid out for a terminal: blocks in their containers (list items in list
//! items, block quotes), each line prefixed by what contains it, inline text wrapped to
//! the width. Code blocks and tables are drawn by `markdown-to-ansi` (syntax colors, box
//! tables) and placed inside their containers.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::wrap::{Piece, Style, styled, width, wrap};

/// What contains the lines being written.
#[derive(Debug)]
enum Frame {
    /// A block quote: every line starts with a bar.
    Quote,
    /// A list; `next` is the number of the next item of an ordered one; `loose` once an
    /// item held a paragraph (its items are then set apart by blank lines).
    List { next: Option<u64>, loose: bool, items: usize },
    /// A list item: its marker on its first line, as many spaces on the others.
    Item { marker: String, started: bool },
}

/// A code block being collected.
struct Code {
    language: String,
    text: String,
}

struct Layout<'a> {
    source: &'a str,
    width: usize,
    out: Vec<String>,
    frames: Vec<Frame>,
    inline: Vec<Piece>,
    style: Style,
    /// Styles of the open inline tags, innermost last.
    styles: Vec<Style>,
    link: Option<String>,
    heading: Option<HeadingLevel>,
    code: Option<Code>,
    /// A block ended: the next one is set apart by a blank line (not inside a tight list).
    gap: bool,
    /// Inside a table, which is drawn whole at its start.
    skip_table: bool,
}

/// `text` laid out for a terminal `width` columns wide.
pub fn render(text: &str, width: usize) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut layout = Layout {
        source: text,
        width: width.max(20),
        out: Vec::new(),
        frames: Vec::new(),
        inline: Vec::new(),
        style: Style::default(),
        styles: Vec::new(),
        link: None,
        heading: None,
        code: None,
        gap: false,
        skip_table: false,
    };
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        layout.event(event, range);
    }
    layout.flush();
    let mut rendered = layout.out.join("\n");
    rendered.push('\n');
    rendered
}

impl Layout<'_> {
    fn event(&mut self, event: Event<'_>, range: std::ops::Range<usize>) {
        if self.skip_table {
            self.skip_table = !matches!(event, Event::End(TagEnd::Table));
            return;
        }
        if let Some(code) = &mut self.code {
            match event {
                Event::Text(text) => code.text.push_str(&text),
                Event::End(TagEnd::CodeBlock) => self.code_block(),
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag, range),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(text) => {
                self.inline.push(Piece::Text(text.into_string(), self.with(|s| s.code = true)))
            }
            Event::InlineHtml(html) | Event::Html(html) => self.text(&html),
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.inline.push(Piece::Break),
            Event::Rule => {
                self.block_start();
                let rule = "─".repeat(self.inner_width().min(40));
                self.line(&styled(&rule, Style { dim: true, ..Style::default() }));
                self.gap = true;
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>, range: std::ops::Range<usize>) {
        match tag {
            Tag::Paragraph => {
                // A paragraph in an item makes its list loose.
                let depth = self.frames.len();
                if depth >= 2
                    && matches!(self.frames[depth - 1], Frame::Item { .. })
                    && let Frame::List { loose, .. } = &mut self.frames[depth - 2]
                {
                    *loose = true;
                }
                self.block_start();
            }
            Tag::Heading { level, .. } => {
                self.block_start();
                self.heading = Some(level);
                self.push_style(|s| s.bold = true);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.block_start();
                self.frames.push(Frame::Quote);
            }
            Tag::CodeBlock(kind) => {
                self.flush();
                self.block_start();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => info.split_whitespace().next().unwrap_or("").to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(Code { language, text: String::new() });
            }
            Tag::List(start) => {
                // An item's own text comes before its nested list, on a line of its own.
                self.flush();
                if !matches!(self.frames.last(), Some(Frame::Item { .. })) {
                    self.block_start();
                }
                self.frames.push(Frame::List { next: start, loose: false, items: 0 });
            }
            Tag::Item => {
                self.flush();
                let (marker, apart) = match self.frames.last_mut() {
                    Some(Frame::List { next, loose, items }) => {
                        *items += 1;
                        let marker = match next {
                            Some(n) => {
                                let marker = format!("{n}. ");
                                *n += 1;
                                marker
                            }
                            None => "• ".to_owned(),
                        };
                        (marker, *loose && *items > 1)
                    }
                    _ => ("• ".to_owned(), false),
                };
                if apart {
                    self.line("");
                }
                self.frames.push(Frame::Item { marker, started: false });
                self.gap = false;
            }
            Tag::Table(_) => {
                self.flush();
                self.block_start();
                let source = self.source[range].to_owned();
                self.table(&source);
            }
            Tag::Emphasis => self.push_style(|s| s.italic = true),
            Tag::Strong => self.push_style(|s| s.bold = true),
            Tag::Strikethrough => self.push_style(|s| s.strike = true),
            Tag::Link { dest_url, .. } => {
                self.link = Some(dest_url.into_string());
                self.push_style(|s| s.link = true);
            }
            Tag::Image { dest_url, .. } => {
                self.text("[image: ");
                self.link = Some(dest_url.into_string());
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush();
                self.gap = true;
            }
            TagEnd::Heading(_) => {
                self.pop_style();
                self.flush();
                self.heading = None;
                self.gap = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.frames.pop();
                self.gap = true;
            }
            TagEnd::List(_) => {
                self.flush();
                self.frames.pop();
                self.gap = true;
            }
            TagEnd::Item => {
                self.flush();
                self.frames.pop();
                self.gap = false;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link => {
                self.pop_style();
                self.link_target();
            }
            TagEnd::Image => {
                self.text("]");
                self.link_target();
            }
            _ => {}
        }
    }

    /// After a link's text: its address, dimmed, unless the text is the address.
    fn link_target(&mut self) {
        let Some(url) = self.link.take() else { return };
        let shown: String = self
            .inline
            .iter()
            .rev()
            .take(1)
            .filter_map(|p| if let Piece::Text(t, _) = p { Some(t.as_str()) } else { None })
            .collect();
        if !url.is_empty() && shown != url && !url.starts_with('#') {
            self.inline.push(Piece::Text(format!(" ({url})"), Style { dim: true, ..Style::default() }));
        }
    }

    fn with(&self, change: impl FnOnce(&mut Style)) -> Style {
        let mut style = self.style;
        change(&mut style);
        style
    }

    fn push_style(&mut self, change: impl FnOnce(&mut Style)) {
        self.styles.push(self.style);
        change(&mut self.style);
    }

    fn pop_style(&mut self) {
        self.style = self.styles.pop().unwrap_or_default();
    }

    fn text(&mut self, text: &str) {
        self.inline.push(Piece::Text(text.to_owned(), self.style));
    }

    /// A blank line before a block when one ended before it.
    fn block_start(&mut self) {
        if self.gap && !self.out.is_empty() {
            self.line("");
        }
        self.gap = false;
    }

    /// Columns left for content inside the current containers.
    fn inner_width(&self) -> usize {
        let used: usize = self
            .frames
            .iter()
            .map(|frame| match frame {
                Frame::Quote => 2,
                Frame::List { .. } => 0,
                Frame::Item { marker, .. } => width(marker),
            })
            .sum();
        self.width.saturating_sub(used).max(10)
    }

    /// Writes collected inline text as wrapped lines.
    fn flush(&mut self) {
        if self.inline.is_empty() {
            return;
        }
        let pieces = std::mem::take(&mut self.inline);
        let underline = self.heading == Some(HeadingLevel::H1);
        for line in wrap(&pieces, self.inner_width()) {
            // Each styled word ends in a reset: the underline starts again after each.
            let line = if underline {
                format!("\x1b[4m{}\x1b[0m", line.replace("\x1b[0m", "\x1b[0m\x1b[4m"))
            } else {
                line
            };
            self.line(&line);
        }
    }

    /// One output line with the containers' prefixes.
    fn line(&mut self, content: &str) {
        let mut prefix = String::new();
        for frame in &mut self.frames {
            match frame {
                Frame::Quote => {
                    let bar = if content.is_empty() { "│" } else { "│ " };
                    prefix.push_str(&styled(bar, Style { dim: true, ..Style::default() }));
                }
                Frame::List { .. } => {}
                Frame::Item { marker, started } => {
                    if *started {
                        prefix.push_str(&" ".repeat(width(marker)));
                    } else {
                        prefix.push_str(&styled(marker, Style { bold: true, ..Style::default() }));
                        *started = true;
                    }
                }
            }
        }
        let line = format!("{prefix}{content}");
        self.out.push(line.trim_end().to_owned());
    }

    fn code_block(&mut self) {
        let Some(code) = self.code.take() else { return };
        let fence = if code.text.contains("```") { "~~~" } else { "```" };
        let source = format!("{fence}{}\n{}{fence}\n", code.language, code.text);
        self.drawn(&source);
        self.gap = true;
    }

    fn table(&mut self, source: &str) {
        // Inside a quote or a list the table's lines carry the container's markers.
        let lines: Vec<&str> = source
            .lines()
            .map(|line| {
                let mut line = line.trim_start();
                while let Some(rest) = line.strip_prefix('>') {
                    line = rest.trim_start();
                }
                line
            })
            .collect();
        self.drawn(&lines.join("\n"));
        self.gap = true;
        // The table's cells come as events too; they are drawn already.
        self.skip_table = true;
    }

    /// A block drawn by `markdown-to-ansi`, placed line by line inside the containers.
    fn drawn(&mut self, source: &str) {
        let options = markdown_to_ansi::Options {
            syntax_highlight: true,
            width: Some(self.inner_width()),
            code_bg: false,
        };
        let rendered = markdown_to_ansi::render(source, &options);
        for line in rendered.trim_end_matches('\n').lines() {
            self.line(line);
        }
    }
}
