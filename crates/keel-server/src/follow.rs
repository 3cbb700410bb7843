//! Following sessions other nodes run: the store's commit notices (PostgreSQL
//! `LISTEN/NOTIFY`, this process's own JSONL writers; see
//! [`keel_session::SessionStore::watch`]) fanned out to every event stream, which then
//! reads the events after the last seq it sent. Live-only events (deltas, permission
//! questions) stay on the node that runs the turn.

use std::sync::Arc;

use keel_session::SessionStore;
use tokio::sync::broadcast;

/// A commit notice: `(session id, last seq committed)`.
pub type Notice = (Arc<str>, u64);

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

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.tx.subscribe()
    }
}
