//! `keel sessions export ID --format md|html|json [-o FILE]`: a session's log as a
//! transcript people read (Markdown, or one self-contained HTML page), or as JSON for
//! programs: the events exactly as stored, with the totals beside them.
//!
//! The log is read by `keel sessions` (the same reading as `sessions show`), then
//! [`transcript::read`] turns it into blocks the two readable formats lay out.

mod html;
mod markdown;
mod markup;
mod transcript;

use std::collections::BTreeMap;
use std::path::Path;

use keel_session::Event;
use serde_json::json;

pub use crate::cli::ExportFormat as Format;
use crate::config::Price;

/// Why an export could not be written.
#[derive(Debug)]
pub struct ExportError {
    /// What went wrong, naming the file.
    pub message: String,
}

impl std::fmt::Display for ExportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExportError {}

/// `events` in `format`, with costs from `prices`.
pub fn render(events: &[Event], format: Format, prices: &BTreeMap<String, Price>) -> String {
    match format {
        Format::Md => markdown::render(&transcript::read(events, prices)),
        Format::Html => html::render(&transcript::read(events, prices)),
        Format::Json => json(events, prices),
    }
}

/// The JSON export: `{"keel_export": 1, "session": header, "usage", "cost_usd", "turns":
/// [{"turn", "reason", "usage", "cost_usd"}], "events": [events as stored]}`; a cost is
/// `null` when a model's price is unknown.
fn json(events: &[Event], prices: &BTreeMap<String, Price>) -> String {
    let transcript = transcript::read(events, prices);
    let turns: Vec<serde_json::Value> = transcript
        .blocks
        .iter()
        .filter_map(|block| match block {
            transcript::Block::TurnEnd { turn, reason, usage, cost, .. } => Some(json!({
                "turn": turn,
                "reason": reason.as_str(),
                "usage": usage,
                "cost_usd": cost,
            })),
            _ => None,
        })
        .collect();
    let document = json!({
        "keel_export": 1,
        "session": transcript.header,
        "usage": transcript.usage,
        "cost_usd": transcript.cost,
        "turns": turns,
        "events": events,
    });
    let mut text =
        serde_json::to_string_pretty(&document).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    text.push('\n');
    text
}

/// Writes `text` to `path` (created or replaced), or to stdout when `None`.
pub fn write(text: &str, path: Option<&Path>) -> Result<(), ExportError> {
    match path {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| ExportError { message: format!("cannot write {}: {e}", path.display()) }),
        None => {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|_| stdout.flush())
                .map_err(|e| ExportError { message: format!("cannot write the export: {e}") })
        }
    }
}

/// The prices the config file sets (`[pricing."model"]`), over nothing when it cannot
/// be read (the export still shows tokens; the built-in list prices known models).
pub fn prices() -> BTreeMap<String, Price> {
    match crate::config::load_file() {
        Ok(file) => file.pricing,
        Err(e) => {
            errln!("keel: prices from the config file are not used: {}", e.message);
            BTreeMap::new()
        }
    }
}

#[cfg(test)]
mod tests;
