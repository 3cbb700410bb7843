//! Serving connections, with limits for slow and hostile clients.
//!
//! - HTTP/1 through hyper with a timer, so a connection that sends no (or half a)
//!   request head within `header_timeout` is closed; an idle keep-alive connection too.
//! - Every connection's writes run under a stall limit ([`StallLimit`]): a client that
//!   stops reading (an SSE client that went away without closing, a full receive
//!   window) holds a write pending; after `write_stall` the connection is closed, which
//!   drops its event stream and subscription.
//! - Graceful shutdown: on `shutdown` no new connections are accepted, every connection
//!   finishes its request in flight (event streams end as the server stops) and closes.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Limits on every connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    /// Time to receive a request's head (from the connection's start, or the end of
    /// the previous request).
    pub header_timeout: Duration,
    /// Longest a write may stay blocked on a client that does not read.
    pub write_stall: Duration,
}

/// Accepts connections on `listener` and serves `router` on each until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection task holds a clone of `open_rx`; `open_tx.closed()` resolves
    // when the last one has ended.
    let (open_tx, open_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Events are small writes that must leave at once: without TCP_NODELAY, Nagle's
        // algorithm and the client's delayed ACK held each burst ~40 ms.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY");
        }
        let io = TokioIo::new(StallLimit::new(tcp, limits.write_stall));
        let service = TowerToHyperService::new(router.clone());
        let mut stop = stop_rx.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(io, service)
                .with_upgrades();
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => log_end(result),
                () = async move { drop(stop.wait_for(|stop| *stop).await) } => {
                    conn.as_mut().graceful_shutdown();
                    log_end(conn.await);
                }
            }
            drop(open);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(open_rx);
    open_tx.closed().await;
    Ok(())
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended");
    }
}

/// A stream whose writes fail once they have been blocked for longer than `limit`.
pub(crate) struct StallLimit<T> {
    inner: T,
    limit: Duration,
    /// Running while a write waits; reset by any progress.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> StallLimit<T> {
    /// `inner` with writes limited to `limit` without progress.
    pub(crate) fn new(inner: T, limit: Duration) -> Self {
        StallLimit { inner, limit, stalled: None }
    }

    /// Progress or not: `Pending` is kept until the limit passes, then it is an error.
    fn check<R>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {limit:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallLimit<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallLimit<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.check(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A write into a pipe nobody reads fails after the limit instead of waiting forever.
    #[tokio::test(start_paused = true)]
    async fn a_write_blocked_past_the_limit_fails() {
        let (near, _far) = tokio::io::duplex(16);
        let mut limited = StallLimit::new(near, Duration::from_secs(5));
        limited.write_all(b"0123456789abcdef").await.unwrap();
        let started = tokio::time::Instant::now();
        let err = limited.write_all(b"more").await.unwrap_err();
        assert_eq!(
            (err.kind(), err.to_string(), started.elapsed()),
            (io::ErrorKind::TimedOut, "the client read nothing for 5s".to_owned(), Duration::from_secs(5))
        );
    }

    /// Progress resets the limit: a slow reader that keeps reading is served.
    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_served() {
        let (near, mut far) = tokio::io::duplex(4);
        let mut limited = StallLimit::new(near, Duration::from_secs(5));
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = [0u8; 4];
            loop {
                tokio::time::sleep(Duration::from_secs(3)).await;
                let n = tokio::io::AsyncReadExt::read(&mut far, &mut buf).await.unwrap();
                if n == 0 {
                    return got;
                }
                got.extend_from_slice(&buf[..n]);
            }
        });
        limited.write_all(b"twelve bytes").await.unwrap();
        limited.shutdown().await.unwrap();
        drop(limited);
        assert_eq!(reader.await.unwrap(), b"twelve bytes".to_vec());
    }
}
