//! Undo of file changes: before write_file or edit_file changes a file, its content (or
//! the fact that it did not exist) is kept in the session's artifacts folder, under
//! `undo/<call id in hex>.before` and `.json`, and after the change the hash of what was
//! written (`.after`). [`undo`] puts files back as they were before a list of calls,
//! newest first, and marks those calls undone. A file changed since (by the user, or a
//! command) is left as it is and reported: undo never overwrites work it did not do.
//! Every file keel creates here is new (`O_EXCL`, no link followed); a file to remove is
//! removed through [`keel_sandbox::anchored`], so a folder on the way swapped for a link to
//! elsewhere is never followed.

mod error;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::workspace::Roots;
pub use error::{UndoError, UndoErrorKind};

/// Largest file content kept for undo; a larger file's change cannot be undone.
pub const MAX_KEPT_BYTES: u64 = 64 * 1024 * 1024;

/// Where one call's undo record goes; it also witnesses the change (the file before
/// and after), for the diff logged with the call's result ([`Keeper::change`]).
#[derive(Debug, Clone)]
pub struct Keeper {
    /// The undo folder; `None` when the call has no artifacts folder (nothing is kept).
    dir: Option<PathBuf>,
    call_id: String,
    witness: Arc<Mutex<Witness>>,
}

/// What the keeper saw of one call's file.
#[derive(Debug, Default)]
struct Witness {
    before: Before,
    change: Option<keel_agent::FileChange>,
}

/// The file as it was before the call.
#[derive(Debug, Default)]
enum Before {
    /// Not seen yet.
    #[default]
    Unseen,
    /// There was no file.
    Absent,
    /// Its text.
    Text(String),
    /// Too big, or not text: no diff.
    Unknown,
}

/// What was kept about a file before a call changed it.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    /// The file's canonical path.
    path: PathBuf,
    /// It existed before the call (its bytes are in `.before`).
    existed: bool,
    /// Too large to keep: the change cannot be undone.
    #[serde(default)]
    too_large: bool,
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

impl Keeper {
    /// A keeper for call `call_id` in the session's `artifacts` folder.
    pub fn new(artifacts: &Path, call_id: &str) -> Self {
        Keeper { dir: Some(artifacts.join("undo")), call_id: hex(call_id), witness: Arc::default() }
    }

    /// The keeper of a tool call: keeps for undo in the call's artifacts folder, when it
    /// has one, and witnesses the change in any case.
    pub fn for_call(ctx: &keel_agent::ToolContext) -> Self {
        Keeper {
            dir: ctx.artifacts.as_ref().map(|dir| dir.join("undo")),
            call_id: hex(&ctx.call_id),
            witness: Arc::default(),
        }
    }

    /// What the call changed, once it has written ([`Keeper::written`]).
    pub fn change(&self) -> Option<keel_agent::FileChange> {
        self.witness.lock().ok().and_then(|mut witness| witness.change.take())
    }

    /// Reads the file's text for the diff (bounded; the file's offset is left at its start).
    fn witness_before(&self, file: Option<&File>) {
        let Ok(mut witness) = self.witness.lock() else { return };
        if !matches!(witness.before, Before::Unseen) {
            return;
        }
        witness.before = match file {
            None => Before::Absent,
            Some(mut file) => {
                let mut bytes = Vec::new();
                let limit = crate::diffs::MAX_DIFFED_BYTES as u64 + 1;
                let read =
                    file.seek(SeekFrom::Start(0)).and_then(|_| file.take(limit).read_to_end(&mut bytes));
                let _ = file.seek(SeekFrom::Start(0));
                match (read, String::from_utf8(bytes)) {
                    (Ok(n), Ok(text)) if (n as u64) < limit => Before::Text(text),
                    _ => Before::Unknown,
                }
            }
        };
    }

    fn paths(dir: &Path, hexed: &str) -> (PathBuf, PathBuf) {
        (dir.join(format!("{hexed}.json")), dir.join(format!("{hexed}.before")))
    }

    /// Keeps the content of `file` (open for reading, at `canonical`), or that there was
    /// no file when `file` is `None`. Leaves the file's offset at its start.
    pub fn keep(&self, canonical: &Path, file: Option<&File>) -> std::io::Result<()> {
        self.witness_before(file);
        let Some(dir) = &self.dir else { return Ok(()) };
        std::fs::create_dir_all(dir)?;
        let (meta, before) = Self::paths(dir, &self.call_id);
        // A call changes one file; the first record is the one that counts.
        if meta.exists() {
            return Ok(());
        }
        let mut record = Record { path: canonical.to_path_buf(), existed: file.is_some(), too_large: false };
        if let Some(mut file) = file {
            file.seek(SeekFrom::Start(0))?;
            let _ = std::fs::remove_file(&before);
            let mut out = std::fs::OpenOptions::new().write(true).create_new(true).open(&before)?;
            let copied = std::io::copy(&mut file.take(MAX_KEPT_BYTES + 1), &mut out)?;
            if copied > MAX_KEPT_BYTES {
                drop(out);
                std::fs::remove_file(&before)?;
                record.too_large = true;
            }
            file.seek(SeekFrom::Start(0))?;
        }
        let text = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        create_new(&meta, &text)
    }

    /// Records what the call wrote to the file shown as `shown`: its hash, so undo can tell
    /// a file changed since, and the change from what [`Keeper::keep`] saw.
    pub fn written(&self, shown: &str, content: &[u8]) {
        if let Ok(mut witness) = self.witness.lock() {
            let before = std::mem::replace(&mut witness.before, Before::Unknown);
            witness.change = match (before, std::str::from_utf8(content)) {
                (Before::Absent, Ok(after)) => crate::diffs::file_change(shown, None, after),
                (Before::Text(text), Ok(after)) => crate::diffs::file_change(shown, Some(&text), after),
                _ => None,
            };
        }
        let Some(dir) = &self.dir else { return };
        let after = dir.join(format!("{}.after", self.call_id));
        let _ = std::fs::remove_file(&after);
        if let Err(e) = create_new(&after, hash(content).as_bytes()) {
            tracing::warn!("cannot keep the undo record {}: {e}", after.display());
        }
    }
}

/// Writes a new file: one already there (or a link planted there) is an error.
fn create_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    file.write_all(bytes)
}

fn hash(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// What undo did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Undone {
    /// Its earlier content was written back.
    Restored(String),
    /// The call had created it: removed.
    Removed(String),
    /// It could not be put back, and why.
    Failed(String, UndoError),
}

/// Puts back the files changed by `call_ids` (in the order they ran), newest first, from
/// the records in `artifacts`; a call with no record (it failed, or was undone already) is
/// skipped. Each restored call's record is marked undone.
pub fn undo(artifacts: &Path, roots: &Roots, call_ids: &[String]) -> Vec<Undone> {
    let dir = artifacts.join("undo");
    let mut done: Vec<Undone> = Vec::new();
    // Files changed since their newest change here: left alone, and so are older ones.
    let mut changed_since: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let mut checked: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    for call_id in call_ids.iter().rev() {
        let hexed = hex(call_id);
        let (meta, before) = Keeper::paths(&dir, &hexed);
        let Ok(text) = std::fs::read(&meta) else { continue };
        let Ok(record) = serde_json::from_slice::<Record>(&text) else { continue };
        let shown = roots.display(&record.path);
        if checked.insert(record.path.clone())
            && let Ok(after) = std::fs::read_to_string(dir.join(format!("{hexed}.after")))
            && current_hash(&record.path) != Some(after.trim().to_owned())
        {
            changed_since.insert(record.path.clone());
        }
        if changed_since.contains(&record.path) {
            let entry = Undone::Failed(
                shown,
                UndoError::new(
                    UndoErrorKind::ChangedSince,
                    "it changed after keel's change (your edits, or a command's); it is left as it is",
                ),
            );
            done.retain(|d| name(d) != name(&entry));
            done.push(entry);
            continue;
        }
        let outcome = restore(&record, &before, roots);
        let _ = std::fs::rename(&meta, dir.join(format!("{hexed}.undone")));
        let entry = match outcome {
            Ok(true) => Undone::Restored(shown),
            Ok(false) => Undone::Removed(shown),
            Err(why) => Undone::Failed(shown, why),
        };
        // A file changed by several calls is reported once, as its oldest state decides.
        done.retain(|d| name(d) != name(&entry));
        done.push(entry);
    }
    done.reverse();
    done
}

/// A file as it was before a call changed it, read from the call's undo record
/// ([`kept_before`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptFile {
    /// The file's canonical path.
    pub path: PathBuf,
    /// Its bytes before the call; `None` when there was no file (the call created it).
    pub content: Option<Vec<u8>>,
}

/// What call `call_id` found before it changed its file, from the records in `artifacts`
/// (undone or not): `Ok(None)` when the call kept none (it failed, or ran without an
/// artifacts folder); an error when the record cannot be read or its content was too
/// large to keep. Read by `keel replay`, which puts a copy of the workspace back as it
/// was before a session.
pub fn kept_before(artifacts: &Path, call_id: &str) -> Result<Option<KeptFile>, UndoError> {
    let dir = artifacts.join("undo");
    let hexed = hex(call_id);
    let (meta, before) = Keeper::paths(&dir, &hexed);
    let text = match std::fs::read(&meta).or_else(|_| std::fs::read(dir.join(format!("{hexed}.undone")))) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(UndoError::io(e)),
    };
    let record: Record = serde_json::from_slice(&text)
        .map_err(|e| UndoError::new(UndoErrorKind::Io, format!("its undo record cannot be read: {e}")))?;
    if record.too_large {
        return Err(UndoError::new(
            UndoErrorKind::NotKept,
            format!("it was larger than {} MB; its earlier content was not kept", MAX_KEPT_BYTES >> 20),
        ));
    }
    let content = if record.existed { Some(std::fs::read(&before).map_err(UndoError::io)?) } else { None };
    Ok(Some(KeptFile { path: record.path, content }))
}

/// The hash of the file at `path` as it is now (`None` when it cannot be read; a
/// missing file hashes as nothing, so it never equals what was written).
fn current_hash(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_KEPT_BYTES {
        return None;
    }
    std::fs::read(path).ok().map(|bytes| hash(&bytes))
}

fn name(undone: &Undone) -> &str {
    match undone {
        Undone::Restored(p) | Undone::Removed(p) | Undone::Failed(p, _) => p,
    }
}

/// Restores one record: `Ok(true)` written back, `Ok(false)` removed.
fn restore(record: &Record, before: &Path, roots: &Roots) -> Result<bool, UndoError> {
    if record.too_large {
        return Err(UndoError::new(
            UndoErrorKind::NotKept,
            format!("it was larger than {} MB; its earlier content was not kept", MAX_KEPT_BYTES >> 20),
        ));
    }
    let outside = || UndoError::new(UndoErrorKind::Outside, "it is outside the folders keel may write");
    if !roots.allows(&record.path, true) {
        return Err(outside());
    }
    let path = record.path.to_string_lossy();
    if !record.existed {
        // Removed below the root it is in, no link on the way followed.
        let Some((root, rel)) = roots.anchor_for(&record.path) else {
            return Err(outside());
        };
        let anchored = keel_sandbox::anchored::Anchored::open(root).map_err(UndoError::io)?;
        return match anchored.kind(&rel) {
            Ok(None) => Ok(false),
            Ok(Some(keel_sandbox::anchored::Kind::File | keel_sandbox::anchored::Kind::Link)) => {
                anchored.remove(&rel).map(|_| false).map_err(UndoError::io)
            }
            Ok(Some(_)) => Err(UndoError::new(
                UndoErrorKind::NotAFile,
                "it is no longer a file (a folder or a device is there now); left as it is",
            )),
            Err(e) => Err(UndoError::new(
                UndoErrorKind::PathChanged,
                format!("a folder on its way was replaced ({e}); left as it is"),
            )
            .caused_by(e)),
        };
    }
    let mut kept = File::open(before).map_err(|e| {
        UndoError::new(UndoErrorKind::Io, format!("its kept copy cannot be read: {e}")).caused_by(e)
    })?;
    let (mut file, _, _) = roots.open_write(&path).map_err(UndoError::refused)?;
    file.set_len(0).map_err(UndoError::io)?;
    std::io::copy(&mut kept, &mut file).map_err(UndoError::io)?;
    file.flush().map_err(UndoError::io)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::edit::{EditArgs, edit_kept};
    use crate::write::write_kept;

    #[derive(Debug, Clone)]
    enum Op {
        Write(usize, Vec<u8>),
        Edit(usize, u8, u8, bool),
    }

    const FILES: [&str; 3] = ["a.txt", "sub/b.txt", "c.txt"];

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (
                0..3usize,
                proptest::collection::vec(
                    prop_oneof![Just(b'x'), Just(b'y'), Just(b'\n'), Just(b'\r')],
                    0..12
                )
            )
                .prop_map(|(f, c)| Op::Write(f, c)),
            (0..3usize, b'w'..=b'z', b'w'..=b'z', any::<bool>())
                .prop_map(|(f, o, n, all)| Op::Edit(f, o, n, all)),
        ]
    }

    fn state(root: &Path) -> BTreeMap<&'static str, Option<Vec<u8>>> {
        FILES.iter().map(|f| (*f, std::fs::read(root.join(f)).ok())).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Whatever a turn wrote and edited, undo restores every file's exact bytes
        /// (and removes the files it created); a second undo changes nothing.
        #[test]
        fn undo_restores_exact_bytes(initial in proptest::collection::vec(proptest::option::of("[xyz\n]{0,8}"), 3), earlier in proptest::collection::vec(op(), 0..4), ops in proptest::collection::vec(op(), 1..10)) {
            let ws = tempfile::tempdir().unwrap();
            let artifacts = tempfile::tempdir().unwrap();
            let roots = Roots::new(ws.path(), &[], &[]).unwrap();
            for (file, content) in FILES.iter().zip(&initial) {
                if let Some(content) = content {
                    std::fs::create_dir_all(ws.path().join(file).parent().unwrap()).unwrap();
                    std::fs::write(ws.path().join(file), content).unwrap();
                }
            }
            let run = |ops: &[Op], prefix: &str| -> Vec<String> {
                let mut ids = Vec::new();
                for (n, op) in ops.iter().enumerate() {
                    let id = format!("{prefix}{n}");
                    let keeper = Keeper::new(artifacts.path(), &id);
                    let ok = match op {
                        Op::Write(f, content) => {
                            write_kept(&roots, FILES[*f], &String::from_utf8_lossy(content), Some(&keeper)).is_ok()
                        }
                        Op::Edit(f, old, new, all) => {
                            let args = EditArgs {
                                path: FILES[*f].to_owned(),
                                old_text: (*old as char).to_string(),
                                new_text: format!("{}{}", *new as char, *new as char),
                                replace_all: *all,
                            };
                            edit_kept(&roots, &args, Some(&keeper)).is_ok()
                        }
                    };
                    if ok {
                        ids.push(id);
                    }
                }
                ids
            };
            // An earlier turn, then the turn to undo.
            run(&earlier, "e");
            let before = state(ws.path());
            let ids = run(&ops, "t");
            undo(artifacts.path(), &roots, &ids);
            prop_assert_eq!(state(ws.path()), before.clone());
            prop_assert!(undo(artifacts.path(), &roots, &ids).is_empty());
            prop_assert_eq!(state(ws.path()), before);
        }
    }

    #[test]
    fn undo_reports_each_file_once() {
        let ws = tempfile::tempdir().unwrap();
        let artifacts = tempfile::tempdir().unwrap();
        let roots = Roots::new(ws.path(), &[], &[]).unwrap();
        std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
        for (id, path, content) in [("1", "a.txt", "two\n"), ("2", "new.txt", "x"), ("3", "a.txt", "three\n")]
        {
            write_kept(&roots, path, content, Some(&Keeper::new(artifacts.path(), id))).unwrap();
        }
        let done = undo(artifacts.path(), &roots, &["1".into(), "2".into(), "3".into()]);
        assert_eq!(done, [Undone::Restored("a.txt".into()), Undone::Removed("new.txt".into())]);
        assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).unwrap(), "one\n");
        assert!(!ws.path().join("new.txt").exists());
    }

    #[test]
    fn what_a_call_found_is_read_back_undone_or_not() {
        let ws = tempfile::tempdir().unwrap();
        let artifacts = tempfile::tempdir().unwrap();
        let roots = Roots::new(ws.path(), &[], &[]).unwrap();
        std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
        write_kept(&roots, "a.txt", "two\n", Some(&Keeper::new(artifacts.path(), "1"))).unwrap();
        write_kept(&roots, "new.txt", "x", Some(&Keeper::new(artifacts.path(), "2"))).unwrap();
        let root = ws.path().canonicalize().unwrap();
        let kept = |id: &str| kept_before(artifacts.path(), id).unwrap();
        assert_eq!(kept("1"), Some(KeptFile { path: root.join("a.txt"), content: Some(b"one\n".to_vec()) }));
        assert_eq!(kept("2"), Some(KeptFile { path: root.join("new.txt"), content: None }));
        assert_eq!(kept("3"), None);
        undo(artifacts.path(), &roots, &["1".into()]);
        assert_eq!(kept("1").and_then(|k| k.content), Some(b"one\n".to_vec()));
    }

    /// Issue 28, item 1: a turn creates `d/victim.txt`, a command turns `d` into a link
    /// to an outside folder holding a file of that name, and undo deleted that file.
    #[test]
    fn undo_never_deletes_through_a_folder_swapped_for_a_link() {
        // The outside file differs from what the turn wrote (seen as changed since), or
        // holds the very same bytes (only the folder swapped for a link stops undo).
        for (victim, kind) in
            [("precious", UndoErrorKind::ChangedSince), ("made by the turn", UndoErrorKind::PathChanged)]
        {
            let dir = tempfile::tempdir().unwrap();
            let (ws, outside, artifacts) =
                (dir.path().join("ws"), dir.path().join("outside"), dir.path().join("a"));
            std::fs::create_dir_all(&ws).unwrap();
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(outside.join("victim.txt"), victim).unwrap();
            let roots = Roots::new(&ws, &[], &[]).unwrap();
            write_kept(&roots, "d/victim.txt", "made by the turn", Some(&Keeper::new(&artifacts, "1")))
                .unwrap();
            std::fs::remove_dir_all(ws.join("d")).unwrap();
            std::os::unix::fs::symlink(&outside, ws.join("d")).unwrap();
            let done = undo(&artifacts, &roots, &["1".into()]);
            let [Undone::Failed(_, why)] = &done[..] else { panic!("{done:?}") };
            assert_eq!(why.kind, kind, "{why}");
            if kind == UndoErrorKind::PathChanged {
                assert!(why.io_kind().is_some(), "the error underneath is kept: {why:?}");
            }
            assert_eq!(std::fs::read_to_string(outside.join("victim.txt")).unwrap(), victim);
        }
    }

    /// Issue 28, item 12: undo overwrote what the user had changed after the turn.
    #[test]
    fn undo_keeps_what_changed_after_the_turn() {
        let ws = tempfile::tempdir().unwrap();
        let artifacts = tempfile::tempdir().unwrap();
        let roots = Roots::new(ws.path(), &[], &[]).unwrap();
        std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
        write_kept(&roots, "a.txt", "two\n", Some(&Keeper::new(artifacts.path(), "1"))).unwrap();
        write_kept(&roots, "new.txt", "x", Some(&Keeper::new(artifacts.path(), "2"))).unwrap();
        std::fs::write(ws.path().join("a.txt"), "two, and the user's line\n").unwrap();
        std::fs::write(ws.path().join("new.txt"), "the user kept writing here").unwrap();
        let done = undo(artifacts.path(), &roots, &["1".into(), "2".into()]);
        assert!(
            matches!(&done[..], [Undone::Failed(a, _), Undone::Failed(b, _)] if a == "a.txt" && b == "new.txt"),
            "{done:?}"
        );
        // Issue 31, item 5: the kind says why, so a caller can tell the user's own edits
        // from a failure.
        for undone in &done {
            let Undone::Failed(_, why) = undone else { continue };
            assert_eq!(why.kind, UndoErrorKind::ChangedSince);
            assert_eq!(
                why.to_string(),
                "it changed after keel's change (your edits, or a command's); it is left as it is"
            );
        }
        assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).unwrap(), "two, and the user's line\n");
        assert_eq!(std::fs::read_to_string(ws.path().join("new.txt")).unwrap(), "the user kept writing here");
        // Unchanged since: undone as before.
        write_kept(&roots, "a.txt", "three\n", Some(&Keeper::new(artifacts.path(), "3"))).unwrap();
        assert_eq!(undo(artifacts.path(), &roots, &["3".into()]), [Undone::Restored("a.txt".into())]);
    }

    /// A link planted where keel writes its undo record is not followed.
    #[test]
    fn undo_records_are_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, artifacts) = (dir.path().join("ws"), dir.path().join("a"));
        std::fs::create_dir_all(ws.clone()).unwrap();
        std::fs::create_dir_all(artifacts.join("undo")).unwrap();
        std::fs::write(dir.path().join("target"), "keep").unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("target"),
            artifacts.join("undo").join(format!("{}.json", hex("9"))),
        )
        .unwrap();
        let roots = Roots::new(&ws, &[], &[]).unwrap();
        let _ = write_kept(&roots, "x.txt", "y", Some(&Keeper::new(&artifacts, "9")));
        assert_eq!(std::fs::read_to_string(dir.path().join("target")).unwrap(), "keep");
    }
}
