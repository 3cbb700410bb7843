//! Putting a command's arguments into its text: `$ARGUMENTS` is everything typed after
//! the name (further lines included: a paste, or piped input in print mode), `$1`, `$2`…
//! the words of the first line (quotes group words; a missing one is empty). A text with
//! neither gets the arguments after it, so nothing typed is dropped.

use crate::quoted::{Backslash, words};

/// `body` with `arguments` put in.
pub fn expand(body: &str, arguments: &str) -> String {
    let arguments = arguments.trim();
    let positional = words(arguments.lines().next().unwrap_or_default(), Backslash::IsText);
    let mut out = String::with_capacity(body.len() + arguments.len());
    let mut used = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(arguments);
            used = true;
            rest = tail;
            continue;
        }
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[..digits].parse::<usize>() {
            Ok(n) if n > 0 && !after.starts_with('0') => {
                out.push_str(positional.get(n - 1).map_or("", String::as_str));
                used = true;
                rest = &after[digits..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    if !used && !arguments.is_empty() {
        out.push_str("\n\nArguments: ");
        out.push_str(arguments);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_all_and_by_position() {
        assert_eq!(
            expand("Review $ARGUMENTS for bugs.", "src/lib.rs  src/main.rs"),
            "Review src/lib.rs  src/main.rs for bugs."
        );
        assert_eq!(
            expand("Fix issue #$1 with priority $2 ($3).", "123 \"very high\""),
            "Fix issue #123 with priority very high ()."
        );
        assert_eq!(expand("$1$2 and $10 and $0 and $ and $x", "a b"), "ab and  and $0 and $ and $x");
        assert_eq!(expand("Tidy up.", ""), "Tidy up.");
        assert_eq!(expand("Tidy up.", " the tests "), "Tidy up.\n\nArguments: the tests");
        assert_eq!(
            expand("Explain $1:\n$ARGUMENTS", "this\n```\nlog line\n```"),
            "Explain this:\nthis\n```\nlog line\n```"
        );
        assert_eq!(expand("Price: $ARGUMENTSs", "5"), "Price: 5s");
    }
}
