//! The JSONL store: one file per session, one event per line.
//!
//! Writes go straight to the file (one `write` per event); `sync` is `fdatasync`. A
//! session open for writing holds an exclusive lock on its file, released by the OS if
//! the process dies, so two keel processes never write the same session.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{SessionError, SessionErrorKind};
use crate::event::{Event, EventKind, ParentRef, SpawnRef};
use crate::image_files::ImageFiles;
use crate::projection::Projection;
use crate::session::{EventWriter, Session, SyncWork};
use crate::store::{ChangeNotify, SessionStore, SessionSummary};

/// Sessions as `<dir>/<id>.jsonl` files.
#[derive(Debug, Clone)]
pub struct JsonlStore {
    dir: PathBuf,
    detached_sync: bool,
    watchers: Registry,
}

/// Who is told of appends by this store's writers (followers in the same process; other
/// processes are not told, and poll).
#[derive(Clone, Default)]
struct Registry(std::sync::Arc<std::sync::Mutex<Vec<ChangeNotify>>>);

/// The watchers a writer tells, fixed when it was opened.
#[derive(Clone, Default)]
struct Watchers(std::sync::Arc<Vec<ChangeNotify>>);

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Registry")
    }
}

impl std::fmt::Debug for Watchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watchers")
    }
}

impl Registry {
    fn all(&self) -> Vec<ChangeNotify> {
        match self.0.lock() {
            Ok(w) => w.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn add(&self, notify: ChangeNotify) {
        match self.0.lock() {
            Ok(mut w) => w.push(notify),
            Err(poisoned) => poisoned.into_inner().push(notify),
        }
    }
}

/// Appends events to a locked JSONL file.
#[derive(Debug)]
pub struct JsonlWriter {
    file: std::sync::Arc<File>,
    path: PathBuf,
    /// The session id and whom to tell of each append, when anyone watches.
    watched: Option<(String, Watchers)>,
    line: Vec<u8>,
    /// Syncs run on a blocking thread (see [`JsonlStore::detached_sync`]).
    detached: bool,
    closed: bool,
    /// Where the session's images are kept.
    images: ImageFiles,
}

impl JsonlWriter {
    fn new(file: File, path: PathBuf, detached: bool) -> Self {
        JsonlWriter {
            file: std::sync::Arc::new(file),
            images: ImageFiles::beside(&path),
            path,
            watched: None,
            line: Vec::with_capacity(4096),
            detached,
            closed: false,
        }
    }
}

impl EventWriter for JsonlWriter {
    fn append(&mut self, event: &Event) -> Result<(), SessionError> {
        if self.closed {
            return Err(
                SessionError::new(SessionErrorKind::Invalid, "the session was closed").at_path(&self.path)
            );
        }
        self.line.clear();
        event.write_line(&mut self.line)?;
        (&*self.file).write_all(&self.line).map_err(|e| SessionError::io(e).at_path(&self.path))?;
        if let Some((id, watchers)) = &self.watched {
            for notify in watchers.0.iter() {
                notify(id, event.seq);
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), SessionError> {
        self.file.sync_data().map_err(|e| SessionError::io(e).at_path(&self.path))
    }

    fn sync_work(&mut self) -> SyncWork {
        if !self.detached {
            return SyncWork::Inline;
        }
        let file = std::sync::Arc::clone(&self.file);
        let path = self.path.clone();
        SyncWork::Blocking(Box::new(move || file.sync_data().map_err(|e| SessionError::io(e).at_path(&path))))
    }

    fn close(&mut self) -> Result<(), SessionError> {
        if self.closed {
            return Ok(());
        }
        self.sync()?;
        self.closed = true;
        // The lock goes now, not when the last handle (a detached sync) drops the file.
        self.file.unlock().map_err(|e| SessionError::io(e).at_path(&self.path))
    }

    /// Images are files beside the log (`<id>.images/<sha256>.<ext>`).
    fn put_image(&mut self, image: &keel_llm::Image, data: &[u8]) -> Result<(), SessionError> {
        self.images.put(image, data)
    }
}

/// What reading a log found.
struct Loaded {
    /// Byte length of the valid prefix (everything after is a torn line).
    valid_len: u64,
    /// True when the last valid line lacks its newline.
    missing_newline: bool,
}

/// Reads a log, handing each event to `visit`. A torn last line is skipped; any other bad
/// line is an error naming its line number.
fn read_log(
    path: &Path,
    file: &File,
    mut visit: impl FnMut(Event) -> Result<(), SessionError>,
) -> Result<Loaded, SessionError> {
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut buf = Vec::with_capacity(4096);
    let mut offset = 0u64;
    let mut valid_len = 0u64;
    let mut missing_newline = false;
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let read = reader.read_until(b'\n', &mut buf).map_err(|e| SessionError::io(e).at_path(path))?;
        if read == 0 {
            break;
        }
        line_no += 1;
        offset += read as u64;
        let complete = buf.last() == Some(&b'\n');
        let text = match std::str::from_utf8(&buf) {
            Ok(text) => text.trim_end_matches(['\n', '\r']),
            Err(_) if !complete => break,
            Err(e) => {
                return Err(SessionError::new(SessionErrorKind::Corrupt, format!("not UTF-8: {e}"))
                    .at_path(path)
                    .at_line(line_no));
            }
        };
        if text.trim().is_empty() {
            if complete {
                valid_len = offset;
            }
            continue;
        }
        let event = match Event::parse(text) {
            Ok(event) => event,
            // A crash mid-write leaves a partial last line without its newline.
            Err(_) if !complete => break,
            Err(e) => return Err(e.at_path(path).at_line(line_no)),
        };
        valid_len = offset;
        missing_newline = !complete;
        visit(event).map_err(|e| e.at_path(path).at_line(line_no))?;
    }
    Ok(Loaded { valid_len, missing_newline })
}

impl JsonlStore {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        JsonlStore { dir: dir.into(), detached_sync: false, watchers: Registry::default() }
    }

    /// A writer for `file`, telling this store's watchers of its appends.
    fn writer(&self, id: &str, file: File, path: PathBuf) -> JsonlWriter {
        let mut writer = JsonlWriter::new(file, path, self.detached_sync);
        let watchers = self.watchers.all();
        if !watchers.is_empty() {
            writer.watched = Some((id.to_owned(), Watchers(std::sync::Arc::new(watchers))));
        }
        writer
    }

    /// With `true`, sessions' syncs run on a blocking thread ([`SyncWork::Blocking`]),
    /// so a slow disk does not stall other sessions served by the same executor (a
    /// server); with `false` (the default, a CLI running one session) they run inline,
    /// which is cheaper than a thread hand-off.
    pub fn detached_sync(mut self, detached: bool) -> Self {
        self.detached_sync = detached;
        self
    }

    /// The folder holding the session files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The log file of session `id`.
    pub fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    /// Finds the full id for an id or a unique prefix of one.
    pub fn resolve_id(&self, id: &str) -> Result<String, SessionError> {
        if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
            return Err(SessionError::new(SessionErrorKind::Invalid, format!("`{id}` is not a session id")));
        }
        if self.path_of(id).is_file() {
            return Ok(id.to_owned());
        }
        let mut matches: Vec<String> =
            self.ids()?.into_iter().filter(|candidate| candidate.starts_with(id)).collect();
        match matches.len() {
            0 => Err(SessionError::new(
                SessionErrorKind::NotFound,
                format!("no session `{id}` in {}", self.dir.display()),
            )),
            1 => Ok(matches.remove(0)),
            n => Err(SessionError::new(
                SessionErrorKind::Invalid,
                format!("`{id}` matches {n} sessions; give more of the id"),
            )),
        }
    }

    fn ids(&self) -> Result<Vec<String>, SessionError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(SessionError::io(e).at_path(&self.dir)),
        };
        let mut ids = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) {
                ids.push(id.to_owned());
            }
        }
        Ok(ids)
    }

    fn ensure_dir(&self) -> Result<(), SessionError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| SessionError::io(e).at_path(&self.dir))
    }

    fn lock(file: &File, id: &str, path: &Path) -> Result<(), SessionError> {
        match file.try_lock() {
            Ok(()) => Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => Err(SessionError::new(
                SessionErrorKind::Locked,
                format!(
                    "session {id} is open in another keel process; wait for it to finish, or branch it with `keel sessions fork {id}`"
                ),
            )
            .at_path(path)),
            Err(std::fs::TryLockError::Error(e)) => Err(SessionError::io(e).at_path(path)),
        }
    }

    fn create_with(
        &self,
        cwd: &str,
        parent: Option<ParentRef>,
        spawned_by: Option<SpawnRef>,
    ) -> Result<Session, SessionError> {
        self.ensure_dir()?;
        let (id, path, file) = loop {
            let id = crate::new_session_id();
            let path = self.path_of(&id);
            match OpenOptions::new().read(true).write(true).create_new(true).open(&path) {
                Ok(file) => break (id, path, file),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(SessionError::io(e).at_path(&path)),
            }
        };
        Self::lock(&file, &id, &path)?;
        let writer = self.writer(&id, file, path);
        let session = match spawned_by {
            Some(spawned_by) => Session::create_spawned(id, cwd, spawned_by, Box::new(writer))?,
            None => Session::create(id, cwd, parent, Box::new(writer))?,
        };
        // Make the new directory entry durable too.
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(session)
    }

    /// Reads every event of a session without locking it (for display and fork).
    pub fn read_events(&self, id: &str) -> Result<Vec<Event>, SessionError> {
        self.read_events_after(id, None)
    }

    /// The events after seq `after` (all with `None`), checked as a load checks them; only
    /// those returned get their images' bytes read back.
    fn read_events_after(&self, id: &str, after: Option<u64>) -> Result<Vec<Event>, SessionError> {
        let id = self.resolve_id(id)?;
        let path = self.path_of(&id);
        let file = File::open(&path).map_err(|e| SessionError::io(e).at_path(&path))?;
        let mut events = Vec::new();
        // Events are checked as they are read, so what is returned is a valid log.
        let mut projection = Projection::new();
        let images = ImageFiles::beside(&path);
        read_log(&path, &file, |mut event| {
            projection.check(&event)?;
            if after.is_some_and(|after| event.seq <= after) {
                projection.fold(event);
                return Ok(());
            }
            images.fill(&mut event);
            projection.fold(event.clone());
            events.push(event);
            Ok(())
        })?;
        Ok(events)
    }

    fn summarize(&self, id: String) -> Result<SessionSummary, SessionError> {
        let path = self.path_of(&id);
        let file = File::open(&path).map_err(|e| SessionError::io(e).at_path(&path))?;
        let modified = file.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
        let mut projection = Projection::new();
        let mut events = 0u64;
        read_log(&path, &file, |event| {
            events += 1;
            projection.apply(event)
        })?;
        Ok(SessionSummary::from_projection(id, &projection, modified, events))
    }
}

impl SessionStore for JsonlStore {
    fn create(&self, cwd: &str) -> Result<Session, SessionError> {
        self.create_with(cwd, None, None)
    }

    fn create_spawned(&self, cwd: &str, spawned_by: SpawnRef) -> Result<Session, SessionError> {
        self.create_with(cwd, None, Some(spawned_by))
    }

    fn open(&self, id: &str) -> Result<Session, SessionError> {
        let id = self.resolve_id(id)?;
        let path = self.path_of(&id);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| SessionError::io(e).at_path(&path))?;
        Self::lock(&file, &id, &path)?;
        let mut projection = Projection::new();
        let images = ImageFiles::beside(&path);
        let loaded = read_log(&path, &file, |mut event| {
            images.fill(&mut event);
            projection.apply(event)
        })?;
        let io = |e: std::io::Error| SessionError::io(e).at_path(&path);
        // Drop a torn tail so the next append starts on a fresh line.
        let len = file.metadata().map_err(io)?.len();
        if loaded.valid_len < len {
            file.set_len(loaded.valid_len).map_err(io)?;
        }
        file.seek(SeekFrom::Start(loaded.valid_len)).map_err(io)?;
        if loaded.missing_newline {
            file.write_all(b"\n").map_err(io)?;
        }
        let writer = self.writer(&id, file, path.clone());
        if projection.header().is_none() {
            // Nothing survived, not even the header: start the log over under the same id.
            let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
            return Session::create(id, &cwd, None, Box::new(writer));
        }
        Ok(Session::resume(id, projection, Box::new(writer)))
    }

    fn fork(&self, id: &str, at: Option<u64>) -> Result<Session, SessionError> {
        let id = self.resolve_id(id)?;
        let events = self.read_events(&id)?;
        let last = events.last().map_or(0, |e| e.seq);
        let at = at.unwrap_or(last);
        if at > last {
            return Err(SessionError::new(
                SessionErrorKind::Invalid,
                format!("session {id} ends at seq {last}; cannot fork at {at}"),
            ));
        }
        let cwd = events
            .first()
            .and_then(|e| match &e.kind {
                EventKind::SessionHeader(h) => Some(h.cwd.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let mut session = self.create_with(&cwd, Some(ParentRef { id, seq: at }), None)?;
        for event in events {
            if event.seq == 0 || event.seq > at || matches!(event.kind, EventKind::SessionHeader(_)) {
                continue;
            }
            session.append_copy(event)?;
        }
        session.sync()?;
        session.repair()?;
        Ok(session)
    }

    fn latest_in(&self, cwd: &str) -> Result<Option<String>, SessionError> {
        let mut best: Option<(SystemTime, String)> = None;
        for id in self.ids()? {
            let path = self.path_of(&id);
            let Ok(file) = File::open(&path) else { continue };
            let modified = file.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
            let mut first = String::new();
            if BufReader::new(file).read_line(&mut first).is_err() {
                continue;
            }
            let matches = match Event::parse(first.trim_end()) {
                // A child session (a subagent's) is resumed by its id, never by --continue.
                Ok(Event { kind: EventKind::SessionHeader(header), .. }) => {
                    header.cwd == cwd && header.spawned_by.is_none()
                }
                _ => false,
            };
            if matches && best.as_ref().is_none_or(|(time, best_id)| (modified, &id) > (*time, best_id)) {
                best = Some((modified, id));
            }
        }
        Ok(best.map(|(_, id)| id))
    }

    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        let mut out = Vec::new();
        for id in self.ids()? {
            match self.summarize(id) {
                Ok(summary) => out.push(summary),
                // One unreadable file must not hide the others.
                Err(_) => continue,
            }
        }
        out.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| b.id.cmp(&a.id)));
        Ok(out)
    }

    fn read(&self, id: &str) -> Result<Vec<Event>, SessionError> {
        self.read_events(id)
    }

    /// Followers poll this on every change: images already sent are not read again.
    fn read_after(&self, id: &str, after: u64) -> Result<Vec<Event>, SessionError> {
        self.read_events_after(id, Some(after))
    }

    /// Appends by this store's writers (sessions opened after the call) are told at once;
    /// writers in other processes are not, so followers still poll.
    fn watch(&self, notify: ChangeNotify) -> bool {
        self.watchers.add(notify);
        true
    }

    fn delete(&self, id: &str) -> Result<(), SessionError> {
        let id = self.resolve_id(id)?;
        let path = self.path_of(&id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| SessionError::io(e).at_path(&path))?;
        Self::lock(&file, &id, &path)?;
        std::fs::remove_file(&path).map_err(|e| SessionError::io(e).at_path(&path))?;
        ImageFiles::beside(&path).remove()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, TurnStart};

    #[test]
    fn watchers_are_told_of_each_append_of_sessions_opened_after_they_asked() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = JsonlStore::new(dir.path());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let told = std::sync::Arc::clone(&seen);
        assert!(store.watch(std::sync::Arc::new(move |id: &str, seq: u64| {
            told.lock().unwrap_or_else(|e| e.into_inner()).push((id.to_owned(), seq));
        })));
        let mut session = store.create("/w").unwrap_or_else(|e| panic!("{e}"));
        session.append(EventKind::TurnStart(TurnStart { turn: 1 })).unwrap_or_else(|e| panic!("{e}"));
        let id = session.id().to_owned();
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(seen, vec![(id.clone(), 0), (id, 1)]);
    }
}
