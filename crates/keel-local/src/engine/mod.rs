//! The embedded model: llama.cpp in a worker thread, behind `keel_llm::ModelClient`.
//!
//! One OS thread owns the weights and the context (llama.cpp contexts are not shared
//! between threads). A request renders the model's own chat template, tokenizes it,
//! re-evaluates only the tokens after the longest prefix shared with the previous
//! request (KV cache reuse), then samples token by token, streaming text deltas and
//! checking for cancellation between tokens. When the model opens a tool call, sampling
//! follows a grammar built from the tool schemas, so the call is valid by construction
//! (see [`crate::grammar`]).

mod prefix_cache;
mod sampling;
mod worker;

use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_llm::{
    CancellationToken, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelInfo, ModelRequest,
    ModelStream, ToolChoice, ToolDefinition,
};
use tokio::sync::mpsc;

use crate::LocalError;
use crate::grammar::{self, CallStyle};
use crate::template::ChatTemplate;
use worker::{Job, Piece};

/// Settings of the embedded model.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// Context size in tokens (default 8192).
    pub n_ctx: u32,
    /// CPU threads (default: all cores).
    pub threads: Option<usize>,
    /// Output cap per reply (default 2048).
    pub max_tokens: u32,
    /// Sampling temperature for text; 0 is greedy (default 0.7).
    pub temperature: f32,
    /// Sampling temperature inside a tool call (default 0.2): names, paths and commands
    /// want the model's most likely choice.
    pub call_temperature: f32,
    /// Constrain tool calls with a grammar built from the tool schemas (default on).
    pub grammar: bool,
    /// Most calls in one reply under the grammar (default 1: a small model that chains
    /// calls without seeing their results invents the results).
    pub max_calls_per_reply: usize,
    /// Characters of free text allowed before a required call (default 0: none). A short
    /// thought ("the typo is on line 5") was meant to make a small model's next call
    /// better; measured on the real-task suite, the 1.5B model passed as many tasks
    /// without it, with 40% fewer output tokens.
    pub thought_chars: usize,
    /// Sampling seed.
    pub seed: u32,
    /// Reuse the KV cache across requests (default on; off only for measuring).
    pub reuse_cache: bool,
    /// Keep evaluated prompt prefixes on disk so the next process starts from them
    /// (default on): the system prompt and tools are not evaluated again.
    pub prefix_cache: Option<PathBuf>,
}

impl LocalConfig {
    /// Defaults for `model_path`.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        LocalConfig {
            model_path: model_path.into(),
            n_ctx: 8192,
            threads: None,
            max_tokens: 2048,
            temperature: 0.7,
            call_temperature: 0.2,
            grammar: true,
            max_calls_per_reply: 1,
            thought_chars: 0,
            seed: 42,
            reuse_cache: true,
            prefix_cache: Some(crate::models::cache_dir().join("prefixes")),
        }
    }
}

/// What one request cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RequestStats {
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Of those, tokens whose KV entries were reused from the previous request.
    pub reused_tokens: usize,
    /// Tokens evaluated (prompt minus reused).
    pub evaluated_tokens: usize,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Time evaluating the prompt.
    pub prompt_time: Duration,
    /// Time generating.
    pub generation_time: Duration,
    /// True when a tool call was sampled under the grammar.
    pub constrained: bool,
}

/// A model running inside this process.
pub struct LocalModel {
    jobs: Mutex<std_mpsc::Sender<Job>>,
    template: Arc<ChatTemplate>,
    style: CallStyle,
    grammar: bool,
    max_calls: usize,
    thought: usize,
    grammars: Mutex<Option<(Vec<ToolDefinition>, Arc<str>)>>,
    name: String,
    max_tokens: u32,
    n_ctx: u32,
    stats: Arc<Mutex<Vec<RequestStats>>>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel").field("name", &self.name).finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Loads the model (a second or more on this kind of machine). A file that is not
    /// GGUF, or a GGUF without a chat template, is a clear error.
    pub fn load(config: LocalConfig) -> Result<LocalModel, LocalError> {
        let meta = crate::gguf::read_meta(&config.model_path)?;
        let template_source = meta.chat_template().map(str::to_owned).ok_or_else(|| {
            LocalError::Template(format!(
                "{} has no chat template (tokenizer.chat_template), so keel cannot format a conversation for it; use an instruct model's GGUF",
                config.model_path.display()
            ))
        })?;
        let name =
            config.model_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let style = CallStyle::of_template(&template_source);
        let (job_tx, job_rx) = std_mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let stats = Arc::new(Mutex::new(Vec::new()));
        let worker_stats = Arc::clone(&stats);
        let max_tokens = config.max_tokens;
        let grammar = config.grammar;
        let max_calls = config.max_calls_per_reply;
        let thought = config.thought_chars;
        std::thread::Builder::new()
            .name("keel-llama".into())
            .spawn(move || worker::run(config, style, job_rx, ready_tx, worker_stats))
            .map_err(|e| LocalError::Engine(format!("cannot start the model thread: {e}")))?;
        let loaded = ready_rx
            .recv()
            .map_err(|_| LocalError::Engine("the model thread stopped while loading".into()))??;
        let template = ChatTemplate::new(&crate::template::mend(&template_source), &loaded.bos, &loaded.eos)?;
        Ok(LocalModel {
            jobs: Mutex::new(job_tx),
            template: Arc::new(template),
            style,
            grammar,
            max_calls,
            thought,
            grammars: Mutex::new(None),
            name,
            max_tokens,
            n_ctx: loaded.n_ctx,
            stats,
        })
    }

    /// Per-request costs so far, in order.
    pub fn stats(&self) -> Vec<RequestStats> {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Renders the prompt a request would send (for tests and inspection).
    pub fn render(&self, request: &ModelRequest<'_>) -> Result<String, LocalError> {
        self.template.render(request.system, request.messages, request.tools)
    }

    /// The call grammar for `tools`, built once per tool set.
    fn grammar_for(&self, tools: &[ToolDefinition]) -> Option<Arc<str>> {
        if !self.grammar || tools.is_empty() {
            return None;
        }
        let mut cache = self.grammars.lock().ok()?;
        if let Some((cached_tools, text)) = cache.as_ref()
            && cached_tools.as_slice() == tools
        {
            return Some(Arc::clone(text));
        }
        let text: Arc<str> = Arc::from(grammar::tool_calls(tools, self.style, self.max_calls, self.thought)?);
        *cache = Some((tools.to_vec(), Arc::clone(&text)));
        Some(text)
    }
}

fn failed(error: ModelError) -> ModelStream<'static> {
    Box::pin(futures::stream::once(async move { Err(error) }))
}

impl ModelClient for LocalModel {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: "local".into(), model: self.name.clone() }
    }

    fn context_window(&self) -> Option<u64> {
        Some(u64::from(self.n_ctx))
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let prompt = match self.template.render(request.system, request.messages, request.tools) {
            Ok(prompt) => prompt,
            Err(e) => return failed(ModelError::new(ModelErrorKind::Config, e.to_string())),
        };
        let (tools, grammar): (Vec<String>, _) = match request.tool_choice {
            ToolChoice::None => (Vec::new(), None),
            _ => (request.tools.iter().map(|t| t.name.clone()).collect(), self.grammar_for(request.tools)),
        };
        // A required call is sampled under the grammar from the first token.
        let require_call = request.tool_choice == ToolChoice::Required && grammar.is_some();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let job = Job {
            prompt,
            max_tokens: self.max_tokens,
            cancel,
            events: events_tx,
            grammar,
            require_call,
            temperature: request.temperature,
        };
        let sent = self.jobs.lock().map(|jobs| jobs.send(job).is_ok()).unwrap_or(false);
        if !sent {
            return failed(ModelError::new(ModelErrorKind::Server, "the local model thread has stopped"));
        }
        Box::pin(futures::stream::unfold((events_rx, tools, false), |(mut rx, tools, done)| async move {
            if done {
                return None;
            }
            match rx.recv().await {
                Some(Ok(Piece::Text(piece))) => Some((Ok(ModelEvent::TextDelta(piece)), (rx, tools, false))),
                Some(Ok(Piece::Restarted(reason))) => {
                    let event = ModelEvent::Retrying {
                        attempt: 1,
                        max_retries: 1,
                        delay: std::time::Duration::ZERO,
                        reason,
                    };
                    Some((Ok(event), (rx, tools, false)))
                }
                Some(Ok(Piece::Done { text, finish, stats })) => {
                    let finished = crate::reply::Finished {
                        text,
                        finish,
                        prompt_tokens: stats.prompt_tokens as u64,
                        generated_tokens: stats.generated_tokens as u64,
                        reused_tokens: stats.reused_tokens as u64,
                    };
                    let message = crate::reply::finish_message(finished, &tools);
                    Some((Ok(ModelEvent::Completed(message)), (rx, tools, true)))
                }
                Some(Err(error)) => Some((Err(error), (rx, tools, true))),
                None => {
                    let error = ModelError::new(ModelErrorKind::Cancelled, "generation stopped");
                    Some((Err(error), (rx, tools, true)))
                }
            }
        }))
    }
}
