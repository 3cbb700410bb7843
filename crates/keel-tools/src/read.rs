//! `read_file`: numbered lines, in pages.

use std::future::Future;
use std::io::Read;
use std::sync::Arc;

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::suggest::missing_path_message;
use crate::workspace::Roots;

/// Most lines returned by one call.
pub const MAX_LINES: usize = 2000;
/// Most bytes returned by one call.
pub const MAX_BYTES: usize = 50 * 1024;
/// Longer lines are cut.
pub const MAX_LINE_CHARS: usize = 2000;

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File path.
    pub path: String,
    /// First line to read, from 1.
    #[serde(default)]
    pub offset: Option<usize>,
    /// Lines to read (at most 2000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Reads text files.
#[derive(Debug, Clone)]
pub struct ReadFile {
    config: Arc<ToolsConfig>,
}

impl ReadFile {
    /// A read tool with these settings.
    pub fn new(config: Arc<ToolsConfig>) -> Self {
        ReadFile { config }
    }
}

/// A known binary format from its first bytes, if any.
fn binary_kind(head: &[u8]) -> Option<&'static str> {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"\x89PNG", "PNG image"),
        (b"\xff\xd8\xff", "JPEG image"),
        (b"GIF8", "GIF image"),
        (b"%PDF", "PDF document"),
        (b"PK\x03\x04", "ZIP archive"),
        (b"\x1f\x8b", "gzip archive"),
        (b"\x7fELF", "ELF executable"),
        (b"GGUF", "GGUF model"),
        (b"\0asm", "WebAssembly module"),
        (b"SQLite format 3", "SQLite database"),
    ];
    if let Some((_, kind)) = MAGIC.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Some(kind);
    }
    head.contains(&0).then_some("binary data")
}

fn human_size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} bytes"),
        b if b < 1024 * 1024 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{:.1} MB", b as f64 / 1_048_576.0),
    }
}

/// Reads `path` under `roots` as the model sees it.
pub fn read(roots: &Roots, args: &ReadArgs) -> Result<String, ToolError> {
    let (mut file, canonical) = roots.open_read(&args.path).map_err(|e| {
        if e.code == "not_found" {
            ToolError::new("not_found", missing_path_message(roots, &args.path))
        } else {
            e
        }
    })?;
    let metadata =
        file.metadata().map_err(|e| ToolError::msg(format!("cannot stat `{}`: {e}", args.path)))?;
    if metadata.is_dir() {
        return Err(ToolError::new(
            "is_a_directory",
            format!("`{}` is a folder; use list_files to see what is in it", args.path),
        ));
    }
    let mut bytes = Vec::with_capacity(metadata.len().min(16 * 1024 * 1024) as usize);
    file.read_to_end(&mut bytes).map_err(|e| ToolError::msg(format!("cannot read `{}`: {e}", args.path)))?;
    if let Some(kind) = binary_kind(&bytes[..bytes.len().min(8192)]) {
        return Err(ToolError::new(
            "binary_file",
            format!(
                "`{}` is a {kind} ({}), not text; read_file only shows text",
                args.path,
                human_size(metadata.len())
            ),
        ));
    }
    let text = String::from_utf8_lossy(&bytes);
    if text.is_empty() {
        return Ok(format!("({} is empty)", roots.display(&canonical)));
    }
    let total = text.lines().count();
    let start = args.offset.unwrap_or(1).max(1);
    if start > total {
        return Err(ToolError::new(
            "invalid_arguments",
            format!("offset {start} is past the end: `{}` has {total} lines", args.path),
        ));
    }
    let limit = args.limit.unwrap_or(MAX_LINES).clamp(1, MAX_LINES);
    let width = (start + limit).min(total).to_string().len();
    let mut out = String::new();
    let mut last = start - 1;
    for (index, line) in text.lines().enumerate().skip(start - 1).take(limit) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let shown: String = if line.chars().count() > MAX_LINE_CHARS {
            let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
            format!("{cut}… [line cut at {MAX_LINE_CHARS} characters]")
        } else {
            line.to_owned()
        };
        let entry = format!("{:>width$}\t{shown}\n", index + 1);
        if out.len() + entry.len() > MAX_BYTES && index + 1 > start {
            break;
        }
        out.push_str(&entry);
        last = index + 1;
    }
    if last < total {
        out.push_str(&format!(
            "[showing lines {start}-{last} of {total}; read_file with offset={} to continue]\n",
            last + 1
        ));
    }
    Ok(out)
}

impl Tool for ReadFile {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a text file as numbered lines; use offset and limit to page through long files."
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn call(
        &self,
        args: ReadArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        let state = Arc::clone(&ctx.state);
        crate::confined(Arc::clone(&self.config), ctx, move |roots| {
            let text = read(roots, &args)?;
            crate::seen::mark(roots, &state, &args.path);
            Ok(text)
        })
    }
}
