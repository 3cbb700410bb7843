//! What a task asks for, read from its words: a change, a check, or an answer.
//!
//! The turn-stopping rules and the small profile's tools judge a task by the same words,
//! here in one place. Two questions are kept apart on purpose: [`asks_for_change`] is sure
//! the task wants files changed ("Fix the typo"), [`is_question`] is sure it wants only an
//! answer ("Which file defines parse_header?"); a task in between ("Can you fix the
//! test?", "The build fails.") is neither, and the rules that act on certainty leave it
//! alone.

/// Words that make a task a request for a change.
const CHANGE_WORDS: &[&str] = &[
    "add",
    "append",
    "bump",
    "change",
    "commit",
    "convert",
    "copy",
    "create",
    "delete",
    "edit",
    "fix",
    "format",
    "generate",
    "implement",
    "insert",
    "install",
    "make",
    "modify",
    "move",
    "refactor",
    "remove",
    "rename",
    "replace",
    "save",
    "set",
    "sort",
    "update",
    "write",
];

/// Words in a task that name a check to run.
const CHECK_WORDS: &[&str] =
    &["run", "runs", "test", "tests", "verify", "check", "confirm", "works", "working"];

/// Words that open a question.
const QUESTION_WORDS: &[&str] = &[
    "which", "what", "where", "when", "who", "whose", "why", "how", "does", "do", "is", "are", "can",
    "could", "should", "would", "will", "has", "have",
];

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty())
}

fn has_word(text: &str, list: &[&str]) -> bool {
    words(text).any(|word| list.iter().any(|w| word.eq_ignore_ascii_case(w)))
}

/// True when a word of `text` asks for a change (fix, add, rename, …).
pub fn names_a_change(text: &str) -> bool {
    has_word(text, CHANGE_WORDS)
}

/// True when a word of `text` names a check to run (run, test, verify, …).
pub fn names_a_check(text: &str) -> bool {
    has_word(text, CHECK_WORDS)
}

/// True for a task that asks for a change: not a question, and a change word in it.
pub fn asks_for_change(task: &str) -> bool {
    let task = task.trim();
    !task.ends_with('?') && names_a_change(task)
}

/// True for a task that asks a question and names no change: it has a question mark,
/// its first word opens a question, and no word of it asks for a change ("Can you fix
/// the test?" is a change request).
pub fn is_question(task: &str) -> bool {
    let task = task.trim();
    let opens_question =
        words(task).next().is_some_and(|first| QUESTION_WORDS.iter().any(|w| first.eq_ignore_ascii_case(w)));
    opens_question && task.contains('?') && !names_a_change(task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_requests_are_told_from_questions() {
        for task in [
            "Fix the typo in README.md.",
            "Rename notes.txt to NOTES.md",
            "Commit the changes",
            "Sort the lines of names.txt",
        ] {
            assert!(asks_for_change(task), "{task}");
            assert!(!is_question(task), "{task}");
        }
        for task in
            ["Which file defines parse_header?", "What does `python3 calc.py` print?", "Explain this project"]
        {
            assert!(!asks_for_change(task), "{task}");
        }
        assert!(!asks_for_change("Which files contain TODO?"));
    }

    #[test]
    fn questions_are_told_from_change_requests() {
        for task in [
            "Which file defines the function parse_header? Answer with its path.",
            "What does `python3 calc.py 6 7` print?",
            "How many data rows (not counting the header line) are in sales.csv?",
            "Which files have uncommitted changes in this git repository?",
            "Why does the test fail?",
        ] {
            assert!(is_question(task), "{task}");
        }
        for task in [
            "Can you fix the failing test?",
            "Could you add a --shout flag?",
            "Rename notes.txt to NOTES.md.",
            "Explain this project",
            "Sort the lines of names.txt. Which order? Alphabetical.",
            "",
        ] {
            assert!(!is_question(task), "{task}");
        }
    }

    #[test]
    fn checks_are_named_by_whole_words() {
        assert!(names_a_check("Fix the script and run it."));
        assert!(names_a_check("then run the tests to confirm they pass"));
        assert!(!names_a_check("Rename the function calc_total"));
        assert!(!names_a_check("Bump the version (trunk)"));
    }
}
