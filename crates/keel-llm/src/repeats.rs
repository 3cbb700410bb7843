//! Noticing a reply that writes the same line over and over, alike or with only a leading
//! line number changing (`28\tdef total(…)`, `29\tdef total(…)`, …): the token-level
//! check in the embedded engine misses the second, since the digits keep the tokens
//! distinct. Both routes that sample a small model use it: the embedded engine and
//! llama-server's `/completion` (the `completion` module). Small models fall into
//! this while copying numbered output into a call's argument, and then run to
//! `max_tokens` (minutes on a laptop).
//!
//! Lines end at a line break or at the escape `\n` (inside a JSON string argument).
//! Two more checks see loops inside one line: [`ShortCycles`] (a word or a few
//! characters over and over) and [`Echoes`] (a few sentences cycling).

/// The lowest temperature a stuck reply is sampled again at (with another seed): the
/// likeliest tokens are what got it stuck.
pub const RESAMPLE_TEMPERATURE: f32 = 0.8;

/// Lines the same but for a leading line number, in a row, that count as stuck.
pub const STUCK_LINES: u32 = 24;

/// A line shorter than this without its number says too little to compare.
const MIN_KEY_CHARS: usize = 8;

/// Longest line kept while looking for its end; past it the line counts as new.
const MAX_LINE_BYTES: usize = 4096;

/// Counts, as text arrives, how many lines in a row are the same but for a leading line
/// number.
#[derive(Debug, Default, Clone)]
pub struct LineRepeats {
    /// The current line so far.
    line: Vec<u8>,
    /// The key of the last complete line, and how many lines in a row had it.
    last: Vec<u8>,
    run: u32,
}

impl LineRepeats {
    /// A fresh counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes of the reply; true once [`STUCK_LINES`] lines in a row are
    /// the same but for a leading line number.
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        let mut stuck = false;
        for &byte in bytes {
            self.line.push(byte);
            let end = if byte == b'\n' {
                Some(1)
            } else if byte == b'n' && self.line.len() >= 2 && self.line[self.line.len() - 2] == b'\\' {
                Some(2)
            } else {
                None
            };
            match end {
                Some(len) => {
                    let cut = self.line.len() - len;
                    self.line.truncate(cut);
                    stuck |= self.end_line();
                }
                None if self.line.len() > MAX_LINE_BYTES => {
                    self.line.clear();
                    self.last.clear();
                    self.run = 0;
                }
                None => {}
            }
        }
        stuck
    }

    fn end_line(&mut self) -> bool {
        let key = without_line_number(&self.line).to_vec();
        self.line.clear();
        if key.len() < MIN_KEY_CHARS {
            self.last.clear();
            self.run = 0;
            return false;
        }
        if key == self.last {
            self.run += 1;
        } else {
            self.last = key;
            self.run = 1;
        }
        self.run >= STUCK_LINES
    }
}

/// Bytes looked at for a short cycle: about 60 tokens of text.
pub const CYCLE_WINDOW: usize = 256;

/// Longest unit that counts as a short cycle.
const MAX_CYCLE: usize = 16;

/// Notices text whose last [`CYCLE_WINDOW`] bytes repeat one unit of at most 16 bytes
/// (`typo typo typo …`): a model stuck inside one line, which [`LineRepeats`] cannot
/// see. The embedded engine sees it by its tokens (at most 3 distinct in 48); a route
/// that gets only text uses this.
#[derive(Debug, Clone, Default)]
pub struct ShortCycles {
    /// The last [`MAX_CYCLE`] bytes, the newest last.
    last: std::collections::VecDeque<u8>,
    /// For each unit length `n` (index `n - 1`): how many bytes in a row equalled the
    /// byte `n` places before them. The last [`CYCLE_WINDOW`] bytes repeat a unit of `n`
    /// once that reaches `CYCLE_WINDOW - n`; constant work per byte.
    runs: [usize; MAX_CYCLE],
}

impl ShortCycles {
    /// A fresh window.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes of the reply; true once the last [`CYCLE_WINDOW`] bytes are
    /// one short unit over and over.
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        let mut stuck = false;
        for &byte in bytes {
            for (index, run) in self.runs.iter_mut().enumerate() {
                let unit = index + 1;
                let same = self.last.len() >= unit && self.last[self.last.len() - unit] == byte;
                *run = if same { *run + 1 } else { 0 };
                stuck |= *run >= CYCLE_WINDOW - unit;
            }
            if self.last.len() == MAX_CYCLE {
                self.last.pop_front();
            }
            self.last.push_back(byte);
        }
        stuck
    }
}

/// Bytes looked at for echoes: the last 2 KiB of a reply (about 500 tokens).
pub const ECHO_WINDOW: usize = 2048;

/// Length of the spans compared: a span is an echo when the reply wrote it before.
const ECHO_SPAN: usize = 32;

/// Stuck when at least this many of the window's [`ECHO_WINDOW`] spans are echoes
/// (97 %): one changed word in the window costs about 40.
const ECHO_STUCK: usize = ECHO_WINDOW * 97 / 100;

/// Spans remembered; a longer reply is still checked against the first ones.
const MAX_REMEMBERED_SPANS: usize = 1 << 20;

/// Notices text whose last [`ECHO_WINDOW`] bytes are nearly all text the same reply wrote
/// before: a model stuck cycling through a few sentences on one line ("The program prints
/// 'HELLO, world!' … The program prints 'HELLO, user!' …", 7,800 bytes of it in one
/// `answer`), which neither [`LineRepeats`] (no line ends) nor [`ShortCycles`] (the unit
/// is a sentence, not a word) sees. Every 32-byte span is hashed as it completes
/// (a rolling hash: constant work per byte).
#[derive(Debug, Clone)]
pub struct Echoes {
    /// The last [`ECHO_SPAN`] bytes, the newest last.
    span: std::collections::VecDeque<u8>,
    /// Rolling hash of `span`.
    hash: u64,
    /// Hashes of every span written so far (up to [`MAX_REMEMBERED_SPANS`]).
    seen: std::collections::HashSet<u64, std::hash::BuildHasherDefault<AsIs>>,
    /// For each of the last [`ECHO_WINDOW`] bytes: whether the span ending there is an echo.
    marks: std::collections::VecDeque<bool>,
    /// How many of `marks` are true.
    echoed: usize,
}

/// A hasher for keys that are hashes already: the rolling hash is the bucket hash
/// (hashing it again cost more than the rest of the check together).
#[derive(Debug, Clone, Copy, Default)]
struct AsIs(u64);

impl std::hash::Hasher for AsIs {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// Base of the rolling hash (odd, so multiplication by it loses nothing mod 2^64).
const HASH_BASE: u64 = 0x100_0000_01b3;

impl Default for Echoes {
    fn default() -> Self {
        Echoes {
            span: std::collections::VecDeque::with_capacity(ECHO_SPAN + 1),
            hash: 0,
            seen: std::collections::HashSet::default(),
            marks: std::collections::VecDeque::with_capacity(ECHO_WINDOW + 1),
            echoed: 0,
        }
    }
}

impl Echoes {
    /// A fresh window.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes of the reply; true once nearly all of the last
    /// [`ECHO_WINDOW`] bytes repeat what the reply wrote before.
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        let outgoing_weight = HASH_BASE.wrapping_pow(ECHO_SPAN as u32);
        let mut stuck = false;
        for &byte in bytes {
            self.hash = self.hash.wrapping_mul(HASH_BASE).wrapping_add(u64::from(byte) + 1);
            self.span.push_back(byte);
            if self.span.len() > ECHO_SPAN
                && let Some(out) = self.span.pop_front()
            {
                self.hash = self.hash.wrapping_sub(outgoing_weight.wrapping_mul(u64::from(out) + 1));
            }
            let echo = self.span.len() == ECHO_SPAN
                && (self.seen.contains(&self.hash)
                    || (self.seen.len() < MAX_REMEMBERED_SPANS && !self.seen.insert(self.hash)));
            self.marks.push_back(echo);
            self.echoed += usize::from(echo);
            if self.marks.len() > ECHO_WINDOW && self.marks.pop_front() == Some(true) {
                self.echoed -= 1;
            }
            stuck |= self.marks.len() == ECHO_WINDOW && self.echoed >= ECHO_STUCK;
        }
        stuck
    }
}

/// The checks a text-only route makes: [`LineRepeats`], [`ShortCycles`] and [`Echoes`].
#[derive(Debug, Clone, Default)]
pub struct Repeats {
    lines: LineRepeats,
    cycles: ShortCycles,
    echoes: Echoes,
}

impl Repeats {
    /// Fresh counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes of the reply; true once it is stuck any way.
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        let lines = self.lines.push(bytes);
        let echoes = self.echoes.push(bytes);
        self.cycles.push(bytes) | lines | echoes
    }
}

/// `line` without a leading line number (`28\t`, `  7: `, or `28\\t` inside a JSON
/// string), as read_file and grep print them: numbered copies of one line differ only
/// there. Other digits stay, so data rows that differ in their numbers are different.
fn without_line_number(line: &[u8]) -> &[u8] {
    let start = line.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(line.len());
    let rest = &line[start..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return rest;
    }
    let after = &rest[digits..];
    for separator in [&b"\\t"[..], b"\t", b": ", b":", b" "] {
        if let Some(text) = after.strip_prefix(separator) {
            return text;
        }
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(text: &str, piece: usize) -> (bool, usize) {
        let mut repeats = LineRepeats::new();
        let bytes = text.as_bytes();
        for (i, chunk) in bytes.chunks(piece).enumerate() {
            if repeats.push(chunk) {
                return (true, (i + 1) * piece);
            }
        }
        (false, bytes.len())
    }

    #[test]
    fn numbered_copies_of_one_line_are_stuck_whatever_the_chunking() {
        let text: String = (28..80).map(|n| format!("{n}\tdef calc_total(items):\n")).collect();
        let escaped: String = (28..80).map(|n| format!("{n}\\tdef calc_total(items):\\n")).collect();
        for piece in [1, 2, 3, 7, 64] {
            assert!(feed(&text, piece).0, "piece {piece}");
            assert!(feed(&escaped, piece).0, "escaped, piece {piece}");
        }
        // Stuck at the 24th line, not before.
        let first: String =
            (28..28 + STUCK_LINES).map(|n| format!("{n}\tdef calc_total(items):\n")).collect();
        assert!(feed(&first, 1).0);
        let fewer: String =
            (28..27 + STUCK_LINES).map(|n| format!("{n}\tdef calc_total(items):\n")).collect();
        assert!(!feed(&fewer, 1).0);
    }

    #[test]
    fn ordinary_code_and_short_rows_are_not_stuck() {
        let code: String = (0..30)
            .map(|n| {
                format!("def test_case_{n}():\n    value = compute({n})\n    assert value == {}\n\n", n * 2)
            })
            .collect();
        assert!(!feed(&code, 5).0, "tests alike but for their numbers, with other lines between");
        let rows: String = (0..200).map(|n| format!("{n},{}\n", n * 3)).collect();
        assert!(!feed(&rows, 5).0, "rows of numbers say too little to compare");
        let inserts: String =
            (0..100).map(|n| format!("INSERT INTO t VALUES ({n}, 'item', {});\n", n * 7)).collect();
        assert!(!feed(&inserts, 5).0, "rows that differ in their numbers are data");
        let names: String =
            (0..60).map(|n| format!("user{n},{},{}\n", ["ann", "bob", "cy"][n % 3], n)).collect();
        assert!(!feed(&names, 5).0);
        // A long line without an end is dropped rather than kept growing.
        assert!(!feed(&"x".repeat(3 * MAX_LINE_BYTES), 100).0);
    }

    #[test]
    fn a_short_unit_over_and_over_is_stuck_and_varied_text_is_not() {
        let stuck = |text: &str| {
            let mut cycles = ShortCycles::new();
            text.as_bytes().chunks(3).any(|chunk| cycles.push(chunk))
        };
        assert!(stuck(&format!("The file now reads: {}", "typo ".repeat(60))));
        assert!(stuck(&"ab".repeat(200)));
        assert!(!stuck(&"typo ".repeat(40)), "under the window");
        // Stuck exactly when the window is full of the unit, not a byte before.
        assert!(!stuck(&"ab".repeat(CYCLE_WINDOW / 2 - 1)));
        assert!(stuck(&"ab".repeat(CYCLE_WINDOW / 2)));
        let code: String = (0..40).map(|n| format!("    total += item_{n}.price\n")).collect();
        assert!(!stuck(&code));
        assert!(!stuck(&"-".repeat(80)), "a rule line is short of the window");
        // A unit longer than 16 bytes is the line check's to judge.
        assert!(!stuck(&"value = compute(x); ".repeat(20)));
        let mut both = Repeats::new();
        assert!(both.push("typo ".repeat(60).as_bytes()));
        let mut both = Repeats::new();
        assert!(both.push("pip install tasker\n".repeat(30).as_bytes()));
    }

    fn echoes_stuck_at(text: &str) -> Option<usize> {
        let mut echoes = Echoes::new();
        let bytes = text.as_bytes();
        bytes.chunks(5).enumerate().find(|(_, chunk)| echoes.push(chunk)).map(|(i, _)| (i + 1) * 5)
    }

    #[test]
    fn sentences_cycling_on_one_line_are_stuck_within_a_window_or_so() {
        // As the 1.5B model wrote it (local-1206e, add-cli-flag): a few sentences, one of
        // them over and over, no line break in 7,800 bytes.
        let sentences = [
            "The program prints 'HELLO, world!' when run with the default arguments. ",
            "The program prints 'HELLO, user!' when run with the `--name user` argument. ",
            "The program prints 'HELLO, world!' when run with the `--name user` argument. ",
        ];
        let mut text = format!("{{\"text\": \"{}{}", sentences[0], sentences[1]);
        for n in 0..100 {
            text.push_str(sentences[if n % 7 == 3 { 1 } else { 2 }]);
        }
        let at = echoes_stuck_at(&text).expect("stuck");
        assert!(at <= 2 * ECHO_WINDOW, "stuck at byte {at}");
        let mut all = Repeats::new();
        assert!(text.as_bytes().chunks(7).any(|chunk| all.push(chunk)), "the text routes' check sees it too");
    }

    #[test]
    fn code_and_prose_of_this_repository_are_not_echoes() {
        // Every source and document file of the workspace, written out as one reply.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        let mut folders = vec![root.join("crates"), root.join("docs")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "rs" || e == "md") {
                    files.push(path);
                }
            }
        }
        assert!(files.len() > 100, "found {} files", files.len());
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(echoes_stuck_at(&text), None, "{}", path.display());
        }
        // Tests alike but for their names and numbers.
        let code: String = (0..40)
            .map(|n| {
                format!("def test_case_{n}():\n    value = compute({n})\n    assert value == {}\n\n", n * 2)
            })
            .collect();
        assert_eq!(echoes_stuck_at(&code), None);
    }

    #[test]
    fn one_block_written_twice_is_stuck_only_past_a_window() {
        let block: String =
            (0..ECHO_WINDOW / 40).map(|n| format!("line {n:03} of a block, nothing more\n")).collect();
        assert!(block.len() < ECHO_WINDOW + ECHO_SPAN);
        assert_eq!(echoes_stuck_at(&format!("{block}{block}")), None, "under a window of echoes");
        assert!(echoes_stuck_at(&format!("{block}{block}{block}")).is_some());
    }
}
