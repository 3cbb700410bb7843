//! A mock OpenAI-compatible HTTP/1.1 server on tokio: serves scripted responses
//! (whole, streamed in chunks with delays, cut off, or stalled) and records requests.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// `POST`, `GET`, …
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names (lower-cased) and values.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
    /// When the request was fully read.
    pub received_at: Instant,
    /// When the response was fully written (None while in flight or if cut off).
    pub responded_at: Option<Instant>,
}

impl HttpRequest {
    /// The body parsed as JSON (`Null` if it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// A header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone)]
enum Part {
    Bytes(Vec<u8>),
    Delay(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Complete,
    Drop,
    Stall,
}

/// A scripted response.
#[derive(Debug, Clone)]
pub struct MockResponse {
    status: u16,
    headers: Vec<(String, String)>,
    /// `None`: a fixed body with Content-Length; `Some`: chunked parts.
    body: Option<Vec<u8>>,
    parts: Vec<Part>,
    ending: Ending,
    delay: Duration,
}

impl MockResponse {
    /// A whole JSON body.
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Self::body(status, "application/json", value.to_string().into_bytes())
    }

    /// A whole body with a content type.
    pub fn body(status: u16, content_type: &str, body: Vec<u8>) -> Self {
        MockResponse {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: Some(body),
            parts: Vec::new(),
            ending: Ending::Complete,
            delay: Duration::ZERO,
        }
    }

    /// An SSE stream: each item is sent as `data: <item>\n\n` in its own chunk, then
    /// `data: [DONE]`.
    pub fn sse<I: IntoIterator<Item = String>>(events: I) -> Self {
        let mut chunks: Vec<Vec<u8>> =
            events.into_iter().map(|e| format!("data: {e}\n\n").into_bytes()).collect();
        chunks.push(b"data: [DONE]\n\n".to_vec());
        Self::chunks(chunks)
    }

    /// A streamed 200 `text/event-stream` response sending these exact chunks.
    pub fn chunks<I: IntoIterator<Item = Vec<u8>>>(chunks: I) -> Self {
        MockResponse {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: None,
            parts: chunks.into_iter().map(Part::Bytes).collect(),
            ending: Ending::Complete,
            delay: Duration::ZERO,
        }
    }

    /// Sets the status code.
    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// Sets the `content-type` header (replacing the one the constructor chose).
    pub fn content_type(mut self, value: &str) -> Self {
        self.headers.retain(|(name, _)| name != "content-type");
        self.headers.push(("content-type".into(), value.to_owned()));
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// Waits before sending the status line.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Waits `delay` between streamed chunks.
    pub fn delay_each(mut self, delay: Duration) -> Self {
        let parts = std::mem::take(&mut self.parts);
        for part in parts {
            self.parts.push(Part::Delay(delay));
            self.parts.push(part);
        }
        self
    }

    /// Sends only the first `n` chunks, then closes the connection mid-body.
    pub fn drop_after(mut self, n: usize) -> Self {
        self.keep_first(n);
        self.ending = Ending::Drop;
        self
    }

    /// Sends only the first `n` chunks, then goes silent with the connection open.
    pub fn stall_after(mut self, n: usize) -> Self {
        self.keep_first(n);
        self.ending = Ending::Stall;
        self
    }

    fn keep_first(&mut self, n: usize) {
        let mut seen = 0;
        self.parts.retain(|p| match p {
            Part::Bytes(_) => {
                seen += 1;
                seen <= n
            }
            Part::Delay(_) => seen < n,
        });
    }

    /// The streamed bytes, concatenated (for splitting tests).
    pub fn stream_bytes(&self) -> Vec<u8> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Bytes(b) => Some(b.as_slice()),
                Part::Delay(_) => None,
            })
            .flatten()
            .copied()
            .collect()
    }
}

/// Decides the response to each request (for servers shared by many sessions).
pub type Handler = Arc<dyn Fn(&HttpRequest) -> MockResponse + Send + Sync>;

#[derive(Default)]
struct Shared {
    queue: Mutex<VecDeque<MockResponse>>,
    requests: Mutex<Vec<HttpRequest>>,
    handler: Mutex<Option<Handler>>,
    routes: Mutex<Vec<(String, String, MockResponse)>>,
    not_recording: AtomicBool,
    closes_after_streams: AtomicBool,
}

/// Whether `request` asks what a server knows of its model (llama.cpp's `GET /props`,
/// Ollama's `POST /api/show`, `GET …/models`) rather than for a reply: keel asks these
/// at start-up, so they never take a scripted reply.
fn asks_about_the_model(request: &HttpRequest) -> bool {
    let path = request.path.split('?').next().unwrap_or_default();
    (request.method == "GET" && (path.ends_with("/props") || path.ends_with("/models")))
        || (request.method == "POST" && path.ends_with("/api/show"))
}

/// The mock server. Stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    /// Starts a server on an ephemeral loopback port.
    pub async fn start() -> MockServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared::default());
        let accept_shared = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let _ = stream.set_nodelay(true);
                let shared = Arc::clone(&accept_shared);
                tokio::spawn(async move {
                    let _ = serve(stream, shared).await;
                });
            }
        });
        MockServer { addr, shared, task }
    }

    /// `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a response for the next request.
    pub fn push(&self, response: MockResponse) {
        self.shared.queue.lock().unwrap().push_back(response);
    }

    /// Answers every `method` request for `path` with `response`, before the queue and
    /// the handler. Without one, the questions keel asks a server about its model
    /// (`GET /props`, `POST /api/show`, `GET …/models`) go to the handler, or are
    /// answered 404 as by a server that has no such route; they never take from the queue.
    pub fn route(&self, method: &str, path: &str, response: MockResponse) {
        self.shared.routes.lock().unwrap().push((method.to_owned(), path.to_owned(), response));
    }

    /// Answers every request with `handler` (the queue is used first while not empty).
    pub fn set_handler(&self, handler: impl Fn(&HttpRequest) -> MockResponse + Send + Sync + 'static) {
        *self.shared.handler.lock().unwrap() = Some(Arc::new(handler));
    }

    /// Behaves as llama.cpp's llama-server does: after a streamed (chunked) reply the
    /// connection is closed though the reply did not say so, so a client that sends its
    /// next request on it gets no answer. To be certain the client tries, the server
    /// reads that next request first (it is not recorded), then closes.
    pub fn close_after_streams(&self) {
        self.shared.closes_after_streams.store(true, Ordering::Relaxed);
    }

    /// Stops keeping request copies (for load tests).
    pub fn stop_recording(&self) {
        self.shared.not_recording.store(true, Ordering::Relaxed);
    }

    /// Every request received so far, but for the questions about the model (see
    /// [`MockServer::questions`]): the requests the script answers, in order.
    pub fn requests(&self) -> Vec<HttpRequest> {
        self.shared.requests.lock().unwrap().iter().filter(|r| !asks_about_the_model(r)).cloned().collect()
    }

    /// The questions about the model received so far (`GET /props`, `POST /api/show`,
    /// `GET …/models`).
    pub fn questions(&self) -> Vec<HttpRequest> {
        self.shared.requests.lock().unwrap().iter().filter(|r| asks_about_the_model(r)).cloned().collect()
    }

    /// How many requests arrived, but for the questions about the model.
    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().iter().filter(|r| !asks_about_the_model(r)).count()
    }
}

async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<HttpRequest>> {
    let header_end = loop {
        if let Some(pos) = find(buf, b"\r\n\r\n") {
            break pos;
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split_whitespace();
    let method = request_line.next().unwrap_or_default().to_owned();
    let path = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize =
        headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let body_start = header_end + 4;
    while buf.len() < body_start + length {
        let mut chunk = [0u8; 65536];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[body_start..body_start + length].to_vec();
    buf.drain(..body_start + length);
    Ok(Some(HttpRequest { method, path, headers, body, received_at: Instant::now(), responded_at: None }))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

async fn serve(mut stream: TcpStream, shared: Arc<Shared>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buf).await? {
        let routed = shared.routes.lock().unwrap().iter().find_map(|(method, path, response)| {
            (*method == request.method && *path == request.path).then(|| response.clone())
        });
        let handler = shared.handler.lock().unwrap().clone();
        let queued = match (&routed, &handler) {
            (Some(_), _) => None,
            (None, _) if asks_about_the_model(&request) => None,
            (None, _) => shared.queue.lock().unwrap().pop_front(),
        };
        let response = match (routed, queued) {
            (Some(response), _) | (None, Some(response)) => response,
            (None, None) if asks_about_the_model(&request) && handler.is_none() => MockResponse::json(
                404,
                &serde_json::json!({"error": {"message": "mock server: no such route"}}),
            ),
            (None, None) => match handler {
                Some(handler) => handler(&request),
                None => MockResponse::json(
                    500,
                    &serde_json::json!({"error": {"message": "mock server: no scripted response left"}}),
                ),
            },
        };
        let index = if shared.not_recording.load(Ordering::Relaxed) {
            None
        } else {
            let mut requests = shared.requests.lock().unwrap();
            requests.push(request);
            Some(requests.len() - 1)
        };
        if !response.delay.is_zero() {
            tokio::time::sleep(response.delay).await;
        }
        let mut head = format!("HTTP/1.1 {} {}\r\n", response.status, reason(response.status));
        for (name, value) in &response.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        match &response.body {
            Some(body) => {
                head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(body).await?;
            }
            None => {
                head.push_str("transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n");
                stream.write_all(head.as_bytes()).await?;
                for part in &response.parts {
                    match part {
                        Part::Delay(d) => tokio::time::sleep(*d).await,
                        Part::Bytes(bytes) => {
                            let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                            chunk.extend_from_slice(bytes);
                            chunk.extend_from_slice(b"\r\n");
                            stream.write_all(&chunk).await?;
                        }
                    }
                }
                match response.ending {
                    Ending::Complete if shared.closes_after_streams.load(Ordering::Relaxed) => {
                        stream.write_all(b"0\r\n\r\n").await?;
                        stream.flush().await?;
                        if let Some(index) = index
                            && let Some(request) = shared.requests.lock().unwrap().get_mut(index)
                        {
                            request.responded_at = Some(Instant::now());
                        }
                        let _ = read_request(&mut stream, &mut buf).await;
                        return Ok(());
                    }
                    Ending::Complete => stream.write_all(b"0\r\n\r\n").await?,
                    Ending::Drop => return Ok(()),
                    Ending::Stall => {
                        // Silent until the client gives up and closes.
                        let mut sink = [0u8; 1024];
                        while stream.read(&mut sink).await? > 0 {}
                        return Ok(());
                    }
                }
            }
        }
        stream.flush().await?;
        if let Some(index) = index
            && let Some(request) = shared.requests.lock().unwrap().get_mut(index)
        {
            request.responded_at = Some(Instant::now());
        }
    }
    Ok(())
}
