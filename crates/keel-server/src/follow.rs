//! Following a session another node runs: its logged events, read from the shared
//! store as they are committed, so any node can serve any client.
//!
//! The store's commit notices (PostgreSQL `LISTEN/NOTIFY`, see
//! [`keel_session::SessionStore::watch`]) wake the follower, which reads the events
//! after the last seq it has; without a notice it reads every [`POLL`] anyway (a notice
//! can be lost while the listener reconnects). The stream ends after the `turn/end` of
//! a turn that ends while it follows, or when the client leaves. Live-only events
//! (deltas, permission questions) stay on the node that runs the session.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use keel_session::{EventKind, SessionStore};
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::hub::{Frame, logged_frame};
use crate::live::blocking;
use crate::sse::sse_event;

/// A commit notice: `(session id, last seq committed)`.
pub type Notice = (Arc<str>, u64);

/// How often a follower reads the store without a notice.
pub const POLL: Duration = Duration::from_millis(1500);

/// Commit notices from the store, for every follower of this server.
#[derive(Debug)]
pub struct Notices {
    tx: broadcast::Sender<Notice>,
}

impl Notices {
    /// Asks `store` for commit notices (a store that has none leaves followers polling).
    pub fn watch(store: &dyn SessionStore) -> Notices {
        let (tx, _) = broadcast::channel(1024);
        let sender = tx.clone();
        let watched = store.watch(Arc::new(move |id: &str, seq: u64| {
            let _ = sender.send((Arc::from(id), seq));
        }));
        tracing::debug!(watched, "commit notices");
        Notices { tx }
    }

    fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.tx.subscribe()
    }
}

struct Follower {
    store: Arc<dyn SessionStore>,
    id: Arc<str>,
    rx: broadcast::Receiver<Notice>,
    /// Frames to send, each with whether it ends the stream.
    queue: VecDeque<(Frame, bool)>,
    /// The last seq read from the store.
    read: u64,
    /// The last seq in the log when the client came: a later `turn/end` ends the stream.
    start: u64,
    done: bool,
    poll: Duration,
}

impl Follower {
    fn push(&mut self, events: &[keel_session::Event], after: Option<u64>) {
        for event in events {
            self.read = self.read.max(event.seq);
            if after.is_some_and(|after| event.seq <= after) {
                continue;
            }
            let ends = event.seq > self.start && matches!(event.kind, EventKind::TurnEnd(_));
            if let Some(frame) = logged_frame(event) {
                self.queue.push_back((frame, ends));
            }
        }
    }

    /// Waits for a notice of a commit past what was read, or for the poll interval.
    async fn wait(&mut self) {
        let timeout = tokio::time::sleep(self.poll);
        tokio::pin!(timeout);
        loop {
            tokio::select! {
                notice = self.rx.recv() => match notice {
                    Ok((id, seq)) if *id == *self.id && seq > self.read => return,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => return timeout.await,
                },
                () = &mut timeout => return,
            }
        }
    }
}

/// The stream of session `id`, run by another node, from after `after`.
pub async fn follow(
    store: Arc<dyn SessionStore>,
    notices: &Notices,
    id: String,
    after: Option<u64>,
    heartbeat: Duration,
    stopping: keel_llm::CancellationToken,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>>, ApiError> {
    // Subscribe first: a commit after the read below is noticed.
    let rx = notices.subscribe();
    let read_store = Arc::clone(&store);
    let read_id = id.clone();
    let events = blocking(move || read_store.read(&read_id)).await?;
    let start = events.last().map_or(0, |e| e.seq);
    let mut follower = Follower {
        store,
        id: Arc::from(id),
        rx,
        queue: VecDeque::new(),
        read: 0,
        start,
        done: false,
        poll: POLL,
    };
    follower.push(&events, after);
    let stream = futures::stream::unfold(follower, move |mut st| async move {
        loop {
            if let Some((frame, ends)) = st.queue.pop_front() {
                st.done |= ends;
                return Some((Ok(sse_event(&frame)), st));
            }
            if st.done {
                return None;
            }
            st.wait().await;
            let store = Arc::clone(&st.store);
            let (id, read) = (st.id.clone(), st.read);
            match blocking(move || store.read_after(&id, read)).await {
                Ok(events) => st.push(&events, after),
                Err(e) => {
                    // The client resumes by id (from any node).
                    tracing::warn!(session = %st.id, error = %e.message, "following a session failed");
                    return None;
                }
            }
        }
    });
    let stream = stream.take_until(stopping.cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(heartbeat).text("heartbeat")))
}
