//! Following sessions other nodes run: the store's commit notices (PostgreSQL
//! `LISTEN/NOTIFY`, this process's own JSONL writers; see
//! [`keel_session::SessionStore::watch`]) routed to the event streams of that session
//! only, which then read the events after the last seq they sent. Live-only events
//! (deltas, permission questions) stay on the node that runs the turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keel_session::SessionStore;
use tokio::sync::watch;

use crate::live::locked;

/// The last seq committed per watched session; one channel per session with streams.
type Watched = Arc<Mutex<HashMap<Arc<str>, watch::Sender<u64>>>>;

/// Commit notices from the store, for the event streams of this server.
#[derive(Debug, Default)]
pub struct Notices {
    watched: Watched,
}

impl Notices {
    /// Asks `store` for commit notices (a store that has none leaves streams polling).
    pub fn watch(store: &dyn SessionStore) -> Notices {
        let notices = Notices::default();
        let watched = Arc::clone(&notices.watched);
        let asked = store.watch(Arc::new(move |id: &str, seq: u64| {
            locked(&watched, |map| {
                let Some(tx) = map.get(id) else { return };
                if tx.receiver_count() == 0 {
                    // Its streams are gone.
                    map.remove(id);
                } else {
                    tx.send_if_modified(|last| {
                        let newer = seq > *last;
                        *last = (*last).max(seq);
                        newer
                    });
                }
            });
        }));
        tracing::debug!(asked, "commit notices");
        notices
    }

    /// The last seq committed of session `id`, changing with each notice.
    pub(crate) fn subscribe(&self, id: &str) -> watch::Receiver<u64> {
        locked(&self.watched, |map| match map.get(id) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = watch::channel(0);
                map.insert(Arc::from(id), tx);
                rx
            }
        })
    }
}
