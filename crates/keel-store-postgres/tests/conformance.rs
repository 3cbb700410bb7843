#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The store conformance suite against a real PostgreSQL (`KEEL_TEST_DATABASE_URL`;
//! skipped with a note when unset; `scripts/pg-test-cluster` starts one).

use keel_session::SessionStore;
use keel_store_postgres::PgStore;
use keel_testkit::store::StoreHarness;

struct Pg {
    store: PgStore,
    url: String,
}

impl StoreHarness for Pg {
    fn store(&self) -> &dyn SessionStore {
        &self.store
    }

    fn other(&self) -> Option<Box<dyn SessionStore>> {
        // Another node: its own runtime and connections.
        Some(Box::new(PgStore::connect(&self.url).unwrap()))
    }
}

fn harness() -> Option<Pg> {
    let url = keel_testkit::prereq::database_url()?;
    Some(Pg { store: PgStore::connect(&url).unwrap(), url })
}

keel_testkit::store_conformance!(harness());
