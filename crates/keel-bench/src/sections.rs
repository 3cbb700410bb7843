//! The benchmark sections.

use std::time::{Duration, Instant};

use keel_agent::{Agent, NullSink, SessionContext, Tool, ToolContext, ToolError, ToolOutput};
use keel_llm::{AssistantMessage, CancellationToken, ContentBlock, FinishReason, ToolCall, Usage};
use keel_session::{
    EventKind, JsonlStore, SessionStore, StepEnd, StepStart, ToolCallStarted, ToolResultData, TurnEnd,
    TurnEndReason, TurnStart, UserInput,
};
use keel_testkit::{ScriptedModel, reply};

use crate::measure::{fmt, mb, median, peak_rss, process_cpu};

/// Arguments of the echo tool.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// Text to echo.
    text: String,
}

/// A tool that costs nothing, so the loop's own cost shows.
struct Echo;

impl Tool for Echo {
    type Args = EchoArgs;
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echoes text."
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(&self, args: EchoArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(args.text))
    }
}

/// Harness CPU per step: scripted model, zero latency, a free tool, JSONL session on disk.
pub fn loop_cpu() {
    const STEPS: usize = 20;
    const RUNS: usize = 15;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut per_step_cpu = Vec::new();
    let mut per_step_wall = Vec::new();
    for _ in 0..RUNS {
        let mut script: Vec<_> = (0..STEPS - 1)
            .map(|i| {
                reply()
                    .text("Checking.")
                    .call("echo", &format!(r#"{{"text":"step {i} {}"}}"#, "x".repeat(200)))
            })
            .collect();
        script.push(reply().text("Done."));
        let model = ScriptedModel::new(script);
        model.stop_recording();
        let agent = Agent::builder(model).system_prompt("bench").tool(Echo).build();
        let mut session = store.create("/bench").unwrap();
        let cpu = process_cpu();
        let wall = Instant::now();
        runtime
            .block_on(agent.run_turn(
                &mut session,
                &SessionContext::default(),
                "go",
                &NullSink,
                &CancellationToken::new(),
            ))
            .unwrap();
        per_step_cpu.push((process_cpu() - cpu) / STEPS as u32);
        per_step_wall.push(wall.elapsed() / STEPS as u32);
    }
    println!("\n[loop] scripted model, {STEPS} steps per turn, JSONL session with fsync, {RUNS} runs");
    println!("  harness CPU per step   {}", fmt(median(&mut per_step_cpu)));
    println!("  wall per step          {}", fmt(median(&mut per_step_wall)));
}

fn assistant_call(i: usize) -> EventKind {
    EventKind::AssistantMessage(AssistantMessage {
        content: vec![
            ContentBlock::Text { text: format!("Let me look at file {i}.") },
            ContentBlock::ToolCall(ToolCall::new(
                format!("call_{i}"),
                "read_file",
                format!(r#"{{"path":"src/module_{i}.rs"}}"#),
            )),
        ],
        finish_reason: FinishReason::ToolUse,
        raw_finish_reason: Some("tool_calls".into()),
        usage: Usage { input_tokens: 1000 + i as u64, output_tokens: 40, ..Usage::default() },
        ..AssistantMessage::default()
    })
}

/// Writes a session of about `events` events: turns of 5 steps, each a call and a
/// ~600-byte result.
fn write_session(store: &JsonlStore, events: usize) -> String {
    let mut session = store.create("/bench").unwrap();
    let body = "fn example() -> u32 { 42 }\n".repeat(22);
    let mut i = 0;
    let mut turn = 0;
    while (session.next_seq() as usize) < events {
        turn += 1;
        session.append(EventKind::TurnStart(TurnStart { turn })).unwrap();
        session
            .append(EventKind::UserMessage(UserInput {
                text: format!("task {turn}"),
                source: Default::default(),
                reason: None,
                images: Vec::new(),
            }))
            .unwrap();
        for step in 1..=5 {
            i += 1;
            session.append(EventKind::StepStart(StepStart { step })).unwrap();
            let seq = session.append(assistant_call(i)).unwrap();
            session
                .append(EventKind::ToolCall(ToolCallStarted {
                    call_id: format!("call_{i}"),
                    name: "read_file".into(),
                    arguments: format!(r#"{{"path":"src/module_{i}.rs"}}"#),
                    effect: None,
                }))
                .unwrap();
            session
                .append(EventKind::ToolResult(ToolResultData {
                    call_id: format!("call_{i}"),
                    name: "read_file".into(),
                    source_seq: seq + 1,
                    content: body.clone(),
                    is_error: false,
                    error_code: None,
                    concludes_turn: false,
                    duration_ms: Some(1),
                    change: None,
                    images: Vec::new(),
                }))
                .unwrap();
            session.append(EventKind::StepEnd(StepEnd { step, interrupted: false })).unwrap();
        }
        session
            .append(EventKind::TurnEnd(TurnEnd {
                turn,
                reason: TurnEndReason::Completed,
                message: None,
                usage: Usage::default(),
            }))
            .unwrap();
    }
    session.id().to_owned()
}

/// Child process: opens, repairs and derives one session, then prints
/// `<nanoseconds> <peak rss bytes> <messages>`. Run in a fresh process so the peak is the
/// reopen's own.
pub fn reopen_child(dir: &str, id: &str) {
    let store = JsonlStore::new(dir);
    let start = Instant::now();
    let mut session = store.open(id).unwrap();
    session.repair().unwrap();
    let messages = session.messages().len();
    let elapsed = start.elapsed();
    println!("{} {} {messages}", elapsed.as_nanos(), peak_rss());
}

/// Time and peak memory to load, repair and derive a 10,000- and a 100,000-event session.
pub fn reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let exe = std::env::current_exe().unwrap();
    let baseline = child_peak(&exe, &["noop"]);
    println!("\n[reopen] load + repair + derive messages, fresh process each (median of 5)");
    println!("  process baseline peak RSS {}", mb(baseline));
    for events in [10_000usize, 100_000] {
        let id = write_session(&store, events);
        let bytes = std::fs::metadata(store.path_of(&id)).unwrap().len();
        let mut times: Vec<Duration> = Vec::new();
        let mut peaks: Vec<u64> = Vec::new();
        let mut messages = String::new();
        for _ in 0..5 {
            let out = std::process::Command::new(&exe)
                .args(["reopen-child", &dir.path().display().to_string(), &id])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let fields: Vec<&str> = text.split_whitespace().collect();
            times.push(Duration::from_nanos(fields[0].parse().unwrap()));
            peaks.push(fields[1].parse().unwrap());
            messages = fields[2].to_owned();
        }
        peaks.sort();
        println!(
            "  {events:>7} events ({}, {messages} messages): {}   peak RSS {}",
            mb(bytes),
            fmt(median(&mut times)),
            mb(peaks[peaks.len() / 2]),
        );
    }
}

fn child_peak(exe: &std::path::Path, args: &[&str]) -> u64 {
    let out = std::process::Command::new(exe).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
}
