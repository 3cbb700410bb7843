//! Watching a keel run: its `--json` stream is read as keel writes it, and at each nudge
//! keel is stopped, its workspace copied, and keel let go on, so the state the nudge
//! acted on can be verified after the run.
//!
//! The race: keel prints the nudge and then asks the model for its next step; it can
//! change the workspace only through a tool, and it prints a `tool/call` before running
//! one (the log is written and synced before a batch starts). The stream is polled every
//! 10 ms and read once more after keel is stopped: a `tool/call` after the nudge means
//! keel got ahead (a model that answered within those milliseconds), and that nudge is
//! left unchecked rather than judged on a later state.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use crate::EvalError;
use crate::freeze::freeze;
use crate::nudge::Nudge;
use crate::record::RunRecord;
use crate::stream::{StreamReader, is_tool_call};

/// How often the stream is read.
const POLL: Duration = Duration::from_millis(10);

/// What to watch.
#[derive(Debug, Clone, Copy)]
pub struct Watch<'a> {
    /// The file keel's stdout goes to.
    pub events: &'a Path,
    /// keel's workspace.
    pub workspace: &'a Path,
    /// Where the copies go: `<copies>/<seq>/project` for the nudge with that `seq`.
    pub copies: &'a Path,
    /// A run still going after this (not counting the time it was stopped) is
    /// interrupted (SIGINT, as a user would), then killed ten seconds later.
    pub timeout: Duration,
}

/// The workspace as it was at a nudge.
#[derive(Debug)]
pub struct Snapshot {
    /// The nudge.
    pub nudge: Nudge,
    /// The copy of the workspace, or why there is none.
    pub copy: Result<PathBuf, String>,
    /// How long keel was stopped for it.
    pub stopped: Duration,
}

/// What a watched run did.
#[derive(Debug)]
pub struct Watched {
    /// keel's exit status.
    pub status: Option<ExitStatus>,
    /// It ran past the timeout.
    pub timed_out: bool,
    /// What the stream said (task fields left empty).
    pub record: RunRecord,
    /// The workspace at each nudge, in order.
    pub snapshots: Vec<Snapshot>,
    /// Wall time of the run, less the time keel was stopped.
    pub active: Duration,
}

/// Watches `child` (keel, writing its stream to `watch.events`) until it exits.
pub fn watch(child: &mut Child, watch: Watch<'_>) -> Result<Watched, EvalError> {
    let file =
        File::open(watch.events).map_err(|e| EvalError::Io(format!("{}: {e}", watch.events.display())))?;
    let mut tail = Tail { file, partial: Vec::new() };
    let mut pending: VecDeque<String> = VecDeque::new();
    let mut reader = StreamReader::new();
    let mut snapshots = Vec::new();
    let started = Instant::now();
    let mut stopped = Duration::ZERO;
    let mut interrupted_at: Option<Instant> = None;
    loop {
        let exited = child.try_wait().map_err(|e| EvalError::Io(format!("waiting for keel: {e}")))?;
        pending.extend(tail.lines(exited.is_some()));
        while let Some(line) = pending.pop_front() {
            if let Some(nudge) = reader.line(&line) {
                let running = exited.is_none().then(|| child.id());
                let snapshot = snapshot(nudge, running, &mut tail, &mut pending, watch);
                stopped += snapshot.stopped;
                snapshots.push(snapshot);
            }
        }
        let active = started.elapsed().saturating_sub(stopped);
        if let Some(status) = exited {
            let record = reader.finish();
            return Ok(Watched {
                status: Some(status),
                timed_out: interrupted_at.is_some(),
                record,
                snapshots,
                active,
            });
        }
        match interrupted_at {
            None if active > watch.timeout => {
                if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
                }
                interrupted_at = Some(Instant::now());
            }
            Some(at) if at.elapsed() > Duration::from_secs(10) => {
                // The next round finds it exited and reads the rest of the stream.
                let _ = child.kill();
                child.wait().map_err(|e| EvalError::Io(format!("waiting for keel: {e}")))?;
                continue;
            }
            _ => {}
        }
        std::thread::sleep(POLL);
    }
}

/// Copies the workspace as it is at `nudge`: with keel (`running`) stopped, or after it
/// exited. `pending` holds the stream's lines after the nudge.
fn snapshot(
    nudge: Nudge,
    running: Option<u32>,
    tail: &mut Tail,
    pending: &mut VecDeque<String>,
    watch: Watch<'_>,
) -> Snapshot {
    let at = Instant::now();
    let frozen = running.map(freeze);
    if frozen.is_some() {
        // What keel printed before it stopped.
        pending.extend(tail.lines(false));
    }
    let copy = if pending.iter().any(|line| is_tool_call(line)) {
        Err("keel ran a tool after the nudge before it could be stopped".to_owned())
    } else {
        let target = watch.copies.join(nudge.seq.to_string()).join("project");
        let _ = std::fs::remove_dir_all(&target);
        std::fs::create_dir_all(&target)
            .map_err(|e| format!("{}: {e}", target.display()))
            .and_then(|()| crate::task::copy_tree(watch.workspace, &target).map_err(|e| e.to_string()))
            .map(|()| target)
    };
    drop(frozen);
    Snapshot { nudge, copy, stopped: if running.is_some() { at.elapsed() } else { Duration::ZERO } }
}

/// The part of the stream file not read yet.
struct Tail {
    file: File,
    /// The start of a line whose end keel has not written yet.
    partial: Vec<u8>,
}

impl Tail {
    /// The whole lines written since the last call; with `last`, also an unfinished one.
    fn lines(&mut self, last: bool) -> Vec<String> {
        let _ = self.file.read_to_end(&mut self.partial);
        let complete = match self.partial.iter().rposition(|&b| b == b'\n') {
            Some(end) => {
                let rest = self.partial.split_off(end + 1);
                std::mem::replace(&mut self.partial, rest)
            }
            None => Vec::new(),
        };
        let mut lines: Vec<String> =
            complete.split(|&b| b == b'\n').map(|line| String::from_utf8_lossy(line).into_owned()).collect();
        lines.pop(); // after the last line break
        if last && !self.partial.is_empty() {
            lines.push(String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned());
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_stream_is_read_in_whole_lines_as_it_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut writer = File::create(&path).unwrap();
        let mut tail = Tail { file: File::open(&path).unwrap(), partial: Vec::new() };
        assert!(tail.lines(false).is_empty());
        writer.write_all(b"{\"a\":1}\n{\"b\":").unwrap();
        assert_eq!(tail.lines(false), ["{\"a\":1}"]);
        assert!(tail.lines(false).is_empty());
        writer.write_all("2, \"é\":3}\n\n{\"c\"".as_bytes()).unwrap();
        assert_eq!(tail.lines(false), ["{\"b\":2, \"é\":3}", ""]);
        writer.write_all(b":4}").unwrap();
        assert_eq!(tail.lines(true), ["{\"c\":4}"]);
        assert!(tail.lines(true).is_empty());
    }

    #[test]
    fn a_nudge_after_a_tool_call_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("events.jsonl");
        std::fs::write(&events, "").unwrap();
        let workspace = dir.path().join("project");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(workspace.join("a.txt"), "a").unwrap();
        let copies = dir.path().join("nudges");
        let watch =
            Watch { events: &events, workspace: &workspace, copies: &copies, timeout: Duration::ZERO };
        let mut tail = Tail { file: File::open(&events).unwrap(), partial: Vec::new() };
        let nudge = Nudge { seq: 5, ..Nudge::default() };

        let mut pending: VecDeque<String> = [r#"{"seq":6,"type":"step/start","data":{}}"#.to_owned()].into();
        let copied = snapshot(nudge.clone(), None, &mut tail, &mut pending, watch);
        let copy = copied.copy.unwrap();
        assert_eq!(copy, copies.join("5/project"));
        assert_eq!(std::fs::read_to_string(copy.join("a.txt")).unwrap(), "a");

        pending.push_back(
            r#"{"seq":7,"type":"tool/call","data":{"call_id":"c","name":"shell","arguments":"{}"}}"#.into(),
        );
        let raced = snapshot(Nudge { seq: 6, ..nudge }, None, &mut tail, &mut pending, watch);
        assert!(raced.copy.unwrap_err().contains("ran a tool"));
        assert!(!copies.join("6").exists());
    }
}
