//! keel's session log: an append-only list of events from which everything else is
//! derived.
//!
//! - [`Event`] / [`EventKind`]: the vocabulary, one JSON line each on disk.
//! - [`Session`]: a live session; appends events and folds them into a [`Projection`]
//!   (the model-visible messages, open-turn state, totals).
//! - [`derive_messages`]: the same fold as a pure function.
//! - [`Session::repair`]: deterministic closing of an interrupted turn.
//! - [`SessionStore`] with [`JsonlStore`]: create, open, list, fork.

mod aside;
pub mod context;
mod error;
mod event;
mod file_change;
mod history;
mod hook;
mod image_files;
mod jsonl;
mod plan;
mod projection;
mod repair;
mod session;
mod store;
pub mod time;
mod validate;
mod withdrawn;

pub use aside::{Effect, ModelAside, TaskIntent, Wants};
pub use context::{
    CompactionEnd, CompactionOutcome, CompactionReason, CompactionStart, Pruned, PrunedResult,
};
pub use error::{SessionError, SessionErrorKind};
pub use event::{
    Event, EventKind, FORMAT_VERSION, InputSource, ParentRef, RequestHeader, SessionHeader, SpawnRef,
    StepEnd, StepStart, ToolCallStarted, ToolResultData, TurnEnd, TurnEndReason, TurnStart, UserInput,
};
pub use file_change::FileChange;
pub use hook::{HookOutcome, HookRun, HookVerdict};
pub use jsonl::{JsonlStore, JsonlWriter};
pub use plan::{PlanStatus, PlanStep, plan_text};
pub use projection::{OpenTurn, PendingCall, Projection, derive_messages};
pub use repair::{INTERRUPTED_CODE, NOT_STARTED, OUTCOME_UNKNOWN, RepairReport};
pub use session::{
    DurableNotify, EventWriter, MemoryWriter, NullWriter, Session, SyncFuture, SyncJob, SyncWork,
};
pub use store::{ChangeNotify, MAX_SIGNAL_BYTES, SessionStore, SessionSummary, SignalNotify, StoreStats};
pub use validate::{InvalidHistory, validate};
pub use withdrawn::ImagesWithdrawn;

/// A new session id: creation time (UTC, to the second) and 48 random bits, e.g.
/// `20261130-051926-3fa9c1d2e08b`. Sorts by creation time. Thousands of creates in one
/// second collide with a chance near 1 in 10^8; stores draw again on a collision.
pub fn new_session_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(now.as_nanos());
    hasher.write_u32(std::process::id());
    let random = hasher.finish() & 0xffff_ffff_ffff;
    let stamp = time::format_unix_millis(now.as_millis() as i64);
    // 2026-11-30T05:19:26.000Z -> 20261130-051926
    let compact: String = stamp[..19].chars().filter(|c| c.is_ascii_digit() || *c == 'T').collect();
    format!("{}-{random:012x}", compact.replace('T', "-"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn session_ids_drawn_in_one_second_do_not_collide() {
        let ids: std::collections::HashSet<String> = (0..100_000).map(|_| super::new_session_id()).collect();
        assert_eq!(ids.len(), 100_000);
        let id = super::new_session_id();
        let (stamp, random) = id.rsplit_once('-').unwrap_or_default();
        assert_eq!((stamp.len(), random.len()), (15, 12), "{id}");
        assert!(random.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }
}
