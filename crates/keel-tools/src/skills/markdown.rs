//! Markdown files with front matter, as custom commands and skills are written for
//! Claude Code, opencode and the Agent Skills format: an optional YAML block between
//! `---` lines, then the body. Only the subset those files use is read: top-level
//! `key: value` pairs whose value is a plain, quoted or block (`|`, `>`) string, or a
//! flow list kept as written (`argument-hint: [file]`). A key holding an indented list
//! or map (`metadata:`) is kept as absent, so files written for other tools load with
//! the keys keel does not use ignored.
//!
//! The files come from the project (hostile, like any file of the repository) or from
//! the user: each is read up to a cap and no further, only when it is a regular file
//! (never a FIFO or a device), and refused when it is not UTF-8 text.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use keel_agent::ToolErrorKind;
use rustix::fs::{Mode, OFlags};

use crate::workspace::{Roots, special_kind};

/// Why a file was not read, or not understood.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocError {
    /// It does not exist.
    #[error("it does not exist")]
    Missing,
    /// It is a folder, FIFO, socket or device.
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    /// It is larger than the cap.
    #[error("it is larger than {} KB", .0 / 1024)]
    TooLarge(usize),
    /// It holds a NUL byte or is not UTF-8.
    #[error("it is not UTF-8 text")]
    NotText,
    /// It leads outside the project folder (a symlink, or a folder swapped for one).
    #[error("it leads outside the project folder (add its folder to allowed_roots to use it)")]
    Outside,
    /// The front matter is not closed or not readable.
    #[error("its front matter {0}")]
    FrontMatter(String),
    /// Reading failed.
    #[error("{0}")]
    Io(String),
}

/// A Markdown file split into its front matter's string values and its body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Doc {
    /// The string values of the front matter's top-level keys (absent for a list or map).
    pub fields: BTreeMap<String, String>,
    /// The text after the front matter, trimmed.
    pub body: String,
    /// The top-level keys holding a block list (`- item` lines), with their items.
    pub lists: BTreeMap<String, Vec<String>>,
}

impl Doc {
    /// The value of `key`, trimmed, when it is a non-empty string.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// The items of `key` as a list: a block list (`- a`), a flow list (`[a, b]`), or a
    /// string of items split at commas and spaces (`a, b`); quotes around items dropped.
    pub fn list(&self, key: &str) -> Option<Vec<String>> {
        if let Some(items) = self.lists.get(key) {
            return Some(items.clone());
        }
        let text = self.field(key)?;
        let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
        Some(
            inner
                .split([',', ' '])
                .map(|item| item.trim().trim_matches(|c| c == '"' || c == '\'').to_owned())
                .filter(|item| !item.is_empty())
                .collect(),
        )
    }
}

/// Reads an open file: a regular file of at most `cap` bytes of UTF-8 text.
pub fn read_capped(file: File, cap: usize) -> Result<String, DocError> {
    let metadata = file.metadata().map_err(|e| DocError::Io(e.to_string()))?;
    if !metadata.is_file() {
        return Err(DocError::NotRegular(special_kind(&metadata.file_type()).unwrap_or("a folder")));
    }
    let mut bytes = Vec::new();
    file.take(cap as u64 + 1).read_to_end(&mut bytes).map_err(|e| DocError::Io(e.to_string()))?;
    if bytes.len() > cap {
        return Err(DocError::TooLarge(cap));
    }
    if bytes.contains(&0) {
        return Err(DocError::NotText);
    }
    String::from_utf8(bytes).map_err(|_| DocError::NotText)
}

/// Reads a file of the user's own (under keel's config folder): wherever its symlinks
/// lead, but only a regular file, opened without blocking.
pub fn read_user_file(path: &Path, cap: usize) -> Result<String, DocError> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => read_capped(File::from(fd), cap),
        Err(rustix::io::Errno::NOENT) => Err(DocError::Missing),
        Err(e) => Err(DocError::Io(e.to_string())),
    }
}

/// Reads a file of the project, confined as read_file is: inside the workspace (or an
/// allowed root), a regular file, checked where it was opened.
pub fn read_project_file(roots: &Roots, path: &str, cap: usize) -> Result<String, DocError> {
    match roots.open_read(path) {
        Ok((file, _)) => read_capped(file, cap),
        Err(e) => Err(confined_error(e)),
    }
}

/// The [`DocError`] for a confined open that failed.
pub fn confined_error(error: keel_agent::ToolError) -> DocError {
    match error.kind {
        ToolErrorKind::NotFound => DocError::Missing,
        ToolErrorKind::OutsideWorkspace => DocError::Outside,
        _ => DocError::Io(error.message),
    }
}

/// Splits `text` into front matter and body. A file that does not start with a `---`
/// line has no front matter; one that opens it must close it.
pub fn parse(text: &str) -> Result<Doc, DocError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let opened = lines.next().is_some_and(|first| first.trim_end() == "---");
    if !opened {
        return Ok(Doc { fields: BTreeMap::new(), body: text.trim().to_owned(), lists: BTreeMap::new() });
    }
    let mut header = Vec::new();
    let mut consumed = text.split_inclusive('\n').next().map_or(0, str::len);
    let mut closed = false;
    for line in lines {
        consumed += line.len();
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            closed = true;
            break;
        }
        header.push(bare);
    }
    if !closed {
        return Err(DocError::FrontMatter("is not closed (a `---` line after it)".into()));
    }
    let (fields, lists) = fields(&header)?;
    Ok(Doc { fields, body: text[consumed..].trim().to_owned(), lists })
}

/// A block list's items (`- a` lines), when `block` is one.
fn block_list(block: &[&str]) -> Option<Vec<String>> {
    let lines: Vec<&str> = block.iter().map(|l| l.trim()).filter(|l| !l.is_empty()).collect();
    let items: Option<Vec<String>> = lines
        .iter()
        .map(|l| {
            l.strip_prefix('-')
                .map(|item| strip_comment(item).trim_matches(|c| c == '"' || c == '\'').to_owned())
        })
        .collect();
    items.filter(|items| !items.is_empty())
}

/// The top-level string values of a front matter's lines, and its block lists.
type Fields = (BTreeMap<String, String>, BTreeMap<String, Vec<String>>);

/// The top-level string values of a front matter's lines, and its block lists.
fn fields(lines: &[&str]) -> Result<Fields, DocError> {
    let mut fields = BTreeMap::new();
    let mut lists = BTreeMap::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        at += 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            // Inside a list or map that was skipped, or stray: ignored.
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(DocError::FrontMatter(format!("has a line that is not `key: value`: `{line}`")));
        };
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'').to_owned();
        let value = value.trim();
        // The indented lines that belong to this key.
        let start = at;
        while at < lines.len() && (lines[at].trim().is_empty() || lines[at].starts_with([' ', '\t'])) {
            at += 1;
        }
        let block: Vec<&str> = lines[start..at].to_vec();
        if value.is_empty()
            && let Some(items) = block_list(&block)
        {
            lists.insert(key.clone(), items);
        }
        if let Some(text) = value_of(value, &block)? {
            fields.insert(key, text);
        }
    }
    Ok((fields, lists))
}

/// A key's string value from the rest of its line and its indented lines; `None` for a
/// list, a map or anything else that is not a string.
fn value_of(value: &str, block: &[&str]) -> Result<Option<String>, DocError> {
    let indented = || block.iter().map(|l| l.trim()).collect::<Vec<_>>();
    // Chomping and indentation indicators (`|-`, `>2`) need no reading: values are trimmed.
    if value.starts_with(['|', '>']) {
        return Ok(Some(block_scalar(&indented(), value.starts_with('|'))));
    }
    if let Some(rest) = value.strip_prefix('"') {
        return double_quoted(rest).map(Some);
    }
    if let Some(rest) = value.strip_prefix('\'') {
        return match rest.rfind('\'') {
            Some(end) => Ok(Some(rest[..end].replace("''", "'"))),
            None => Err(DocError::FrontMatter(format!("has an unclosed quote: `'{rest}`"))),
        };
    }
    // A flow list or map is kept as written: Claude Code's files write
    // `argument-hint: [message]`, which is meant as text.
    if value.starts_with(['[', '{']) {
        return Ok(Some(strip_comment(value).to_owned()));
    }
    let first = strip_comment(value);
    let continued = indented();
    let structure = continued.iter().find(|l| !l.is_empty()).is_some_and(|l| {
        l.starts_with("- ") || *l == "-" || l.split_once(':').is_some_and(|(k, _)| !k.contains(' '))
    });
    if first.is_empty() && structure {
        return Ok(None);
    }
    // A plain scalar: its lines folded into one.
    let mut words: Vec<&str> = vec![first];
    words.extend(continued.iter().map(|l| strip_comment(l)));
    Ok(Some(words.into_iter().filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")))
}

/// A `|` (literal: lines kept) or `>` (folded: lines joined, blank lines kept as breaks)
/// block's text.
fn block_scalar(lines: &[&str], literal: bool) -> String {
    if literal {
        return lines.join("\n").trim().to_owned();
    }
    let mut out = String::new();
    for line in lines {
        if line.is_empty() {
            out.push('\n');
        } else {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(' ');
            }
            out.push_str(line);
        }
    }
    out.trim().to_owned()
}

/// The text of a double-quoted value (after its opening quote), escapes read.
fn double_quoted(rest: &str) -> Result<String, DocError> {
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Ok(out),
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => break,
            },
            other => out.push(other),
        }
    }
    Err(DocError::FrontMatter(format!("has an unclosed quote: `\"{rest}`")))
}

/// A plain value without its trailing ` # comment`.
fn strip_comment(value: &str) -> &str {
    match value.find(" #") {
        Some(at) => value[..at].trim_end(),
        None => value.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Doc {
        parse(text).unwrap()
    }

    #[test]
    fn claude_code_and_opencode_commands() {
        let claude = doc(
            "---\nallowed-tools: Bash(git add:*), Bash(git status:*)\nargument-hint: [message]\ndescription: Create a git commit\nmodel: sonnet\n---\nCreate a git commit.\n\nMessage: $ARGUMENTS\n",
        );
        assert_eq!(claude.field("description"), Some("Create a git commit"));
        assert_eq!(claude.field("argument-hint"), Some("[message]"));
        assert_eq!(claude.body, "Create a git commit.\n\nMessage: $ARGUMENTS");
        let opencode = doc(
            "---\ndescription: Run tests with coverage\nagent: build\nmodel: anthropic/claude-3-5-sonnet-20241022\n---\n\nRun the full test suite.\n",
        );
        assert_eq!(opencode.field("description"), Some("Run tests with coverage"));
        assert_eq!(opencode.body, "Run the full test suite.");
        let bare = doc("Review $ARGUMENTS for bugs.\n");
        assert!(bare.fields.is_empty());
        assert_eq!(bare.body, "Review $ARGUMENTS for bugs.");
    }

    #[test]
    fn skills_with_quotes_blocks_lists_and_maps() {
        let skill = doc(
            "---\nname: pdf-processing\ndescription: >\n  Extract text and tables from PDF files.\n  Use when handling PDFs.\nlicense: 'Apache-2.0'\nmetadata:\n  author: example-org\n  version: \"1.0\"\nallowed-tools:\n  - Read\n  - Bash\ncompatibility: \"Needs \\\"python3\\\"\" # a comment\n---\n# PDF\nSteps.\n",
        );
        assert_eq!(skill.field("name"), Some("pdf-processing"));
        assert_eq!(
            skill.field("description"),
            Some("Extract text and tables from PDF files. Use when handling PDFs.")
        );
        assert_eq!(skill.field("license"), Some("Apache-2.0"));
        assert_eq!(skill.field("metadata"), None, "a map is not a string");
        assert_eq!(skill.field("allowed-tools"), None, "a list is not a string");
        assert_eq!(skill.list("allowed-tools"), Some(vec!["Read".to_owned(), "Bash".to_owned()]));
        assert_eq!(skill.list("metadata"), None, "a map is not a list");
        let flow = doc("---\ntools: [read_file, \"grep\"]\nother: glob, list_files\n---\n");
        assert_eq!(flow.list("tools"), Some(vec!["read_file".to_owned(), "grep".to_owned()]));
        assert_eq!(flow.list("other"), Some(vec!["glob".to_owned(), "list_files".to_owned()]));
        assert_eq!(skill.field("compatibility"), Some("Needs \"python3\""));
        assert_eq!(skill.body, "# PDF\nSteps.");
        let literal = doc("---\ndescription: |-\n  one\n  two\n---\nbody");
        assert_eq!(literal.field("description"), Some("one\ntwo"));
        let plain = doc("---\ndescription: starts here\n  and goes on # note\n---\n");
        assert_eq!(plain.field("description"), Some("starts here and goes on"));
        assert_eq!(plain.body, "");
        let flow = doc("---\nargument-hint: [file] [focus] # both optional\nname: x\n---\n");
        assert_eq!((flow.field("argument-hint"), flow.field("name")), (Some("[file] [focus]"), Some("x")));
    }

    #[test]
    fn broken_front_matter_is_an_error() {
        assert!(matches!(parse("---\ndescription: x\nbody"), Err(DocError::FrontMatter(_))));
        assert!(matches!(parse("---\njust words\n---\n"), Err(DocError::FrontMatter(_))));
        assert!(matches!(parse("---\ndescription: \"open\n---\n"), Err(DocError::FrontMatter(_))));
        assert_eq!(
            doc("\u{feff}---\r\ndescription: crlf\r\n---\r\nbody\r\n").field("description"),
            Some("crlf")
        );
    }

    #[test]
    fn reading_is_capped_and_text_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        std::fs::write(&path, "x".repeat(100)).unwrap();
        assert_eq!(read_user_file(&path, 100).unwrap().len(), 100);
        assert!(matches!(read_user_file(&path, 99), Err(DocError::TooLarge(99))));
        std::fs::write(&path, b"a\0b").unwrap();
        assert!(matches!(read_user_file(&path, 100), Err(DocError::NotText)));
        assert!(matches!(read_user_file(&dir.path().join("none.md"), 100), Err(DocError::Missing)));
        assert!(matches!(read_user_file(dir.path(), 100), Err(DocError::NotRegular("a folder"))));
        let fifo = dir.path().join("fifo.md");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(matches!(read_user_file(&fifo, 100), Err(DocError::NotRegular(_))));
    }
}
