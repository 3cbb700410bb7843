//! A live session's fan-out: every event the loop reports goes to every connected
//! client — a logged event only once the store keeps it. On a store that reports its
//! commits (PostgreSQL), logged events wait here until committed, and so do the live
//! ones behind them, so a client never sees an event that a crash could rewrite under
//! the same seq, and sees everything in the order it happened. A client that
//! reconnects reads what it missed from the store.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use std::sync::atomic::Ordering;

use keel_agent::{AgentEvent, Sink};
use tokio::sync::broadcast;

use crate::metrics::Metrics;
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

#[derive(Debug, Default)]
struct State {
    /// Whether logged events wait for the store's word that they are durable.
    deferred: bool,
    /// The last seq the store reported durable.
    durable: Option<u64>,
    /// Frames held back, in order: a logged event not yet durable and all after it.
    pending: VecDeque<Frame>,
    /// When the running step started (for the step-time counter).
    step_started: Option<std::time::Instant>,
}

/// The fan-out of one session; also the [`Sink`] its turns report to.
#[derive(Debug)]
pub struct Hub {
    state: Mutex<State>,
    tx: broadcast::Sender<Frame>,
    /// The server's counters, when it keeps them.
    metrics: Option<Arc<Metrics>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub::with_buffer(DEFAULT_BUFFER)
    }
}

impl Hub {
    /// A hub whose subscribers may fall `buffer` frames behind before they are cut off.
    pub fn with_buffer(buffer: usize) -> Self {
        Hub { state: Mutex::new(State::default()), tx: broadcast::channel(buffer.max(1)).0, metrics: None }
    }

    /// This hub also counts steps, step time and model failures in `metrics`.
    pub fn counting(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        match self.state.lock() {
            Ok(mut state) => f(&mut state),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// From now on, logged events are shown only when [`Hub::durable_through`] says
    /// they are durable (the store reports its commits).
    pub fn defer_until_durable(&self) {
        self.with(|state| state.deferred = true);
    }

    /// Sends a frame to every client, or holds it until the logged events up to it are
    /// durable.
    pub fn publish(&self, frame: Frame) {
        self.with(|state| {
            let shown = !state.deferred
                || (state.pending.is_empty()
                    && frame.seq.is_none_or(|seq| state.durable.is_some_and(|durable| seq <= durable)));
            if shown {
                let _ = self.tx.send(frame);
            } else {
                state.pending.push_back(frame);
            }
        });
    }

    /// Sends a live-only JSON value (a permission question) to every client.
    pub fn publish_value(&self, value: &serde_json::Value) {
        self.publish(Frame { seq: None, data: Arc::from(value.to_string()) });
    }

    /// The store keeps everything up to `seq` now: send what waited for it.
    pub fn durable_through(&self, seq: u64) {
        self.with(|state| {
            state.durable = Some(state.durable.map_or(seq, |durable| durable.max(seq)));
            while let Some(front) = state.pending.front() {
                if front.seq.is_some_and(|pending| pending > seq) {
                    break;
                }
                if let Some(frame) = state.pending.pop_front() {
                    let _ = self.tx.send(frame);
                }
            }
        });
    }

    /// The held-back frames will never be durable (the store failed): drop them. Returns
    /// how many were dropped.
    pub fn abandon_pending(&self) -> usize {
        self.with(|state| std::mem::take(&mut state.pending).len())
    }

    /// A channel for every frame shown from now on. What was shown before is in the
    /// store (logged events) or gone (live ones).
    pub fn subscribe(&self) -> broadcast::Receiver<Frame> {
        self.tx.subscribe()
    }

    /// Connected clients.
    pub fn clients(&self) -> usize {
        self.tx.receiver_count()
    }
}

impl Hub {
    fn count(&self, metrics: &Metrics, event: &AgentEvent<'_>) {
        use keel_session::{EventKind, TurnEndReason};
        match event {
            AgentEvent::Logged(e) => match &e.kind {
                EventKind::StepStart(_) => {
                    self.with(|state| state.step_started = Some(std::time::Instant::now()));
                }
                EventKind::StepEnd(_) => {
                    if let Some(started) = self.with(|state| state.step_started.take()) {
                        Metrics::bump(&metrics.steps);
                        metrics.step_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                    }
                }
                EventKind::TurnEnd(end) if end.reason == TurnEndReason::Error => {
                    Metrics::bump(&metrics.model_errors);
                }
                _ => {}
            },
            AgentEvent::Model(keel_llm::ModelEvent::Retrying { .. }) => Metrics::bump(&metrics.model_retries),
            _ => {}
        }
    }
}

impl Sink for Hub {
    fn emit(&self, event: &AgentEvent<'_>) {
        if let Some(metrics) = &self.metrics {
            self.count(metrics, event);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(seq: u64) -> Frame {
        Frame { seq: Some(seq), data: Arc::from(format!("logged {seq}")) }
    }

    fn live(text: &str) -> Frame {
        Frame { seq: None, data: Arc::from(text) }
    }

    fn received(rx: &mut broadcast::Receiver<Frame>) -> Vec<Frame> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[test]
    fn a_store_without_commit_reports_shows_each_frame_at_once() {
        let hub = Hub::default();
        let mut rx = hub.subscribe();
        hub.publish(logged(1));
        hub.publish(live("delta"));
        assert_eq!(received(&mut rx), vec![logged(1), live("delta")]);
    }

    #[test]
    fn logged_frames_wait_for_their_commit_and_live_ones_keep_their_place() {
        let hub = Hub::default();
        hub.defer_until_durable();
        let mut rx = hub.subscribe();
        hub.publish(live("before anything is logged"));
        hub.publish(logged(1));
        hub.publish(live("delta after 1"));
        hub.publish(logged(2));
        hub.publish(logged(3));
        assert_eq!(received(&mut rx), vec![live("before anything is logged")]);

        hub.durable_through(2);
        assert_eq!(received(&mut rx), vec![logged(1), live("delta after 1"), logged(2)]);
        hub.durable_through(3);
        assert_eq!(received(&mut rx), vec![logged(3)]);
        // Nothing is pending: a live frame and an already durable one go out at once.
        hub.publish(live("question"));
        assert_eq!(received(&mut rx), vec![live("question")]);
    }

    #[test]
    fn frames_of_a_failed_commit_are_never_shown() {
        let hub = Hub::default();
        hub.defer_until_durable();
        let mut rx = hub.subscribe();
        hub.publish(logged(7));
        hub.publish(live("delta"));
        assert_eq!(hub.abandon_pending(), 2);
        hub.publish(live("error"));
        hub.durable_through(6);
        assert_eq!(received(&mut rx), vec![live("error")]);
    }
}
