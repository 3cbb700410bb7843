//! Choosing the next token: freely for text, under the call grammar inside a tool call.

use super::llama::{Api, Context, Sampler, Stage, Token, Vocab};

/// Candidates looked at first under the grammar; the whole vocabulary only when none of
/// them fits (checking every token against the grammar costs milliseconds a token).
const GRAMMAR_TOP_K: i32 = 40;

/// The sampler for free text: top-k 40, top-p 0.95, min-p 0.05, then `temperature`
/// (greedy at 0).
pub(crate) fn free<'v>(api: &'static Api, temperature: f32, seed: u32) -> Option<Sampler<'v>> {
    if temperature <= 0.0 {
        return Sampler::greedy(api);
    }
    Sampler::chain(
        api,
        &[
            Stage::TopK(40),
            Stage::TopP(0.95),
            Stage::MinP(0.05),
            Stage::Temperature(temperature),
            Stage::Pick(seed),
        ],
    )
}

/// Sampling inside a tool call: every token must keep the text a valid prefix of the
/// grammar, so the finished call parses and matches the tool's schema.
pub(crate) struct Constrained<'v> {
    grammar: Sampler<'v>,
    top_k: Sampler<'v>,
    pick: Sampler<'v>,
}

impl<'v> Constrained<'v> {
    /// A constrained sampler for `grammar` (GBNF, root rule `root`); `None` when llama.cpp
    /// rejects the grammar.
    pub(crate) fn new(
        api: &'static Api,
        vocab: Vocab<'v>,
        grammar: &str,
        temperature: f32,
        seed: u32,
    ) -> Option<Constrained<'v>> {
        let grammar = Sampler::grammar(api, vocab, grammar)?;
        let pick = if temperature <= 0.0 {
            Sampler::greedy(api)?
        } else {
            Sampler::chain(api, &[Stage::Temperature(temperature), Stage::Pick(seed)])?
        };
        let top_k = Sampler::chain(api, &[Stage::TopK(GRAMMAR_TOP_K)])?;
        Some(Constrained { grammar, top_k, pick })
    }

    /// Feeds a token the grammar already allows (the call's opening tag, sampled freely).
    pub(crate) fn accept(&mut self, token: Token) {
        self.grammar.accept(token);
    }

    /// The next token from the logits at `index`, or `None` when the grammar allows no
    /// token at all (it cannot go on).
    pub(crate) fn sample(&mut self, context: &mut Context<'_>, index: i32) -> Option<Token> {
        let mut candidates = context.candidates(index)?;
        self.top_k.apply(&mut candidates);
        self.grammar.apply(&mut candidates);
        if candidates.all_ruled_out() {
            candidates = context.candidates(index)?;
            self.grammar.apply(&mut candidates);
            if candidates.all_ruled_out() {
                return None;
            }
        }
        candidates.drop_ruled_out();
        self.pick.apply(&mut candidates);
        let token = candidates.selected()?;
        // Only a token the grammar allowed reaches here, so accepting cannot fail.
        self.grammar.accept(token);
        Some(token)
    }
}
