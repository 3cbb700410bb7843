//! `keel` with no model configured (issue 32, item 5): the help says how to set keys and
//! how to run the embedded model (`--local`, the README's first command); on a terminal,
//! a keel built with the embedded model offers to run it at once. A build without it says
//! how to install one that has it (in the help, [`crate::provider::missing_model_help`]).

use std::io::{BufRead, IsTerminal, Write};

use keel_local::models::{self, Choice};

use crate::cli::Cli;
use crate::config::ConfigError;

/// The question, on stderr (after what runs, see [`question`]).
const QUESTION: &str = "Run the local model now?";

/// [`QUESTION`] with what `--local` would run: a model already here, or the one it
/// fetches first and how big it is (the walkthrough of issue 32: the size was only said
/// after the yes, when a gigabyte started to come down).
fn question(choice: Option<&Choice>) -> String {
    let mb = |bytes: u64| format!("{:.0} MB", bytes as f64 / 1_048_576.0);
    let what = match choice {
        Some(Choice::File(path)) => {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            format!("It runs {name}, already fetched.\n")
        }
        Some(Choice::Download(known, path)) => format!(
            "It runs {}, fetched first: {} into {}.\n",
            known.name,
            mb(known.size),
            path.parent().map(|p| p.display().to_string()).unwrap_or_default()
        ),
        None => String::new(),
    };
    format!("{what}{QUESTION} [y/N] ")
}

/// What `keel --local` would run here (no `--local-model`: the offer comes only without).
fn local_choice() -> Option<Choice> {
    let explicit = crate::config::layer::env("KEEL_LOCAL_MODEL");
    models::choose(explicit.as_deref(), &models::cache_dir()).ok()
}

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
    let yes = ask(&question(local_choice().as_ref()), std::io::stdin().lock(), &mut std::io::stderr());
    yes.then(|| Cli { local: true, ..cli.clone() })
}

/// Asks `question` on `out` and reads the answer from `answer`: yes is `y` or `yes`
/// (any case); Enter alone, anything else and end-of-file are no.
fn ask(question: &str, mut answer: impl BufRead, out: &mut impl Write) -> bool {
    let _ = write!(out, "\n{question}");
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
        let asked = "Run the local model now? [y/N] ";
        for (typed, yes) in [("y\n", true), ("YES\n", true), (" y \n", true), ("\n", false), ("n\n", false)] {
            let mut shown = Vec::new();
            assert_eq!(ask(asked, typed.as_bytes(), &mut shown), yes, "{typed:?}");
            assert_eq!(String::from_utf8(shown).unwrap(), format!("\n{asked}"));
        }
        assert!(!ask(asked, "".as_bytes(), &mut Vec::new()), "end of input is no");
        assert!(!ask(asked, "yellow\n".as_bytes(), &mut Vec::new()));
    }

    /// The walkthrough of issue 32: the download's size came only after the yes.
    #[test]
    fn the_question_says_what_runs_and_what_it_fetches() {
        let known = models::find("qwen2.5-coder-1.5b").unwrap();
        let dir = std::path::Path::new("/home/me/.cache/keel/models");
        let fetch = Choice::Download(known, dir.join(known.file));
        assert_eq!(
            question(Some(&fetch)),
            "It runs qwen2.5-coder-1.5b, fetched first: 1066 MB into /home/me/.cache/keel/models.\nRun the local model now? [y/N] "
        );
        let here = Choice::File(dir.join(known.file));
        assert_eq!(
            question(Some(&here)),
            "It runs qwen2.5-coder-1.5b-instruct-q4_k_m.gguf, already fetched.\nRun the local model now? [y/N] "
        );
        assert_eq!(question(None), "Run the local model now? [y/N] ");
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
