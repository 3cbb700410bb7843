//! Events to rows and back. The payload is kept as `json` (its text exactly as keel
//! wrote it), not `jsonb`, which would reorder object keys: the log is the truth, and a
//! provider's prompt cache depends on its bytes.

use keel_session::{Event, EventKind, SessionError, SessionErrorKind};

/// One event as stored.
#[derive(Debug)]
pub(crate) struct Row {
    pub seq: i64,
    pub kind: &'static str,
    pub time: String,
    pub payload: String,
    /// For the header: the session row to create with it.
    pub header: Option<HeaderRow>,
}

/// What a header sets in its `keel_sessions` row (created with the lease, before it).
#[derive(Debug)]
pub(crate) struct HeaderRow {
    pub created: String,
}

#[derive(serde::Deserialize)]
struct Parts<'a> {
    #[serde(borrow)]
    data: &'a serde_json::value::RawValue,
}

/// The row for `event`; `line` is scratch space.
pub(crate) fn to_row(event: &Event, line: &mut Vec<u8>) -> Result<Row, SessionError> {
    line.clear();
    event.write_line(line)?;
    let parts: Parts<'_> = serde_json::from_slice(line)
        .map_err(|e| SessionError::new(SessionErrorKind::Encode, format!("event {}: {e}", event.seq)))?;
    let seq = i64::try_from(event.seq).map_err(|_| {
        SessionError::new(SessionErrorKind::Invalid, format!("seq {} is too large", event.seq))
    })?;
    let header = match &event.kind {
        EventKind::SessionHeader(h) => Some(HeaderRow { created: h.created.clone() }),
        _ => None,
    };
    Ok(Row {
        seq,
        kind: event.kind.type_name(),
        time: event.time.clone(),
        payload: parts.data.get().to_owned(),
        header,
    })
}

/// The event a stored row holds.
pub(crate) fn from_row(seq: i64, kind: &str, time: &str, payload: &str) -> Result<Event, SessionError> {
    let time = serde_json::to_string(time)
        .map_err(|e| SessionError::new(SessionErrorKind::Encode, e.to_string()).caused_by(e))?;
    let kind = serde_json::to_string(kind)
        .map_err(|e| SessionError::new(SessionErrorKind::Encode, e.to_string()).caused_by(e))?;
    let line = format!(r#"{{"seq":{seq},"time":{time},"type":{kind},"data":{payload}}}"#);
    Event::parse(&line).map_err(|e| SessionError::new(SessionErrorKind::Corrupt, format!("event {seq}: {e}")))
}
