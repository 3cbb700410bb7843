#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The README's library example compiles as written: its lines are the body of
//! [`readme_example`] below, and a test fails when the README and this file differ.

/// The README's example, line for line between the markers (never run: it calls a real
/// provider).
#[allow(dead_code)]
#[rustfmt::skip]
async fn readme_example() -> Result<(), Box<dyn std::error::Error>> {
    // README START
    use keel_agent::{Agent, NullSink, Session, SessionContext};
    use keel_llm::{CancellationToken, Preset, ProviderConfig};

    let mut config: ProviderConfig = Preset::find("anthropic").and_then(|p| p.config(None)).expect("preset");
    config.api_key = std::env::var("ANTHROPIC_API_KEY").ok();
    let model = config.client()?;                          // Arc<dyn ModelClient>, for config.api
    let agent = Agent::builder_shared(model)
        .system_prompt("You are a careful assistant.")
        .tools(keel_tools::builtin(Default::default()))   // or .tool(MyTool): schema from its Args type
        .build();
    let mut session = Session::in_memory(".");            // or JsonlStore::new(dir).create(cwd)?
    let ctx = SessionContext::new(".");                   // per session: workspace, inbox, model override
    let outcome = agent.run_turn(&mut session, &ctx, "task", &NullSink, &CancellationToken::new()).await?;
    println!("{}", outcome.final_text);
    // README END
    Ok(())
}

#[test]
fn the_readme_example_is_the_one_compiled_here() {
    let here = include_str!("readme_example.rs");
    let start = here.find("// README START\n").unwrap() + "// README START\n".len();
    let end = here.find("    // README END").unwrap();
    let compiled: Vec<&str> = here[start..end].lines().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect();
    let readme = include_str!("../../../README.md");
    let block = readme
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("```\n").next())
        .expect("a rust block in the README");
    let shown: Vec<&str> = block.lines().collect();
    assert_eq!(shown, compiled, "README's library example and tests/readme_example.rs differ");
}
