//! No module of a keel crate imports one that imports it back, directly or around a
//! loop (issue 31, item 1). A circle makes two modules one in all but name: neither can
//! be read, tested or changed alone. A module may use its ancestors' items (a child
//! reading its parent's types is how Rust modules are built); every other path a module
//! names (`crate::…`, `super::…`) is an edge. Test modules and comments are left out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

/// The module path of a source file under `src`.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: ModPath = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without line comments and without its test module.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            break;
        }
        let line = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every path that starts at `crate::` or `super::` in `code`, brace groups expanded:
/// `crate::{a::B, c::{D, E}}` gives `a::B`, `c::D`, `c::E` (each from the crate root).
fn paths(code: &str, module: &ModPath) -> Vec<ModPath> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &code[at..];
        let boundary = at == 0
            || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':');
        let base = if !boundary {
            None
        } else if rest.starts_with("crate::") {
            Some((Vec::new(), "crate::".len()))
        } else if rest.starts_with("super::") {
            // `super` of `a/b.rs` (module a::b) and of `a/b/mod.rs` (module a::b) is `a`.
            let mut base = module.clone();
            base.pop();
            let mut skip = "super::".len();
            while code[at + skip..].starts_with("super::") {
                base.pop();
                skip += "super::".len();
            }
            Some((base, skip))
        } else {
            None
        };
        match base {
            Some((base, skip)) => {
                let (consumed, mut tails) = tree(&code[at + skip..]);
                for tail in tails.drain(..) {
                    let mut path = base.clone();
                    path.extend(tail);
                    found.push(path);
                }
                at += skip + consumed.max(1);
            }
            None => at += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    found
}

/// Reads a use tree at the start of `text`: `a::b::C`, or `a::{…}`; returns the bytes
/// read and the paths (as segments).
fn tree(text: &str) -> (usize, Vec<ModPath>) {
    let mut segments: ModPath = Vec::new();
    let mut at = 0;
    loop {
        let word: String = text[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if word.is_empty() {
            if text[at..].starts_with('{') {
                let mut paths = Vec::new();
                at += 1;
                loop {
                    at += text[at..].len() - text[at..].trim_start().len();
                    if text[at..].starts_with('}') || at >= text.len() {
                        at += 1;
                        break;
                    }
                    let (used, inner) = tree(&text[at..]);
                    for tail in inner {
                        let mut path = segments.clone();
                        path.extend(tail);
                        paths.push(path);
                    }
                    at += used.max(1);
                    at += text[at..].len() - text[at..].trim_start().len();
                    if text[at..].starts_with(',') {
                        at += 1;
                    }
                }
                return (at, paths);
            }
            return (at, vec![segments]);
        }
        at += word.len();
        segments.push(word);
        if text[at..].starts_with("::") {
            at += 2;
        } else {
            return (at, vec![segments]);
        }
    }
}

/// The import graph of one crate: module → modules it names (ancestors left out).
fn graph(src: &Path) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<ModPath, PathBuf> = files.iter().map(|f| (module_of(src, f), f.clone())).collect();
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let targets = edges.entry(module.clone()).or_default();
        for path in paths(&code(&text), module) {
            let Some(target) =
                (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains_key(p))
            else {
                continue;
            };
            let ancestor = target.len() < module.len() && module.starts_with(&target);
            if &target != module && !ancestor {
                targets.insert(target);
            }
        }
    }
    edges
}

/// The strongly connected components with more than one module (Tarjan).
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.found
}

fn name(module: &ModPath) -> String {
    if module.is_empty() { "lib".to_owned() } else { module.join("::") }
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut found = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        let krate = src.parent().and_then(Path::file_name).unwrap().to_string_lossy().into_owned();
        for circle in circles(&graph(&src)) {
            found.push(format!("{krate}: {}", circle.iter().map(name).collect::<Vec<_>>().join(" <-> ")));
        }
    }
    found.sort();
    assert!(checked >= 10, "only {checked} crates found under {}", crates.display());
    assert_eq!(found, Vec::<String>::new(), "module circles");
}

#[test]
fn the_reader_sees_groups_super_and_skips_comments_and_tests() {
    let module = vec!["a".to_owned(), "b".to_owned()];
    let text = "use crate::{x::Y, z::{P, q::R}};\n// crate::commented\nfn f() { super::sibling::go(); }\n#[cfg(test)]\nmod tests { use crate::hidden; }\n";
    let got = paths(&code(text), &module);
    let want: Vec<ModPath> =
        [vec!["x", "Y"], vec!["z", "P"], vec!["z", "q", "R"], vec!["a", "sibling", "go"]]
            .iter()
            .map(|p| p.iter().map(|s| (*s).to_owned()).collect())
            .collect();
    assert_eq!(got, want);
}

#[test]
fn a_loop_of_three_is_one_circle() {
    let m = |s: &str| vec![s.to_owned()];
    let edges: BTreeMap<ModPath, BTreeSet<ModPath>> = [
        (m("a"), [m("b")].into_iter().collect()),
        (m("b"), [m("c")].into_iter().collect()),
        (m("c"), [m("a")].into_iter().collect()),
        (m("d"), [m("a")].into_iter().collect()),
    ]
    .into_iter()
    .collect();
    assert_eq!(circles(&edges), vec![vec![m("a"), m("b"), m("c")]]);
}
