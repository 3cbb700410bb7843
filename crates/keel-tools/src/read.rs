//! `read_file`: a text file's lines (numbered, unless configured off), in pages.

use keel_agent::ToolErrorKind;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::sync::Arc;

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::suggest::missing_path_message;
use crate::workspace::Roots;

/// Most lines returned by one call.
pub const MAX_LINES: usize = 2000;
/// Most bytes returned by one call.
pub const MAX_BYTES: usize = 50 * 1024;
/// Longer lines are cut.
pub const MAX_LINE_CHARS: usize = 2000;

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File path.
    pub path: String,
    /// First line to read, from 1.
    #[serde(default)]
    pub offset: Option<usize>,
    /// Lines to read (at most 2000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Reads text files.
#[derive(Debug, Clone)]
pub struct ReadFile {
    config: Arc<ToolsConfig>,
}

impl ReadFile {
    /// A read tool with these settings.
    pub fn new(config: Arc<ToolsConfig>) -> Self {
        ReadFile { config }
    }
}

/// A known binary format from its first bytes, if any.
fn binary_kind(head: &[u8]) -> Option<&'static str> {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"\x89PNG", "PNG image"),
        (b"\xff\xd8\xff", "JPEG image"),
        (b"GIF8", "GIF image"),
        (b"%PDF", "PDF document"),
        (b"PK\x03\x04", "ZIP archive"),
        (b"\x1f\x8b", "gzip archive"),
        (b"\x7fELF", "ELF executable"),
        (b"GGUF", "GGUF model"),
        (b"\0asm", "WebAssembly module"),
        (b"SQLite format 3", "SQLite database"),
    ];
    if let Some((_, kind)) = MAGIC.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Some(kind);
    }
    head.contains(&0).then_some("binary data")
}

/// A size for people: bytes, KB, MB or GB.
pub(crate) fn human_size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} bytes"),
        b if b < 1024 * 1024 => format!("{:.1} KB", b as f64 / 1024.0),
        b if b < 1024 * 1024 * 1024 => format!("{:.1} MB", b as f64 / 1_048_576.0),
        b => format!("{:.1} GB", b as f64 / 1_073_741_824.0),
    }
}

/// Bytes read past the page only to count the file's lines; a longer file says "more
/// than N lines" instead of reading to its end.
const COUNT_BUDGET: u64 = 32 * 1024 * 1024;
/// Bytes kept of one line: enough for `MAX_LINE_CHARS` characters of any width, and
/// more than `MAX_LINE_CHARS` characters whenever something was cut.
const KEEP_LINE_BYTES: usize = MAX_LINE_CHARS * 4 + 8;

/// One page of numbered lines, read as a stream: a line is kept only while the page
/// needs it and only up to `KEEP_LINE_BYTES`, so memory stays bounded whatever the file.
struct Page {
    start: usize,
    limit: usize,
    /// Lines shown: number and text.
    lines: Vec<(usize, String)>,
    /// Bytes the shown lines take (with a provisional number width).
    bytes: usize,
    /// The page is full (by lines or bytes); later lines are only counted.
    full: bool,
    /// Lines finished so far.
    finished: usize,
    /// The bytes kept of the line being read, and whether it was cut.
    current: Vec<u8>,
    cut: bool,
    /// The line being read has at least one byte.
    in_line: bool,
}

impl Page {
    fn new(start: usize, limit: usize) -> Page {
        Page {
            start,
            limit,
            lines: Vec::new(),
            bytes: 0,
            full: false,
            finished: 0,
            current: Vec::new(),
            cut: false,
            in_line: false,
        }
    }

    fn wants_current(&self) -> bool {
        !self.full && self.finished + 1 >= self.start
    }

    /// Adds a chunk of the file.
    fn push(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let newline = memchr::memchr(b'\n', chunk);
            let part = &chunk[..newline.unwrap_or(chunk.len())];
            if self.wants_current() {
                let room = KEEP_LINE_BYTES.saturating_sub(self.current.len());
                self.current.extend_from_slice(&part[..part.len().min(room)]);
                self.cut |= part.len() > room;
            }
            self.in_line |= !part.is_empty();
            match newline {
                Some(at) => {
                    self.end_line();
                    chunk = &chunk[at + 1..];
                }
                None => chunk = &[],
            }
        }
    }

    /// Counts the newlines of a chunk read only to know the total.
    fn count(&mut self, chunk: &[u8]) {
        let newlines = memchr::memchr_iter(b'\n', chunk).count();
        if newlines > 0 {
            self.finished += newlines;
            self.in_line = chunk.last() != Some(&b'\n');
        } else {
            self.in_line |= !chunk.is_empty();
        }
    }

    fn end_line(&mut self) {
        let number = self.finished + 1;
        self.finished = number;
        self.in_line = false;
        if number < self.start || self.full {
            return;
        }
        let mut bytes = std::mem::take(&mut self.current);
        if bytes.last() == Some(&b'\r') && !self.cut {
            bytes.pop();
        }
        let text = String::from_utf8_lossy(&bytes);
        let shown = if self.cut || text.chars().count() > MAX_LINE_CHARS {
            let kept: String = text.chars().take(MAX_LINE_CHARS).collect();
            format!("{kept}… [line cut at {MAX_LINE_CHARS} characters]")
        } else {
            text.into_owned()
        };
        self.cut = false;
        let width = (self.start + self.limit).to_string().len();
        let entry_len = width + 2 + shown.len();
        if self.bytes + entry_len > MAX_BYTES && number > self.start {
            self.full = true;
            return;
        }
        self.bytes += entry_len;
        self.lines.push((number, shown));
        self.full = self.lines.len() >= self.limit;
    }

    /// Ends the file: a last line without a newline counts.
    fn finish(&mut self) {
        if self.in_line {
            self.end_line();
        }
    }
}

/// Reads `path` under `roots` as the model sees it. Only the first bytes decide whether
/// the file is text, its size comes from its metadata, and lines are streamed: a page
/// of a huge file costs the bytes before it, never the whole file in memory. With
/// `numbered`, each line starts with its number and a tab.
pub fn read(roots: &Roots, args: &ReadArgs, numbered: bool) -> Result<String, ToolError> {
    let (file, canonical) = roots.open_read(&args.path).map_err(|e| {
        if e.kind == ToolErrorKind::NotFound {
            ToolError::new(ToolErrorKind::NotFound, missing_path_message(roots, &args.path))
        } else {
            e
        }
    })?;
    let metadata =
        file.metadata().map_err(|e| ToolError::msg(format!("cannot stat `{}`: {e}", args.path)))?;
    if metadata.is_dir() {
        return Err(ToolError::new(
            ToolErrorKind::IsADirectory,
            format!("`{}` is a folder; use list_files to see what is in it", args.path),
        ));
    }
    let io = |e: std::io::Error| ToolError::msg(format!("cannot read `{}`: {e}", args.path));
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let head = reader.fill_buf().map_err(io)?;
    if let Some(kind) = binary_kind(&head[..head.len().min(8192)]) {
        return Err(ToolError::new(
            ToolErrorKind::BinaryFile,
            format!(
                "`{}` is a {kind} ({}), not text; read_file only shows text",
                args.path,
                human_size(metadata.len())
            ),
        ));
    }
    if head.is_empty() {
        return Ok(format!("({} is empty)", roots.display(&canonical)));
    }
    let start = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(MAX_LINES).clamp(1, MAX_LINES);
    let mut page = Page::new(start, limit);
    let mut counted = 0u64;
    let mut complete = true;
    loop {
        let chunk = reader.fill_buf().map_err(io)?;
        if chunk.is_empty() {
            page.finish();
            break;
        }
        let len = chunk.len();
        if page.full {
            if counted > COUNT_BUDGET {
                complete = false;
                break;
            }
            page.count(chunk);
            counted += len as u64;
        } else {
            page.push(chunk);
        }
        reader.consume(len);
    }
    render(&page, complete, &args.path, metadata.len(), numbered)
}

/// The page's lines (numbered or as they are), with where to continue.
fn render(page: &Page, complete: bool, path: &str, size: u64, numbered: bool) -> Result<String, ToolError> {
    let total = page.finished;
    let Some(&(last, _)) = page.lines.last() else {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!("offset {} is past the end: `{path}` has {total} lines", page.start),
        ));
    };
    let width = if complete { (page.start + page.limit).min(total) } else { page.start + page.limit };
    let width = width.to_string().len();
    let mut out = String::with_capacity(page.bytes + 200);
    for (number, text) in &page.lines {
        if numbered {
            out.push_str(&format!("{number:>width$}\t"));
        }
        out.push_str(text);
        out.push('\n');
    }
    if !complete {
        out.push_str(&format!(
            "[showing lines {}-{last} of a {} file (more than {total} lines); read_file with offset={} to continue]\n",
            page.start,
            human_size(size),
            last + 1
        ));
    } else if last < total {
        out.push_str(&format!(
            "[showing lines {}-{last} of {total}; read_file with offset={} to continue]\n",
            page.start,
            last + 1
        ));
    }
    Ok(out)
}

impl Tool for ReadFile {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        if self.config.numbered_lines {
            "Read a text file as numbered lines; use offset and limit to page through long files."
        } else {
            "Read a text file; use offset and limit (in lines) to page through long files."
        }
    }

    fn effect(&self, arguments: &serde_json::Value) -> keel_agent::Effect {
        keel_agent::Effect::Reads { path: keel_agent::path_argument(arguments) }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn call(
        &self,
        args: ReadArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        let state = Arc::clone(&ctx.state);
        let numbered = self.config.numbered_lines;
        crate::confined(Arc::clone(&self.config), ctx, move |roots| {
            let text = read(roots, &args, numbered)?;
            crate::seen::mark(roots, &state, &args.path);
            Ok(text)
        })
    }
}
