//! Typing while the agent works, visible: during a turn the terminal is switched to
//! non-canonical mode without echo (signals stay on, so Ctrl-C still stops the turn),
//! keel keeps the line being typed and the terminal sink redraws it after the spinner.
//! The terminal's settings are put back when the turn ends, and on every early exit.
//! Bracketed paste is on meanwhile, so a pasted block is one message.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;

use rustix::termios::{LocalModes, OptionalActions, Termios};

/// The terminal and its settings from before the turn, while keel has changed them.
static SAVED: Mutex<Option<(OwnedFd, Termios)>> = Mutex::new(None);

/// Switches `terminal` to reading keys one by one without echo; false when it is not
/// a terminal or cannot be switched (lines are then read as the terminal gives them).
pub fn start(terminal: &File) -> bool {
    let Ok(saved) = rustix::termios::tcgetattr(terminal.as_fd()) else { return false };
    let Ok(fd) = terminal.as_fd().try_clone_to_owned() else { return false };
    let mut keys = saved.clone();
    keys.local_modes.remove(LocalModes::ICANON | LocalModes::ECHO);
    keys.special_codes[rustix::termios::SpecialCodeIndex::VMIN] = 1;
    keys.special_codes[rustix::termios::SpecialCodeIndex::VTIME] = 0;
    if rustix::termios::tcsetattr(terminal.as_fd(), OptionalActions::Now, &keys).is_err() {
        return false;
    }
    bracketed_paste(terminal, true);
    if let Ok(mut slot) = SAVED.lock() {
        *slot = Some((fd, saved));
    }
    true
}

/// Puts the terminal's settings back (a no-op when keel did not change them).
pub fn restore() {
    let saved = match SAVED.lock() {
        Ok(mut slot) => slot.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    };
    if let Some((fd, termios)) = saved {
        bracketed_paste(&fd, false);
        let _ = rustix::termios::tcsetattr(fd.as_fd(), OptionalActions::Now, &termios);
    }
}

/// Turns the terminal's bracketed paste on (a paste arrives between `ESC [200~` and
/// `ESC [201~`, so its newlines do not end the line) or off.
fn bracketed_paste(terminal: impl AsFd, on: bool) {
    let code: &[u8] = if on { b"\x1b[?2004h" } else { b"\x1b[?2004l" };
    let _ = rustix::io::write(terminal, code);
}

/// The line being typed, from raw key bytes: Enter ends it, Backspace and Ctrl-U edit
/// it, escape sequences (arrows) and other control keys are ignored; a bracketed paste
/// is kept whole, newlines included.
#[derive(Debug, Default)]
pub struct LineEditor {
    bytes: Vec<u8>,
    /// Inside an escape sequence: 1 after ESC, 2 inside `ESC [`.
    escape: u8,
    /// The parameter bytes of the `ESC [` sequence being read.
    params: Vec<u8>,
    /// Inside a bracketed paste.
    pasting: bool,
    /// The last pasted byte was a carriage return (a CRLF is one break).
    pasted_cr: bool,
}

impl LineEditor {
    /// Feeds bytes; returns the lines they finished.
    pub fn feed(&mut self, input: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for &byte in input {
            if self.escape == 0 && !matches!(byte, b'\n' | b'\r') {
                self.pasted_cr = false;
            }
            match (self.escape, byte) {
                (1, b'[' | b'O') => {
                    self.escape = 2;
                    self.params.clear();
                }
                (1, _) => self.escape = 0,
                (2, b'@'..=b'~') => {
                    self.escape = 0;
                    match (self.params.as_slice(), byte) {
                        (b"200", b'~') => self.pasting = true,
                        (b"201", b'~') => self.pasting = false,
                        _ => {}
                    }
                }
                (2, byte) => {
                    if self.params.len() < 16 {
                        self.params.push(byte);
                    }
                }
                (_, 0x1b) => self.escape = 1,
                (_, b'\n' | b'\r') if self.pasting => {
                    // A pasted CRLF is one line break.
                    if !(byte == b'\n' && self.pasted_cr) {
                        self.bytes.push(b'\n');
                    }
                    self.pasted_cr = byte == b'\r';
                    continue;
                }
                (_, b'\n' | b'\r') => {
                    lines.push(String::from_utf8_lossy(&self.bytes).into_owned());
                    self.bytes.clear();
                }
                (_, b'\t') if self.pasting => self.bytes.push(b'\t'),
                (_, 0x7f | 0x08) => {
                    // Drop the last character, continuation bytes first.
                    while let Some(last) = self.bytes.pop() {
                        if last & 0xC0 != 0x80 {
                            break;
                        }
                    }
                }
                (_, 0x15) => self.bytes.clear(),
                (_, byte) if byte < 0x20 => {}
                (_, byte) => self.bytes.push(byte),
            }
        }
        lines
    }

    /// The unfinished line as typed so far.
    pub fn current(&self) -> String {
        String::from_utf8_lossy(&self.bytes).trim_end_matches('\u{fffd}').to_owned()
    }

    /// Nothing typed, and not inside an escape sequence or a paste.
    pub fn is_idle(&self) -> bool {
        self.bytes.is_empty() && self.escape == 0 && !self.pasting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_make_lines() {
        let mut editor = LineEditor::default();
        assert!(editor.feed(b"fix th").is_empty());
        assert_eq!(editor.current(), "fix th");
        assert_eq!(editor.feed(b"e tesx\x7ft\x1b[D\x1bOA\x01s\r"), ["fix the tests"]);
        assert_eq!(editor.current(), "");
        assert_eq!(editor.feed("héé\x7f\n".as_bytes()), ["hé"]);
        editor.feed(b"junk\x15y");
        assert_eq!(editor.current(), "y");
        editor.feed(&[0xc3]);
        assert_eq!(editor.current(), "y", "half a character is not shown");
        assert_eq!(editor.feed(&[0xa9, b'\n']), ["yé"]);
    }

    /// Issue 32: a pasted traceback became one turn per line.
    #[test]
    fn a_bracketed_paste_is_one_line_with_its_breaks() {
        let mut editor = LineEditor::default();
        assert!(editor.is_idle());
        let paste = b"\x1b[200~Traceback:\r\n  File \"a.py\"\r\n\tboom\nValueError\x1b[201~";
        assert!(editor.feed(paste).is_empty(), "no line ends inside a paste");
        assert_eq!(editor.current(), "Traceback:\n  File \"a.py\"\n\tboom\nValueError");
        assert!(!editor.is_idle());
        assert_eq!(editor.feed(b" why?\r"), ["Traceback:\n  File \"a.py\"\n\tboom\nValueError why?"]);
        // A paste cut over two reads.
        assert!(editor.feed(b"\x1b[20").is_empty());
        assert!(editor.feed(b"0~a\nb\x1b[201~").is_empty());
        assert_eq!(editor.feed(b"\r"), ["a\nb"]);
        assert!(editor.is_idle());
    }
}
