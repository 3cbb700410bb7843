//! The embedded model: llama.cpp in a worker thread, behind `keel_llm::ModelClient`.
//!
//! One OS thread owns the weights and the context (llama.cpp contexts are not shared
//! between threads). A request renders the model's own chat template, tokenizes it,
//! re-evaluates only the tokens after the longest prefix shared with the previous
//! request (KV cache reuse), then samples token by token, streaming text deltas and
//! checking for cancellation between tokens.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use keel_llm::text_calls::extract_text_tool_calls;
use keel_llm::{
    AssistantMessage, CancellationToken, ContentBlock, FinishReason, ModelClient, ModelError, ModelErrorKind,
    ModelEvent, ModelInfo, ModelRequest, ModelStream, Usage,
};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc;

use crate::LocalError;
use crate::template::ChatTemplate;

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
    /// Sampling temperature; 0 is greedy (default 0.7).
    pub temperature: f32,
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
}

struct Job {
    prompt: String,
    max_tokens: u32,
    cancel: CancellationToken,
    events: mpsc::UnboundedSender<Result<Piece, ModelError>>,
}

enum Piece {
    Text(String),
    Done { finish: FinishReason, stats: RequestStats },
}

struct Loaded {
    bos: String,
    eos: String,
}

/// A model running inside this process.
pub struct LocalModel {
    jobs: Mutex<std_mpsc::Sender<Job>>,
    template: Arc<ChatTemplate>,
    name: String,
    max_tokens: u32,
    stats: Arc<Mutex<Vec<RequestStats>>>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel").field("name", &self.name).finish_non_exhaustive()
    }
}

static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

fn backend() -> Result<&'static LlamaBackend, LocalError> {
    let result = BACKEND.get_or_init(|| {
        llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
        LlamaBackend::init().map_err(|e| e.to_string())
    });
    result.as_ref().map_err(|e| LocalError::Engine(format!("cannot start llama.cpp: {e}")))
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
        let (job_tx, job_rx) = std_mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = std_mpsc::channel::<Result<Loaded, LocalError>>();
        let stats = Arc::new(Mutex::new(Vec::new()));
        let worker_stats = Arc::clone(&stats);
        let max_tokens = config.max_tokens;
        std::thread::Builder::new()
            .name("keel-llama".into())
            .spawn(move || worker(config, job_rx, ready_tx, worker_stats))
            .map_err(|e| LocalError::Engine(format!("cannot start the model thread: {e}")))?;
        let loaded = ready_rx
            .recv()
            .map_err(|_| LocalError::Engine("the model thread stopped while loading".into()))??;
        let template = ChatTemplate::new(&template_source, &loaded.bos, &loaded.eos)?;
        Ok(LocalModel { jobs: Mutex::new(job_tx), template: Arc::new(template), name, max_tokens, stats })
    }

    /// Per-request costs so far, in order.
    pub fn stats(&self) -> Vec<RequestStats> {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Renders the prompt a request would send (for tests and inspection).
    pub fn render(&self, request: &ModelRequest<'_>) -> Result<String, LocalError> {
        self.template.render(request.system, request.messages, request.tools)
    }
}

fn thread_count(config: &LocalConfig) -> i32 {
    let threads =
        config.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    i32::try_from(threads.max(1)).unwrap_or(1)
}

fn worker(
    config: LocalConfig,
    jobs: std_mpsc::Receiver<Job>,
    ready: std_mpsc::Sender<Result<Loaded, LocalError>>,
    stats: Arc<Mutex<Vec<RequestStats>>>,
) {
    let backend = match backend() {
        Ok(backend) => backend,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let model = match LlamaModel::load_from_file(backend, &config.model_path, &LlamaModelParams::default()) {
        Ok(model) => model,
        Err(e) => {
            let _ = ready
                .send(Err(LocalError::Engine(format!("cannot load {}: {e}", config.model_path.display()))));
            return;
        }
    };
    let threads = thread_count(&config);
    let n_ctx = config.n_ctx.clamp(512, model.n_ctx_train().max(512));
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(512)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = ready
                .send(Err(LocalError::Engine(format!("cannot create a context of {n_ctx} tokens: {e}"))));
            return;
        }
    };
    let vocab = model.vocab();
    let text_of =
        |token: LlamaToken| String::from_utf8_lossy(&vocab.token_to_piece(token, true, None)).into_owned();
    let bos = if vocab.should_add_bos() { text_of(vocab.bos()) } else { String::new() };
    let eos = text_of(vocab.eos());
    if ready.send(Ok(Loaded { bos: bos.clone(), eos })).is_err() {
        return;
    }
    let mut cached: Vec<LlamaToken> = Vec::new();
    let mut batch = LlamaBatch::new(512, 1);
    let prefixes = if config.reuse_cache {
        config.prefix_cache.as_deref().and_then(|dir| PrefixCache::new(dir, &config.model_path, n_ctx))
    } else {
        None
    };
    let mut saved_prefix = false;
    while let Ok(job) = jobs.recv() {
        let add_bos = vocab.should_add_bos() && !bos.is_empty() && !job.prompt.starts_with(&bos);
        let tokens = vocab.tokenize(job.prompt.as_bytes(), add_bos, true);
        let budget = job.max_tokens as usize;
        if tokens.len() + budget.min(256) > n_ctx as usize {
            let _ = job.events.send(Err(ModelError::new(
                ModelErrorKind::ContextOverflow,
                format!(
                    "the conversation ({} tokens) no longer fits the local model's context of {n_ctx} tokens; start a new session or raise the context size",
                    tokens.len()
                ),
            )));
            continue;
        }
        let started = Instant::now();
        // A fresh context starts from the best prefix a previous process saved.
        if cached.is_empty()
            && let Some(prefixes) = &prefixes
            && let Some(path) = prefixes.best(&tokens)
        {
            match ctx.state_load_file(&path, n_ctx as usize) {
                Ok(loaded) => cached = loaded,
                Err(_) => {
                    ctx.clear_kv_cache();
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        // Reuse the KV cache for the longest shared prefix; always evaluate at least
        // the last token, whose logits start generation.
        let mut common = if config.reuse_cache {
            cached.iter().zip(&tokens).take_while(|(a, b)| a == b).count()
        } else {
            0
        };
        if common >= tokens.len() {
            common = tokens.len() - 1;
        }
        let _ = ctx.clear_kv_cache_seq(Some(0), Some(common as u32), None);
        cached.truncate(common);
        let mut failed = None;
        for (chunk_index, chunk) in tokens[common..].chunks(512).enumerate() {
            batch.clear();
            let base = common + chunk_index * 512;
            for (offset, token) in chunk.iter().enumerate() {
                let position = base + offset;
                let last = position == tokens.len() - 1;
                if batch.add(*token, position as i32, &[0], last).is_err() {
                    failed = Some("the batch is full".to_owned());
                }
            }
            if let Err(e) = ctx.decode(&mut batch) {
                failed = Some(e.to_string());
            }
            if failed.is_some() || job.cancel.is_cancelled() {
                break;
            }
        }
        if let Some(reason) = failed {
            cached.clear();
            let _ = ctx.clear_kv_cache_seq(Some(0), None, None);
            let _ =
                job.events.send(Err(ModelError::new(ModelErrorKind::Server, format!("llama.cpp: {reason}"))));
            continue;
        }
        cached.extend_from_slice(&tokens[common..]);
        let prompt_time = started.elapsed();
        if !saved_prefix
            && tokens.len() - common >= 256
            && let Some(prefixes) = &prefixes
        {
            saved_prefix = true;
            prefixes.save(&ctx, &tokens);
        }
        let generation_started = Instant::now();
        let mut sampler = if config.temperature <= 0.0 {
            LlamaSampler::greedy()
        } else {
            LlamaSampler::chain_simple([
                LlamaSampler::top_k(40),
                LlamaSampler::top_p(0.95, 1),
                LlamaSampler::min_p(0.05, 1),
                LlamaSampler::temp(config.temperature),
                LlamaSampler::dist(config.seed),
            ])
        };
        let mut pending_bytes: Vec<u8> = Vec::new();
        let mut generated = 0usize;
        let mut finish = FinishReason::Length;
        let mut logits_index = batch.n_tokens() - 1;
        let mut position = tokens.len();
        let mut aborted = false;
        while generated < budget && position < n_ctx as usize {
            if job.cancel.is_cancelled() || job.events.is_closed() {
                aborted = true;
                break;
            }
            let token = sampler.sample(&ctx, logits_index);
            sampler.accept(token);
            if vocab.is_eog(token) {
                finish = FinishReason::Stop;
                break;
            }
            generated += 1;
            pending_bytes.extend_from_slice(&vocab.token_to_piece(token, true, None));
            // Send only complete UTF-8; a character may span tokens.
            let valid = match std::str::from_utf8(&pending_bytes) {
                Ok(text) => text.len(),
                Err(e) => e.valid_up_to(),
            };
            if valid > 0 {
                let text = String::from_utf8_lossy(&pending_bytes[..valid]).into_owned();
                pending_bytes.drain(..valid);
                if job.events.send(Ok(Piece::Text(text))).is_err() {
                    aborted = true;
                    break;
                }
            }
            batch.clear();
            if batch.add(token, position as i32, &[0], true).is_err() || ctx.decode(&mut batch).is_err() {
                finish = FinishReason::Error;
                break;
            }
            cached.push(token);
            position += 1;
            logits_index = 0;
        }
        if !pending_bytes.is_empty() {
            let _ = job.events.send(Ok(Piece::Text(String::from_utf8_lossy(&pending_bytes).into_owned())));
        }
        let request_stats = RequestStats {
            prompt_tokens: tokens.len(),
            reused_tokens: common,
            evaluated_tokens: tokens.len() - common,
            generated_tokens: generated,
            prompt_time,
            generation_time: generation_started.elapsed(),
        };
        if let Ok(mut all) = stats.lock() {
            all.push(request_stats);
        }
        if !aborted {
            let _ = job.events.send(Ok(Piece::Done { finish, stats: request_stats }));
        }
    }
}

impl ModelClient for LocalModel {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: "local".into(), model: self.name.clone() }
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let prompt = match self.template.render(request.system, request.messages, request.tools) {
            Ok(prompt) => prompt,
            Err(e) => {
                let error = ModelError::new(ModelErrorKind::Config, e.to_string());
                return Box::pin(futures::stream::once(async move { Err(error) }));
            }
        };
        let tools: Vec<String> = match request.tool_choice {
            keel_llm::ToolChoice::Auto => request.tools.iter().map(|t| t.name.clone()).collect(),
            keel_llm::ToolChoice::None => Vec::new(),
        };
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let job = Job { prompt, max_tokens: self.max_tokens, cancel, events: events_tx };
        let sent = self.jobs.lock().map(|jobs| jobs.send(job).is_ok()).unwrap_or(false);
        if !sent {
            let error = ModelError::new(ModelErrorKind::Server, "the local model thread has stopped");
            return Box::pin(futures::stream::once(async move { Err(error) }));
        }
        let state = (events_rx, String::new(), tools, false);
        Box::pin(futures::stream::unfold(state, |(mut rx, mut text, tools, done)| async move {
            if done {
                return None;
            }
            match rx.recv().await {
                Some(Ok(Piece::Text(piece))) => {
                    text.push_str(&piece);
                    Some((Ok(ModelEvent::TextDelta(piece)), (rx, text, tools, false)))
                }
                Some(Ok(Piece::Done { finish, stats })) => {
                    let mut content = vec![ContentBlock::Text { text: std::mem::take(&mut text) }];
                    let names: Vec<&str> = tools.iter().map(String::as_str).collect();
                    let mut finish_reason = finish;
                    if extract_text_tool_calls(&mut content, &names) && finish_reason == FinishReason::Stop {
                        finish_reason = FinishReason::ToolUse;
                    }
                    content.retain(|b| !matches!(b, ContentBlock::Text { text } if text.is_empty()));
                    let message = AssistantMessage {
                        content,
                        finish_reason,
                        raw_finish_reason: None,
                        usage: Usage {
                            input_tokens: stats.prompt_tokens as u64,
                            output_tokens: stats.generated_tokens as u64,
                            cached_tokens: stats.reused_tokens as u64,
                            reasoning_tokens: 0,
                        },
                        interrupted: false,
                    };
                    Some((Ok(ModelEvent::Completed(message)), (rx, String::new(), tools, true)))
                }
                Some(Err(error)) => Some((Err(error), (rx, text, tools, true))),
                None => {
                    let error = ModelError::new(ModelErrorKind::Cancelled, "generation stopped");
                    Some((Err(error), (rx, text, tools, true)))
                }
            }
        }))
    }
}

/// Evaluated prompt prefixes on disk: llama.cpp state files with their tokens beside
/// them, one folder per model file and context size, at most eight kept.
struct PrefixCache {
    dir: PathBuf,
}

impl PrefixCache {
    const KEEP: usize = 8;
    const MIN_SHARED: usize = 64;

    fn new(root: &Path, model: &Path, n_ctx: u32) -> Option<PrefixCache> {
        let size = std::fs::metadata(model).ok()?.len();
        let stem = model.file_stem()?.to_string_lossy().into_owned();
        let dir = root.join(format!("{stem}-{size}-ctx{n_ctx}"));
        std::fs::create_dir_all(&dir).ok()?;
        Some(PrefixCache { dir })
    }

    fn read_tokens(path: &Path) -> Option<Vec<LlamaToken>> {
        let bytes = std::fs::read(path).ok()?;
        Some(
            bytes.chunks_exact(4).map(|c| LlamaToken(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        )
    }

    /// The saved state sharing the longest prefix with `tokens`, if long enough.
    fn best(&self, tokens: &[LlamaToken]) -> Option<PathBuf> {
        let mut best: Option<(usize, PathBuf)> = None;
        for entry in std::fs::read_dir(&self.dir).ok()?.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "tokens") {
                continue;
            }
            let Some(saved) = Self::read_tokens(&path) else { continue };
            let shared = saved.iter().zip(tokens).take_while(|(a, b)| a == b).count();
            let state = path.with_extension("state");
            if shared >= Self::MIN_SHARED && state.is_file() && best.as_ref().is_none_or(|(n, _)| shared > *n)
            {
                best = Some((shared, state));
            }
        }
        best.map(|(_, path)| path)
    }

    /// Saves the context's state for `tokens` (written to a temporary name, then
    /// renamed, so a crash never leaves a half file under a real name).
    fn save(&self, ctx: &llama_cpp_2::context::LlamaContext<'_>, tokens: &[LlamaToken]) {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        tokens.iter().map(|t| t.0).collect::<Vec<i32>>().hash(&mut hasher);
        let name = format!("{:016x}", hasher.finish());
        let state = self.dir.join(format!("{name}.state"));
        let temporary = self.dir.join(format!("{name}.state.tmp"));
        if ctx.state_save_file(&temporary, tokens).is_err() || std::fs::rename(&temporary, &state).is_err() {
            let _ = std::fs::remove_file(&temporary);
            return;
        }
        let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.0.to_le_bytes()).collect();
        let _ = std::fs::write(self.dir.join(format!("{name}.tokens")), bytes);
        self.evict();
    }

    fn evict(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut states: Vec<(std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "state"))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        states.sort();
        while states.len() > Self::KEEP {
            let (_, path) = states.remove(0);
            let _ = std::fs::remove_file(path.with_extension("tokens"));
            let _ = std::fs::remove_file(path);
        }
    }
}
