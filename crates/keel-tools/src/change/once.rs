//! Refusals given once: a call change_file refuses before asking the editor (a command as
//! the words, a new file beside the one the task names) goes through when the model makes
//! it again. The refusal is a question, not a wall: the model that insists gets the editor,
//! which sees the task (json-dependency, llama-server: `npm install lodash@^4.17.21` as the
//! words for package.json, refused four times in a row, then the step limit).

use std::collections::HashSet;

use keel_agent::ToolState;

/// Most refusals remembered; past it the memory starts again.
const MAX_REMEMBERED: usize = 256;

/// What was refused once in this session, by a key of the refusal's kind and the call.
#[derive(Debug, Default)]
struct RefusedOnce(HashSet<String>);

/// True the first time `key` is seen in this session (refuse then), false after.
pub(super) fn first_time(state: &ToolState, key: String) -> bool {
    state.with(|refused: &mut RefusedOnce| {
        if refused.0.len() >= MAX_REMEMBERED {
            refused.0.clear();
        }
        refused.0.insert(key)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_new_once_per_session() {
        let (state, other) = (ToolState::default(), ToolState::default());
        assert!(first_time(&state, "command:a.py\0git add a.py".into()));
        assert!(!first_time(&state, "command:a.py\0git add a.py".into()));
        assert!(first_time(&state, "command:b.py\0git add a.py".into()));
        assert!(first_time(&other, "command:a.py\0git add a.py".into()), "sessions are apart");
    }
}
