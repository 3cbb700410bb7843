//! `keel` with no model configured (issue 32, item 5): the help says how to set keys and
//! how to run the embedded model (`--local`, the README's first command); on a terminal,
//! a keel built with the embedded model offers to run it at once. A build without it says
//! how to install one that has it (in the help, [`crate::provider::missing_model_help`]).

use std::io::{BufRead, IsTerminal, Write};

use crate::cli::Cli;
use crate::config::ConfigError;

/// The question, on stderr.
const QUESTION: &str = "Run the local model now? [y/N] ";

/// Whether to ask [`QUESTION`] after `error`: no model is configured, this keel has the
/// embedded model, and a person is there to answer (stdin and stderr are a terminal).
pub fn can_offer(error: &ConfigError) -> bool {
    cfg!(feature = "local")
        && crate::provider::names_no_model(error)
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal()
}

/// Asks [`QUESTION`] at the terminal; on yes, `cli` with `--local`.
pub fn ask_local(cli: &Cli) -> Option<Cli> {
    let yes = ask(std::io::stdin().lock(), &mut std::io::stderr());
    yes.then(|| Cli { local: true, ..cli.clone() })
}

/// Asks [`QUESTION`] on `out` and reads the answer from `answer`: yes is `y` or `yes`
/// (any case); Enter alone, anything else and end-of-file are no.
fn ask(mut answer: impl BufRead, out: &mut impl Write) -> bool {
    let _ = write!(out, "\n{QUESTION}");
    let _ = out.flush();
    let mut line = String::new();
    if answer.read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_yes_runs_the_local_model() {
        for (typed, yes) in [("y\n", true), ("YES\n", true), (" y \n", true), ("\n", false), ("n\n", false)] {
            let mut shown = Vec::new();
            assert_eq!(ask(typed.as_bytes(), &mut shown), yes, "{typed:?}");
            assert_eq!(String::from_utf8(shown).unwrap(), format!("\n{QUESTION}"));
        }
        assert!(!ask("".as_bytes(), &mut Vec::new()), "end of input is no");
        assert!(!ask("yellow\n".as_bytes(), &mut Vec::new()));
    }

    #[test]
    fn the_offer_follows_the_missing_model_only() {
        // No provider picked (none named, no key in the environment), no base URL.
        let missing = crate::provider::base_config(&crate::config::Layer::default(), None).unwrap_err();
        assert!(crate::provider::names_no_model(&missing), "{}", missing.message);
        assert_eq!(missing.exit_code(), crate::exit::USAGE);
        let same_words = ConfigError::new(crate::provider::missing_model_help());
        assert!(!crate::provider::names_no_model(&same_words), "the kind decides, not the words");
        assert!(!crate::provider::names_no_model(&ConfigError::new("DEEPSEEK_API_KEY is not set")));
    }
}
