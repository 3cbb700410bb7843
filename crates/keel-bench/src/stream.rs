//! Section 4: streaming overhead — decoding throughput, and how long a delta takes from
//! the socket to the sink.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_agent::{Agent, AgentEvent, Session, SessionContext, Sink};
use keel_llm::openai::StreamDecoder;
use keel_llm::sse::SseParser;
use keel_llm::{CancellationToken, ModelEvent};
use keel_llm::{HttpClient, ProviderConfig};
use keel_testkit::ChatStream;

use crate::measure::{fmt, median};

/// A recorded-looking stream: a long answer in small deltas, then a tool call whose
/// arguments arrive in fragments.
fn big_stream() -> Vec<u8> {
    let text = "The quick brown fox jumps over the lazy dog; ".repeat(20_000);
    let args = format!(r#"{{"path": "NOTES.md", "content": "{}"}}"#, "lorem ipsum ".repeat(20_000));
    let chunks = ChatStream::new()
        .text(&text, 100_000)
        .tool_call("c1", "write_file", &args, 30_000)
        .finish("tool_calls")
        .usage(1000, 50_000);
    let mut bytes = Vec::new();
    for event in chunks.events() {
        bytes.extend_from_slice(b"data: ");
        bytes.extend_from_slice(event.as_bytes());
        bytes.extend_from_slice(b"\n\n");
    }
    bytes.extend_from_slice(b"data: [DONE]\n\n");
    bytes
}

fn throughput() {
    let stream = big_stream();
    let mb = stream.len() as f64 / 1_048_576.0;
    let mut sse_times = Vec::new();
    let mut full_times = Vec::new();
    let mut deltas = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for piece in stream.chunks(16 * 1024) {
            parser.feed(piece, &mut events).unwrap();
            events.clear();
        }
        sse_times.push(started.elapsed());

        let started = Instant::now();
        let mut decoder = StreamDecoder::new();
        let mut out = Vec::new();
        deltas = 0;
        for piece in stream.chunks(16 * 1024) {
            decoder.feed(piece, &mut out).unwrap();
            deltas += out.len();
            out.clear();
        }
        let message = decoder.finish(None);
        assert!(message.has_tool_calls());
        full_times.push(started.elapsed());
    }
    let sse = median(&mut sse_times);
    let full = median(&mut full_times);
    println!("\n[stream] decoding a {mb:.1} MB recorded stream ({deltas} deltas), median of 5");
    println!("  SSE parsing alone            {:.0} MB/s", mb / sse.as_secs_f64());
    println!(
        "  SSE + JSON + assembly        {:.0} MB/s ({} per delta)",
        mb / full.as_secs_f64(),
        fmt(full / deltas as u32)
    );
}

/// Records when each text delta reached the sink.
struct Stamps(Mutex<Vec<Instant>>);

impl Sink for Stamps {
    fn emit(&self, event: &AgentEvent<'_>) {
        if let AgentEvent::Model(ModelEvent::TextDelta(_)) = event
            && let Ok(mut stamps) = self.0.lock()
        {
            stamps.push(Instant::now());
        }
    }
}

/// A one-shot HTTP server writing `n` text chunks 2 ms apart, recording when each was
/// written.
fn paced_server(n: usize) -> (String, std::thread::JoinHandle<Vec<Instant>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        socket.set_nodelay(true).unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 65536];
        // Read headers and body (Content-Length).
        loop {
            let read = socket.read(&mut buf).unwrap();
            request.extend_from_slice(&buf[..read]);
            if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                    .unwrap_or(0);
                if request.len() >= end + 4 + length {
                    break;
                }
            }
        }
        socket
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
            )
            .unwrap();
        let mut sent = Vec::with_capacity(n);
        let write_chunk = |socket: &mut std::net::TcpStream, data: &str| {
            let event = format!("data: {data}\n\n");
            let chunk = format!("{:x}\r\n{event}\r\n", event.len());
            socket.write_all(chunk.as_bytes()).unwrap();
        };
        for i in 0..n {
            std::thread::sleep(Duration::from_millis(2));
            let data = format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"token{i} "}}}}]}}"#);
            sent.push(Instant::now());
            write_chunk(&mut socket, &data);
        }
        write_chunk(&mut socket, r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#);
        write_chunk(&mut socket, "[DONE]");
        socket.write_all(b"0\r\n\r\n").unwrap();
        sent
    });
    (url, handle)
}

fn latency() {
    const N: usize = 300;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (url, server) = paced_server(N);
    let client = HttpClient::new(ProviderConfig::new(url, "mock")).unwrap();
    let agent = Agent::builder(client).build();
    let stamps = Arc::new(Stamps(Mutex::new(Vec::with_capacity(N))));
    let mut session = Session::in_memory("/bench");
    runtime
        .block_on(agent.run_turn(
            &mut session,
            &SessionContext::default(),
            "stream",
            &*stamps,
            &CancellationToken::new(),
        ))
        .unwrap();
    let sent = server.join().unwrap();
    let received = stamps.0.lock().unwrap().clone();
    let mut delays: Vec<Duration> =
        sent.iter().zip(received.iter()).map(|(s, r)| r.saturating_duration_since(*s)).collect();
    delays.sort();
    let p99 = delays[delays.len() * 99 / 100];
    println!(
        "  socket write -> sink         {} median, {} p99 ({N} deltas, 2 ms apart, through the full loop)",
        fmt(median(&mut delays)),
        fmt(p99)
    );
}

/// Prints the streaming figures.
pub fn stream() {
    throughput();
    latency();
}
