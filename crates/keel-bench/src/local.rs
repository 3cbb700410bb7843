//! Section `local` (feature `local`): the embedded model against llama-server on the
//! same file and threads, and prompt tokens evaluated per step with and without KV
//! cache reuse. Needs `KEEL_LOCAL_MODEL`; `KEEL_LLAMA_SERVER` (a base URL such as
//! http://127.0.0.1:8091/v1, started with ../shared/local-llm/serve.sh) adds the server
//! column.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keel_llm::{
    AssistantMessage, CancellationToken, ContentBlock, Message, ModelClient, ModelRequest, ToolCall,
    ToolResultMessage, UserMessage,
};
use keel_local::engine::{LocalConfig, LocalModel, RequestStats};
use keel_tools::{ToolsConfig, builtin};

fn conversation(steps: usize) -> Vec<Message> {
    let mut messages = vec![Message::User(UserMessage::text(crate::trajectory::TASK))];
    let calls = [
        ("list_files", "{}", "README.md\ndata/\ndata/numbers.txt\nhello.py"),
        (
            "read_file",
            r#"{"path": "README.md"}"#,
            "1\t# Demo\n2\t\n3\tA tiny project: hello.py prints a greeting.",
        ),
        ("shell", r#"{"command": "python3 hello.py"}"#, "hello from the demo\n[exit code: 0]"),
        (
            "write_file",
            r##"{"path": "NOTES.md", "content": "# Notes\n- hello.py prints a greeting\n"}"##,
            "Created NOTES.md (40 bytes, 2 lines).",
        ),
        ("shell", r#"{"command": "cat NOTES.md"}"#, "# Notes\n- hello.py prints a greeting\n[exit code: 0]"),
    ];
    for (i, (name, args, result)) in calls.iter().take(steps).enumerate() {
        let id = format!("call_{i}");
        messages.push(Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::ToolCall(ToolCall::new(id.clone(), *name, *args))],
            ..AssistantMessage::default()
        }));
        messages.push(Message::ToolResult(ToolResultMessage {
            call_id: id,
            name: (*name).into(),
            content: (*result).into(),
            is_error: false,
            images: Vec::new(),
        }));
    }
    messages
}

fn run(runtime: &tokio::runtime::Runtime, model: &LocalModel, messages: &[Message], with_tools: bool) {
    let tools = builtin(Arc::new(ToolsConfig::default()));
    let definitions = if with_tools { tools.definitions() } else { &[] };
    let request =
        ModelRequest::new("You are keel, a coding agent in a project folder.", messages, definitions);
    runtime.block_on(async {
        let mut stream = model.stream(request, CancellationToken::new());
        while let Some(event) = stream.next().await {
            if event.is_err() {
                break;
            }
        }
    });
}

/// A prompt that makes both engines generate up to the 128-token cap.
const SPEED_PROMPT: &str = "Count from one to two hundred in English words, one number per line, with no other text. \
Here is the format: one, two, three, four, five, and so on. Do not stop early; the list must be complete.";

fn per_second(tokens: usize, time: Duration) -> f64 {
    tokens as f64 / time.as_secs_f64().max(1e-9)
}

fn server_speed(url: &str, runtime: &tokio::runtime::Runtime) -> Option<(f64, f64)> {
    let body = serde_json::json!({
        "messages": [{"role": "user", "content": SPEED_PROMPT}],
        "max_tokens": 128, "temperature": 0, "cache_prompt": false
    });
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let response = client.post(format!("{url}/chat/completions")).json(&body).send().await.ok()?;
        let value: serde_json::Value = response.json().await.ok()?;
        Some((
            value["timings"]["prompt_per_second"].as_f64()?,
            value["timings"]["predicted_per_second"].as_f64()?,
        ))
    })
}

/// Prints the local-model figures.
pub fn local() {
    let Some(path) = std::env::var_os("KEEL_LOCAL_MODEL") else {
        println!(
            "\n[local] skipped: set KEEL_LOCAL_MODEL to a GGUF file (and KEEL_LLAMA_SERVER to compare with llama-server)"
        );
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut config = LocalConfig::new(&path);
    config.prefix_cache = None;
    config.temperature = 0.0;
    config.max_tokens = 128;
    config.threads = Some(threads);
    // `KEEL_LOCAL_KERNELS` and `KEEL_LOCAL_VARIANT` measure other kernels.
    config.kernels =
        std::env::var("KEEL_LOCAL_KERNELS").ok().and_then(|k| k.parse().ok()).unwrap_or_default();
    config.variant = std::env::var("KEEL_LOCAL_VARIANT").ok().filter(|v| !v.is_empty());
    config.kernel_memory = None;
    let model = runtime.block_on(LocalModel::load(config.clone())).unwrap();
    println!(
        "\n[local] {} with {threads} threads, kernels {}",
        std::path::Path::new(&path).display(),
        model.kernels().describe()
    );
    // Speed: the same prompt as the server gets.
    run(&runtime, &model, &[Message::User(UserMessage::text(SPEED_PROMPT))], false);
    let speed: RequestStats = *model.stats().last().unwrap();
    println!(
        "  embedded:      prompt {:.0} tok/s ({} tokens), generation {:.1} tok/s ({} tokens)",
        per_second(speed.evaluated_tokens, speed.prompt_time),
        speed.evaluated_tokens,
        per_second(speed.generated_tokens, speed.generation_time),
        speed.generated_tokens
    );
    match std::env::var("KEEL_LLAMA_SERVER").ok().and_then(|url| server_speed(&url, &runtime)) {
        Some((prompt_tps, gen_tps)) => {
            println!("  llama-server:  prompt {prompt_tps:.0} tok/s, generation {gen_tps:.1} tok/s")
        }
        None => println!("  llama-server:  (set KEEL_LLAMA_SERVER to a running server's base URL)"),
    }
    // KV cache reuse over the six steps of the scripted task (one token generated each).
    let mut with_reuse = config.clone();
    with_reuse.max_tokens = 1;
    let mut without = with_reuse.clone();
    without.reuse_cache = false;
    drop(model);
    let reuse = runtime.block_on(LocalModel::load(with_reuse)).unwrap();
    let no_reuse = runtime.block_on(LocalModel::load(without)).unwrap();
    for step in 0..6 {
        let messages = conversation(step);
        run(&runtime, &reuse, &messages, true);
        run(&runtime, &no_reuse, &messages, true);
    }
    let (reuse, no_reuse) = (reuse.stats(), no_reuse.stats());
    // A new process with the on-disk prefix cache: the first request of a run shares
    // the system prompt and tools with the previous run's.
    let dir = tempfile::tempdir().unwrap();
    let mut cached_config = config.clone();
    cached_config.max_tokens = 1;
    cached_config.prefix_cache = Some(dir.path().to_path_buf());
    let first = runtime.block_on(LocalModel::load(cached_config.clone())).unwrap();
    run(&runtime, &first, &conversation(0), true);
    let before = *first.stats().last().unwrap();
    drop(first);
    let second = runtime.block_on(LocalModel::load(cached_config)).unwrap();
    let mut other_task = conversation(0);
    other_task[0] = Message::User(UserMessage::text("Find the TODO comments in this project."));
    run(&runtime, &second, &other_task, true);
    let after = *second.stats().last().unwrap();
    println!(
        "  first request of a process: {} of {} tokens evaluated ({} ms); next process, another task: {} of {} ({} ms, prefix from disk)",
        before.evaluated_tokens,
        before.prompt_tokens,
        before.prompt_time.as_millis(),
        after.evaluated_tokens,
        after.prompt_tokens,
        after.prompt_time.as_millis()
    );
    println!("  prompt tokens evaluated per step (6-step task, all tools offered):");
    println!("    step  prompt  evaluated with reuse  evaluated without  prompt time with / without");
    for (i, (a, b)) in reuse.iter().zip(no_reuse.iter()).enumerate() {
        println!(
            "    {:>4}  {:>6}  {:>20}  {:>17}  {:>8.0} ms / {:.0} ms",
            i + 1,
            a.prompt_tokens,
            a.evaluated_tokens,
            b.evaluated_tokens,
            a.prompt_time.as_secs_f64() * 1000.0,
            b.prompt_time.as_secs_f64() * 1000.0
        );
    }
}
