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

/// Routes typed lines during a turn.
#[derive(Default)]
pub struct TurnInput {
    pending: Mutex<Option<oneshot::Sender<String>>>,
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

    /// Delivers a typed line: to a waiting question, else as steering input.
    fn deliver(&self, line: String, inbox: &Inbox, terminal: &Terminal) {
        let waiting = self.pending.lock().ok().and_then(|mut p| p.take());
        match waiting {
            Some(sender) => {
                if self.typing.load(Ordering::Relaxed) {
                    terminal.line(&format!("  › {line}"));
                }
                let _ = sender.send(line);
            }
            None if line.trim().is_empty() => {}
            None => {
                terminal.line(&format!("  ↳ queued for the next step: {}", clip(&line, 80)));
                inbox.steer(line);
            }
        }
    }

    /// The permission callback: prints the question and waits for the next typed line.
    pub fn ask_fn(self: &Arc<Self>, terminal: Arc<Terminal>, workspace: &std::path::Path) -> AskFn {
        let input = Arc::clone(self);
        let folder = workspace.display().to_string();
        let roots = keel_tools::workspace::Roots::new(workspace, &[], &[]).ok().map(Arc::new);
        Arc::new(move |request: AskRequest| {
            let input = Arc::clone(&input);
            let terminal = Arc::clone(&terminal);
            let folder = folder.clone();
            let roots = roots.clone();
            Box::pin(async move {
                if !input.attached.load(Ordering::Relaxed) {
                    terminal.line(&format!(
                        "  {} needs permission, but there is no terminal to ask: denied",
                        request.tool
                    ));
                    return AskAnswer::Deny;
                }
                let (sender, receiver) = oneshot::channel();
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
                match receiver.await.map(|answer| answer.trim().to_lowercase()) {
                    Ok(answer) if answer == "y" || answer == "yes" => AskAnswer::Allow,
                    Ok(answer) if answer == "a" || answer == "always" => AskAnswer::AllowAlways,
                    Ok(answer) if answer == "s" || answer == "stop" => AskAnswer::DenyAndStop,
                    _ => AskAnswer::Deny,
                }
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
        let (sender, mut receiver) = mpsc::unbounded_channel::<String>();
        let thread_stop = Arc::clone(&stop);
        // Typed text is shown by keel only where the spinner is drawn.
        let typing = terminal.draws() && crate::typing::start(&source);
        input.typing.store(typing, Ordering::Relaxed);
        let shown = typing.then(|| Arc::clone(&terminal));
        let kept = Arc::clone(&terminal);
        let thread = std::thread::Builder::new()
            .name("keel-input".into())
            .spawn(move || read_lines(source, &thread_stop, &sender, shown.as_deref()))
            .ok();
        input.attached.store(thread.is_some(), Ordering::Relaxed);
        let router = Arc::clone(&input);
        let task = tokio::spawn(async move {
            while let Some(line) = receiver.recv().await {
                router.deliver(line, &inbox, &terminal);
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
/// drawn there after each key.
fn read_lines(
    mut source: File,
    stop: &AtomicBool,
    sender: &mpsc::UnboundedSender<String>,
    shown: Option<&Terminal>,
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
        match source.read(&mut buf) {
            Ok(0) | Err(_) => return editor.current(),
            Ok(n) => {
                for line in editor.feed(&buf[..n]) {
                    if sender.send(line).is_err() {
                        return editor.current();
                    }
                }
                if let Some(terminal) = shown {
                    terminal.typing(&editor.current());
                }
            }
        }
    }
    editor.current()
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
