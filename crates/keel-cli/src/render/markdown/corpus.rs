//! Answers as models write them (lists in lists, quotes, tables, code in lists), laid out
//! as a person reads them: issue 32, item 6 (a nested item was glued onto its parent's
//! line, a quote lost its marker).

use pretty_assertions::assert_eq;

/// What the terminal shows, escapes dropped.
fn shown(markdown: &str, width: usize) -> String {
    let mut out = String::new();
    let mut chars = super::render(markdown, width).chars().collect::<Vec<_>>().into_iter().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn a_nested_list_stays_under_its_item() {
    let answer = "Here's the plan:\n\n1. Read the config\n   - check `model`\n   - check `base_url`\n2. Fix the bug in **parser.rs**\n3. Run the tests\n";
    assert_eq!(
        shown(answer, 40),
        "Here's the plan:\n\n1. Read the config\n   • check model\n   • check base_url\n2. Fix the bug in parser.rs\n3. Run the tests\n"
    );
}

#[test]
fn a_quote_keeps_its_bar_on_every_line() {
    let answer = "> **Note:** this deletes files.\n> Run it in a copy.\n\nDone.\n";
    assert_eq!(shown(answer, 40), "│ Note: this deletes files. Run it in a\n│ copy.\n\nDone.\n");
    let nested = "> Quoted:\n> - one\n> - two\n";
    assert_eq!(shown(nested, 40), "│ Quoted:\n│\n│ • one\n│ • two\n");
}

#[test]
fn code_in_a_list_item_is_indented_with_it() {
    let answer = "- Install:\n\n  ```sh\n  pip install -r requirements.txt\n  ```\n\n- Run `pytest`.\n";
    assert_eq!(shown(answer, 60), "• Install:\n\n  pip install -r requirements.txt\n\n• Run pytest.\n");
}

#[test]
fn tables_are_drawn_and_the_text_after_them_follows() {
    let answer = "| file | lines |\n|---|---|\n| a.py | 12 |\n\nThat's all.";
    let expected = "┌──────┬───────┐\n│ file │ lines │\n├──────┼───────┤\n│ a.py │ 12    │\n└──────┴───────┘\n\nThat's all.\n";
    assert_eq!(shown(answer, 40), expected);
}

#[test]
fn long_items_wrap_under_their_own_text_at_every_depth() {
    let answer = "1. Outer item whose text is long enough to wrap onto a second line here\n   1. inner\n      - deepest [link](https://example.com)\n";
    assert_eq!(
        shown(answer, 40),
        "1. Outer item whose text is long enough\n   to wrap onto a second line here\n   1. inner\n      • deepest link\n        (https://example.com)\n"
    );
    for width in [20, 32, 50] {
        for line in shown(answer, width).lines() {
            // Only a word longer than the line may pass its end.
            let fits = super::wrap::width(line) <= width || !line.trim().contains(' ');
            assert!(fits, "{line:?} is wider than {width}");
        }
    }
}

#[test]
fn numbering_starts_where_the_answer_starts_it_and_tasks_show_their_state() {
    let answer = "3. third\n4. fourth\n\n- [x] done\n- [ ] open\n\n---\n\n## Summary\nAll *good*.";
    assert_eq!(
        shown(answer, 40),
        "3. third\n4. fourth\n\n• [x] done\n• [ ] open\n\n────────────────────────────────────────\n\nSummary\n\nAll good.\n"
    );
}
