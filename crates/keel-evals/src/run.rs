//! Running keel on one task in a fresh workspace and reading what happened from its
//! `--json` event stream.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::EvalError;
use crate::task::Task;

/// How keel is run for every task.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The keel binary.
    pub keel: PathBuf,
    /// Extra arguments for keel (model selection: `--local`, `--provider …`).
    pub keel_args: Vec<String>,
    /// `--max-steps` for each task.
    pub max_steps: u32,
    /// A run still going after this is interrupted and counted as failed.
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

/// What one run of one task did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Task name.
    pub task: String,
    /// Task category.
    pub category: String,
    /// The task's set ("original" in records made before sets existed).
    #[serde(default = "crate::task::original_set")]
    pub set: String,
    /// Run number, from 1; also the sampling seed given to keel.
    pub run: u32,
    /// The verification passed.
    pub passed: bool,
    /// What verify.sh printed.
    pub verify_output: String,
    /// keel's turn end reason (`completed`, `max_steps`, …), or `timeout` / `crashed`.
    pub reason: String,
    /// keel's exit code (-1 when killed).
    pub exit_code: i32,
    /// Steps taken.
    pub steps: u32,
    /// Tool calls answered.
    pub tool_calls: u32,
    /// Of those, results that were errors.
    pub tool_errors: u32,
    /// Error codes of failed results, counted.
    pub error_codes: BTreeMap<String, u32>,
    /// Calls per tool name.
    pub tools: BTreeMap<String, u32>,
    /// Calls the model wrote as text that keel recovered.
    pub text_calls: u32,
    /// Inputs keel added on its own (turn-stopping rules).
    pub nudges: u32,
    /// Times a stuck turn started again with a fresh context (`fresh_start`).
    #[serde(default)]
    pub restarts: u32,
    /// Prompt tokens over all requests.
    pub input_tokens: u64,
    /// Of those, served from a cache.
    pub cached_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Wall time of the keel run, in seconds.
    pub seconds: f64,
    /// keel's final answer.
    pub answer: String,
    /// A failure of the run itself (keel could not start, a configuration error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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
    let started = Instant::now();
    let mut child =
        command.spawn().map_err(|e| EvalError::Io(format!("cannot run {}: {e}", settings.keel.display())))?;
    let (status, timed_out) = wait_with_timeout(&mut child, settings.timeout)?;
    let seconds = started.elapsed().as_secs_f64();

    let events = std::fs::read_to_string(&events_path).unwrap_or_default();
    let mut record = read_events(&events);
    record.task = task.name.clone();
    record.category = task.category.clone();
    record.set = task.set.clone();
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
    if !settings.keep {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    Ok(record)
}

/// Waits for `child`; past `timeout` it is interrupted (SIGINT, as a user would), then
/// killed ten seconds later. Returns the exit status and whether it timed out.
fn wait_with_timeout(
    child: &mut std::process::Child,
    timeout: Duration,
) -> Result<(Option<std::process::ExitStatus>, bool), EvalError> {
    let started = Instant::now();
    let mut interrupted_at: Option<Instant> = None;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok((Some(status), interrupted_at.is_some())),
            Ok(None) => {}
            Err(e) => return Err(EvalError::Io(format!("waiting for keel: {e}"))),
        }
        let pid = rustix::process::Pid::from_raw(child.id() as i32);
        match interrupted_at {
            None if started.elapsed() > timeout => {
                if let Some(pid) = pid {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
                }
                interrupted_at = Some(Instant::now());
            }
            Some(at) if at.elapsed() > Duration::from_secs(10) => {
                let _ = child.kill();
                let status = child.wait().map_err(|e| EvalError::Io(format!("waiting for keel: {e}")))?;
                return Ok((Some(status), true));
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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

/// Reads a `keel --json` stream into a record (task fields left empty).
pub fn read_events(stream: &str) -> RunRecord {
    let mut record = RunRecord::default();
    for line in stream.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else { continue };
        let data = &event["data"];
        match event["type"].as_str().unwrap_or_default() {
            "step/start" => record.steps += 1,
            "user/message" if data["source"] == "hook" => record.nudges += 1,
            "compaction/start" if data["reason"] == "restart" => record.restarts += 1,
            "assistant/message" => {
                for block in data["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_call"
                        && block["id"].as_str().is_some_and(|id| id.starts_with("call_text_"))
                    {
                        record.text_calls += 1;
                    }
                }
            }
            "tool/result" => {
                let name = data["name"].as_str().unwrap_or("?").to_owned();
                *record.tools.entry(name).or_default() += 1;
                if data["is_error"] == true {
                    record.tool_errors += 1;
                    let code = data["error_code"].as_str().unwrap_or("tool_error").to_owned();
                    *record.error_codes.entry(code).or_default() += 1;
                }
            }
            "keel/done" => {
                record.reason = data["reason"].as_str().unwrap_or_default().to_owned();
                record.answer = data["final_text"].as_str().unwrap_or_default().to_owned();
                record.tool_calls = data["tool_calls"].as_u64().unwrap_or_default() as u32;
                let usage = &data["usage"];
                record.input_tokens = usage["input_tokens"].as_u64().unwrap_or_default();
                record.cached_tokens = usage["cached_tokens"].as_u64().unwrap_or_default();
                record.output_tokens = usage["output_tokens"].as_u64().unwrap_or_default();
            }
            "keel/error" => {
                record.error = data["message"].as_str().map(str::to_owned);
            }
            _ => {}
        }
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_stream_becomes_a_record() {
        let stream = r#"{"seq":1,"time":"t","type":"step/start","data":{"step":1}}
{"seq":2,"time":"t","type":"assistant/message","data":{"content":[{"type":"tool_call","id":"call_text_0","name":"shell","arguments":"{}"}]}}
{"type":"delta/text","data":{"text":"x"}}
{"seq":3,"time":"t","type":"tool/result","data":{"call_id":"call_text_0","name":"shell","source_seq":2,"content":"no","is_error":true,"error_code":"invalid_arguments"}}
{"seq":4,"time":"t","type":"step/start","data":{"step":2}}
{"seq":5,"time":"t","type":"user/message","data":{"text":"go on","source":"hook"}}
{"seq":6,"time":"t","type":"compaction/start","data":{"reason":"restart","tokens_before":900,"instruction":""}}
{"seq":7,"time":"t","type":"compaction/start","data":{"reason":"threshold","tokens_before":900,"instruction":"x"}}
not json
{"type":"keel/done","data":{"reason":"completed","final_text":"done","steps":2,"tool_calls":1,"usage":{"input_tokens":100,"output_tokens":7,"cached_tokens":60}}}"#;
        let record = read_events(stream);
        assert_eq!(
            record,
            RunRecord {
                reason: "completed".into(),
                steps: 2,
                tool_calls: 1,
                tool_errors: 1,
                error_codes: [("invalid_arguments".to_owned(), 1)].into(),
                tools: [("shell".to_owned(), 1)].into(),
                text_calls: 1,
                nudges: 1,
                restarts: 1,
                input_tokens: 100,
                cached_tokens: 60,
                output_tokens: 7,
                answer: "done".into(),
                ..RunRecord::default()
            }
        );
    }
}
