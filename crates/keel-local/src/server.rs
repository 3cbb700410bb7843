//! llama.cpp's own server (`llama-server`) driven the way the embedded engine is: keel
//! renders the model's chat template itself (read once from `/props`, mended like the
//! embedded one), constrains a required tool call with its grammar, and posts the prompt
//! to the native `/completion` endpoint ([`keel_llm::completion`]: streamed, retried and
//! bounded by the transport every API shares). Over Chat Completions the server neither
//! honours `tool_choice: "required"` for Qwen2.5 nor accepts a grammar together with
//! tools, so a small model there wrote prose and fenced calls; here its calls are valid
//! by construction, as with `--local`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use keel_llm::completion::{
    CompletionClient, CompletionReply, CompletionRequest, FinishReply, until_cancelled,
};
use keel_llm::repeats::RESAMPLE_TEMPERATURE;
use keel_llm::{
    AssistantMessage, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelInfo, ModelRequest,
    ModelStream, ProviderConfig, ToolChoice, ToolDefinition,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::grammar::{self, CallStyle};
use crate::reply::{Finished, finish_message};
use crate::template::ChatTemplate;

/// What `/props` tells once: the template and how calls are written.
struct Prepared {
    template: ChatTemplate,
    style: CallStyle,
}

/// A `ModelClient` for llama-server's `/completion` with keel's template and grammar.
pub struct TemplatedServer {
    completion: CompletionClient,
    config: ProviderConfig,
    prepared: tokio::sync::OnceCell<Prepared>,
    grammars: Mutex<Option<(Vec<ToolDefinition>, Arc<str>)>>,
    seed: Option<u64>,
}

/// Temperature inside a required call, as the embedded engine's `call_temperature`:
/// names, paths and commands want the likeliest tokens.
pub const CALL_TEMPERATURE: f32 = 0.2;

/// A finished reply becomes a message as the embedded engine's does: calls to `tools`
/// written as text become real calls, text before the first becomes reasoning.
struct Calls {
    tools: Vec<String>,
}

impl FinishReply for Calls {
    fn finish(&self, reply: CompletionReply) -> AssistantMessage {
        let finished = Finished {
            text: reply.text,
            finish: reply.finish,
            prompt_tokens: reply.prompt_tokens,
            generated_tokens: reply.generated_tokens,
            reused_tokens: reply.cached_tokens,
        };
        finish_message(finished, &self.tools)
    }
}

impl TemplatedServer {
    /// A client for the server at `config.base_url` (with or without `/v1`); nothing is
    /// asked of the server until the first request.
    pub fn new(config: ProviderConfig) -> Result<TemplatedServer, ModelError> {
        Ok(TemplatedServer {
            completion: CompletionClient::new(&config)?,
            config,
            prepared: tokio::sync::OnceCell::new(),
            grammars: Mutex::new(None),
            seed: None,
        })
    }

    /// Sends `seed` with every request (runs can be repeated).
    pub fn seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }

    /// Reads the chat template and special tokens from `/props`.
    async fn prepare(&self) -> Result<&Prepared, ModelError> {
        self.prepared
            .get_or_try_init(|| async {
                let props = self.completion.props().await?;
                let text = |key: &str| props.get(key).and_then(Value::as_str).unwrap_or("");
                let source = text("chat_template");
                if source.trim().is_empty() {
                    return Err(ModelError::new(
                        ModelErrorKind::Config,
                        format!(
                            "{}/props names no chat_template; start llama-server with --jinja, or set grammar = false",
                            self.completion.root()
                        ),
                    ));
                }
                let template =
                    ChatTemplate::new(&crate::template::mend(source), text("bos_token"), text("eos_token"))
                        .map_err(|e| ModelError::new(ModelErrorKind::Config, e.to_string()))?;
                Ok(Prepared { template, style: CallStyle::of_template(source) })
            })
            .await
    }

    /// The one-call grammar for `tools`, built once per tool set.
    fn grammar_for(&self, tools: &[ToolDefinition], style: CallStyle) -> Option<Arc<str>> {
        let mut cache = self.grammars.lock().ok()?;
        if let Some((cached, text)) = cache.as_ref()
            && cached.as_slice() == tools
        {
            return Some(Arc::clone(text));
        }
        let text: Arc<str> = Arc::from(grammar::tool_calls(tools, style, 1, 0)?);
        *cache = Some((tools.to_vec(), Arc::clone(&text)));
        Some(text)
    }

    /// What goes to `/completion` for `request`, and how its reply becomes a message.
    fn ask(
        &self,
        prepared: &Prepared,
        request: &ModelRequest<'_>,
    ) -> Result<(CompletionRequest, Calls), ModelError> {
        let prompt = prepared
            .template
            .render(request.system, request.messages, request.tools)
            .map_err(|e| ModelError::new(ModelErrorKind::Config, e.to_string()))?;
        let tools: Vec<String> = match request.tool_choice {
            ToolChoice::None => Vec::new(),
            _ => request.tools.iter().map(|t| t.name.clone()).collect(),
        };
        // A required call is sampled under the grammar from the first token, at the call
        // temperature unless one is configured; otherwise the reply is free (the server's
        // sampling) and calls written as text are still recovered.
        let grammar = match request.tool_choice {
            ToolChoice::Required => self.grammar_for(request.tools, prepared.style),
            _ => None,
        };
        let temperature =
            request.temperature.or(self.config.temperature).or(grammar.as_ref().map(|_| CALL_TEMPERATURE));
        let ask = CompletionRequest {
            prompt,
            max_tokens: request.token_cap(self.config.max_tokens),
            temperature,
            grammar,
            seed: self.seed,
        };
        Ok((ask, Calls { tools }))
    }
}

/// The reply to `ask`. One the transport stopped for writing the same line over and
/// over ([`ModelErrorKind::Repeating`]) is asked for once more, hotter and with another
/// seed, as the embedded engine samples a stuck reply again (a `Retrying` event tells the
/// loop to drop what it had of the first); stuck a second time, it fails.
fn sampled_again_when_stuck<'a>(
    completion: &'a CompletionClient,
    ask: CompletionRequest,
    finish: Arc<Calls>,
    cancel: CancellationToken,
) -> ModelStream<'a> {
    let first = completion.stream(&ask, Arc::clone(&finish) as Arc<dyn FinishReply>, cancel.clone());
    let state = (first, Some((ask, finish, cancel)));
    Box::pin(futures::stream::unfold(Some(state), move |state| async move {
        let (mut stream, again) = state?;
        match stream.next().await {
            Some(Err(error)) if error.kind == ModelErrorKind::Repeating => {
                // The stuck reply's connection closes here, which ends its generation.
                drop(stream);
                let Some((mut ask, finish, cancel)) = again else {
                    let error = ModelError::new(
                        ModelErrorKind::Repeating,
                        format!(
                            "{}, also when sampled again; try rephrasing the task or a larger model",
                            error.message
                        ),
                    );
                    return Some((Err(error), None));
                };
                ask.temperature =
                    Some(ask.temperature.map_or(RESAMPLE_TEMPERATURE, |t| t.max(RESAMPLE_TEMPERATURE)));
                ask.seed = Some(ask.seed.map_or(1, |seed| seed.wrapping_add(1)));
                let retry = completion.stream(&ask, finish, cancel);
                let retrying = ModelEvent::Retrying {
                    attempt: 1,
                    max_retries: 1,
                    delay: Duration::ZERO,
                    reason: format!("{}; sampling again", error.message),
                };
                Some((Ok(retrying), Some((retry, None))))
            }
            Some(item) => Some((item, Some((stream, again)))),
            None => None,
        }
    }))
}

/// Whether a llama-server's `/props` shows a chat template that writes calls as
/// `<tool_call>` (Qwen, Hermes): the family this route was measured on.
pub fn writes_tagged_calls(props: &Value) -> bool {
    let template = props.get("chat_template").and_then(Value::as_str).unwrap_or("");
    CallStyle::of_template(template) == CallStyle::Tagged
}

impl ModelClient for TemplatedServer {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: self.config.provider.clone(), model: self.config.model.clone() }
    }

    fn context_window(&self) -> Option<u64> {
        self.config.context_window
    }

    /// The prompt is rendered to text by a chat template: no images.
    fn accepts_images(&self) -> Option<bool> {
        Some(false)
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let start = async move {
            let prepared = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ModelError::new(ModelErrorKind::Cancelled, "generation stopped")),
                prepared = self.prepare() => prepared,
            };
            match prepared.and_then(|prepared| self.ask(prepared, &request)) {
                Ok((ask, calls)) => sampled_again_when_stuck(&self.completion, ask, Arc::new(calls), cancel),
                Err(error) => until_cancelled(Box::pin(futures::stream::once(async { Err(error) })), cancel),
            }
        };
        Box::pin(futures::stream::once(start).flatten())
    }
}
