//! Cost estimates from per-million-token prices (built-in list, overridable in config).

use std::collections::BTreeMap;

use keel_llm::Usage;

use crate::config::Price;

/// Known list prices in USD per million tokens (input, cached input, output). A config
/// `[pricing."model"]` entry overrides these.
const KNOWN: &[(&str, f64, f64, f64)] = &[
    ("deepseek-chat", 0.28, 0.028, 0.42),
    ("deepseek-reasoner", 0.28, 0.028, 0.42),
    ("gpt-4.1", 2.00, 0.50, 8.00),
    ("gpt-4.1-mini", 0.40, 0.10, 1.60),
    ("gpt-4.1-nano", 0.10, 0.025, 0.40),
    ("gpt-4o", 2.50, 1.25, 10.00),
    ("gpt-4o-mini", 0.15, 0.075, 0.60),
];

/// The price of `model`, if known.
pub fn price(overrides: &BTreeMap<String, Price>, model: &str) -> Option<Price> {
    if let Some(price) = overrides.get(model) {
        return Some(*price);
    }
    KNOWN.iter().find(|(name, ..)| *name == model).map(|(_, input, cached, output)| Price {
        input: *input,
        cached: Some(*cached),
        output: *output,
    })
}

/// Dollars spent for `usage` on `model`, if its price is known.
pub fn cost(overrides: &BTreeMap<String, Price>, model: &str, usage: &Usage) -> Option<f64> {
    let price = price(overrides, model)?;
    let cached = usage.cached_tokens.min(usage.input_tokens) as f64;
    let fresh = usage.input_tokens as f64 - cached;
    let dollars = fresh * price.input
        + cached * price.cached.unwrap_or(price.input)
        + usage.output_tokens as f64 * price.output;
    Some(dollars / 1_000_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_are_cheaper() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cached_tokens: 500_000,
            ..Usage::default()
        };
        let dollars = cost(&BTreeMap::new(), "deepseek-chat", &usage).unwrap();
        assert!((dollars - (0.14 + 0.014 + 0.42)).abs() < 1e-9, "{dollars}");
        assert_eq!(cost(&BTreeMap::new(), "my-local-model", &usage), None);
        let mut overrides = BTreeMap::new();
        overrides.insert("my-local-model".to_owned(), Price { input: 0.0, cached: None, output: 0.0 });
        assert_eq!(cost(&overrides, "my-local-model", &usage), Some(0.0));
    }
}
