//! Runs the weather demo and prints each step.
//!
//! Without configuration it replays the scripted trajectory a good model takes, so the
//! loop can be watched with no account and no server. With `KEEL_PROVIDER` (a preset
//! such as `deepseek` or `llamacpp`) or `KEEL_BASE_URL` + `KEEL_MODEL` set, it runs
//! against that real model (key from `KEEL_API_KEY` or the preset's variable).

use std::time::Instant;

use keel_agent::{AgentEvent, Session, SessionContext, Sink};
use keel_example_weather::{TASK, agent, fake_celsius};
use keel_llm::{CancellationToken, ModelClient};
use keel_llm::{HttpClient, Preset, ProviderConfig};
use keel_testkit::{ScriptedModel, reply};

/// Prints one line per finished tool call.
struct Lines;

impl Sink for Lines {
    fn emit(&self, event: &AgentEvent<'_>) {
        if let AgentEvent::ToolFinished { step, call, result, duration } = event {
            let mark = if result.is_error { "✗" } else { "✓" };
            eprintln!(
                "  step {step} {mark} {}({}) -> {} [{:.1} ms]",
                call.name,
                call.arguments,
                result.content.trim().replace('\n', " | "),
                duration.as_secs_f64() * 1000.0
            );
        }
    }
}

fn scripted() -> ScriptedModel {
    let (oslo, cairo, lima) = (fake_celsius("Oslo"), fake_celsius("Cairo"), fake_celsius("Lima"));
    let coldest = [("Oslo", oslo), ("Cairo", cairo), ("Lima", lima)]
        .into_iter()
        .fold(("", f64::MAX), |a, b| if b.1 < a.1 { b } else { a });
    ScriptedModel::new([
        reply().call("read_file", r#"{"path":"cities.txt"}"#),
        reply()
            .call("get_weather", r#"{"city":"Oslo"}"#)
            .call("get_weather", r#"{"city":"Cairo"}"#)
            .call("get_weather", r#"{"city":"Lima"}"#),
        reply().call("calculate", &format!(r#"{{"expression":"({oslo} + {cairo} + {lima}) / 3"}}"#)),
        reply().text(&format!(
            "The average is {:.1} °C; the coldest city is {} at {:.1} °C.",
            (oslo + cairo + lima) / 3.0,
            coldest.0,
            coldest.1
        )),
    ])
}

/// A real model from the environment, if one is configured.
fn real_model() -> Result<Option<HttpClient>, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let model = var("KEEL_MODEL");
    let mut config = match (var("KEEL_PROVIDER"), var("KEEL_BASE_URL")) {
        (Some(name), base) => {
            let preset = Preset::find(&name).ok_or(format!("unknown provider {name}"))?;
            let mut config = preset.config(model.as_deref()).ok_or("set KEEL_MODEL")?;
            if let Some(base) = base {
                config.base_url = base;
            }
            config
        }
        (None, Some(base)) => ProviderConfig::new(base, model.ok_or("set KEEL_MODEL")?),
        (None, None) => return Ok(None),
    };
    config.api_key = var("KEEL_API_KEY").or_else(|| config.api_key_env.as_deref().and_then(var));
    HttpClient::new(config).map(Some).map_err(|e| e.message)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = std::env::temp_dir().join(format!("keel-weather-{}", std::process::id()));
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(workspace.join("cities.txt"), "Oslo\nCairo\nLima\n")?;
    let model: Box<dyn ModelClient> = match real_model()? {
        Some(client) => {
            eprintln!("task: {TASK}\nmodel: {} at {}", client.config().model, client.config().base_url);
            Box::new(client)
        }
        None => {
            eprintln!("task: {TASK}\nmodel: scripted (replays a good model's trajectory)");
            Box::new(scripted())
        }
    };
    let agent = agent(model);
    let mut session = Session::in_memory(&workspace.display().to_string());
    let start = Instant::now();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::new(&workspace), TASK, &Lines, &CancellationToken::new())
        .await?;
    eprintln!(
        "{} steps, {} tool calls, {:?}, {:.1} ms",
        outcome.steps,
        outcome.tool_calls,
        outcome.reason,
        start.elapsed().as_secs_f64() * 1000.0
    );
    println!("{}", outcome.final_text);
    std::fs::remove_dir_all(&workspace)?;
    Ok(())
}
