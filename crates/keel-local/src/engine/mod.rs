//! The embedded model: llama.cpp in an engine process of its own, behind
//! `keel_llm::ModelClient`.
//!
//! keel renders the model's own chat template and builds the call grammar here; the
//! engine process ([`child`], feature `llama`) loads the weights with the best kernels
//! this CPU runs, evaluates only the tokens after the longest prefix shared with the
//! previous request (KV cache reuse, and evaluated prefixes kept on disk), and samples
//! token by token, streaming text and stopping between two tokens on a cancel. When the
//! model opens a tool call, sampling follows a grammar built from the tool schemas, so
//! the call is valid by construction (see [`crate::grammar`]).
//!
//! A crash in native code ends the engine process, not keel: the step's request gets one
//! more try with the safe kernel set (remembered for that model on that machine, see
//! [`kernels`]), and the session goes on.

mod check;
#[cfg(feature = "llama")]
pub mod child;
mod host;
pub mod kernels;
pub mod protocol;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
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
pub use check::{CheckOutcome, check_variant};
pub use host::{Crash, EngineCommand, signal_name};
use host::{EngineProcess, JobEnd};
use kernels::{KernelMemory, Kernels};
use protocol::{FromEngine, Hello, JobSpec, Probe, Start};

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
    /// Which kernels run (default [`Kernels::Auto`]).
    pub kernels: Kernels,
    /// Run exactly this CPU variant of the kernels (a self-test of it: no safe retry).
    pub variant: Option<String>,
    /// Where verdicts about kernels on this machine are kept (default
    /// [`KernelMemory::default_path`]; `None` remembers nothing).
    pub kernel_memory: Option<PathBuf>,
    /// The engine program (default: this program with `__engine`, see
    /// [`EngineCommand::current_exe`]).
    pub engine: Option<EngineCommand>,
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
            kernels: Kernels::Auto,
            variant: None,
            kernel_memory: Some(KernelMemory::default_path()),
            engine: None,
        }
    }

    fn start(&self) -> Start {
        let threads =
            self.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        Start {
            model: self.model_path.clone(),
            n_ctx: self.n_ctx,
            threads: threads.max(1),
            temperature: self.temperature,
            call_temperature: self.call_temperature,
            seed: self.seed,
            reuse_cache: self.reuse_cache,
            prefix_cache: self.prefix_cache.clone(),
            kernels: self.kernels,
            variant: self.variant.clone(),
            memory: self.kernel_memory.clone(),
        }
    }

    fn command(&self) -> Result<EngineCommand, LocalError> {
        match &self.engine {
            Some(command) => Ok(command.clone()),
            None => EngineCommand::current_exe(),
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

impl From<protocol::JobStats> for RequestStats {
    fn from(stats: protocol::JobStats) -> Self {
        RequestStats {
            prompt_tokens: stats.prompt_tokens,
            reused_tokens: stats.reused_tokens,
            evaluated_tokens: stats.prompt_tokens.saturating_sub(stats.reused_tokens),
            generated_tokens: stats.generated_tokens,
            prompt_time: stats.prompt_time(),
            generation_time: stats.generation_time(),
            constrained: stats.constrained,
        }
    }
}

/// The engine process and how to start it again.
struct Slot {
    engine: Option<EngineProcess>,
    command: EngineCommand,
    start: Start,
    memory_key: String,
    /// The running engine's process id (0: none).
    pid: Arc<AtomicU32>,
}

impl Slot {
    async fn engine(&mut self) -> Result<&mut EngineProcess, LocalError> {
        let engine = match self.engine.take() {
            Some(engine) => engine,
            None => host::spawn(&self.command, &Hello::Serve(self.start.clone())).await?,
        };
        self.pid.store(engine.pid().unwrap_or(0), Ordering::Relaxed);
        Ok(self.engine.insert(engine))
    }

    /// After a crash of the fast kernels: the safe set from now on, here and (through
    /// the memory) in every later process for this model on this machine.
    fn fall_back(&mut self, crash: &Crash) {
        self.start.kernels = Kernels::Safe;
        let Some(path) = &self.start.memory else { return };
        let what = format!("{} with {}", crash.how(), crash.kernels.describe());
        let model = self.start.model.display().to_string();
        if let Err(e) = KernelMemory::at(path).update(&self.memory_key, |v| {
            v.crashed = Some(what);
            v.model = model;
        }) {
            tracing::warn!("cannot remember the kernel choice in {}: {e}", path.display());
        }
    }
}

/// A model running in keel's engine process.
pub struct LocalModel {
    slot: Arc<tokio::sync::Mutex<Slot>>,
    template: Arc<ChatTemplate>,
    style: CallStyle,
    grammar: bool,
    max_calls: usize,
    thought: usize,
    grammars: Mutex<Option<(Vec<ToolDefinition>, Arc<str>)>>,
    name: String,
    max_tokens: u32,
    loaded: protocol::Loaded,
    stats: Arc<Mutex<Vec<RequestStats>>>,
    pid: Arc<AtomicU32>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel").field("name", &self.name).finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Starts the engine and loads the model (a second or more on this kind of machine).
    /// A file that is not GGUF, or a GGUF without a chat template, is a clear error.
    pub async fn load(config: LocalConfig) -> Result<LocalModel, LocalError> {
        let meta = crate::gguf::read_meta(&config.model_path)?;
        let template_source = meta.chat_template().map(str::to_owned).ok_or_else(|| {
            LocalError::Template(format!(
                "{} has no chat template (tokenizer.chat_template), so keel cannot format a conversation for it; use an instruct model's GGUF",
                config.model_path.display()
            ))
        })?;
        let name =
            config.model_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let command = config.command()?;
        let start = config.start();
        let engine = host::spawn(&command, &Hello::Serve(start.clone())).await?;
        let loaded = engine.loaded().clone();
        let template = ChatTemplate::new(&crate::template::mend(&template_source), &loaded.bos, &loaded.eos)?;
        let pid = Arc::new(AtomicU32::new(engine.pid().unwrap_or(0)));
        let slot = Slot {
            engine: Some(engine),
            command,
            start,
            memory_key: loaded.memory_key.clone(),
            pid: Arc::clone(&pid),
        };
        Ok(LocalModel {
            slot: Arc::new(tokio::sync::Mutex::new(slot)),
            template: Arc::new(template),
            style: CallStyle::of_template(&template_source),
            grammar: config.grammar,
            max_calls: config.max_calls_per_reply,
            thought: config.thought_chars,
            grammars: Mutex::new(None),
            name,
            max_tokens: config.max_tokens,
            loaded,
            stats: Arc::new(Mutex::new(Vec::new())),
            pid,
        })
    }

    /// The engine process's id, while one runs.
    pub fn engine_pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::Relaxed)).filter(|&pid| pid != 0)
    }

    /// Per-request costs so far, in order.
    pub fn stats(&self) -> Vec<RequestStats> {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Which kernels the engine loaded first, and why.
    pub fn kernels(&self) -> &protocol::KernelReport {
        &self.loaded.kernels
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

/// Asks the engine which CPU it runs on and which kernels `kernels` would load.
pub async fn probe(engine: Option<EngineCommand>, kernels: Kernels) -> Result<Probe, LocalError> {
    let command = match engine {
        Some(command) => command,
        None => EngineCommand::current_exe()?,
    };
    host::probe(&command, &Hello::Probe { kernels }).await
}

fn failed(error: ModelError) -> ModelStream<'static> {
    Box::pin(futures::stream::once(async move { Err(error) }))
}

type Event = Result<ModelEvent, ModelError>;

/// Runs one job on the slot's engine: one more try with the safe kernels when the
/// engine dies, then an error that says what died and what to try.
async fn run_job(
    slot: Arc<tokio::sync::Mutex<Slot>>,
    spec: JobSpec,
    cancel: CancellationToken,
    events: mpsc::UnboundedSender<Event>,
    mut map: impl FnMut(FromEngine) -> Event,
) {
    let mut slot = slot.lock().await;
    if cancel.is_cancelled() || events.is_closed() {
        // Given up while waiting for the engine.
        let _ = events.send(Err(ModelError::new(ModelErrorKind::Cancelled, "generation stopped")));
        return;
    }
    let mut retried = false;
    loop {
        let engine = match slot.engine().await {
            Ok(engine) => engine,
            Err(e) => {
                let _ = events.send(Err(ModelError::new(ModelErrorKind::Server, e.to_string())));
                return;
            }
        };
        match engine.run_job(spec.clone(), &cancel, &events, &mut map).await {
            JobEnd::Answered => return,
            JobEnd::Killed => {
                slot.engine = None;
                slot.pid.store(0, Ordering::Relaxed);
                return;
            }
            JobEnd::Crashed(crash) => {
                slot.engine = None;
                slot.pid.store(0, Ordering::Relaxed);
                tracing::warn!(
                    "the model engine died: {} with {}: {:?}",
                    crash.how(),
                    crash.kernels.describe(),
                    crash.stderr
                );
                if cancel.is_cancelled() || events.is_closed() {
                    return;
                }
                if slot.start.kernels != Kernels::Safe && slot.start.variant.is_none() && !retried {
                    retried = true;
                    slot.fall_back(&crash);
                    let reason = format!(
                        "the model engine crashed ({}, kernels {}); running this step again with the safe kernels, kept for this model on this machine (KEEL_LOCAL_KERNELS=fast tries the fast ones again)",
                        crash.how(),
                        crash.kernels.describe()
                    );
                    let retry =
                        ModelEvent::Retrying { attempt: 1, max_retries: 1, delay: Duration::ZERO, reason };
                    let _ = events.send(Ok(retry));
                    continue;
                }
                let _ = events.send(Err(crash_error(&crash, retried)));
                return;
            }
        }
    }
}

fn crash_error(crash: &Crash, retried: bool) -> ModelError {
    let words = crash.last_words().map(|w| format!(" Its last words: {w}")).unwrap_or_default();
    let message = if retried || crash.kernels.asked == Kernels::Safe {
        format!(
            "the model engine crashed ({}) also with the safe kernels ({}). The session is saved: try the most basic kernels (KEEL_LOCAL_VARIANT=x64, about ten times slower), another model (--local-model), or a model server (--provider llamacpp).{words}",
            crash.how(),
            crash.kernels.describe()
        )
    } else {
        format!(
            "the model engine crashed ({}, kernels {}). The session is saved; the next request starts the engine again. KEEL_LOCAL_KERNELS=safe runs the safe kernels.{words}",
            crash.how(),
            crash.kernels.describe()
        )
    };
    ModelError::new(ModelErrorKind::Server, message)
}

fn kind_of(name: &str) -> ModelErrorKind {
    ModelErrorKind::from_name(name).unwrap_or(ModelErrorKind::Server)
}

impl ModelClient for LocalModel {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: "local".into(), model: self.name.clone() }
    }

    fn context_window(&self) -> Option<u64> {
        Some(u64::from(self.loaded.n_ctx))
    }

    /// The prompt is rendered to text by a chat template: no images.
    fn accepts_images(&self) -> Option<bool> {
        Some(false)
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
        let spec = JobSpec {
            id: 0,
            prompt,
            max_tokens: request.token_cap(self.max_tokens),
            grammar: grammar.map(|g| g.to_string()),
            require_call,
            temperature: request.temperature,
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return failed(ModelError::new(ModelErrorKind::Config, "the local model needs a tokio runtime"));
        };
        let stats = Arc::clone(&self.stats);
        let map = move |message: FromEngine| -> Event {
            match message {
                FromEngine::Text { text } => Ok(ModelEvent::TextDelta(text)),
                FromEngine::Restarted { reason } => {
                    Ok(ModelEvent::Retrying { attempt: 1, max_retries: 1, delay: Duration::ZERO, reason })
                }
                FromEngine::Done { text, finish, stats: job } => {
                    if let Ok(mut all) = stats.lock() {
                        all.push(RequestStats::from(job));
                    }
                    let finished = crate::reply::Finished {
                        text,
                        finish,
                        prompt_tokens: job.prompt_tokens as u64,
                        generated_tokens: job.generated_tokens as u64,
                        reused_tokens: job.reused_tokens as u64,
                    };
                    Ok(ModelEvent::Completed(crate::reply::finish_message(finished, &tools)))
                }
                FromEngine::Failed { kind, message } => Err(ModelError::new(kind_of(&kind), message)),
                _ => Err(ModelError::new(ModelErrorKind::Cancelled, "generation stopped")),
            }
        };
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        runtime.spawn(run_job(Arc::clone(&self.slot), spec, cancel, events_tx, map));
        // Calls the model writes as text are not shown as text; the finished message reads
        // them, and what was held back is shown when it held none.
        let guard = keel_llm::text_calls::CallTextGuard::default();
        let state = (events_rx, guard, std::collections::VecDeque::<Event>::new(), false);
        Box::pin(futures::stream::unfold(state, |(mut rx, mut guard, mut ready, done)| async move {
            loop {
                if let Some(event) = ready.pop_front() {
                    let last = matches!(event, Ok(ModelEvent::Completed(_)) | Err(_));
                    return Some((event, (rx, guard, ready, last)));
                }
                if done {
                    return None;
                }
                match rx.recv().await {
                    Some(Ok(ModelEvent::TextDelta(text))) => {
                        let shown = guard.push(&text);
                        if !shown.is_empty() {
                            ready.push_back(Ok(ModelEvent::TextDelta(shown)));
                        }
                    }
                    Some(Ok(ModelEvent::Completed(message))) => {
                        let rest = guard.flush();
                        if !rest.is_empty() && !message.has_tool_calls() {
                            ready.push_back(Ok(ModelEvent::TextDelta(rest)));
                        }
                        ready.push_back(Ok(ModelEvent::Completed(message)));
                    }
                    Some(event) => ready.push_back(event),
                    None => {
                        ready.push_back(Err(ModelError::new(ModelErrorKind::Cancelled, "generation stopped")))
                    }
                }
            }
        }))
    }
}
