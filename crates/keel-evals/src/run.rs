//! Running keel on one task in a fresh workspace and reading what happened from its
//! `--json` event stream, as it is written: at each nudge the workspace is copied (see
//! `watch`) and, after the run, verified, to tell whether the nudge helped or hurt.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::EvalError;
use crate::nudge::{self, NudgeVerdict};
pub use crate::record::RunRecord;
pub use crate::stream::read_events;
use crate::task::Task;
use crate::watch::{Snapshot, Watch, watch};

/// How keel is run for every task.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The keel binary.
    pub keel: PathBuf,
    /// Extra arguments for keel (model selection: `--local`, `--provider …`).
    pub keel_args: Vec<String>,
    /// `--max-steps` for each task.
    pub max_steps: u32,
    /// A run still going after this is interrupted and counted as failed (the time keel
    /// was stopped at nudges does not count).
    pub timeout: Duration,
    /// Where each run's events and stderr are kept.
    pub out_dir: PathBuf,
    /// Scratch space for workspaces (removed after each run unless `keep`).
    pub scratch: PathBuf,
    /// Keep the workspaces.
    pub keep: bool,
    /// A config.toml copied into each run's config folder.
    pub config: Option<PathBuf>,
}

/// A folder name for one run that says nothing about the task: `w` and a hash (FNV-1a)
/// of the task's name and the run number.
fn neutral_name(task: &str, run: u32) -> String {
    let hash = format!("{task}.{run}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("w{:08x}", hash & 0xffff_ffff)
}

/// Runs keel on `task` (run number `run`, also its seed) and verifies the result.
pub fn run_task(task: &Task, run: u32, settings: &RunSettings) -> Result<RunRecord, EvalError> {
    // The model sees the workspace's path in its environment block, so the path names
    // neither the task nor the run ("gitignore.1/ws" was taken for a file name); a
    // `TASK` file beside it says which task a kept workspace was.
    let scratch = settings.scratch.join(neutral_name(&task.name, run));
    let _ = std::fs::remove_dir_all(&scratch);
    let workspace = scratch.join("project");
    let home = scratch.join("home");
    let config = scratch.join("config");
    for dir in [&home, &config] {
        std::fs::create_dir_all(dir).map_err(|e| EvalError::Io(format!("{}: {e}", dir.display())))?;
    }
    if let Some(file) = &settings.config {
        std::fs::copy(file, config.join("config.toml"))
            .map_err(|e| EvalError::Io(format!("{}: {e}", file.display())))?;
    }
    task.prepare(&workspace)?;
    std::fs::write(scratch.join("TASK"), format!("{}.{run}\n", task.name))
        .map_err(|e| EvalError::Io(format!("{}: {e}", scratch.display())))?;
    std::fs::create_dir_all(&settings.out_dir)
        .map_err(|e| EvalError::Io(format!("{}: {e}", settings.out_dir.display())))?;
    let events_path = settings.out_dir.join(format!("{}.{run}.jsonl", task.name));
    let stderr_path = settings.out_dir.join(format!("{}.{run}.stderr", task.name));
    let file =
        |p: &Path| std::fs::File::create(p).map_err(|e| EvalError::Io(format!("{}: {e}", p.display())));

    let mut command = Command::new(&settings.keel);
    command
        .arg("--json")
        .arg("--max-steps")
        .arg(settings.max_steps.to_string())
        .arg("-C")
        .arg(&workspace)
        .args(&settings.keel_args)
        .arg(&task.prompt)
        .env("KEEL_HOME", &home)
        .env("KEEL_CONFIG_DIR", &config)
        .env("KEEL_SEED", run.to_string())
        .stdin(Stdio::null())
        .stdout(file(&events_path)?)
        .stderr(file(&stderr_path)?);
    for (key, value) in crate::GIT_IDENTITY {
        command.env(key, value);
    }
    let mut child =
        command.spawn().map_err(|e| EvalError::Io(format!("cannot run {}: {e}", settings.keel.display())))?;
    let copies = scratch.join("nudges");
    let what =
        Watch { events: &events_path, workspace: &workspace, copies: &copies, timeout: settings.timeout };
    let watched = match watch(&mut child, what) {
        Ok(watched) => watched,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let (status, timed_out) = (watched.status, watched.timed_out);
    let seconds = watched.active.as_secs_f64();
    let mut record = watched.record;
    record.task = task.name.clone();
    record.category = task.category.clone();
    record.set = task.set.clone();
    record.twin = task.twin.clone();
    record.run = run;
    record.seconds = (seconds * 10.0).round() / 10.0;
    record.exit_code = status.and_then(|s| s.code()).unwrap_or(-1);
    if timed_out {
        record.reason = "timeout".into();
    } else if record.reason.is_empty() {
        record.reason = "crashed".into();
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        record.error.get_or_insert_with(|| tail(&stderr, 400));
    }
    let answer_path = scratch.join("answer.txt");
    std::fs::write(&answer_path, &record.answer)
        .map_err(|e| EvalError::Io(format!("{}: {e}", answer_path.display())))?;
    let verdict = task.verify(&workspace, &answer_path)?;
    record.passed = verdict.passed && !timed_out;
    record.verify_output = tail(&verdict.output, 300);
    record.nudge_verdicts = watched.snapshots.iter().map(|s| judge(task, s, record.passed)).collect();
    (record.nudges_helped, record.nudges_hurt) = nudge::counts(&record.nudge_verdicts);
    if !settings.keep {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    Ok(record)
}

fn tail(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// Verifies the workspace as it was at a nudge (with the answer the turn had then) and
/// judges the nudge against the run's outcome.
fn judge(task: &Task, snapshot: &Snapshot, passed: bool) -> NudgeVerdict {
    let stopped_ms = u64::try_from(snapshot.stopped.as_millis()).unwrap_or(u64::MAX);
    let copy = match &snapshot.copy {
        Ok(copy) => copy,
        Err(why) => return NudgeVerdict::unchecked(&snapshot.nudge, stopped_ms, why.clone()),
    };
    let answer = copy.with_file_name("answer.txt");
    if let Err(e) = std::fs::write(&answer, &snapshot.nudge.answer) {
        return NudgeVerdict::unchecked(&snapshot.nudge, stopped_ms, format!("{}: {e}", answer.display()));
    }
    match task.verify(copy, &answer) {
        Ok(outcome) => NudgeVerdict::judged(
            &snapshot.nudge,
            outcome.passed,
            passed,
            stopped_ms,
            tail(&outcome.output, 200),
        ),
        Err(e) => NudgeVerdict::unchecked(&snapshot.nudge, stopped_ms, e.to_string()),
    }
}
