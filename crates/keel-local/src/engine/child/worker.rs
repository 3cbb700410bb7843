//! The engine's job loop: owns the weights and the context, evaluates prompts (reusing the KV
//! cache), and generates replies.
//!
//! A reply is generated freely until it opens a tool call. The `<tool_call>` token of a
//! tagged template switches sampling to the call grammar on the spot. A call opened in
//! another shape (` ```json {"name"…`, a bare `{"name"…`) is noticed within its first
//! tokens, which are held back from the stream: generation rolls back to the start of the
//! reply and samples again under the grammar, so the call comes out in the template's own
//! format, valid by construction.

use std::io::Write;
use std::time::Instant;

use keel_llm::{FinishReason, ModelErrorKind};

use super::error::{EngineError, EngineErrorKind};
use super::llama::{Api, Batch, Context, Model, Token};
use super::prefix_cache::PrefixCache;
use super::sampling::{self, Constrained};
use crate::engine::protocol::{FromEngine, JobSpec, JobStats, Start};
use crate::grammar::{self, CallStyle, Opening};

/// Where a job's messages go, and whether it was cancelled.
pub(crate) trait Channel {
    /// Sends `message` to keel; false when keel is gone.
    fn send(&mut self, message: FromEngine) -> bool;
    /// Whether the running job was cancelled (or keel is gone).
    fn cancelled(&self) -> bool;
}

/// The loaded model and its context, serving one job at a time.
pub(crate) struct Engine<'m> {
    api: &'static Api,
    model: &'m Model,
    ctx: Context<'m>,
    batch: Batch,
    /// Tokens whose KV entries are in the context, in order.
    cached: Vec<Token>,
    n_ctx: usize,
    prefixes: Option<PrefixCache>,
    saved_prefix: bool,
    start: &'m Start,
    style: CallStyle,
    bos: String,
}

/// Where generation stands.
struct Reply<'v> {
    /// Everything generated, calls included.
    text: String,
    /// Text not yet streamed because the reply's start could still be a call.
    held: String,
    /// The start of the reply has been read (text or call).
    decided: bool,
    /// Sampling is under the call grammar.
    constrained: Option<Constrained<'v>>,
    /// Bytes of a character split across tokens.
    pending: Vec<u8>,
    generated: usize,
    /// Position of the next token.
    position: usize,
    /// Which logits to sample from.
    logits_index: i32,
    /// The last tokens, to notice a model stuck repeating itself.
    recent: std::collections::VecDeque<Token>,
    /// Lines the same but for a leading line number, to notice a numbered copy loop.
    lines: keel_llm::repeats::LineRepeats,
    /// Spans the reply wrote before, to notice sentences cycling on one line.
    echoes: keel_llm::repeats::Echoes,
    /// The reply was sampled again once already.
    resampled: bool,
    /// Sampling stopped because the model kept repeating itself.
    degenerate: bool,
}

/// Tokens looked at to notice repetition, and the fewest distinct ones among them that
/// still count as progress.
const REPEAT_WINDOW: usize = 48;
const REPEAT_DISTINCT: usize = 3;

impl Reply<'_> {
    /// Records `token`; true when the last tokens are a handful repeated over and over.
    fn repeating(&mut self, token: Token) -> bool {
        if self.recent.len() == REPEAT_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(token);
        if self.recent.len() < REPEAT_WINDOW {
            return false;
        }
        let mut distinct: Vec<Token> = Vec::with_capacity(REPEAT_DISTINCT + 1);
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

/// How a reply's generation ended.
enum Ended {
    /// It ended for this reason.
    Finished(FinishReason),
    /// The job was cancelled.
    Cancelled,
}

impl<'m> Engine<'m> {
    /// A context of `model` for `start`'s settings.
    pub(crate) fn new(
        api: &'static Api,
        model: &'m Model,
        start: &'m Start,
        style: CallStyle,
    ) -> Result<Engine<'m>, EngineError> {
        let threads = i32::try_from(start.threads.max(1)).unwrap_or(1);
        let n_ctx = start.n_ctx.clamp(512, model.n_ctx_train().max(512));
        let ctx = model.context(n_ctx, 512, threads)?;
        let vocab = model.vocab();
        let bos = if vocab.add_bos() {
            String::from_utf8_lossy(&vocab.piece(vocab.bos())).into_owned()
        } else {
            String::new()
        };
        let prefixes = if start.reuse_cache {
            start.prefix_cache.as_deref().and_then(|dir| PrefixCache::new(dir, &start.model, n_ctx))
        } else {
            None
        };
        Ok(Engine {
            api,
            model,
            ctx,
            batch: Batch::new(api, 512),
            cached: Vec::new(),
            n_ctx: n_ctx as usize,
            prefixes,
            saved_prefix: false,
            start,
            style,
            bos,
        })
    }

    /// The beginning-of-sequence text ("" when prompts do not start with one).
    pub(crate) fn bos(&self) -> &str {
        &self.bos
    }

    /// The end-of-sequence text.
    pub(crate) fn eos(&self) -> String {
        let vocab = self.model.vocab();
        String::from_utf8_lossy(&vocab.piece(vocab.eos())).into_owned()
    }

    /// The context size.
    pub(crate) fn n_ctx(&self) -> u32 {
        self.n_ctx as u32
    }

    /// Evaluates the prompt, generates the reply, and reports it: text as it comes, then
    /// exactly one of done, cancelled or failed.
    pub(crate) fn serve(&mut self, job: &JobSpec, channel: &mut dyn Channel) {
        let vocab = self.model.vocab();
        let add_bos = vocab.add_bos() && !self.bos.is_empty() && !job.prompt.starts_with(&self.bos);
        let tokens = vocab.tokenize(&job.prompt, add_bos);
        let budget = job.max_tokens as usize;
        if tokens.is_empty() {
            channel.send(failed(ModelErrorKind::Config, "the prompt is empty".into()));
            return;
        }
        if tokens.len() + budget.min(256) > self.n_ctx {
            channel.send(failed(
                ModelErrorKind::ContextOverflow,
                format!(
                    "the conversation ({} tokens) no longer fits the local model's context of {} tokens; start a new session or raise the context size",
                    tokens.len(),
                    self.n_ctx
                ),
            ));
            return;
        }
        let started = Instant::now();
        let common = match self.evaluate(&tokens, &*channel) {
            Ok(common) => common,
            Err(e) => {
                channel.send(failed(e.model_error_kind(), format!("llama.cpp: {e}")));
                return;
            }
        };
        if channel.cancelled() {
            channel.send(FromEngine::Cancelled);
            return;
        }
        let prompt_us = started.elapsed().as_micros() as u64;
        let generation_started = Instant::now();
        let (mut reply, ended) = self.generate(job, &tokens, channel);
        let stats = JobStats {
            prompt_tokens: tokens.len(),
            reused_tokens: common,
            generated_tokens: reply.generated,
            prompt_us,
            generation_us: generation_started.elapsed().as_micros() as u64,
            constrained: reply.constrained.is_some(),
        };
        let finish = match ended {
            Ended::Cancelled => {
                channel.send(FromEngine::Cancelled);
                return;
            }
            Ended::Finished(finish) => finish,
        };
        if reply.degenerate {
            channel.send(failed(
                ModelErrorKind::Repeating,
                "the local model kept repeating itself (the same few tokens, one line with only its line number changing, or the same few sentences), also when sampled again; try rephrasing the task or a larger model".into(),
            ));
            return;
        }
        let rest = String::from_utf8_lossy(&std::mem::take(&mut reply.pending)).into_owned();
        if !rest.is_empty() {
            channel.send(FromEngine::Text { text: rest.clone() });
        }
        let mut text = reply.text;
        text.push_str(&rest);
        channel.send(FromEngine::Done { text, finish, stats });
    }

    /// Makes the context hold `tokens`, reusing the longest prefix it already holds (or
    /// one saved on disk). Returns how many tokens were reused.
    fn evaluate(&mut self, tokens: &[Token], channel: &dyn Channel) -> Result<usize, EngineError> {
        // A fresh context starts from the best prefix a previous process saved.
        if self.cached.is_empty()
            && let Some(prefixes) = &self.prefixes
            && let Some(path) = prefixes.best(tokens)
        {
            match self.ctx.load_state(&path) {
                Some(loaded) => self.cached = loaded,
                None => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        // Always evaluate at least the last token, whose logits start generation.
        let mut common = if self.start.reuse_cache {
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
                if !self.batch.add(*token, position, last) {
                    failed = Some(EngineError::new(EngineErrorKind::Decode, "the batch is full"));
                }
            }
            if let Err(code) = self.ctx.decode(&self.batch) {
                failed = Some(EngineError::new(
                    EngineErrorKind::Decode,
                    format!("decoding failed (status {code})"),
                ));
            }
            if failed.is_some() || channel.cancelled() {
                break;
            }
        }
        if let Some(reason) = failed {
            self.truncate(0);
            return Err(reason);
        }
        if channel.cancelled() {
            // What was evaluated is not known to be whole: start clean next time.
            self.truncate(common);
            return Ok(common);
        }
        self.cached.extend_from_slice(&tokens[common..]);
        if !self.saved_prefix
            && tokens.len() - common >= 256
            && let Some(prefixes) = &self.prefixes
        {
            self.saved_prefix = true;
            prefixes.save(&mut self.ctx, tokens);
        }
        Ok(common)
    }

    /// Drops every cached token from `keep` on.
    fn truncate(&mut self, keep: usize) {
        self.ctx.truncate(keep as u32);
        self.cached.truncate(keep);
    }

    /// Appends `token` at `position` and computes the logits after it.
    fn push(&mut self, token: Token, position: usize) -> bool {
        self.batch.clear();
        if !self.batch.add(token, position, true) || self.ctx.decode(&self.batch).is_err() {
            return false;
        }
        self.cached.push(token);
        true
    }

    fn constrained(&self, job: &JobSpec, temperature: f32, seed: u32) -> Option<Constrained<'m>> {
        let grammar = job.grammar.as_deref()?;
        let sampler = Constrained::new(self.api, self.model.vocab(), grammar, temperature, seed);
        if sampler.is_none() {
            let _ = writeln!(
                std::io::stderr(),
                "llama.cpp rejected the tool-call grammar; calls are sampled freely"
            );
        }
        sampler
    }

    /// Generates the reply to the prompt `tokens` (already evaluated). A reply stuck
    /// repeating itself (a handful of tokens, one line with only its line number
    /// changing, or a few sentences cycling) is sampled again once, hotter and with another seed; a second time it
    /// ends as degenerate.
    fn generate(&mut self, job: &JobSpec, tokens: &[Token], channel: &mut dyn Channel) -> (Reply<'m>, Ended) {
        let vocab = self.model.vocab();
        let budget = job.max_tokens as usize;
        // A request's own temperature holds inside its calls too (keel's reading of a
        // task's intent is a call at 0: the same task always reads the same).
        let (mut temperature, mut call_temperature, mut seed) = (
            job.temperature.unwrap_or(self.start.temperature),
            job.temperature.unwrap_or(self.start.call_temperature),
            self.start.seed,
        );
        let mut reply = Reply {
            text: String::new(),
            held: String::new(),
            decided: job.grammar.is_none(),
            constrained: None,
            pending: Vec::new(),
            generated: 0,
            position: tokens.len(),
            logits_index: self.batch.len() - 1,
            recent: std::collections::VecDeque::with_capacity(REPEAT_WINDOW),
            lines: keel_llm::repeats::LineRepeats::new(),
            echoes: keel_llm::repeats::Echoes::new(),
            resampled: false,
            degenerate: false,
        };
        let Some(mut free) = sampling::free(self.api, temperature, seed) else {
            return (reply, Ended::Finished(FinishReason::Error));
        };
        let opener = self.style.opener();
        if job.require_call {
            reply.constrained = self.constrained(job, call_temperature, seed);
            reply.decided = true;
        }
        while reply.generated < budget && reply.position < self.n_ctx {
            if channel.cancelled() {
                return (reply, Ended::Cancelled);
            }
            let token = match &mut reply.constrained {
                Some(constrained) => match constrained.sample(&mut self.ctx, reply.logits_index) {
                    Some(token) => token,
                    None => return (reply, Ended::Finished(FinishReason::Error)),
                },
                None => free.sample(&mut self.ctx, reply.logits_index),
            };
            if vocab.is_eog(token) {
                return (reply, Ended::Finished(FinishReason::Stop));
            }
            reply.generated += 1;
            let bytes = vocab.piece(token);
            let repeating = reply.repeating(token);
            let echoing = reply.echoes.push(&bytes);
            if repeating || reply.lines.push(&bytes) || echoing {
                if reply.resampled {
                    reply.degenerate = true;
                    return (reply, Ended::Finished(FinishReason::Error));
                }
                let was_call = reply.constrained.is_some();
                if !self.restart(tokens, &mut reply) {
                    return (reply, Ended::Finished(FinishReason::Error));
                }
                reply.resampled = true;
                temperature = temperature.max(keel_llm::repeats::RESAMPLE_TEMPERATURE);
                call_temperature = call_temperature.max(keel_llm::repeats::RESAMPLE_TEMPERATURE);
                seed = seed.wrapping_add(1);
                let Some(hotter) = sampling::free(self.api, temperature, seed) else {
                    return (reply, Ended::Finished(FinishReason::Error));
                };
                free = hotter;
                reply.constrained =
                    if was_call { self.constrained(job, call_temperature, seed) } else { None };
                reply.decided = was_call || job.grammar.is_none();
                if !channel.send(FromEngine::Restarted {
                    reason: "the model repeated itself; sampling again".into(),
                }) {
                    return (reply, Ended::Cancelled);
                }
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
                match self.route_text(job, &mut reply, piece, call_temperature, seed, channel) {
                    Routed::Go => {}
                    Routed::Aborted => return (reply, Ended::Cancelled),
                    Routed::Restarted => {
                        if !self.restart(tokens, &mut reply) {
                            return (reply, Ended::Finished(FinishReason::Error));
                        }
                        continue;
                    }
                }
            }
            if !self.push(token, reply.position) {
                return (reply, Ended::Finished(FinishReason::Error));
            }
            reply.position += 1;
            reply.logits_index = 0;
        }
        (reply, Ended::Finished(FinishReason::Length))
    }

    /// Free text: stream it, or hold it while the reply's start could be a call; a call
    /// opened as text switches to the grammar (the caller then restarts the reply).
    fn route_text(
        &self,
        job: &JobSpec,
        reply: &mut Reply<'m>,
        piece: String,
        call_temperature: f32,
        seed: u32,
        channel: &mut dyn Channel,
    ) -> Routed {
        let send = |channel: &mut dyn Channel, text: String| {
            if channel.send(FromEngine::Text { text }) { Routed::Go } else { Routed::Aborted }
        };
        if reply.decided {
            return send(channel, piece);
        }
        reply.held.push_str(&piece);
        match grammar::opening(&reply.text) {
            Opening::Undecided => Routed::Go,
            Opening::Text => {
                reply.decided = true;
                let held = std::mem::take(&mut reply.held);
                send(channel, held)
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
                        send(channel, held)
                    }
                }
            }
        }
    }

    /// Rolls the context back to the end of the prompt and recomputes the logits of its
    /// last token, discarding what was generated.
    fn restart(&mut self, tokens: &[Token], reply: &mut Reply<'m>) -> bool {
        let last = tokens.len() - 1;
        self.truncate(last);
        if !self.push(tokens[last], last) {
            return false;
        }
        reply.text.clear();
        reply.held.clear();
        reply.pending.clear();
        reply.recent.clear();
        reply.lines = keel_llm::repeats::LineRepeats::new();
        reply.echoes = keel_llm::repeats::Echoes::new();
        reply.position = tokens.len();
        reply.logits_index = 0;
        true
    }
}

fn failed(kind: ModelErrorKind, message: String) -> FromEngine {
    FromEngine::Failed { kind: kind.as_str().to_owned(), message }
}

/// What became of a piece of free text.
enum Routed {
    /// Go on sampling.
    Go,
    /// keel is gone.
    Aborted,
    /// The reply opened a call: start it again under the grammar.
    Restarted,
}
