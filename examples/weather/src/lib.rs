//! The classic tool-registry demo, as keel library use.
//!
//! Three tools — `get_weather` (deterministic fake data), `calculate` and a
//! workspace-confined `read_file` — and the task in [`TASK`], which needs five or more
//! tool calls, some of them in one message.

mod calc;

use keel_agent::{Agent, Tool, ToolContext, ToolError, ToolErrorKind, ToolOutput};
use keel_llm::ModelClient;
use schemars::JsonSchema;
use serde::Deserialize;

pub use calc::evaluate;

/// The demo task.
pub const TASK: &str =
    "Read cities.txt, get each city's temperature, and tell me the average and the coldest.";

/// The system prompt of the demo agent.
pub const SYSTEM_PROMPT: &str = "You are a weather assistant. Use the tools to look things up; never guess \
temperatures. Call independent tools in one message. Use `calculate` for arithmetic.";

/// Builds the demo agent over any model. Its file tool reads inside the workspace each
/// session's context names.
pub fn agent(model: impl ModelClient + 'static) -> Agent {
    Agent::builder(model)
        .system_prompt(SYSTEM_PROMPT)
        .tool(GetWeather)
        .tool(Calculate)
        .tool(ReadFile)
        .max_steps(12)
        .build()
}

/// Temperature unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Degrees Celsius.
    #[default]
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

/// Arguments of `get_weather`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeatherArgs {
    /// City name, e.g. "Oslo".
    pub city: String,
    /// Unit of the temperature (default celsius).
    #[serde(default)]
    pub unit: Unit,
}

/// Current weather, from a deterministic fake table.
#[derive(Debug, Clone, Copy)]
pub struct GetWeather;

/// The fake temperature of `city` in Celsius: a stable function of its name.
pub fn fake_celsius(city: &str) -> f64 {
    let key = city.trim().to_lowercase();
    let sum: u32 = key.bytes().map(u32::from).sum();
    f64::from(sum % 40) - 5.0
}

impl Tool for GetWeather {
    type Args = WeatherArgs;

    fn name(&self) -> &str {
        "get_weather"
    }

    fn description(&self) -> &str {
        "Current temperature of a city."
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: WeatherArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        if args.city.trim().is_empty() {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                "city is empty; pass a city name such as \"Oslo\"",
            ));
        }
        let celsius = fake_celsius(&args.city);
        let (value, symbol) = match args.unit {
            Unit::Celsius => (celsius, "°C"),
            Unit::Fahrenheit => (celsius * 9.0 / 5.0 + 32.0, "°F"),
        };
        Ok(ToolOutput::text(format!("{}: {value:.1} {symbol}", args.city.trim())))
    }
}

/// Arguments of `calculate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalculateArgs {
    /// Arithmetic with + - * / and parentheses, e.g. "(12 + 7.5) / 2".
    pub expression: String,
}

/// Evaluates arithmetic.
#[derive(Debug, Clone, Copy)]
pub struct Calculate;

impl Tool for Calculate {
    type Args = CalculateArgs;

    fn name(&self) -> &str {
        "calculate"
    }

    fn description(&self) -> &str {
        "Evaluates an arithmetic expression."
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: CalculateArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let value =
            evaluate(&args.expression).map_err(|e| ToolError::new(ToolErrorKind::InvalidArguments, e))?;
        Ok(ToolOutput::text(format!("{value}")))
    }
}

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// Path relative to the workspace.
    pub path: String,
}

/// Reads a text file inside the workspace.
#[derive(Debug, Clone, Copy)]
pub struct ReadFile;

impl Tool for ReadFile {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Reads a text file from the workspace."
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: ReadArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let root = tokio::fs::canonicalize(&*ctx.workspace)
            .await
            .map_err(|e| ToolError::msg(format!("workspace unavailable: {e}")))?;
        let path = tokio::fs::canonicalize(root.join(&args.path)).await.map_err(|e| {
            ToolError::new(ToolErrorKind::NotFound, format!("cannot open {}: {e}", args.path))
        })?;
        if !path.starts_with(&root) {
            return Err(ToolError::new(
                ToolErrorKind::OutsideWorkspace,
                format!("{} is outside the workspace", args.path),
            ));
        }
        let text = tokio::fs::read_to_string(&path)
            .await
            .map_err(|e| ToolError::msg(format!("cannot read {}: {e}", args.path)))?;
        Ok(ToolOutput::text(text))
    }
}
