//! `grep`: regex search with ripgrep's libraries.

use keel_agent::ToolErrorKind;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::workspace::Roots;

/// Most matching lines shown.
pub const MAX_MATCHES: usize = 200;
/// Longer matching lines are cut.
const MAX_LINE_CHARS: usize = 300;

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust regex syntax).
    pub pattern: String,
    /// File or folder to search (default: everything).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files whose path matches this glob, e.g. "*.rs".
    #[serde(default)]
    pub glob: Option<String>,
    /// Ignore case.
    #[serde(default)]
    pub case_insensitive: bool,
}

/// Searches file contents.
#[derive(Debug, Clone)]
pub struct Grep {
    config: Arc<ToolsConfig>,
}

impl Grep {
    /// A grep tool with these settings.
    pub fn new(config: Arc<ToolsConfig>) -> Self {
        Grep { config }
    }
}

/// Runs the search.
pub fn grep(roots: &Roots, args: &GrepArgs) -> Result<String, ToolError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive)
        .build(&args.pattern)
        .map_err(|e| {
            ToolError::new(ToolErrorKind::InvalidPattern, format!("invalid regex `{}`: {e}", args.pattern))
        })?;
    let path = args.path.as_deref().filter(|p| !p.trim().is_empty()).unwrap_or(".");
    let start = roots.resolve_existing(path, false).map_err(|e| {
        if e.kind == ToolErrorKind::NotFound {
            ToolError::new(ToolErrorKind::NotFound, crate::suggest::missing_path_message(roots, path))
        } else {
            e
        }
    })?;
    let glob = match args.glob.as_deref().filter(|g| !g.trim().is_empty()) {
        Some(pattern) => Some(
            globset::GlobBuilder::new(pattern)
                .literal_separator(false)
                .build()
                .map_err(|e| {
                    ToolError::new(ToolErrorKind::InvalidGlob, format!("invalid glob `{pattern}`: {e}"))
                })?
                .compile_matcher(),
        ),
        None => None,
    };
    let found = search(roots, &matcher, &start, glob.as_ref(), MAX_MATCHES);
    if found.lines.is_empty() {
        let glob_text = args.glob.as_deref().filter(|_| glob.is_some());
        let mut report = no_matches(roots, &args.pattern, &start, glob_text);
        // A glob for the wrong language hid the match (a small model searched `*.rs`
        // in a Python project eight times): say what the glob left out.
        let left_out = glob_text.map(|_| search(roots, &matcher, &start, None, MAX_ELSEWHERE));
        match (glob_text, left_out) {
            (Some(pattern), Some(found)) if !found.lines.is_empty() => {
                report.push_str(&format!(
                    "
In files the glob `{pattern}` leaves out it matches:
{}{}",
                    found.lines.join("\n"),
                    found.more("")
                ));
            }
            _ if start != roots.root() => {
                report.push_str(&elsewhere(&search(
                    roots,
                    &matcher,
                    roots.root(),
                    glob.as_ref(),
                    MAX_ELSEWHERE,
                )));
            }
            _ => {}
        }
        return Ok(report);
    }
    let mut out = found.lines.join("\n");
    out.push_str(&found.more(". Narrow the pattern, path or glob"));
    Ok(out)
}

/// Most matches elsewhere shown after a search that found nothing where it looked.
const MAX_ELSEWHERE: usize = 10;

/// What a search found: the first matching lines (`file:line: text`) and the counts.
struct Found {
    lines: Vec<String>,
    total: usize,
    files: usize,
}

impl Found {
    /// The line saying how many matches were not shown (with `advice` after the count),
    /// or nothing when all were.
    fn more(&self, advice: &str) -> String {
        if self.total <= self.lines.len() {
            return String::new();
        }
        format!(
            "\n[{} matches in {} files; only the first {} shown{advice}]",
            self.total,
            self.files,
            self.lines.len()
        )
    }
}

/// Searches every file under `start` (ignore files respected, sorted by name), keeping at
/// most `max` lines.
fn search(
    roots: &Roots,
    matcher: &grep_regex::RegexMatcher,
    start: &Path,
    glob: Option<&globset::GlobMatcher>,
    max: usize,
) -> Found {
    let mut searcher =
        SearcherBuilder::new().binary_detection(BinaryDetection::quit(0)).line_number(true).build();
    let mut found = Found { lines: Vec::new(), total: 0, files: 0 };
    let walker = ignore::WalkBuilder::new(start)
        .require_git(false)
        .git_global(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let shown = roots.display(entry.path());
        if let Some(glob) = glob {
            let name_matches = entry.file_name().to_str().is_some_and(|n| glob.is_match(n));
            if !name_matches && !glob.is_match(&shown) {
                continue;
            }
        }
        // Search the file that was opened and verified, never the path again: a file
        // swapped for a symlink after the walk saw it is not followed out.
        let Some(file) = roots.open_found(entry.path()) else { continue };
        let before = found.total;
        let result = searcher.search_file(
            matcher,
            &file,
            UTF8(|line_number, line| {
                found.total += 1;
                if found.lines.len() < max {
                    let line = line.trim_end_matches(['\n', '\r']);
                    let line = if line.chars().count() > MAX_LINE_CHARS {
                        format!("{}…", line.chars().take(MAX_LINE_CHARS).collect::<String>())
                    } else {
                        line.to_owned()
                    };
                    found.lines.push(format!("{shown}:{line_number}: {line}"));
                }
                Ok(true)
            }),
        );
        if result.is_ok() && found.total > before {
            found.files += 1;
        }
    }
    found
}

/// The matches elsewhere in the project, after a search of one file or folder found none:
/// small models searched the wrong file for a name again and again, then answered that it
/// was nowhere.
fn elsewhere(found: &Found) -> String {
    if found.lines.is_empty() {
        return String::new();
    }
    format!("\nElsewhere in the project it matches:\n{}{}", found.lines.join("\n"), found.more(""))
}

/// The report when nothing matched: where was searched, in words a small model cannot
/// misread ("in .." looked like the parent folder), and a hint when the pattern is the
/// name of a file (grep searches contents, not names).
fn no_matches(roots: &Roots, pattern: &str, start: &Path, glob: Option<&str>) -> String {
    let shown = roots.display(start);
    let place = if shown == "." { "the project folder".to_owned() } else { format!("`{shown}`") };
    let only = glob.map(|g| format!(" (files matching `{g}`)")).unwrap_or_default();
    let mut report = format!("No line in {place}{only} contains a match for `{pattern}`.");
    let name = pattern.replace("\\.", ".");
    // Resolved through the roots, so a name outside the workspace reveals nothing.
    let names_a_file = !name.contains('*')
        && [name.clone(), format!("{shown}/{name}")].iter().any(|p| roots.resolve_existing(p, false).is_ok());
    if names_a_file {
        report.push_str(&format!(
            " grep searches inside files; `{name}` is the name of a file or folder, which exists (list_files shows names)."
        ));
    }
    report
}

impl Tool for Grep {
    type Args = GrepArgs;

    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Search file contents with a regex; returns a file:line: text line per match."
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn call(
        &self,
        args: GrepArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        crate::confined(Arc::clone(&self.config), ctx, move |roots| grep(roots, &args))
    }
}
