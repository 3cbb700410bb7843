//! Typing while the agent works: lines read from the terminal during a turn become
//! steering input, or the answer to a pending permission question.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_agent::Inbox;
use keel_tools::{AskAnswer, AskFn, AskRequest};
use tokio::sync::{mpsc, oneshot};

use crate::render::Terminal;
use crate::render::format::clip;

/// What the user gave a permission question.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    /// One of the one-key answers (`y`, `a`, `s`), typed first.
    Key(u8),
    /// A whole line.
    Line(String),
    /// The line typed after `n`: what to do instead (empty: just no).
    Instead(String),
}

/// What the reader thread sends: a finished line, or a one-key answer.
enum Typed {
    Line(String),
    Key(u8),
}

/// The answer a reply gives: `y`, `a`, `s` (keys or words), a bare Enter or `n`/`no` a
/// plain no, other words a no with those words for the model.
fn answer(reply: Reply) -> AskAnswer {
    let words = match reply {
        Reply::Key(b'y') => return AskAnswer::Allow,
        Reply::Key(b'a') => return AskAnswer::AllowAlways,
        Reply::Key(_) => return AskAnswer::DenyAndStop,
        Reply::Instead(words) => words,
        Reply::Line(line) => match line.trim().to_lowercase().as_str() {
            "y" | "yes" => return AskAnswer::Allow,
            // `p` is `a` that is also kept for the project (see `TurnInput::ask_fn`); a
            // line, not a key, so that words starting with p ("please …") stay words.
            "a" | "always" | "p" | "project" => return AskAnswer::AllowAlways,
            "s" | "stop" => return AskAnswer::DenyAndStop,
            "" | "n" | "no" => return AskAnswer::Deny,
            _ => line,
        },
    };
    match words.trim() {
        "" => AskAnswer::Deny,
        words => AskAnswer::DenyWithWords(words.to_owned()),
    }
}

/// Whether a reply asks to keep the offered rules for the project (`p`).
fn keeps_for_project(reply: &Reply) -> bool {
    match reply {
        Reply::Line(line) => matches!(line.trim().to_lowercase().as_str(), "p" | "project"),
        Reply::Key(_) | Reply::Instead(_) => false,
    }
}

/// Routes typed lines during a turn.
#[derive(Default)]
pub struct TurnInput {
    pending: Mutex<Option<oneshot::Sender<Reply>>>,
    /// `n` was pressed at the question: the next line says what to do instead.
    instead: AtomicBool,
    /// True while a reader is attached (a question can be answered).
    attached: AtomicBool,
    /// Keys are read without the terminal's echo: keel shows typed lines itself.
    typing: AtomicBool,
    /// A slash command typed during the turn is kept for the prompt (the interactive
    /// mode), not sent to the model as steering.
    keeps_commands: AtomicBool,
    /// The slash command typed during this turn, for the prompt.
    command: Mutex<Option<String>>,
}

/// Whether a line typed during a turn is a slash command (`/compact keep the table`, a
/// custom `/fix-issue 12`), not words for the model (`/tmp/x is the file`).
fn is_command(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or_default();
    first.strip_prefix('/').is_some_and(|name| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

impl TurnInput {
    /// A new router.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// From now on, a slash command typed during a turn waits at the next prompt
    /// ([`LineReader::finish`] gives it back) instead of reaching the model: the walkthrough
    /// of issue 32 typed `/compact` while a turn ran, and the model got it as words.
    pub fn keep_commands(&self) {
        self.keeps_commands.store(true, Ordering::Relaxed);
    }

    /// Whether a permission question waits for its answer.
    fn asking(&self) -> bool {
        self.pending.lock().is_ok_and(|p| p.is_some())
    }

    /// Delivers what was typed: to a waiting question, else (a line) as steering input.
    fn deliver(&self, typed: Typed, inbox: &Inbox, terminal: &Terminal) {
        let waiting = self.pending.lock().ok().and_then(|mut p| p.take());
        match (waiting, typed) {
            (Some(sender), Typed::Key(b'n')) => {
                // Not answered yet: the next line says what to do instead.
                if let Ok(mut pending) = self.pending.lock() {
                    *pending = Some(sender);
                }
                self.instead.store(true, Ordering::Relaxed);
                terminal.line("  › no · what should it do instead? (Enter: just no)");
            }
            (Some(sender), Typed::Key(key)) => {
                let shown = match key {
                    b'y' => "yes",
                    b'a' => "always",
                    _ => "stop",
                };
                terminal.line(&format!("  › {shown}"));
                let _ = sender.send(Reply::Key(key));
            }
            (Some(sender), Typed::Line(line)) => {
                if self.typing.load(Ordering::Relaxed) {
                    terminal.line(&format!("  › {}", clip(&line.replace('\n', " ⏎ "), 200)));
                }
                let instead = self.instead.swap(false, Ordering::Relaxed);
                let _ = sender.send(if instead { Reply::Instead(line) } else { Reply::Line(line) });
            }
            (None, Typed::Line(line)) if line.trim().is_empty() => {}
            (None, Typed::Line(line)) if self.keeps_commands.load(Ordering::Relaxed) && is_command(&line) => {
                terminal.line(&format!(
                    "  ↳ {}: a command, it waits at the prompt for this turn to end",
                    clip(&line, 60)
                ));
                if let Ok(mut command) = self.command.lock() {
                    *command = Some(line.trim().to_owned());
                }
            }
            (None, Typed::Line(line)) => {
                terminal
                    .line(&format!("  ↳ queued for the next step: {}", clip(&line.replace('\n', " ⏎ "), 80)));
                inbox.steer(line);
            }
            (None, Typed::Key(_)) => {}
        }
    }

    /// The permission callback: prints the question and waits for the next typed line.
    pub fn ask_fn(self: &Arc<Self>, terminal: Arc<Terminal>, workspace: &std::path::Path) -> AskFn {
        let input = Arc::clone(self);
        let project = Arc::new(workspace.to_path_buf());
        let folder = workspace.display().to_string();
        let roots = keel_tools::workspace::Roots::new(workspace, &[], &[]).ok().map(Arc::new);
        Arc::new(move |request: AskRequest| {
            let input = Arc::clone(&input);
            let terminal = Arc::clone(&terminal);
            let folder = folder.clone();
            let roots = roots.clone();
            let project = Arc::clone(&project);
            Box::pin(async move {
                if !input.attached.load(Ordering::Relaxed) {
                    terminal.line(&format!(
                        "  {} needs permission, but there is no terminal to ask: denied",
                        request.tool
                    ));
                    return AskAnswer::Deny;
                }
                let (sender, receiver) = oneshot::channel();
                input.instead.store(false, Ordering::Relaxed);
                if let Ok(mut pending) = input.pending.lock() {
                    *pending = Some(sender);
                }
                terminal.stop_spinner();
                let question = crate::render::approval::Question {
                    request: &request,
                    folder: &folder,
                    width: crate::render::width(),
                    color: terminal.color(),
                    roots: roots.as_deref(),
                };
                for line in crate::render::approval::question(&question) {
                    terminal.line(&line);
                }
                // Anything but an explicit yes (Enter included) is a no.
                let Ok(reply) = receiver.await else { return AskAnswer::Deny };
                if keeps_for_project(&reply) && !request.suggested.is_empty() {
                    match crate::project_rules::keep(&project, &request.suggested) {
                        Ok(()) => terminal.line(&format!(
                            "  kept for this project in {}",
                            crate::project_rules::file().display()
                        )),
                        Err(e) => terminal.line(&format!("  keel: {e}; allowed for this session only")),
                    }
                }
                answer(reply)
            })
        })
    }
}

/// A reader thread polling a terminal for lines until dropped.
pub struct LineReader {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<String>>,
    task: tokio::task::JoinHandle<()>,
    input: Arc<TurnInput>,
    terminal: Arc<Terminal>,
}

impl LineReader {
    /// Reads lines from `source` (stdin or /dev/tty) and routes them through `input`.
    pub fn start(source: File, input: Arc<TurnInput>, inbox: Inbox, terminal: Arc<Terminal>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (sender, mut receiver) = mpsc::unbounded_channel::<Typed>();
        let thread_stop = Arc::clone(&stop);
        // Typed text is shown by keel only where the spinner is drawn.
        let typing = terminal.draws() && crate::typing::start(&source);
        input.typing.store(typing, Ordering::Relaxed);
        let shown = typing.then(|| Arc::clone(&terminal));
        let kept = Arc::clone(&terminal);
        // One-key answers need keys one by one, as typing mode reads them.
        let keys = typing.then(|| Arc::clone(&input));
        let thread = std::thread::Builder::new()
            .name("keel-input".into())
            .spawn(move || read_lines(source, &thread_stop, &sender, shown.as_deref(), keys.as_deref()))
            .ok();
        input.attached.store(thread.is_some(), Ordering::Relaxed);
        let router = Arc::clone(&input);
        let task = tokio::spawn(async move {
            while let Some(typed) = receiver.recv().await {
                router.deliver(typed, &inbox, &terminal);
            }
        });
        LineReader { stop, thread, task, input, terminal: kept }
    }

    /// Stops reading; returns what carries over to the prompt: a slash command typed
    /// during the turn, else the line typed but not finished.
    pub fn finish(mut self) -> String {
        let unfinished = self.stop();
        let command = self.input.command.lock().ok().and_then(|mut c| c.take());
        command.unwrap_or(unfinished)
    }

    fn stop(&mut self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        self.input.attached.store(false, Ordering::Relaxed);
        let unfinished = self.thread.take().and_then(|thread| thread.join().ok()).unwrap_or_default();
        if self.input.typing.swap(false, Ordering::Relaxed) {
            crate::typing::restore();
            self.terminal.typing("");
        }
        self.task.abort();
        unfinished
    }
}

impl Drop for LineReader {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads keys until `stop`, sending finished lines; with `shown`, the line being typed is
/// drawn there after each key; with `keys`, a question's one-key answers (`y`, `a`, `s`,
/// `n`) typed first are sent once no next key follows them (see [`Keys`]).
fn read_lines(
    mut source: File,
    stop: &AtomicBool,
    sender: &mpsc::UnboundedSender<Typed>,
    shown: Option<&Terminal>,
    keys: Option<&TurnInput>,
) -> String {
    let mut editor = crate::typing::LineEditor::default();
    let mut gate = Keys::default();
    let mut buf = [0u8; 4096];
    let unfinished = |editor: &crate::typing::LineEditor, gate: &Keys| {
        gate.typed().map(String::from).unwrap_or_default() + &editor.current()
    };
    while !stop.load(Ordering::Relaxed) {
        let fd = source.as_fd();
        let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
        let timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: 50_000_000 };
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) => {
                if let Some((key, raw)) = gate.due(Instant::now()) {
                    // Still a question to answer: the key is the answer; else it was typing.
                    let typed = if keys.is_some_and(TurnInput::asking) {
                        Typed::Key(key)
                    } else {
                        editor.feed(&[raw]);
                        continue;
                    };
                    if sender.send(typed).is_err() {
                        return editor.current();
                    }
                    if let Some(terminal) = shown {
                        terminal.typing("");
                    }
                }
                continue;
            }
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return unfinished(&editor, &gate),
        }
        let readable = fds[0].revents();
        if !readable.intersects(rustix::event::PollFlags::IN) {
            if readable.intersects(rustix::event::PollFlags::HUP | rustix::event::PollFlags::ERR) {
                return unfinished(&editor, &gate);
            }
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let n = match source.read(&mut buf) {
            Ok(0) | Err(_) => return unfinished(&editor, &gate),
            Ok(n) => n,
        };
        let may_take = keys.is_some_and(|input| input.asking() && !input.instead.load(Ordering::Relaxed))
            && editor.is_idle();
        let (key, typed) = gate.read(&buf[..n], may_take, Instant::now());
        if let Some(key) = key
            && sender.send(Typed::Key(key)).is_err()
        {
            return editor.current();
        }
        for line in editor.feed(&typed) {
            if sender.send(Typed::Line(line)).is_err() {
                return editor.current();
            }
        }
        if let Some(terminal) = shown {
            let line = unfinished(&editor, &gate);
            terminal.typing(&line.replace('\n', " ⏎ "));
        }
    }
    unfinished(&editor, &gate)
}

/// How long a one-key answer waits for a next key. A person typing words at a question
/// ("also summarize the log") presses the next letter well within it; one answering
/// with a key waits for something to happen.
const KEY_GRACE: Duration = Duration::from_millis(500);

/// One-key answers at a permission question. Issue 32: a key answered at once, so the
/// `a` of "also summarize the log" allowed the command always, and the rest of the words
/// became a turn. A key typed first now counts only if nothing follows it: within
/// [`KEY_GRACE`] another key makes it the first letter of words (a no with what to do
/// instead), Enter answers at once, Backspace takes it back; words that arrive together
/// (typed fast, pasted) are words.
#[derive(Debug, Default)]
struct Keys {
    /// The key waiting for its grace to end: its answer, the byte typed, when.
    pending: Option<(u8, u8, Instant)>,
}

impl Keys {
    /// One read of `bytes` (`may_take`: a question waits and nothing is typed yet): the
    /// key it answers with now, if any, and the bytes that are typing.
    fn read(&mut self, bytes: &[u8], may_take: bool, now: Instant) -> (Option<u8>, Vec<u8>) {
        let Some(&first) = bytes.first() else { return (None, Vec::new()) };
        if let Some((key, raw, _)) = self.pending.take() {
            return match first {
                // Enter: the key, then the Enter (an empty line, or `n`'s plain no).
                b'\r' | b'\n' => (Some(key), bytes.to_vec()),
                // Backspace, Ctrl-U: taken back.
                0x7f | 0x08 | 0x15 => (None, bytes[1..].to_vec()),
                _ => (None, [&[raw], bytes].concat()),
            };
        }
        let Some(key) = one_key(first).filter(|_| may_take) else { return (None, bytes.to_vec()) };
        match bytes.get(1) {
            None => {
                self.pending = Some((key, first, now));
                (None, Vec::new())
            }
            Some(b'\r' | b'\n') => (Some(key), bytes[1..].to_vec()),
            Some(_) => (None, bytes.to_vec()),
        }
    }

    /// The pending key (its answer and its byte) once its grace is over.
    fn due(&mut self, now: Instant) -> Option<(u8, u8)> {
        let (key, raw, at) = self.pending?;
        if now.duration_since(at) < KEY_GRACE {
            return None;
        }
        self.pending = None;
        Some((key, raw))
    }

    /// The pending key as typed, for the line shown.
    fn typed(&self) -> Option<char> {
        self.pending.map(|(_, raw, _)| char::from(raw))
    }
}

/// The one-key answer a key gives at a permission question.
fn one_key(byte: u8) -> Option<u8> {
    match byte.to_ascii_lowercase() {
        key @ (b'y' | b'a' | b's' | b'n') => Some(key),
        _ => None,
    }
}

/// The terminal to read typed lines from: stdin if it is one, else /dev/tty.
pub fn terminal_source() -> Option<File> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        let fd = rustix::io::dup(std::io::stdin().as_fd()).ok()?;
        return Some(File::from(fd));
    }
    File::open("/dev/tty").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_answer_as_the_question_says() {
        assert_eq!(answer(Reply::Key(b'y')), AskAnswer::Allow);
        assert_eq!(answer(Reply::Key(b'a')), AskAnswer::AllowAlways);
        assert_eq!(answer(Reply::Key(b's')), AskAnswer::DenyAndStop);
        assert_eq!(answer(Reply::Instead(String::new())), AskAnswer::Deny);
        assert_eq!(
            answer(Reply::Instead(" run the tests first ".into())),
            AskAnswer::DenyWithWords("run the tests first".into())
        );
        assert_eq!(answer(Reply::Line("".into())), AskAnswer::Deny);
        assert_eq!(answer(Reply::Line("No".into())), AskAnswer::Deny);
        assert_eq!(answer(Reply::Line("YES".into())), AskAnswer::Allow);
        // Issue 32: words at the question were a plain no, and the model never saw them.
        assert_eq!(
            answer(Reply::Line("also summarize the log".into())),
            AskAnswer::DenyWithWords("also summarize the log".into())
        );
    }

    #[test]
    fn slash_commands_are_told_from_words() {
        for command in ["/compact", "/compact keep the table", " /model qwen", "/fix-issue 12"] {
            assert!(is_command(command), "{command}");
        }
        for words in ["/tmp/x is the file", "use /usr/bin/env", "/", "/ look", "/a.out crashes", "fix it"] {
            assert!(!is_command(words), "{words}");
        }
    }

    /// Issue 32: the `a` of "also summarize the log" allowed the command always. A key
    /// counts once nothing follows it; typed on, it is the first letter of words.
    #[test]
    fn a_key_counts_only_when_nothing_follows_it() {
        let start = Instant::now();
        let later = |ms: u64| start + Duration::from_millis(ms);
        // Alone: the answer once the grace is over, not before.
        let mut keys = Keys::default();
        assert_eq!(keys.read(b"a", true, start), (None, vec![]));
        assert_eq!(keys.typed(), Some('a'));
        assert_eq!(keys.due(later(100)), None);
        assert_eq!(keys.due(later(500)), Some((b'a', b'a')));
        assert_eq!(keys.due(later(900)), None, "once");
        // Typed on at a person's pace: words, the key their first letter.
        let mut keys = Keys::default();
        assert_eq!(keys.read(b"a", true, start), (None, vec![]));
        assert_eq!(keys.read(b"l", true, later(150)), (None, b"al".to_vec()));
        assert_eq!(keys.due(later(1000)), None);
        // Arriving together (typed fast, pasted, sent by a program): words.
        let mut keys = Keys::default();
        assert_eq!(keys.read(b"yes but in /tmp", true, start), (None, b"yes but in /tmp".to_vec()));
        // The key and Enter: the key at once; Enter after it is an empty line.
        assert_eq!(keys.read(b"y\r", true, start), (Some(b'y'), b"\r".to_vec()));
        assert_eq!(keys.read(b"Y", true, start), (None, vec![]));
        assert_eq!(keys.read(b"\r", true, later(100)), (Some(b'y'), b"\r".to_vec()));
        // Backspace takes it back.
        assert_eq!(keys.read(b"s", true, start), (None, vec![]));
        assert_eq!(keys.read(b"\x7f", true, later(100)), (None, vec![]));
        assert_eq!(keys.due(later(1000)), None);
        // No question waiting (or text already typed): typing as always.
        assert_eq!(keys.read(b"y", false, start), (None, b"y".to_vec()));
        assert_eq!(keys.read(b"p", true, start), (None, b"p".to_vec()), "p is a line, not a key");
    }
}
