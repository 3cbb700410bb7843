//! Signals that end a turn: SIGINT (Ctrl-C), SIGTERM (`kill`, `timeout`) and SIGHUP (the
//! terminal closed) all cancel the running turn the same way, so its tools' process
//! groups are stopped and the abort is logged; a second signal during that abort leaves
//! at once (the launcher's parent-death signal still stops the commands). Outside a turn
//! a signal ends keel, as it would by default.
//!
//! The handlers live on a thread of their own with its own small runtime: the
//! interactive prompt blocks keel's runtime thread, and a handler registered there would
//! never run, leaving keel deaf to SIGTERM at the prompt.

use std::sync::{Mutex, OnceLock};

use keel_llm::CancellationToken;
use tokio::signal::unix::SignalKind;

use crate::exit;

#[derive(Default)]
struct State {
    /// The running turn's token.
    turn: Option<CancellationToken>,
    /// SIGTERM or SIGHUP cancelled a turn: keel should leave once it has ended.
    leave: bool,
}

/// The process's signal handling.
pub struct Interrupts {
    state: Mutex<State>,
}

/// Marks a turn as running until dropped.
pub struct TurnGuard {
    interrupts: &'static Interrupts,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        if let Ok(mut state) = self.interrupts.state.lock() {
            state.turn = None;
        }
    }
}

impl Interrupts {
    /// The process's handlers, installed on first use (call it at start-up).
    pub fn get() -> &'static Interrupts {
        static INTERRUPTS: OnceLock<&'static Interrupts> = OnceLock::new();
        INTERRUPTS.get_or_init(|| {
            let interrupts: &'static Interrupts = Box::leak(Box::new(Interrupts { state: Mutex::default() }));
            let (ready, installed) = std::sync::mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name("keel-signals".into())
                .spawn(move || listen(interrupts, ready));
            if spawned.is_ok() {
                // Installed before keel goes on, so no signal finds the default action.
                let _ = installed.recv();
            }
            interrupts
        })
    }

    /// A turn is running: a signal cancels `cancel` until the guard is dropped.
    pub fn turn(&'static self, cancel: CancellationToken) -> TurnGuard {
        if let Ok(mut state) = self.state.lock() {
            state.turn = Some(cancel);
        }
        TurnGuard { interrupts: self }
    }

    /// True once SIGTERM or SIGHUP ended a turn: keel leaves instead of asking for more.
    pub fn leaving(&self) -> bool {
        self.state.lock().map(|state| state.leave).unwrap_or(false)
    }

    fn received(&self, kind: SignalKind) {
        let mut state = match self.state.lock() {
            Ok(state) => state,
            Err(_) => {
                crate::typing::restore();
                std::process::exit(i32::from(exit::INTERRUPTED))
            }
        };
        match &state.turn {
            Some(turn) if !turn.is_cancelled() => {
                turn.cancel();
                state.leave |= kind != SignalKind::interrupt();
            }
            // The second signal of a turn: leave now.
            Some(_) => {
                crate::typing::restore();
                std::process::exit(i32::from(exit::INTERRUPTED))
            }
            None => {
                crate::typing::restore();
                std::process::exit(128 + kind.as_raw_value())
            }
        }
    }
}

fn listen(interrupts: &'static Interrupts, ready: std::sync::mpsc::Sender<()>) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        let _ = ready.send(());
        return;
    };
    runtime.block_on(async move {
        let streams = (
            tokio::signal::unix::signal(SignalKind::interrupt()),
            tokio::signal::unix::signal(SignalKind::terminate()),
            tokio::signal::unix::signal(SignalKind::hangup()),
        );
        let _ = ready.send(());
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = streams else { return };
        loop {
            let kind = tokio::select! {
                Some(()) = int.recv() => SignalKind::interrupt(),
                Some(()) = term.recv() => SignalKind::terminate(),
                Some(()) = hup.recv() => SignalKind::hangup(),
                else => return,
            };
            interrupts.received(kind);
        }
    });
}

/// Watches the terminal on stdin for a hang-up (its window or its parent went away) and
/// then acts as on SIGHUP, once. The kernel sends SIGHUP only to the terminal's
/// controlling process, which may be a shell that does not pass it on; without this keel
/// sat at the prompt reading end-of-file forever at full CPU (the line editor retries).
pub fn watch_terminal() {
    let spawned = std::thread::Builder::new().name("keel-terminal-watch".into()).spawn(|| {
        let stdin = std::io::stdin();
        loop {
            let fd = std::os::fd::AsFd::as_fd(&stdin);
            // No events asked for: poll still reports a hang-up, and reads nothing.
            let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::empty())];
            let timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: 500_000_000 };
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => continue,
                Ok(_)
                    if fds[0]
                        .revents()
                        .intersects(rustix::event::PollFlags::HUP | rustix::event::PollFlags::ERR) =>
                {
                    Interrupts::get().received(SignalKind::hangup());
                    return;
                }
                Ok(_) => std::thread::sleep(std::time::Duration::from_millis(500)),
                Err(_) => return,
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch the terminal for a hang-up: {e}");
    }
}

/// Lets a signal cancel `cancel` until the guard is dropped.
pub fn during_turn(cancel: &CancellationToken) -> TurnGuard {
    Interrupts::get().turn(cancel.clone())
}
