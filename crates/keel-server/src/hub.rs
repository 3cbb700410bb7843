//! A live session's fan-out: every event the loop reports goes to every connected
//! client, and the logged events of the running turn are kept until the turn's last
//! sync, so a client that reconnects gets exactly what it missed — from the store for
//! what is durable, from here for the rest.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use keel_agent::{AgentEvent, Sink};
use tokio::sync::broadcast;

use crate::wire::agent_event_value;

/// One event as sent to clients: its seq when logged, and its JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The event's seq (`id:` of the SSE event); `None` for live-only events.
    pub seq: Option<u64>,
    /// The JSON object, as `keel --json` prints it.
    pub data: Arc<str>,
}

/// Frames buffered per subscriber before a slow one is cut off (it reconnects with
/// `Last-Event-ID` and is replayed exactly), unless the server configures another.
pub const DEFAULT_BUFFER: usize = 4096;

#[derive(Debug)]
struct State {
    /// Logged events not yet known durable (since the last completed turn).
    recent: VecDeque<Frame>,
}

/// The fan-out of one session; also the [`Sink`] its turns report to.
#[derive(Debug)]
pub struct Hub {
    state: Mutex<State>,
    tx: broadcast::Sender<Frame>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub::with_buffer(DEFAULT_BUFFER)
    }
}

impl Hub {
    /// A hub whose subscribers may fall `buffer` frames behind before they are cut off.
    pub fn with_buffer(buffer: usize) -> Self {
        Hub { state: Mutex::new(State { recent: VecDeque::new() }), tx: broadcast::channel(buffer.max(1)).0 }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        match self.state.lock() {
            Ok(mut state) => f(&mut state),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Sends a frame to every client (and keeps it when logged).
    pub fn publish(&self, frame: Frame) {
        self.with(|state| {
            if frame.seq.is_some() {
                state.recent.push_back(frame.clone());
            }
            // Under the lock, so a subscriber sees each frame either in its snapshot or
            // on its channel, never in neither.
            let _ = self.tx.send(frame);
        });
    }

    /// Sends a live-only JSON value (a permission question) to every client.
    pub fn publish_value(&self, value: &serde_json::Value) {
        self.publish(Frame { seq: None, data: Arc::from(value.to_string()) });
    }

    /// Everything logged is durable now (the turn ended with a sync): drop the copies.
    pub fn durable(&self) {
        self.with(|state| state.recent.clear());
    }

    /// The kept logged events after seq `after`, and a channel for everything from now.
    pub fn subscribe(&self, after: Option<u64>) -> (Vec<Frame>, broadcast::Receiver<Frame>) {
        self.with(|state| {
            let kept = state
                .recent
                .iter()
                .filter(|f| after.is_none_or(|after| f.seq.is_some_and(|seq| seq > after)))
                .cloned()
                .collect();
            (kept, self.tx.subscribe())
        })
    }

    /// Connected clients.
    pub fn clients(&self) -> usize {
        self.tx.receiver_count()
    }
}

impl Sink for Hub {
    fn emit(&self, event: &AgentEvent<'_>) {
        let frame = match event {
            AgentEvent::Logged(e) => match logged_frame(e) {
                Some(frame) => frame,
                None => return,
            },
            other => match agent_event_value(other) {
                Some(value) => Frame { seq: None, data: Arc::from(value.to_string()) },
                None => return,
            },
        };
        self.publish(frame);
    }
}

/// The frame of a logged event: the event as stored, with its seq.
pub fn logged_frame(event: &keel_session::Event) -> Option<Frame> {
    serde_json::to_string(event).ok().map(|data| Frame { seq: Some(event.seq), data: Arc::from(data) })
}
