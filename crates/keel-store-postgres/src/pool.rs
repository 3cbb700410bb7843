//! A small pool of pipelined connections shared by every statement of a store.
//!
//! Every statement keel sends is one statement (a commit is one `INSERT … WITH`, a lease
//! renewal one `UPDATE`), never a transaction spanning several, so a connection needs no
//! checkout: a `tokio_postgres::Client` pipelines statements from any number of tasks.
//! The pool hands out its connections round-robin and replaces one that was lost on
//! its next use. A store therefore needs `size` connections (plus one to LISTEN),
//! however many sessions it holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use keel_session::SessionError;
use tokio_postgres::{Client, Config};

use crate::db_error;
use crate::tls::Tls;

/// Connections to one database, used round-robin.
pub(crate) struct Pool {
    config: Config,
    tls: Tls,
    slots: Vec<tokio::sync::Mutex<Option<Arc<Client>>>>,
    next: AtomicUsize,
}

impl Pool {
    /// A pool of `size` connections (at least one), opened on first use.
    pub(crate) fn new(config: Config, tls: Tls, size: usize) -> Self {
        let slots = (0..size.max(1)).map(|_| tokio::sync::Mutex::new(None)).collect();
        Pool { config, tls, slots, next: AtomicUsize::new(0) }
    }

    /// The database's connection settings.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// How connections are secured.
    pub(crate) fn tls(&self) -> &Tls {
        &self.tls
    }

    /// The next connection, opened (or reopened, when it was lost) if needed.
    pub(crate) async fn get(&self) -> Result<Arc<Client>, SessionError> {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let Some(slot) = self.slots.get(index) else {
            return Err(SessionError::new(keel_session::SessionErrorKind::Io, "the pool has no connections"));
        };
        let mut slot = slot.lock().await;
        match slot.as_ref() {
            Some(client) if !client.is_closed() => Ok(Arc::clone(client)),
            _ => {
                let client = Arc::new(self.connect().await?);
                *slot = Some(Arc::clone(&client));
                Ok(client)
            }
        }
    }

    /// Makes `client` (used for a transaction before) the pool's first connection.
    pub(crate) async fn adopt(&self, client: Client) {
        if let Some(slot) = self.slots.first() {
            *slot.lock().await = Some(Arc::new(client));
        }
    }

    /// A connection of its own (not pooled), e.g. for a transaction or LISTEN.
    pub(crate) async fn connect(&self) -> Result<Client, SessionError> {
        self.tls.connect(&self.config).await.map_err(db_error)
    }
}
