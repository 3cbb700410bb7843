//! `--json`: one JSON object per line on stdout — every session event as logged, plus
//! live events. The schema is documented in docs/json-events.md.

use std::io::Write;
use std::sync::Mutex;

use keel_agent::{AgentEvent, Sink};

/// Writes events to stdout, one line each, flushed per line.
#[derive(Debug, Default)]
pub struct JsonLines {
    out: Mutex<()>,
}

impl JsonLines {
    /// A JSON sink on stdout.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes one value as a line.
    pub fn write_value(&self, value: &serde_json::Value) {
        let _guard = self.out.lock();
        let mut stdout = std::io::stdout().lock();
        let _ = serde_json::to_writer(&mut stdout, value);
        let _ = stdout.write_all(b"\n");
        let _ = stdout.flush();
    }
}

impl Sink for JsonLines {
    fn emit(&self, event: &AgentEvent<'_>) {
        // The same JSON as `keel serve`'s event streams.
        if let Some(value) = keel_server::wire::agent_event_value(event) {
            self.write_value(&value);
        }
    }
}
