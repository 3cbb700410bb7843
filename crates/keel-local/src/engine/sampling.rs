//! Choosing the next token: freely for text, under the call grammar inside a tool call.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

/// Candidates looked at first under the grammar; the whole vocabulary only when none of
/// them fits (checking every token against the grammar costs milliseconds a token).
const GRAMMAR_TOP_K: i32 = 40;

/// The sampler for free text.
pub(crate) fn free(temperature: f32, seed: u32) -> LlamaSampler {
    if temperature <= 0.0 {
        return LlamaSampler::greedy();
    }
    LlamaSampler::chain_simple([
        LlamaSampler::top_k(40),
        LlamaSampler::top_p(0.95, 1),
        LlamaSampler::min_p(0.05, 1),
        LlamaSampler::temp(temperature),
        LlamaSampler::dist(seed),
    ])
}

/// Sampling inside a tool call: every token must keep the text a valid prefix of the
/// grammar, so the finished call parses and matches the tool's schema.
pub(crate) struct Constrained {
    grammar: LlamaSampler,
    top_k: LlamaSampler,
    pick: LlamaSampler,
}

impl Constrained {
    /// A constrained sampler for `grammar` (GBNF, root rule `root`); `None` when llama.cpp
    /// rejects the grammar.
    pub(crate) fn new(model: &LlamaModel, grammar: &str, temperature: f32, seed: u32) -> Option<Constrained> {
        let grammar = LlamaSampler::grammar(model, grammar, "root").ok()?;
        let pick = if temperature <= 0.0 {
            LlamaSampler::greedy()
        } else {
            LlamaSampler::chain_simple([LlamaSampler::temp(temperature), LlamaSampler::dist(seed)])
        };
        Some(Constrained { grammar, top_k: LlamaSampler::top_k(GRAMMAR_TOP_K), pick })
    }

    /// Feeds a token the grammar already allows (the call's opening tag, sampled freely).
    pub(crate) fn accept(&mut self, token: LlamaToken) {
        self.grammar.accept(token);
    }

    /// The next token from the logits at `index`, or `None` when the grammar allows no
    /// token at all (it cannot go on).
    pub(crate) fn sample(&mut self, ctx: &LlamaContext<'_>, index: i32) -> Option<LlamaToken> {
        let mut candidates = ctx.token_data_array_ith(index);
        candidates.apply_sampler(&mut self.top_k);
        candidates.apply_sampler(&mut self.grammar);
        if candidates.data.iter().all(|d| d.logit() == f32::NEG_INFINITY) {
            candidates = ctx.token_data_array_ith(index);
            candidates.apply_sampler(&mut self.grammar);
            if candidates.data.iter().all(|d| d.logit() == f32::NEG_INFINITY) {
                return None;
            }
        }
        candidates.data.retain(|d| d.logit() != f32::NEG_INFINITY);
        candidates.selected = None;
        candidates.apply_sampler(&mut self.pick);
        let token = candidates.selected_token()?;
        // Only a token the grammar allowed reaches here, so accepting cannot fail.
        self.grammar.accept(token);
        Some(token)
    }
}
