//! The grammars are checked with a small GBNF matcher (the subset the builder writes:
//! literals, character classes, groups, alternatives, `*`, `?`, `{m,n}`, rule names), so
//! these tests need no model.

use std::collections::{BTreeSet, HashMap};

use super::*;
use keel_llm::ToolDefinition;
use pretty_assertions::assert_eq;
use serde_json::value::RawValue;

#[derive(Debug, Clone)]
enum Expr {
    Literal(Vec<char>),
    Class { negated: bool, ranges: Vec<(char, char)> },
    Rule(String),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    Repeat(Box<Expr>, usize, usize),
}

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    _text: &'a str,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.pos < self.chars.len() && (self.chars[self.pos] == ' ' || self.chars[self.pos] == '\t') {
            self.pos += 1;
        }
    }

    fn escaped(&mut self) -> char {
        let c = self.chars[self.pos];
        self.pos += 1;
        if c != '\\' {
            return c;
        }
        let e = self.chars[self.pos];
        self.pos += 1;
        match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'x' => {
                let hex: String = self.chars[self.pos..self.pos + 2].iter().collect();
                self.pos += 2;
                char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap()
            }
            other => other,
        }
    }

    fn alt(&mut self) -> Expr {
        let mut options = vec![self.seq()];
        loop {
            self.ws();
            if self.pos < self.chars.len() && self.chars[self.pos] == '|' {
                self.pos += 1;
                options.push(self.seq());
            } else {
                break;
            }
        }
        if options.len() == 1 { options.pop().unwrap() } else { Expr::Alt(options) }
    }

    fn seq(&mut self) -> Expr {
        let mut items = Vec::new();
        loop {
            self.ws();
            if self.pos >= self.chars.len() || matches!(self.chars[self.pos], '|' | ')' | '\n') {
                break;
            }
            let atom = self.atom();
            items.push(self.postfix(atom));
        }
        Expr::Seq(items)
    }

    fn postfix(&mut self, atom: Expr) -> Expr {
        match self.chars.get(self.pos) {
            Some('*') => {
                self.pos += 1;
                Expr::Repeat(Box::new(atom), 0, usize::MAX)
            }
            Some('+') => {
                self.pos += 1;
                Expr::Repeat(Box::new(atom), 1, usize::MAX)
            }
            Some('?') => {
                self.pos += 1;
                Expr::Repeat(Box::new(atom), 0, 1)
            }
            Some('{') => {
                let close = self.chars[self.pos..].iter().position(|c| *c == '}').unwrap() + self.pos;
                let inner: String = self.chars[self.pos + 1..close].iter().collect();
                self.pos = close + 1;
                let (lo, hi) = match inner.split_once(',') {
                    Some((lo, hi)) => (lo.parse().unwrap(), hi.parse().unwrap()),
                    None => (inner.parse().unwrap(), inner.parse().unwrap()),
                };
                Expr::Repeat(Box::new(atom), lo, hi)
            }
            _ => atom,
        }
    }

    fn atom(&mut self) -> Expr {
        match self.chars[self.pos] {
            '"' => {
                self.pos += 1;
                let mut text = Vec::new();
                while self.chars[self.pos] != '"' {
                    text.push(self.escaped());
                }
                self.pos += 1;
                Expr::Literal(text)
            }
            '[' => {
                self.pos += 1;
                let negated = self.chars[self.pos] == '^';
                if negated {
                    self.pos += 1;
                }
                let mut ranges = Vec::new();
                while self.chars[self.pos] != ']' {
                    let lo = self.escaped();
                    if self.chars[self.pos] == '-' && self.chars[self.pos + 1] != ']' {
                        self.pos += 1;
                        let hi = self.escaped();
                        ranges.push((lo, hi));
                    } else {
                        ranges.push((lo, lo));
                    }
                }
                self.pos += 1;
                Expr::Class { negated, ranges }
            }
            '(' => {
                self.pos += 1;
                let inner = self.alt();
                self.ws();
                assert_eq!(self.chars[self.pos], ')');
                self.pos += 1;
                inner
            }
            _ => {
                let start = self.pos;
                while self.pos < self.chars.len()
                    && (self.chars[self.pos].is_ascii_alphanumeric() || self.chars[self.pos] == '-')
                {
                    self.pos += 1;
                }
                assert!(self.pos > start, "bad grammar at {}", self.pos);
                Expr::Rule(self.chars[start..self.pos].iter().collect())
            }
        }
    }
}

fn parse_grammar(text: &str) -> HashMap<String, Expr> {
    let mut rules = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (name, body) = line.split_once(" ::= ").unwrap();
        let mut parser = Parser { chars: body.chars().collect(), pos: 0, _text: body };
        let expr = parser.alt();
        assert_eq!(parser.pos, parser.chars.len(), "rule {name} not fully parsed: {body}");
        assert!(rules.insert(name.to_owned(), expr).is_none(), "rule {name} defined twice");
    }
    rules
}

/// Every position where `expr`, starting at `pos`, can end.
fn ends(rules: &HashMap<String, Expr>, expr: &Expr, input: &[char], pos: usize) -> BTreeSet<usize> {
    match expr {
        Expr::Literal(text) => {
            if input[pos..].starts_with(text) {
                [pos + text.len()].into()
            } else {
                BTreeSet::new()
            }
        }
        Expr::Class { negated, ranges } => match input.get(pos) {
            Some(c) if ranges.iter().any(|(lo, hi)| lo <= c && c <= hi) != *negated => [pos + 1].into(),
            _ => BTreeSet::new(),
        },
        Expr::Rule(name) => {
            ends(rules, rules.get(name).unwrap_or_else(|| panic!("no rule {name}")), input, pos)
        }
        Expr::Seq(items) => {
            let mut current: BTreeSet<usize> = [pos].into();
            for item in items {
                current = current.iter().flat_map(|&p| ends(rules, item, input, p)).collect();
            }
            current
        }
        Expr::Alt(options) => options.iter().flat_map(|o| ends(rules, o, input, pos)).collect(),
        Expr::Repeat(inner, lo, hi) => {
            let mut all = BTreeSet::new();
            let mut current: BTreeSet<usize> = [pos].into();
            let mut count = 0;
            loop {
                if count >= *lo {
                    all.extend(current.iter().copied());
                }
                if count == *hi || current.is_empty() {
                    break;
                }
                let next: BTreeSet<usize> = current
                    .iter()
                    .flat_map(|&p| ends(rules, inner, input, p))
                    .filter(|&p| !all.contains(&p) || count < *lo)
                    .collect();
                if next.is_empty() {
                    break;
                }
                current = next;
                count += 1;
            }
            all
        }
    }
}

fn accepts(grammar: &str, input: &str) -> bool {
    let rules = parse_grammar(grammar);
    let chars: Vec<char> = input.chars().collect();
    ends(&rules, &rules["root"], &chars, 0).contains(&chars.len())
}

fn tool(name: &str, schema: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: String::new(),
        parameters: RawValue::from_string(schema.into()).unwrap(),
    }
}

fn tools() -> Vec<ToolDefinition> {
    vec![
        tool(
            "shell",
            r#"{"type":"object","properties":{"command":{"type":"string"},"timeout_secs":{"type":"integer"}},"required":["command"]}"#,
        ),
        tool(
            "read_file",
            r#"{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"]}"#,
        ),
        tool(
            "edit_file",
            r#"{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["path","old_text","new_text"]}"#,
        ),
        tool("list_files", r#"{"type":"object","properties":{"path":{"type":"string"}}}"#),
        tool(
            "pick",
            r#"{"type":"object","properties":{"mode":{"enum":["fast","slow"]},"tags":{"type":"array","items":{"type":"string"}},"limit":{"type":["integer","null"]}},"required":["mode"]}"#,
        ),
    ]
}

#[test]
fn valid_calls_are_accepted() {
    let grammar = tool_calls(&tools(), CallStyle::Tagged, 4, 0).unwrap();
    for call in [
        "<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls -la\"}}\n</tool_call>",
        "<tool_call>{\"name\":\"shell\",\"arguments\":{\"command\":\"python3 -c \\\"print(1)\\\"\",\"timeout_secs\":30}}</tool_call>",
        "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\", \"limit\": 20}}\n</tool_call>\n<tool_call>\n{\"name\": \"list_files\", \"arguments\": {}}\n</tool_call>\n",
        "<tool_call>{\"name\": \"edit_file\", \"arguments\": {\"path\": \"a\", \"old_text\": \"x\\n\", \"new_text\": \"y\\u00e9\"}}</tool_call>",
        "<tool_call>{\"name\": \"pick\", \"arguments\": {\"mode\": \"slow\", \"tags\": [\"a\", \"b\"], \"limit\": null}}</tool_call>",
        "<tool_call>{\"name\": \"pick\", \"arguments\": {\"mode\": \"fast\", \"limit\": 3}}</tool_call>",
        "<tool_call>{\"name\": \"list_files\", \"arguments\": {\"path\": \"src\"}}</tool_call>",
    ] {
        assert!(accepts(&grammar, call), "rejected: {call}");
    }
}

#[test]
fn invalid_calls_are_rejected() {
    let grammar = tool_calls(&tools(), CallStyle::Tagged, 4, 0).unwrap();
    for call in [
        // Unknown tool.
        "<tool_call>{\"name\": \"git\", \"arguments\": {\"command\": \"status\"}}</tool_call>",
        // Missing required field.
        "<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>",
        // Unknown field.
        "<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\", \"cwd\": \"x\"}}</tool_call>",
        // Wrong type.
        "<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\", \"timeout_secs\": \"5\"}}</tool_call>",
        // Not in the enum.
        "<tool_call>{\"name\": \"pick\", \"arguments\": {\"mode\": \"medium\"}}</tool_call>",
        // A raw newline inside a string.
        "<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"a\nb\"}}</tool_call>",
        // Unclosed.
        "<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}",
        // Prose after the calls.
        "<tool_call>{\"name\": \"list_files\", \"arguments\": {}}</tool_call> done",
    ] {
        assert!(!accepts(&grammar, call), "accepted: {call}");
    }
}

#[test]
fn the_number_of_calls_per_reply_is_bounded() {
    let call = "<tool_call>{\"name\": \"list_files\", \"arguments\": {}}</tool_call>";
    let one = tool_calls(&tools(), CallStyle::Tagged, 1, 0).unwrap();
    assert!(accepts(&one, call));
    assert!(!accepts(&one, &format!("{call}\n{call}")));
    let three = tool_calls(&tools(), CallStyle::Tagged, 3, 0).unwrap();
    assert!(accepts(&three, &format!("{call}\n{call}\n{call}\n")));
    assert!(!accepts(&three, &format!("{call}\n{call}\n{call}\n{call}")));
}

#[test]
fn a_short_thought_may_come_before_the_call() {
    let call = "<tool_call>{\"name\": \"list_files\", \"arguments\": {}}</tool_call>";
    let grammar = tool_calls(&tools(), CallStyle::Tagged, 1, 40).unwrap();
    assert!(accepts(&grammar, call));
    assert!(accepts(&grammar, &format!("I will list the files first.\n{call}")));
    assert!(!accepts(&grammar, &format!("{}\n{call}", "x".repeat(60))), "too long");
    assert!(!accepts(&grammar, &format!("I will <think> more\n{call}")), "no tags in a thought");
    assert!(!accepts(&grammar, &format!("Plan:\n1. read it\n{call}")), "one line only");
    assert!(!accepts(&grammar, "Just talking, no call."));
}

#[test]
fn bare_style_is_objects_without_tags() {
    let grammar = tool_calls(&tools(), CallStyle::Bare, 4, 0).unwrap();
    assert!(accepts(&grammar, "{\"name\": \"list_files\", \"arguments\": {}}"));
    assert!(accepts(
        &grammar,
        "{\"name\": \"list_files\", \"arguments\": {}}\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}"
    ));
    assert!(!accepts(&grammar, "<tool_call>{\"name\": \"list_files\", \"arguments\": {}}</tool_call>"));
}

#[test]
fn odd_names_and_schemas_still_make_a_grammar() {
    let odd = vec![
        tool(
            "mcp__github__search_issues",
            r#"{"type":"object","properties":{"q":{"type":"string","description":"query \"quoted\""}},"required":["q"]}"#,
        ),
        tool("weird.tool/name", r##"{"$ref":"#/$defs/X","$defs":{"X":{"type":"object"}}}"##),
        tool("empty", r#"{}"#),
    ];
    let grammar = tool_calls(&odd, CallStyle::Tagged, 4, 0).unwrap();
    assert!(accepts(
        &grammar,
        "<tool_call>{\"name\": \"mcp__github__search_issues\", \"arguments\": {\"q\": \"bug\"}}</tool_call>"
    ));
    assert!(accepts(
        &grammar,
        "<tool_call>{\"name\": \"weird.tool/name\", \"arguments\": {\"any\": [1, {\"b\": true}]}}</tool_call>"
    ));
    assert!(accepts(&grammar, "<tool_call>{\"name\": \"empty\", \"arguments\": {}}</tool_call>"));
    assert_eq!(tool_calls(&[], CallStyle::Tagged, 4, 0), None);
}

/// The plan tool's items are a `$ref` into `$defs` (schemars' shape): they are checked
/// like inline schemas, and a schema that refers to itself makes a recursive rule.
#[test]
fn references_into_the_schemas_own_definitions_are_followed() {
    let plan = tool(
        "update_plan",
        r##"{"type":"object","properties":{"plan":{"type":"array","items":{"$ref":"#/$defs/PlanItem"}}},"required":["plan"],
            "$defs":{"PlanItem":{"type":"object","properties":{"step":{"type":"string"},"status":{"$ref":"#/$defs/Status"}},"required":["step","status"]},
                     "Status":{"type":"string","enum":["pending","in_progress","completed"]}}}"##,
    );
    let tree = tool(
        "tree",
        r##"{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}},"left":{"$ref":"#"},"right":{"$ref":"#"}},"required":["name"]}"##,
    );
    let grammar = tool_calls(&[plan, tree], CallStyle::Tagged, 1, 0).unwrap();
    let call = |name: &str, args: &str| {
        format!("<tool_call>{{\"name\": \"{name}\", \"arguments\": {args}}}</tool_call>")
    };
    assert!(accepts(
        &grammar,
        &call(
            "update_plan",
            r#"{"plan": [{"step": "read", "status": "completed"}, {"step": "fix", "status": "pending"}]}"#
        )
    ));
    assert!(!accepts(&grammar, &call("update_plan", r#"{"plan": [{"step": "read", "status": "done"}]}"#)));
    assert!(!accepts(&grammar, &call("update_plan", r#"{"plan": ["read"]}"#)));
    assert!(accepts(
        &grammar,
        &call("tree", r#"{"name": "a", "children": [{"name": "b", "left": {"name": "c"}}]}"#)
    ));
    assert!(!accepts(&grammar, &call("tree", r#"{"name": "a", "left": {"size": 1}}"#)));
    assert!(grammar.len() < 10_000, "{} bytes", grammar.len());
}

#[test]
fn the_style_follows_the_template() {
    assert_eq!(CallStyle::of_template("... <tool_call>\n{\"name\": ...} </tool_call>"), CallStyle::Tagged);
    assert_eq!(CallStyle::of_template("{{ messages }}"), CallStyle::Bare);
}

#[test]
fn the_opening_of_a_reply_is_read_as_it_grows() {
    use Opening::*;
    let cases: &[(&str, Opening)] = &[
        ("", Undecided),
        ("  \n", Undecided),
        ("<", Undecided),
        ("<tool", Undecided),
        ("<tool_call>", Call),
        ("<tools>\n{", Call),
        ("<function name=", Call),
        ("<b>", Text),
        ("{", Undecided),
        ("{{", Undecided),
        ("{\"na", Undecided),
        ("{\"name\"", Call),
        ("{{\"name\": \"shell\"", Call),
        ("{ 'name'", Call),
        ("[{\"name\"", Call),
        ("{\"function\": {", Call),
        ("{\"path\"", Text),
        ("`", Undecided),
        ("```", Undecided),
        ("```json", Undecided),
        ("```json\n", Undecided),
        ("```json\n{\"name\"", Call),
        ("```\n{\"name\"", Call),
        ("```python\nprint(1)", Text),
        ("```json\n{\"port\": 8080}", Text),
        ("``` and more", Text),
        ("The answer", Text),
        ("I will", Text),
        ("Sure!", Text),
    ];
    for (text, want) in cases {
        assert_eq!(opening(text), *want, "{text:?}");
    }
    let long = format!("```{}", "a".repeat(100));
    assert_eq!(opening(&long), Text);
}
