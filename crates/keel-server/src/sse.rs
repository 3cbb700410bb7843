//! `GET /v1/sessions/{id}/events`: the session's events as server-sent events.
//!
//! Each `data:` is one event as `keel --json` prints it; logged events carry `id:` =
//! their seq. A client resuming with `Last-Event-ID: N` (or `?after=N`) gets exactly the
//! logged events after N from the store (which holds every logged event a hub has
//! shown), then what this node's hub shows (its turns' events, live deltas, permission
//! questions), and the logged events of turns other nodes run, read from the store when
//! it reports a commit (or every so often). A client too slow for the live stream is cut
//! off, and resumes the same way.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use keel_session::SessionStore;
use tokio::sync::{broadcast, watch};

use crate::AppState;
use crate::error::ApiError;
use crate::hub::{Frame, logged_frame};
use crate::live::Live;
use crate::manager::blocking;

/// How often a stream reads the store for other nodes' turns without a notice.
const POLL: Duration = Duration::from_secs(15);

struct Replay {
    live: Arc<Live>,
    store: Arc<dyn SessionStore>,
    queue: VecDeque<Frame>,
    rx: broadcast::Receiver<Frame>,
    /// The session's last committed seq, from the store's notices; `None` once the
    /// notices stopped.
    notices: Option<watch::Receiver<u64>>,
    /// The last logged seq sent; later duplicates are skipped.
    last: Option<u64>,
}

/// The SSE event of a frame: `id:` = seq for logged events.
pub(crate) fn sse_event(frame: &Frame) -> SseEvent {
    let event = SseEvent::default().data(&*frame.data);
    match frame.seq {
        Some(seq) => event.id(seq.to_string()),
        None => event,
    }
}

/// What woke a stream.
enum Wake {
    Frame(Frame),
    /// The store may hold events after `last` that no hub here showed.
    Store,
    /// The hub went away, or the client fell too far behind: the stream ends.
    End,
}

impl Replay {
    async fn wake(&mut self) -> Wake {
        let poll = tokio::time::sleep(POLL);
        tokio::pin!(poll);
        loop {
            tokio::select! {
                frame = self.rx.recv() => return match frame {
                    Ok(frame) => Wake::Frame(frame),
                    Err(_) => Wake::End,
                },
                changed = async { match &mut self.notices { Some(rx) => rx.changed().await, None => std::future::pending().await } } => {
                    match changed {
                        Ok(()) => {
                            let seq = self.notices.as_mut().map_or(0, |rx| *rx.borrow_and_update());
                            // This node's own turn shows its events through the hub.
                            if self.last.is_none_or(|last| seq > last) && !self.live.running() {
                                return Wake::Store;
                            }
                        }
                        Err(_) => self.notices = None,
                    }
                }
                () = &mut poll => {
                    if !self.live.running() {
                        return Wake::Store;
                    }
                    poll.as_mut().reset(tokio::time::Instant::now() + POLL);
                }
            }
        }
    }

    /// Queues the store's events after the last one sent.
    async fn read_store(&mut self) -> Result<(), ApiError> {
        let store = Arc::clone(&self.store);
        let id = self.live.id.clone();
        let after = self.last.unwrap_or(0);
        let first = self.last.is_none();
        let events =
            blocking(move || if first { store.read(&id) } else { store.read_after(&id, after) }).await?;
        for event in &events {
            if self.last.is_some_and(|last| event.seq <= last) {
                continue;
            }
            if let Some(frame) = logged_frame(event) {
                self.last = Some(event.seq);
                self.queue.push_back(frame);
            }
        }
        Ok(())
    }
}

/// The stream for `live`, resuming after `after`.
pub async fn events(
    app: &AppState,
    live: Arc<Live>,
    after: Option<u64>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>>, ApiError> {
    // Subscribe first: whatever the hub shows from now on arrives on the channel; what
    // it showed before is in the store (it shows a logged event only once stored).
    let rx = live.hub.subscribe();
    let notices = Some(app.notices.subscribe(&live.id));
    let store = Arc::clone(app.manager.store());
    let mut replay = Replay { live, store, queue: VecDeque::new(), rx, notices, last: after };
    // The log after `after` (all of it without one) first, then a permission question
    // asked before this client came (asked from now on, it arrives on the channel; one
    // asked in between may come twice, with the same id).
    replay.read_store().await?;
    if let Some(question) = replay.live.question() {
        replay.queue.push_back(Frame { seq: None, data: Arc::from(question.to_string()) });
    }
    let stream = futures::stream::unfold(replay, |mut st| async move {
        loop {
            if let Some(frame) = st.queue.pop_front() {
                return Some((Ok(sse_event(&frame)), st));
            }
            match st.wake().await {
                Wake::Frame(frame) => {
                    if let Some(seq) = frame.seq {
                        if st.last.is_some_and(|last| seq <= last) {
                            continue;
                        }
                        st.last = Some(seq);
                    }
                    return Some((Ok(sse_event(&frame)), st));
                }
                Wake::Store => {
                    if let Err(e) = st.read_store().await {
                        // The client resumes by id (from any node).
                        tracing::warn!(session = %st.live.id, error = %e.message, "reading a session's events failed");
                        return None;
                    }
                }
                // Too slow, or the session went away: end; the client resumes by id.
                Wake::End => return None,
            }
        }
    });
    let stream = stream.take_until(app.stopping.clone().cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(app.heartbeat).text("heartbeat")))
}
