//! The options of one request's life, shared by every API, and the options only one
//! API reads, each in its own type.

use std::time::Duration;

/// How long one request may live and how often it is tried again: the same rules on
/// every wire API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLife {
    /// Retries of a failed request (429, 5xx, connection errors) before any output.
    pub max_retries: u32,
    /// Upper bound of one retry wait, whatever `Retry-After` says.
    pub max_retry_delay: Duration,
    /// A request with no progress for this long fails: no response headers, or no
    /// output in the stream (keep-alive comments, empty chunks and status events are not
    /// progress).
    pub idle_timeout: Duration,
    /// The longest one response may take, from sending the request to its end (30 min;
    /// 2 h for local presets). Past it the request fails, whatever is still arriving.
    pub response_deadline: Duration,
    /// After a chunk with a finish reason, how long to wait for the stream's end (a
    /// usage chunk, `[DONE]`, the body's end) before completing the message anyway: a
    /// server that holds the connection open loses nothing.
    pub finish_grace: Duration,
}

impl Default for RequestLife {
    fn default() -> Self {
        RequestLife {
            max_retries: 4,
            max_retry_delay: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            response_deadline: Duration::from_secs(30 * 60),
            finish_grace: Duration::from_millis(1500),
        }
    }
}

/// Options only Chat Completions reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChatOptions {
    /// The field name for the output cap.
    pub max_tokens_field: MaxTokensField,
    /// When reasoning text is sent back (the other APIs send back what their model
    /// signed or encrypted, to that model only).
    pub reasoning_replay: ReasoningReplay,
}

/// Options only Anthropic Messages reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnthropicOptions {
    /// Extended thinking.
    pub thinking: Thinking,
}

/// Options only OpenAI Responses reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponsesOptions {
    /// `reasoning.effort`: `minimal`, `low`, `medium`, `high`; none leaves the model's
    /// default.
    pub reasoning_effort: Option<String>,
    /// `reasoning.summary`: `auto`, `concise`, `detailed`; none asks for no summaries.
    /// Models without reasoning refuse the `reasoning` parameter.
    pub reasoning_summary: Option<String>,
}

/// Anthropic extended thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Thinking {
    /// No `thinking` parameter: the model does not think.
    #[default]
    Off,
    /// `{"type": "adaptive"}`: the model decides when and how much (Claude 4.6 and
    /// later; thinking between tool calls comes with it).
    Adaptive,
    /// `{"type": "enabled", "budget_tokens": n}` (older models), with the
    /// interleaved-thinking beta so the model thinks between tool calls too. The budget
    /// is kept below `max_tokens`.
    Budget(u32),
}

impl Thinking {
    /// Parses `off`, `adaptive` or a token budget (at least 1024).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "off" | "none" | "0" => Some(Thinking::Off),
            "adaptive" | "on" => Some(Thinking::Adaptive),
            number => number.parse::<u32>().ok().filter(|n| *n >= 1024).map(Thinking::Budget),
        }
    }
}

/// When reasoning text is sent back to the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReasoningReplay {
    /// Never (providers that reject unknown message fields).
    #[default]
    Never,
    /// On assistant messages that made tool calls (DeepSeek thinking mode requires it
    /// there and ignores it elsewhere).
    ToolTurns,
    /// On every assistant message that has reasoning.
    Always,
}

impl ReasoningReplay {
    /// Parses `never`, `tool_turns` or `always`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "never" => Some(Self::Never),
            "tool_turns" => Some(Self::ToolTurns),
            "always" => Some(Self::Always),
            _ => None,
        }
    }
}

/// Which body field carries the output cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_tokens` (most servers).
    #[default]
    MaxTokens,
    /// `max_completion_tokens` (OpenAI's newer models reject `max_tokens`).
    MaxCompletionTokens,
}
