//! Newline-delimited JSON-RPC over a byte stream (stdin and stdout), with a bound on each
//! incoming message: a line over it is never held whole in memory, and is answered with a
//! JSON-RPC parse error that says why instead of being read.

use std::pin::Pin;

use futures::{Sink, Stream};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// Most bytes of one incoming JSON-RPC message (a line).
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The outgoing half: each message written as one line and flushed.
pub type Outgoing = Pin<Box<dyn Sink<String, Error = std::io::Error> + Send>>;
/// The incoming half: one message per item.
pub type Incoming = Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>;

/// The lines of `reader`, each at most `max` bytes. A longer line is skipped to its end
/// and given as a short text that is not JSON, so the peer gets a parse error naming the
/// limit; a line that is not UTF-8 likewise.
pub fn incoming<R: AsyncBufRead + Unpin + Send + 'static>(reader: R, max: usize) -> Incoming {
    Box::pin(futures::stream::unfold(reader, move |mut reader| async move {
        match read_line(&mut reader, max).await {
            Ok(Some(line)) => Some((Ok(line), reader)),
            Ok(None) => None,
            Err(error) => Some((Err(error), reader)),
        }
    }))
}

/// One line without its newline; `None` at the end of input.
async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, max: usize) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let mut skipped = 0usize;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            if line.is_empty() && skipped == 0 {
                return Ok(None);
            }
            break;
        }
        let (taken, ended) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        let piece = &buffer[..if ended { taken - 1 } else { taken }];
        if skipped > 0 || line.len() + piece.len() > max {
            skipped += line.len() + piece.len();
            line.clear();
        } else {
            line.extend_from_slice(piece);
        }
        reader.consume(taken);
        if ended {
            break;
        }
    }
    if skipped > 0 {
        return Ok(Some(format!(
            "(a message of {skipped} bytes: keel takes at most {max} bytes in one message)"
        )));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(String::from_utf8(line).unwrap_or_else(|_| "(a message that is not UTF-8)".to_owned())))
}

/// Writes each message to `writer` as one line, flushed at once.
pub fn outgoing<W: AsyncWrite + Unpin + Send + 'static>(writer: W) -> Outgoing {
    Box::pin(futures::sink::unfold(writer, |mut writer, line: String| async move {
        writer.write_all(line.as_bytes()).await?;
        writer.write_all(b"\n").await?;
        writer.flush().await?;
        Ok::<_, std::io::Error>(writer)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn long_lines_are_skipped_and_named_and_the_next_line_still_reads() {
        let input = format!("{{\"a\":1}}\r\n{}\n{{\"b\":2}}\n\u{0}\u{ff}", "x".repeat(100));
        let reader = tokio::io::BufReader::with_capacity(16, std::io::Cursor::new(input.into_bytes()));
        let lines: Vec<String> = incoming(reader, 40).map(|line| line.unwrap()).collect().await;
        assert_eq!(
            lines,
            [
                "{\"a\":1}".to_owned(),
                "(a message of 100 bytes: keel takes at most 40 bytes in one message)".to_owned(),
                "{\"b\":2}".to_owned(),
                "\u{0}\u{ff}".to_owned(),
            ]
        );
        let bad = tokio::io::BufReader::new(std::io::Cursor::new(vec![0xff, b'\n']));
        let lines: Vec<String> = incoming(bad, 40).map(|line| line.unwrap()).collect().await;
        assert_eq!(lines, ["(a message that is not UTF-8)".to_owned()]);
    }
}
