//! Commit notices for followers and signals between processes: one connection per store
//! runs `LISTEN keel_events` (the writer sends `NOTIFY keel_events, 'id:last_seq'` in
//! each commit) and `LISTEN keel_signals` (`'id:message'`, sent by
//! [`keel_session::SessionStore::signal`]) and calls every watcher. Reconnects after 2 s when the connection is lost; notices sent meanwhile are
//! lost, so followers also poll slowly.

use std::sync::Weak;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use crate::Inner;

/// The channel the writer notifies.
pub(crate) const CHANNEL: &str = "keel_events";
/// The channel signals go through.
pub(crate) const SIGNALS: &str = "keel_signals";

/// `id:seq` → its parts.
fn parse(payload: &str) -> Option<(&str, u64)> {
    let (id, seq) = payload.rsplit_once(':')?;
    Some((id, seq.parse().ok()?))
}

/// Listens until the store is dropped.
pub(crate) async fn run(inner: Weak<Inner>) {
    loop {
        let Some(leases) = inner.upgrade().map(|i| std::sync::Arc::clone(&i.leases)) else { return };
        let connected = leases.pool.tls().connect_raw(leases.pool.config()).await;
        drop(leases);
        match connected {
            Ok((client, mut connection)) => {
                let (tx, mut rx) = mpsc::unbounded_channel();
                let reader = tokio::spawn(async move {
                    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                    while let Some(message) = messages.next().await {
                        match message {
                            Ok(AsyncMessage::Notification(n)) => {
                                if tx.send(n).is_err() {
                                    return;
                                }
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::debug!(error = %e, "PostgreSQL listener connection ended");
                                return;
                            }
                        }
                    }
                });
                match client.batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {SIGNALS}")).await {
                    Ok(()) => {
                        while let Some(notice) = rx.recv().await {
                            let Some(inner) = inner.upgrade() else { return };
                            if notice.channel() == SIGNALS {
                                if let Some((id, message)) = notice.payload().split_once(':') {
                                    for watcher in inner.signal_watchers() {
                                        watcher(id, message);
                                    }
                                }
                            } else if let Some((id, seq)) = parse(notice.payload()) {
                                for watcher in inner.watchers() {
                                    watcher(id, seq);
                                }
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "LISTEN failed"),
                }
                reader.abort();
            }
            Err(e) => tracing::warn!(error = %e, "cannot connect to listen for commits"),
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_notices() {
        assert_eq!(super::parse("abc-1:42"), Some(("abc-1", 42)));
        assert_eq!(super::parse("abc"), None);
        assert_eq!(super::parse("abc:x"), None);
    }
}
