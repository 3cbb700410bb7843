//! Where sessions live, in every mode (print, interactive, `keel sessions`, `keel serve`):
//! `--store` / `KEEL_STORE` (a PostgreSQL URL or a folder of JSONL files), else
//! `KEEL_DATABASE_URL`, else keel's sessions folder.

use std::sync::Arc;

use anyhow::Context;
use keel_session::{JsonlStore, SessionStore};

/// An open store and how it is named to the user.
pub struct Opened {
    /// The store.
    pub store: Arc<dyn SessionStore>,
    /// "PostgreSQL", "JSONL files in DIR".
    pub label: String,
}

/// What the flag (or `KEEL_STORE`) names, else `KEEL_DATABASE_URL`; `None` is keel's
/// sessions folder.
pub fn chosen(flag: Option<&str>) -> Option<String> {
    flag.map(str::to_owned).or_else(|| std::env::var("KEEL_DATABASE_URL").ok().filter(|s| !s.is_empty()))
}

/// Whether `spec` names a PostgreSQL database rather than a folder.
fn is_postgres(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

/// Opens the store `spec` names ([`chosen`]). `detached_sync`: a JSONL store makes its
/// files durable on the blocking pool (a server, where a slow disk must not stall other
/// sessions) instead of inline.
pub fn open(spec: Option<&str>, detached_sync: bool) -> anyhow::Result<Opened> {
    match spec {
        Some(url) if is_postgres(url) => {
            let store = keel_store_postgres::PgStore::connect(url).context("--store")?;
            Ok(Opened { store: Arc::new(store), label: "PostgreSQL".to_owned() })
        }
        Some(dir) => Ok(Opened {
            store: Arc::new(JsonlStore::new(dir).detached_sync(detached_sync)),
            label: format!("JSONL files in {dir}"),
        }),
        None => {
            let dir = crate::paths::sessions_dir();
            let label = format!("JSONL files in {}", dir.display());
            Ok(Opened { store: Arc::new(JsonlStore::new(dir).detached_sync(detached_sync)), label })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_a_jsonl_store_and_a_url_is_postgresql() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().display().to_string();
        let opened = open(Some(&path), false).unwrap();
        assert_eq!(opened.label, format!("JSONL files in {path}"));
        let session = opened.store.create("/w").unwrap();
        assert!(dir.path().join(format!("{}.jsonl", session.id())).exists());
        assert!(is_postgres("postgres://keel@127.0.0.1/db") && is_postgres("postgresql://h/db"));
        assert!(!is_postgres("/var/lib/keel"));
    }
}
