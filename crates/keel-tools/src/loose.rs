//! Loose matching for `edit_file`: when `old_text` is not in the file exactly, the one
//! place whose text differs from it only in whitespace (spaces, tabs, line breaks,
//! indentation) and in the kind of quote marks (`'` for `"`). Small models often copy a
//! line with the wrong quotes or indentation; an unambiguous loose match is what they
//! meant. Two or more loose matches, or too little text to be sure, match nothing.

use std::ops::Range;

/// `old_text` longer than this is not matched loosely (the pattern would be large).
const MAX_OLD_CHARS: usize = 20_000;
/// At least this many non-whitespace characters are needed to be sure of a match.
const MIN_SIGNIFICANT_CHARS: usize = 12;

/// The byte range in `content` of the only loose match of `old`, if there is exactly
/// one. When `old` starts with indentation, the range starts at the start of the line,
/// so the replacement's own indentation replaces the file's.
pub(crate) fn loose_match(content: &str, old: &str) -> Option<Range<usize>> {
    if old.chars().count() > MAX_OLD_CHARS {
        return None;
    }
    let tokens: Vec<&str> = old.split_whitespace().collect();
    if tokens.iter().map(|t| t.chars().count()).sum::<usize>() < MIN_SIGNIFICANT_CHARS {
        return None;
    }
    let pattern = tokens
        .iter()
        .map(|token| regex::escape(token).replace(['\'', '"'], "[\"']"))
        .collect::<Vec<_>>()
        .join(r"\s+");
    let regex = regex::RegexBuilder::new(&pattern).size_limit(1 << 22).build().ok()?;
    let mut matches = regex.find_iter(content);
    let found = matches.next()?;
    if matches.next().is_some() {
        return None;
    }
    let mut start = found.start();
    if old.starts_with([' ', '\t']) {
        let line_start = content[..start].rfind('\n').map_or(0, |at| at + 1);
        if content[line_start..start].chars().all(|c| c == ' ' || c == '\t') {
            start = line_start;
        }
    }
    Some(start..found.end())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "def main():\n    parser.add_argument(\"--name\", default=\"world\")\n    args = parser.parse_args()\n";

    #[test]
    fn other_quotes_and_spacing_match_the_one_place() {
        let range = loose_match(FILE, "parser.add_argument('--name',  default='world')").unwrap();
        assert_eq!(&FILE[range], "parser.add_argument(\"--name\", default=\"world\")");
    }

    #[test]
    fn lines_with_other_indentation_match_from_the_line_start_when_indented() {
        let old = "  parser.add_argument(\"--name\", default=\"world\")\n  args = parser.parse_args()";
        let range = loose_match(FILE, old).unwrap();
        assert_eq!(
            &FILE[range],
            "    parser.add_argument(\"--name\", default=\"world\")\n    args = parser.parse_args()"
        );
    }

    #[test]
    fn two_places_or_too_little_text_match_nothing() {
        let twice = "x = 'value one'\ny = 1\nx = \"value one\"\n";
        assert_eq!(loose_match(twice, "x = \"value one\" "), None);
        assert_eq!(loose_match(FILE, "args ="), None);
        assert_eq!(loose_match(FILE, "parser.add_argument('--other')"), None);
    }

    #[test]
    fn other_characters_still_have_to_match_exactly() {
        assert_eq!(loose_match(FILE, "parser.add_argument('--name', default='World')"), None);
        assert_eq!(loose_match(FILE, "parser.add_argument(--name, default=world)"), None);
    }
}
