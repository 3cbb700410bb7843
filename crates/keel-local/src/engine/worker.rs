//! The model thread: owns the weights and the context, evaluates prompts (reusing the KV
//! cache), and generates replies.
//!
//! A reply is generated freely until it opens a tool call. The `<tool_call>` token of a
//! tagged template switches sampling to the call grammar on the spot. A call opened in
//! another shape (` ```json {"name"…`, a bare `{"name"…`) is noticed within its first
//! tokens, which are held back from the stream: generation rolls back to the start of the
//! reply and samples again under the grammar, so the call comes out in the template's own
//! format, valid by construction.

use std::num::NonZeroU32;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use keel_llm::{CancellationToken, FinishReason, ModelError, ModelErrorKind};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc;

use super::prefix_cache::PrefixCache;
use super::sampling::{self, Constrained};
use super::{LocalConfig, RequestStats};
use crate::LocalError;
use crate::grammar::{self, CallStyle, Opening};

/// One request for the thread.
pub(crate) struct Job {
    pub prompt: String,
    pub max_tokens: u32,
    pub cancel: CancellationToken,
    pub events: mpsc::UnboundedSender<Result<Piece, ModelError>>,
    /// The call grammar, when tools may be called and grammars are on.
    pub grammar: Option<Arc<str>>,
    /// The reply must be calls: sample under the grammar from the first token.
    pub require_call: bool,
    /// The request's own text temperature, over the configured one.
    pub temperature: Option<f32>,
}

/// What the thread sends back.
pub(crate) enum Piece {
    /// Text to show as it arrives.
    Text(String),
    /// What was shown so far is void: the reply is being sampled again, for this reason.
    Restarted(String),
    /// The whole reply text (calls included), and why it ended.
    Done { text: String, finish: FinishReason, stats: RequestStats },
}

/// What the thread reports once the model is loaded.
pub(crate) struct Loaded {
    pub bos: String,
    pub eos: String,
    /// The context size the model got.
    pub n_ctx: u32,
}

static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

fn backend() -> Result<&'static LlamaBackend, LocalError> {
    let result = BACKEND.get_or_init(|| {
        llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
        LlamaBackend::init().map_err(|e| e.to_string())
    });
    result.as_ref().map_err(|e| LocalError::Engine(format!("cannot start llama.cpp: {e}")))
}

fn thread_count(config: &LocalConfig) -> i32 {
    let threads =
        config.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    i32::try_from(threads.max(1)).unwrap_or(1)
}

/// The thread's body: load, report, then serve jobs until the sender is dropped.
pub(crate) fn run(
    config: LocalConfig,
    style: CallStyle,
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
    let ctx = match model.new_context(backend, params) {
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
    if ready.send(Ok(Loaded { bos: bos.clone(), eos, n_ctx })).is_err() {
        return;
    }
    let prefixes = if config.reuse_cache {
        config.prefix_cache.as_deref().and_then(|dir| PrefixCache::new(dir, &config.model_path, n_ctx))
    } else {
        None
    };
    let mut engine = Engine {
        model: &model,
        ctx,
        batch: LlamaBatch::new(512, 1),
        cached: Vec::new(),
        n_ctx: n_ctx as usize,
        prefixes,
        saved_prefix: false,
        config: &config,
        style,
        bos,
    };
    while let Ok(job) = jobs.recv() {
        if let Some(request_stats) = engine.serve(&job)
            && let Ok(mut all) = stats.lock()
        {
            all.push(request_stats);
        }
    }
}

struct Engine<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'m>,
    /// Tokens whose KV entries are in the context, in order.
    cached: Vec<LlamaToken>,
    n_ctx: usize,
    prefixes: Option<PrefixCache>,
    saved_prefix: bool,
    config: &'m LocalConfig,
    style: CallStyle,
    bos: String,
}

/// Where generation stands.
struct Reply {
    /// Everything generated, calls included.
    text: String,
    /// Text not yet streamed because the reply's start could still be a call.
    held: String,
    /// The start of the reply has been read (text or call).
    decided: bool,
    /// Sampling is under the call grammar.
    constrained: Option<Constrained>,
    /// Bytes of a character split across tokens.
    pending: Vec<u8>,
    generated: usize,
    /// Position of the next token.
    position: usize,
    /// Which logits to sample from.
    logits_index: i32,
    /// The last tokens, to notice a model stuck repeating itself.
    recent: std::collections::VecDeque<LlamaToken>,
    /// Lines the same but for a leading line number, to notice a numbered copy loop.
    lines: crate::repeats::LineRepeats,
    /// The reply was sampled again once already.
    resampled: bool,
    /// Sampling stopped because the model kept repeating itself.
    degenerate: bool,
}

/// Tokens looked at to notice repetition, and the fewest distinct ones among them that
/// still count as progress.
const REPEAT_WINDOW: usize = 48;
const REPEAT_DISTINCT: usize = 3;

impl Reply {
    /// Records `token`; true when the last tokens are a handful repeated over and over.
    fn repeating(&mut self, token: LlamaToken) -> bool {
        if self.recent.len() == REPEAT_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(token);
        if self.recent.len() < REPEAT_WINDOW {
            return false;
        }
        let mut distinct: Vec<LlamaToken> = Vec::with_capacity(REPEAT_DISTINCT + 1);
        for t in &self.recent {
            if !distinct.contains(t) {
                distinct.push(*t);
                if distinct.len() > REPEAT_DISTINCT {
                    return false;
                }
            }
        }
        true
    }
}

impl Engine<'_> {
    fn fail(job: &Job, kind: ModelErrorKind, message: String) -> Option<RequestStats> {
        let _ = job.events.send(Err(ModelError::new(kind, message)));
        None
    }

    /// Evaluates the prompt, generates the reply, and reports it.
    fn serve(&mut self, job: &Job) -> Option<RequestStats> {
        let vocab = self.model.vocab();
        let add_bos = vocab.should_add_bos() && !self.bos.is_empty() && !job.prompt.starts_with(&self.bos);
        let tokens = vocab.tokenize(job.prompt.as_bytes(), add_bos, true);
        let budget = job.max_tokens as usize;
        if tokens.is_empty() {
            return Self::fail(job, ModelErrorKind::Config, "the prompt is empty".into());
        }
        if tokens.len() + budget.min(256) > self.n_ctx {
            return Self::fail(
                job,
                ModelErrorKind::ContextOverflow,
                format!(
                    "the conversation ({} tokens) no longer fits the local model's context of {} tokens; start a new session or raise the context size",
                    tokens.len(),
                    self.n_ctx
                ),
            );
        }
        let started = Instant::now();
        let common = match self.evaluate(&tokens, &job.cancel) {
            Ok(common) => common,
            Err(reason) => return Self::fail(job, ModelErrorKind::Server, format!("llama.cpp: {reason}")),
        };
        let prompt_time = started.elapsed();
        let generation_started = Instant::now();
        let (reply, finish, aborted) = self.generate(job, &tokens);
        if !reply.pending.is_empty() {
            let _ = job.events.send(Ok(Piece::Text(String::from_utf8_lossy(&reply.pending).into_owned())));
        }
        let request_stats = RequestStats {
            prompt_tokens: tokens.len(),
            reused_tokens: common,
            evaluated_tokens: tokens.len() - common,
            generated_tokens: reply.generated,
            prompt_time,
            generation_time: generation_started.elapsed(),
            constrained: reply.constrained.is_some(),
        };
        if reply.degenerate {
            let _ = job.events.send(Err(ModelError::new(
                ModelErrorKind::InvalidResponse,
                "the local model kept repeating itself (the same few tokens, or one line with only its line number changing), also when sampled again; try rephrasing the task or a larger model",
            )));
        } else if !aborted {
            let mut text = reply.text;
            text.push_str(&String::from_utf8_lossy(&reply.pending));
            let _ = job.events.send(Ok(Piece::Done { text, finish, stats: request_stats }));
        }
        Some(request_stats)
    }

    /// Makes the context hold `tokens`, reusing the longest prefix it already holds (or
    /// one saved on disk). Returns how many tokens were reused.
    fn evaluate(&mut self, tokens: &[LlamaToken], cancel: &CancellationToken) -> Result<usize, String> {
        // A fresh context starts from the best prefix a previous process saved.
        if self.cached.is_empty()
            && let Some(prefixes) = &self.prefixes
            && let Some(path) = prefixes.best(tokens)
        {
            match self.ctx.state_load_file(&path, self.n_ctx) {
                Ok(loaded) => self.cached = loaded,
                Err(_) => {
                    self.ctx.clear_kv_cache();
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        // Always evaluate at least the last token, whose logits start generation.
        let mut common = if self.config.reuse_cache {
            self.cached.iter().zip(tokens).take_while(|(a, b)| a == b).count()
        } else {
            0
        };
        common = common.min(tokens.len() - 1);
        self.truncate(common);
        let mut failed = None;
        for (chunk_index, chunk) in tokens[common..].chunks(512).enumerate() {
            self.batch.clear();
            let base = common + chunk_index * 512;
            for (offset, token) in chunk.iter().enumerate() {
                let position = base + offset;
                let last = position == tokens.len() - 1;
                if self.batch.add(*token, position as i32, &[0], last).is_err() {
                    failed = Some("the batch is full".to_owned());
                }
            }
            if let Err(e) = self.ctx.decode(&mut self.batch) {
                failed = Some(e.to_string());
            }
            if failed.is_some() || cancel.is_cancelled() {
                break;
            }
        }
        if let Some(reason) = failed {
            self.truncate(0);
            return Err(reason);
        }
        self.cached.extend_from_slice(&tokens[common..]);
        if !self.saved_prefix
            && tokens.len() - common >= 256
            && let Some(prefixes) = &self.prefixes
        {
            self.saved_prefix = true;
            prefixes.save(&self.ctx, tokens);
        }
        Ok(common)
    }

    /// Drops every cached token from `keep` on.
    fn truncate(&mut self, keep: usize) {
        let _ = self.ctx.clear_kv_cache_seq(Some(0), Some(keep as u32), None);
        self.cached.truncate(keep);
    }

    /// Appends `token` at `position` and computes the logits after it.
    fn push(&mut self, token: LlamaToken, position: usize) -> bool {
        self.batch.clear();
        if self.batch.add(token, position as i32, &[0], true).is_err()
            || self.ctx.decode(&mut self.batch).is_err()
        {
            return false;
        }
        self.cached.push(token);
        true
    }

    fn constrained(&self, job: &Job, temperature: f32, seed: u32) -> Option<Constrained> {
        let grammar = job.grammar.as_deref()?;
        let sampler = Constrained::new(self.model, grammar, temperature, seed);
        if sampler.is_none() {
            tracing::warn!("llama.cpp rejected the tool-call grammar; calls are sampled freely");
        }
        sampler
    }

    /// Generates the reply to the prompt `tokens` (already evaluated). Returns it, why it
    /// ended, and whether it was aborted. A reply stuck repeating itself (a handful of
    /// tokens, or one line with only its line number changing) is sampled again once, hotter and with
    /// another seed; a second time it ends as degenerate.
    fn generate(&mut self, job: &Job, tokens: &[LlamaToken]) -> (Reply, FinishReason, bool) {
        let vocab = self.model.vocab();
        let budget = job.max_tokens as usize;
        let (mut temperature, mut call_temperature, mut seed) = (
            job.temperature.unwrap_or(self.config.temperature),
            self.config.call_temperature,
            self.config.seed,
        );
        let mut free = sampling::free(temperature, seed);
        let mut reply = Reply {
            text: String::new(),
            held: String::new(),
            decided: job.grammar.is_none(),
            constrained: None,
            pending: Vec::new(),
            generated: 0,
            position: tokens.len(),
            logits_index: self.batch.n_tokens() - 1,
            recent: std::collections::VecDeque::with_capacity(REPEAT_WINDOW),
            lines: crate::repeats::LineRepeats::new(),
            resampled: false,
            degenerate: false,
        };
        let opener = self.style.opener();
        if job.require_call {
            reply.constrained = self.constrained(job, call_temperature, seed);
            reply.decided = true;
        }
        while reply.generated < budget && reply.position < self.n_ctx {
            if job.cancel.is_cancelled() || job.events.is_closed() {
                return (reply, FinishReason::Aborted, true);
            }
            let token = match &mut reply.constrained {
                Some(constrained) => match constrained.sample(&self.ctx, reply.logits_index) {
                    Some(token) => token,
                    None => return (reply, FinishReason::Error, false),
                },
                None => free.sample(&self.ctx, reply.logits_index),
            };
            if vocab.is_eog(token) {
                return (reply, FinishReason::Stop, false);
            }
            reply.generated += 1;
            let bytes = vocab.token_to_piece(token, true, None);
            let repeating = reply.repeating(token);
            if repeating || reply.lines.push(&bytes) {
                if reply.resampled {
                    reply.degenerate = true;
                    return (reply, FinishReason::Error, false);
                }
                let was_call = reply.constrained.is_some();
                if !self.restart(tokens, &mut reply) {
                    return (reply, FinishReason::Error, false);
                }
                reply.resampled = true;
                temperature = temperature.max(0.8);
                call_temperature = call_temperature.max(0.8);
                seed = seed.wrapping_add(1);
                free = sampling::free(temperature, seed);
                reply.constrained =
                    if was_call { self.constrained(job, call_temperature, seed) } else { None };
                reply.decided = was_call || job.grammar.is_none();
                let _ =
                    job.events.send(Ok(Piece::Restarted("the model repeated itself; sampling again".into())));
                continue;
            }
            // The template's own call tag, as one token: the grammar takes over from here.
            if reply.constrained.is_none()
                && self.style == CallStyle::Tagged
                && bytes == opener.as_bytes()
                && let Some(mut constrained) = self.constrained(job, call_temperature, seed)
            {
                constrained.accept(token);
                reply.constrained = Some(constrained);
                reply.decided = true;
                reply.held.clear();
            }
            reply.pending.extend_from_slice(&bytes);
            let valid = match std::str::from_utf8(&reply.pending) {
                Ok(text) => text.len(),
                Err(e) => e.valid_up_to(),
            };
            let piece = String::from_utf8_lossy(&reply.pending[..valid]).into_owned();
            reply.pending.drain(..valid);
            reply.text.push_str(&piece);
            if reply.constrained.is_none() && !piece.is_empty() {
                match self.route_text(job, &mut reply, piece, call_temperature, seed) {
                    Routed::Go => {}
                    Routed::Aborted => return (reply, FinishReason::Aborted, true),
                    Routed::Restarted => {
                        if !self.restart(tokens, &mut reply) {
                            return (reply, FinishReason::Error, false);
                        }
                        continue;
                    }
                }
            }
            if !self.push(token, reply.position) {
                return (reply, FinishReason::Error, false);
            }
            reply.position += 1;
            reply.logits_index = 0;
        }
        (reply, FinishReason::Length, false)
    }

    /// Free text: stream it, or hold it while the reply's start could be a call; a call
    /// opened as text switches to the grammar (the caller then restarts the reply).
    fn route_text(
        &self,
        job: &Job,
        reply: &mut Reply,
        piece: String,
        call_temperature: f32,
        seed: u32,
    ) -> Routed {
        if reply.decided {
            return if job.events.send(Ok(Piece::Text(piece))).is_err() {
                Routed::Aborted
            } else {
                Routed::Go
            };
        }
        reply.held.push_str(&piece);
        match grammar::opening(&reply.text) {
            Opening::Undecided => Routed::Go,
            Opening::Text => {
                reply.decided = true;
                let held = std::mem::take(&mut reply.held);
                if job.events.send(Ok(Piece::Text(held))).is_err() { Routed::Aborted } else { Routed::Go }
            }
            Opening::Call => {
                reply.decided = true;
                match self.constrained(job, call_temperature, seed) {
                    // Start the reply again, under the grammar.
                    Some(constrained) => {
                        reply.constrained = Some(constrained);
                        Routed::Restarted
                    }
                    None => {
                        let held = std::mem::take(&mut reply.held);
                        if job.events.send(Ok(Piece::Text(held))).is_err() {
                            Routed::Aborted
                        } else {
                            Routed::Go
                        }
                    }
                }
            }
        }
    }

    /// Rolls the context back to the end of the prompt and recomputes the logits of its
    /// last token, discarding what was generated.
    fn restart(&mut self, tokens: &[LlamaToken], reply: &mut Reply) -> bool {
        let last = tokens.len() - 1;
        self.truncate(last);
        if !self.push(tokens[last], last) {
            return false;
        }
        reply.text.clear();
        reply.held.clear();
        reply.pending.clear();
        reply.recent.clear();
        reply.lines = crate::repeats::LineRepeats::new();
        reply.position = tokens.len();
        reply.logits_index = 0;
        true
    }
}

/// What became of a piece of free text.
enum Routed {
    /// Go on sampling.
    Go,
    /// The receiver is gone.
    Aborted,
    /// The reply opened a call: start it again under the grammar.
    Restarted,
}
