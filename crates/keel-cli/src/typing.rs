//! Typing while the agent works, visible: during a turn the terminal is switched to
//! non-canonical mode without echo (signals stay on, so Ctrl-C still stops the turn),
//! keel keeps the line being typed and the terminal sink redraws it after the spinner.
//! The terminal's settings are put back when the turn ends, and on every early exit.

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
        let _ = rustix::termios::tcsetattr(fd.as_fd(), OptionalActions::Now, &termios);
    }
}

/// The line being typed, from raw key bytes: Enter ends it, Backspace and Ctrl-U edit
/// it, escape sequences (arrows) and other control keys are ignored.
#[derive(Debug, Default)]
pub struct LineEditor {
    bytes: Vec<u8>,
    /// Inside an escape sequence: 1 after ESC, 2 inside `ESC [`.
    escape: u8,
}

impl LineEditor {
    /// Feeds bytes; returns the lines they finished.
    pub fn feed(&mut self, input: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for &byte in input {
            match (self.escape, byte) {
                (1, b'[' | b'O') => self.escape = 2,
                (1, _) => self.escape = 0,
                (2, b'@'..=b'~') => self.escape = 0,
                (2, _) => {}
                (_, 0x1b) => self.escape = 1,
                (_, b'\n' | b'\r') => {
                    lines.push(String::from_utf8_lossy(&self.bytes).into_owned());
                    self.bytes.clear();
                }
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
}
