#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The store conformance suite (keel-testkit) against the JSONL store.

use std::io::Write;

use keel_session::{JsonlStore, SessionStore};
use keel_testkit::store::StoreHarness;

struct Jsonl {
    _dir: tempfile::TempDir,
    store: JsonlStore,
    other: JsonlStore,
}

impl StoreHarness for Jsonl {
    fn store(&self) -> &dyn SessionStore {
        &self.store
    }

    fn other(&self) -> Option<Box<dyn SessionStore>> {
        Some(Box::new(self.other.clone()))
    }

    fn tear_tail(&self, id: &str) -> bool {
        let path = self.store.path_of(id);
        let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        file.write_all(br#"{"seq":99,"time":"2026-01-01T00:00:00Z","type":"user/mess"#).unwrap();
        true
    }
}

fn harness() -> Option<Jsonl> {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    // Another handle, as another keel process opens the same folder.
    let other = JsonlStore::new(dir.path()).detached_sync(true);
    Some(Jsonl { _dir: dir, store, other })
}

keel_testkit::store_conformance!(harness());
