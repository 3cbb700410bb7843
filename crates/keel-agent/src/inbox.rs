//! The inbox: input that arrives while the agent works.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct Queues {
    steering: VecDeque<String>,
    follow_up: VecDeque<String>,
    /// Why the running turn is being aborted, when not by the user.
    abort_reason: Option<String>,
}

/// A cloneable handle for queueing input from another task or thread.
///
/// Steering input joins the running turn at the next step; follow-up input starts a new
/// turn after the current one ends.
#[derive(Debug, Default, Clone)]
pub struct Inbox {
    queues: Arc<Mutex<Queues>>,
}

impl Inbox {
    /// An empty inbox.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut Queues) -> R) -> R {
        match self.queues.lock() {
            Ok(mut queues) => f(&mut queues),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Queues input for the running turn's next step.
    pub fn steer(&self, text: impl Into<String>) {
        let text = text.into();
        self.with(|q| q.steering.push_back(text));
    }

    /// Queues input for a new turn after the current one.
    pub fn follow_up(&self, text: impl Into<String>) {
        let text = text.into();
        self.with(|q| q.follow_up.push_back(text));
    }

    /// Takes all queued steering input.
    pub fn take_steering(&self) -> Vec<String> {
        self.with(|q| q.steering.drain(..).collect())
    }

    /// Takes the next follow-up input.
    pub fn take_follow_up(&self) -> Option<String> {
        self.with(|q| q.follow_up.pop_front())
    }

    /// Says why the turn about to be aborted stops (e.g. "the server is shutting down"),
    /// for its `turn/end`; without it the turn ends "aborted by the user".
    pub fn set_abort_reason(&self, reason: impl Into<String>) {
        let reason = reason.into();
        self.with(|q| q.abort_reason = Some(reason));
    }

    /// The reason a turn ends when aborted, and forgets a set one (it holds for one turn).
    pub fn take_abort_reason(&self) -> String {
        self.with(|q| q.abort_reason.take()).unwrap_or_else(|| "aborted by the user".to_owned())
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.with(|q| q.steering.is_empty() && q.follow_up.is_empty())
    }
}
