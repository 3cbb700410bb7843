//! `GET /v1/sessions/{id}/events`: the session's events as server-sent events.
//!
//! Each `data:` is one event as `keel --json` prints it; logged events carry `id:` =
//! their seq. A client resuming with `Last-Event-ID: N` (or `?after=N`) gets exactly the
//! logged events after N — from the store for what is durable, from the hub for the
//! running turn — then everything live. Without either, the whole log is replayed first.
//! A client too slow for the live stream is cut off, and resumes the same way.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::hub::{Frame, logged_frame};
use crate::live::{Live, Manager, blocking};

struct Replay {
    queue: VecDeque<Frame>,
    rx: broadcast::Receiver<Frame>,
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

/// The stream for `live`, resuming after `after`.
pub async fn events(
    manager: &Manager,
    live: Arc<Live>,
    after: Option<u64>,
    heartbeat: Duration,
    stopping: keel_llm::CancellationToken,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>>, ApiError> {
    // Subscribe first: whatever is logged from now on arrives on the channel; what was
    // logged before is in the hub's copy (this turn) or durable in the store.
    let (kept, rx) = live.hub.subscribe(after);
    let first_kept = kept.first().and_then(|f| f.seq);
    let store = Arc::clone(manager.store());
    let id = live.id.clone();
    let stored = blocking(move || store.read(&id)).await?;
    let mut queue: VecDeque<Frame> = stored
        .iter()
        .filter(|e| after.is_none_or(|after| e.seq > after) && first_kept.is_none_or(|first| e.seq < first))
        .filter_map(logged_frame)
        .collect();
    queue.extend(kept);
    let last = queue.back().and_then(|f| f.seq).or(after);
    let replay = Replay { queue, rx, last };
    let stream = futures::stream::unfold(replay, |mut st| async move {
        if let Some(frame) = st.queue.pop_front() {
            return Some((Ok(sse_event(&frame)), st));
        }
        loop {
            match st.rx.recv().await {
                Ok(frame) => {
                    if let Some(seq) = frame.seq {
                        if st.last.is_some_and(|last| seq <= last) {
                            continue;
                        }
                        st.last = Some(seq);
                    }
                    return Some((Ok(sse_event(&frame)), st));
                }
                // Too slow, or the session went away: end; the client resumes by id.
                Err(_) => return None,
            }
        }
    });
    let stream = stream.take_until(stopping.cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(heartbeat).text("heartbeat")))
}
