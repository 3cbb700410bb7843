#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! A pseudo-terminal for interactive tests (util-linux `script`).

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A program on a terminal: what it printed, and a way to type. Cursor-position
/// queries (`ESC[6n`, which the line editor sends at every prompt) are answered.
pub struct Terminal {
    pub child: Child,
    input: Arc<Mutex<ChildStdin>>,
    screen: Arc<Mutex<Vec<u8>>>,
}

impl Terminal {
    pub fn start(mut command: Command) -> Terminal {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = command.spawn().unwrap();
        let input = Arc::new(Mutex::new(child.stdin.take().unwrap()));
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut stdout = child.stdout.take().unwrap();
        let (answer, seen) = (Arc::clone(&input), Arc::clone(&screen));
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            let mut answered = 0;
            while let Ok(n) = stdout.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                let mut screen = seen.lock().unwrap();
                screen.extend_from_slice(&buffer[..n]);
                let queries = screen.windows(4).filter(|w| w == b"\x1b[6n").count();
                for _ in answered..queries {
                    let _ = answer.lock().unwrap().write_all(b"\x1b[1;1R");
                }
                answered = queries;
            }
        });
        Terminal { child, input, screen }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Sends keys as they are (no Enter).
    pub fn keys(&self, keys: &str) {
        let mut input = self.input.lock().unwrap();
        input.write_all(keys.as_bytes()).unwrap();
        input.flush().unwrap();
    }

    pub fn type_line(&self, line: &str) {
        let mut input = self.input.lock().unwrap();
        input.write_all(line.as_bytes()).unwrap();
        input.write_all(b"\r").unwrap();
        input.flush().unwrap();
    }

    /// Waits until the screen shows `needle` `times` times.
    pub fn wait_for(&self, needle: &str, times: usize) {
        let started = Instant::now();
        while self.text().matches(needle).count() < times {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "never saw {needle:?} x{times}:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the prompt settle before typing.
        std::thread::sleep(Duration::from_millis(300));
    }
}

pub fn has_script() -> bool {
    Command::new("script").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Whether a pseudo-terminal can be had; `false` is a skip that is said, and a failure
/// where `KEEL_TEST_REQUIRE` names `pty` (see `keel_testkit::prereq::available`).
pub fn available() -> bool {
    keel_testkit::prereq::available("pty", has_script(), "util-linux `script` (a pseudo-terminal)")
}

/// The rest of a control sequence after its `ESC [`: parameters and the final letter.
fn control_sequence(chars: &mut impl Iterator<Item = char>) -> String {
    let mut sequence = String::new();
    for c in chars.by_ref() {
        sequence.push(c);
        if c.is_ascii_alphabetic() || c == '~' {
            break;
        }
    }
    sequence
}

/// What a person reads: escapes dropped, `\r` returning to the line's start (later text
/// overwrites), `ESC[2K` clearing the line.
pub fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut line: Vec<char> = Vec::new();
    let mut col = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                if chars.peek() == Some(&'[') {
                    chars.next();
                    if control_sequence(&mut chars) == "2K" {
                        line.clear();
                        col = 0;
                    }
                } else {
                    chars.next();
                }
            }
            '\r' => col = 0,
            '\n' => {
                out.extend(line.drain(..));
                out.push('\n');
                col = 0;
            }
            c => {
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
    }
    out.extend(line);
    out
}

/// The screen as a terminal leaves it, scrollback included: as [`plain`], and lines
/// redrawn in place too (`ESC[nA` up, `ESC[J` erasing below, `ESC[K` to the line's end),
/// so what was drawn over is gone.
pub fn screen(text: &str) -> String {
    let mut rows: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' if chars.peek() == Some(&'[') => {
                chars.next();
                let sequence = control_sequence(&mut chars);
                let (count, command) = sequence.split_at(sequence.len().saturating_sub(1));
                let n = count.parse::<usize>().unwrap_or(1);
                match (command, count) {
                    ("K", "2") => rows[row].clear(),
                    ("K", "" | "0") => rows[row].truncate(col),
                    ("J", "" | "0") => {
                        rows[row].truncate(col);
                        rows.truncate(row + 1);
                    }
                    ("A", _) => row = row.saturating_sub(n),
                    ("G", _) => col = n.saturating_sub(1),
                    ("C", _) => col += n,
                    ("D", _) => col = col.saturating_sub(n),
                    _ => {}
                }
            }
            '\x1b' => {
                chars.next();
            }
            '\r' => col = 0,
            '\n' => {
                row += 1;
                if row == rows.len() {
                    rows.push(Vec::new());
                }
                col = 0;
            }
            c => {
                let line = &mut rows[row];
                while line.len() < col {
                    line.push(' ');
                }
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
    }
    rows.into_iter().map(|r| r.into_iter().collect::<String>()).collect::<Vec<_>>().join("\n")
}

/// `keel ARGS` under `script`, with `command`'s environment and folder.
pub fn under_script(command: &Command, args: &str) -> Command {
    // `exec`: keel replaces the shell `script` starts, so a Ctrl-C the shell also sees
    // does not change the exit status.
    let keel = format!("exec {} {args}", env!("CARGO_BIN_EXE_keel"));
    let mut script = Command::new("script");
    script.args(["-qfec", &keel, "/dev/null"]).env_clear();
    if let Some(dir) = command.get_current_dir() {
        script.current_dir(dir);
    }
    for (name, value) in command.get_envs() {
        if let Some(value) = value {
            script.env(name, value);
        }
    }
    script.env("TERM", "xterm").env("COLUMNS", "100").env("LINES", "40");
    script
}
