//! Bounded capture of command output: the head and the tail stay in memory, everything
//! goes to a file once the output is too long to show whole.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// Limits of what is shown to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// Output up to this many bytes (and `max_lines` lines) is shown whole.
    pub max_bytes: usize,
    /// Output up to this many lines is shown whole.
    pub max_lines: usize,
    /// Bytes kept from the start when truncating.
    pub head_bytes: usize,
    /// Bytes kept from the end when truncating.
    pub tail_bytes: usize,
    /// Lines kept from the start when truncating.
    pub head_lines: usize,
    /// Lines kept from the end when truncating.
    pub tail_lines: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            max_bytes: 16 * 1024,
            max_lines: 400,
            head_bytes: 6 * 1024,
            tail_bytes: 8 * 1024,
            head_lines: 80,
            tail_lines: 120,
        }
    }
}

/// Collects output in bounded memory.
#[derive(Debug)]
pub struct Capture {
    limits: OutputLimits,
    /// Everything while small; the head once spilled.
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total_bytes: u64,
    total_lines: u64,
    spill_path: PathBuf,
    spill: Option<File>,
    spill_error: Option<String>,
}

/// What the capture produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// Text for the model (possibly head + marker + tail).
    pub text: String,
    /// Where the whole output was saved, when it was truncated.
    pub full_output: Option<PathBuf>,
    /// Total bytes produced.
    pub total_bytes: u64,
}

impl Capture {
    /// A capture that spills to `spill_path` if the output grows too long.
    pub fn new(limits: OutputLimits, spill_path: PathBuf) -> Self {
        Capture {
            limits,
            head: Vec::new(),
            tail: VecDeque::new(),
            total_bytes: 0,
            total_lines: 0,
            spill_path,
            spill: None,
            spill_error: None,
        }
    }

    fn too_big(&self) -> bool {
        self.head.len() > self.limits.max_bytes || self.total_lines as usize > self.limits.max_lines
    }

    /// Adds output.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total_bytes += bytes.len() as u64;
        self.total_lines += memchr_count(bytes);
        if self.spill.is_none() && self.spill_error.is_none() {
            self.head.extend_from_slice(bytes);
            if self.too_big() {
                self.start_spill();
            }
            return;
        }
        if let Some(file) = &mut self.spill
            && let Err(e) = file.write_all(bytes)
        {
            self.spill_error = Some(e.to_string());
            self.spill = None;
        }
        self.tail.extend(bytes.iter().copied());
        let excess = self.tail.len().saturating_sub(self.limits.tail_bytes);
        self.tail.drain(..excess);
    }

    fn start_spill(&mut self) {
        let opened = self
            .spill_path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| File::create(&self.spill_path))
            .and_then(|mut file| file.write_all(&self.head).map(|()| file));
        match opened {
            Ok(file) => self.spill = Some(file),
            Err(e) => self.spill_error = Some(e.to_string()),
        }
        // Keep the tail of what we have so far, and only the head in `head`.
        let keep_from = self.head.len().saturating_sub(self.limits.tail_bytes);
        self.tail = self.head[keep_from..].iter().copied().collect();
        self.head.truncate(self.limits.head_bytes);
    }

    /// Renders the output for the model.
    pub fn finish(mut self) -> Captured {
        if let Some(mut file) = self.spill.take() {
            let _ = file.flush();
        }
        let spilled = self.total_bytes as usize != self.head.len() || self.too_big();
        if !spilled {
            return Captured {
                text: String::from_utf8_lossy(&self.head).into_owned(),
                full_output: None,
                total_bytes: self.total_bytes,
            };
        }
        let head_text = String::from_utf8_lossy(&self.head).into_owned();
        let head = first_lines(&head_text, self.limits.head_lines, self.limits.head_bytes);
        let tail_bytes: Vec<u8> = self.tail.iter().copied().collect();
        let tail_text = String::from_utf8_lossy(&tail_bytes).into_owned();
        let tail = last_lines(&tail_text, self.limits.tail_lines);
        let shown_lines = head.matches('\n').count() as u64 + tail.matches('\n').count() as u64;
        let omitted_lines = self.total_lines.saturating_sub(shown_lines);
        let omitted_bytes = self.total_bytes.saturating_sub((head.len() + tail.len()) as u64);
        let saved = if self.spill_error.is_none() {
            format!("full output saved to {}", self.spill_path.display())
        } else {
            format!(
                "full output could not be saved: {}",
                self.spill_error.as_deref().unwrap_or("unknown error")
            )
        };
        let mut text = head;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[... {omitted_lines} lines / {omitted_bytes} bytes omitted; {saved} ...]\n"));
        text.push_str(&tail);
        Captured {
            text,
            full_output: self.spill_error.is_none().then_some(self.spill_path),
            total_bytes: self.total_bytes,
        }
    }
}

fn memchr_count(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64
}

/// At most `lines` lines and `bytes` bytes from the start, ending at a line end when possible.
fn first_lines(text: &str, lines: usize, bytes: usize) -> String {
    let mut end = 0;
    for (count, (index, _)) in text.match_indices('\n').enumerate() {
        if count >= lines || index + 1 > bytes {
            break;
        }
        end = index + 1;
    }
    if end == 0 {
        // One giant line: cut at a char boundary.
        let mut cut = bytes.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        return text[..cut].to_owned();
    }
    text[..end].to_owned()
}

/// At most `lines` whole lines from the end (the first, partial line is dropped).
fn last_lines(text: &str, lines: usize) -> String {
    let start = match text.find('\n') {
        // Drop the first line: it was cut in the middle by the byte window.
        Some(first) if first + 1 < text.len() => first + 1,
        _ => 0,
    };
    let body = &text[start..];
    let trimmed = body.strip_suffix('\n').unwrap_or(body);
    let mut from = 0;
    for (count, (index, _)) in trimmed.rmatch_indices('\n').enumerate() {
        if count + 1 >= lines {
            from = index + 1;
            break;
        }
    }
    body[from..].to_owned()
}

/// The last line of output while a command runs (a live view for the user, never sent
/// to the model): lines end at `\n` or `\r` (progress bars), terminal escapes are dropped,
/// a line is kept to 200 characters.
#[derive(Debug, Default)]
pub struct LiveTail {
    partial: Vec<u8>,
    last: Option<String>,
    changed: bool,
}

impl LiveTail {
    /// Feeds output bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' || byte == b'\r' {
                let line = clean_line(&self.partial);
                self.partial.clear();
                if !line.trim().is_empty() {
                    self.last = Some(line);
                    self.changed = true;
                }
            } else if self.partial.len() < 4096 {
                self.partial.push(byte);
            }
        }
    }

    /// The last complete line, if it changed since the last call.
    pub fn take_new(&mut self) -> Option<String> {
        if !self.changed {
            return None;
        }
        self.changed = false;
        self.last.clone()
    }
}

/// A line of output as text: escape sequences and control characters dropped, at most
/// 200 characters.
fn clean_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        if c == '\t' {
            out.push(' ');
        } else if !c.is_control() {
            out.push(c);
        }
        if out.chars().count() >= 200 {
            break;
        }
    }
    out.trim_end().to_owned()
}

/// `text` with the project folder's absolute path (in any of its `forms`) taken out of
/// the paths under it (`/tmp/w1/project/hello.py` → `hello.py`) and written `.` where it
/// stands alone.
pub(crate) fn relative_paths(text: &str, forms: &[&std::path::Path]) -> String {
    let mut forms: Vec<String> = forms.iter().map(|f| f.display().to_string()).collect();
    forms.retain(|f| f.len() > 1);
    // Longest first: one form may begin another.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    let mut text = text.to_owned();
    for form in &forms {
        if !text.contains(form.as_str()) {
            continue;
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(form.as_str()) {
            out.push_str(&rest[..at]);
            let after = &rest[at + form.len()..];
            match after.chars().next() {
                Some('/') => rest = &after[1..],
                // Another folder that only begins the same way (`/w/project2`).
                Some(c) if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') => {
                    out.push_str(form);
                    rest = after;
                }
                _ => {
                    out.push('.');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        text = out;
    }
    text
}

/// `line` cut to `max` characters, marked when cut.
pub(crate) fn clip_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}… [cut]", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn small_output_is_kept_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut capture = Capture::new(OutputLimits::default(), dir.path().join("out.log"));
        capture.push(b"hello\n");
        capture.push(b"world\n");
        let captured = capture.finish();
        assert_eq!(captured.text, "hello\nworld\n");
        assert_eq!(captured.full_output, None);
        assert!(!dir.path().join("out.log").exists());
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_saves_everything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.log");
        let mut capture = Capture::new(OutputLimits::default(), path.clone());
        let mut all = String::new();
        for i in 0..10_000 {
            let line = format!("line {i}\n");
            all.push_str(&line);
            capture.push(line.as_bytes());
        }
        let captured = capture.finish();
        assert!(captured.text.starts_with("line 0\nline 1\n"));
        assert!(captured.text.ends_with("line 9998\nline 9999\n"));
        assert!(captured.text.contains("lines / "), "{}", &captured.text[..200]);
        assert!(captured.text.len() < 16 * 1024);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), all);
        assert_eq!(captured.full_output, Some(path));
        let marker = captured.text.lines().find(|l| l.starts_with("[... ")).unwrap();
        let omitted: u64 = marker.split_whitespace().nth(1).unwrap().parse().unwrap();
        let shown = captured.text.lines().count() as u64 - 1;
        assert_eq!(omitted + shown, 10_000);
    }

    #[test]
    fn one_huge_line_is_cut_on_a_char_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let mut capture = Capture::new(OutputLimits::default(), dir.path().join("o"));
        capture.push("é".repeat(50_000).as_bytes());
        let captured = capture.finish();
        assert!(captured.text.len() < 20 * 1024);
        assert!(captured.text.starts_with("éé"));
    }

    #[test]
    fn the_live_tail_is_the_last_clean_line() {
        let mut live = LiveTail::default();
        live.push(b"Compiling a\nCompil");
        assert_eq!(live.take_new().as_deref(), Some("Compiling a"));
        assert_eq!(live.take_new(), None);
        live.push(b"ing b\n\n");
        assert_eq!(live.take_new().as_deref(), Some("Compiling b"));
        live.push(b"\x1b[32m 40%\x1b[0m\t[====  ]\r 80%\r");
        assert_eq!(live.take_new().as_deref(), Some(" 80%"));
        live.push(&[b'x'; 300]);
        live.push(b"\n");
        assert_eq!(live.take_new().map(|l| l.len()), Some(200));
    }

    #[test]
    fn paths_under_the_project_become_relative() {
        let forms = [Path::new("/tmp/w1/project"), Path::new("/private/tmp/w1/project")];
        let text = "python: can't open file '/tmp/w1/project/hello.py'\n  File \"/private/tmp/w1/project/src/a.py\", line 3\ncd /tmp/w1/project && ls\n/tmp/w1/project2/x stays\n";
        assert_eq!(
            relative_paths(text, &forms),
            "python: can't open file 'hello.py'\n  File \"src/a.py\", line 3\ncd . && ls\n/tmp/w1/project2/x stays\n"
        );
        assert_eq!(relative_paths("nothing here", &forms), "nothing here");
        // The root folder itself is never taken out.
        assert_eq!(relative_paths("/etc/hosts", &[Path::new("/")]), "/etc/hosts");
    }
}
