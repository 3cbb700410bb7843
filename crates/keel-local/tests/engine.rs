#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Opt-in: a real two-step task with the embedded model. Runs only when
//! `KEEL_LOCAL_MODEL` names a GGUF file (`../shared/local-llm/setup.sh` assembles the
//! Qwen2.5-Coder files); otherwise it passes without doing anything.

#[cfg(feature = "llama")]
mod with_llama {
    use keel_agent::{Agent, NullSink, Session, SessionContext, Tool, ToolContext, ToolError, ToolOutput};
    use keel_llm::{CancellationToken, Message};
    use keel_local::engine::{LocalConfig, LocalModel};
    use keel_session::TurnEndReason;
    use schemars::JsonSchema;
    use serde::Deserialize;

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

    fn model_path() -> Option<std::path::PathBuf> {
        std::env::var_os("KEEL_LOCAL_MODEL").map(Into::into).filter(|p: &std::path::PathBuf| p.is_file())
    }

    #[test]
    fn a_real_two_step_task_in_process_with_kv_cache_reuse() {
        let Some(path) = model_path() else {
            eprintln!("skipped: set KEEL_LOCAL_MODEL to a GGUF file to run this test");
            return;
        };
        let mut config = LocalConfig::new(path);
        config.prefix_cache = None;
        config.temperature = 0.0;
        config.n_ctx = 4096;
        config.max_tokens = 256;
        let model = std::sync::Arc::new(LocalModel::load(config).unwrap());
        let agent = Agent::builder_shared(model.clone())
            .system_prompt("You are a helpful assistant. Use the tools to answer.")
            .tool(Weather)
            .max_steps(4)
            .build();
        let mut session = Session::in_memory("/tmp");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let outcome = runtime
            .block_on(agent.run_turn(
                &mut session,
                &SessionContext::default(),
                "What is the weather in Paris right now?",
                &NullSink,
                &CancellationToken::new(),
            ))
            .unwrap();
        eprintln!("final: {:?}", outcome.final_text);
        for stats in model.stats() {
            eprintln!("step: {stats:?}");
        }
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
        assert!(stats[1].reused_tokens > 0, "the second step reused the KV cache");
        assert!(stats[1].evaluated_tokens < stats[1].prompt_tokens);
    }

    #[test]
    fn a_tool_call_is_sampled_under_the_grammar_and_is_valid() {
        let Some(path) = model_path() else { return };
        let tools = keel_agent::ToolRegistry::new().register(Weather).clone();
        let messages = vec![Message::User(keel_llm::UserMessage {
            content: "What is the weather in Paris right now? Use the tool.".into(),
        })];
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for seed in 1..=3 {
            let mut config = LocalConfig::new(&path);
            config.prefix_cache = None;
            config.n_ctx = 2048;
            config.max_tokens = 128;
            config.seed = seed;
            let model = LocalModel::load(config).unwrap();
            let message = runtime.block_on(async {
                use futures::StreamExt;
                let request = keel_llm::ModelRequest::new(
                    "You are a helpful assistant.",
                    &messages,
                    tools.definitions(),
                );
                let mut stream = keel_llm::ModelClient::stream(&model, request, CancellationToken::new());
                let mut last = None;
                while let Some(event) = stream.next().await {
                    if let Ok(keel_llm::ModelEvent::Completed(message)) = event {
                        last = Some(message);
                    }
                }
                last.expect("a completed message")
            });
            let stats = *model.stats().last().unwrap();
            eprintln!("seed {seed}: {message:?} {stats:?}");
            let call = message.tool_calls().next().expect("a tool call");
            assert!(stats.constrained, "the call was sampled under the grammar");
            assert_eq!(call.name, "get_weather");
            let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
            assert!(args["city"].as_str().is_some_and(|c| c.contains("Paris")), "{args}");
            assert_eq!(args.as_object().unwrap().len(), 1, "{args}");
        }
    }

    #[test]
    fn cancellation_stops_generation_between_tokens() {
        let Some(path) = model_path() else { return };
        let mut config = LocalConfig::new(path);
        config.prefix_cache = None;
        config.max_tokens = 4096;
        let model = LocalModel::load(config).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let messages =
            vec![Message::User(keel_llm::UserMessage { content: "Write a very long story.".into() })];
        let cancel = CancellationToken::new();
        let started = std::time::Instant::now();
        runtime.block_on(async {
            use futures::StreamExt;
            let request = keel_llm::ModelRequest::new("", &messages, &[]);
            let mut stream = keel_llm::ModelClient::stream(&model, request, cancel.clone());
            let mut deltas = 0;
            while let Some(event) = stream.next().await {
                if matches!(event, Ok(keel_llm::ModelEvent::TextDelta(_))) {
                    deltas += 1;
                    if deltas == 5 {
                        cancel.cancel();
                        break;
                    }
                }
            }
        });
        // The worker notices at the next token and is free for the next request.
        let again = runtime.block_on(async {
            use futures::StreamExt;
            let request = keel_llm::ModelRequest::new("", &messages, &[]);
            keel_llm::ModelClient::stream(&model, request, CancellationToken::new()).next().await
        });
        assert!(again.is_some());
        assert!(started.elapsed() < std::time::Duration::from_secs(120));
    }

    #[test]
    fn a_new_process_starts_from_the_prefix_saved_on_disk() {
        let Some(path) = model_path() else { return };
        let dir = tempfile::tempdir().unwrap();
        let mut config = LocalConfig::new(path);
        config.prefix_cache = Some(dir.path().to_path_buf());
        config.max_tokens = 1;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let system = "You are a careful assistant. ".repeat(60);
        let ask = |model: &LocalModel, question: &str| {
            let messages = vec![Message::User(keel_llm::UserMessage { content: question.into() })];
            runtime.block_on(async {
                use futures::StreamExt;
                let request = keel_llm::ModelRequest::new(&system, &messages, &[]);
                let mut stream = keel_llm::ModelClient::stream(model, request, CancellationToken::new());
                while stream.next().await.is_some() {}
            });
            *model.stats().last().unwrap()
        };
        let first = LocalModel::load(config.clone()).unwrap();
        let cold = ask(&first, "What is 2 + 2?");
        drop(first);
        let second = LocalModel::load(config).unwrap();
        let warm = ask(&second, "Name a prime number.");
        assert_eq!(cold.reused_tokens, 0);
        assert!(warm.reused_tokens >= 300, "{warm:?}");
        assert!(warm.evaluated_tokens < cold.evaluated_tokens / 4, "{cold:?} then {warm:?}");
    }

    #[test]
    fn a_gguf_without_a_chat_template_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("base.gguf");
        keel_local::gguf::write_test_file(
            &path,
            &[("general.architecture", keel_local::gguf::MetaValue::Str("llama".into()))],
        )
        .unwrap();
        let err = LocalModel::load(LocalConfig::new(&path)).unwrap_err().to_string();
        assert!(err.contains("has no chat template"), "{err}");
    }
}
