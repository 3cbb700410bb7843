//! Typing while the agent works: lines read from the terminal during a turn become
//! steering input, or the answer to a pending permission question.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
}

impl TurnInput {
    /// A new router.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
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

    /// Stops reading; returns the line typed but not finished (to carry over to the
    /// prompt).
    pub fn finish(mut self) -> String {
        self.stop()
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
/// `n`) typed first are sent at once.
fn read_lines(
    mut source: File,
    stop: &AtomicBool,
    sender: &mpsc::UnboundedSender<Typed>,
    shown: Option<&Terminal>,
    keys: Option<&TurnInput>,
) -> String {
    let mut editor = crate::typing::LineEditor::default();
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        let fd = source.as_fd();
        let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
        let timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: 50_000_000 };
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return editor.current(),
        }
        let readable = fds[0].revents();
        if !readable.intersects(rustix::event::PollFlags::IN) {
            if readable.intersects(rustix::event::PollFlags::HUP | rustix::event::PollFlags::ERR) {
                return editor.current();
            }
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let n = match source.read(&mut buf) {
            Ok(0) | Err(_) => return editor.current(),
            Ok(n) => n,
        };
        let mut bytes = &buf[..n];
        if let Some(input) = keys
            && let Some(key) = one_key(bytes[0])
            && editor.is_idle()
            && input.asking()
            && !input.instead.load(Ordering::Relaxed)
        {
            if sender.send(Typed::Key(key)).is_err() {
                return editor.current();
            }
            bytes = &bytes[1..];
        }
        for line in editor.feed(bytes) {
            if sender.send(Typed::Line(line)).is_err() {
                return editor.current();
            }
        }
        if let Some(terminal) = shown {
            terminal.typing(&editor.current().replace('\n', " ⏎ "));
        }
    }
    editor.current()
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
}
