//! `cat file | keel "explain this"`: piped text joins the task, fenced and capped.

use std::io::Read;

/// Bytes of piped input put in a task at most.
pub const PIPED_BYTES: usize = 100 * 1024;

/// True when stdin is a pipe or a file (`cat f | keel "task"`, `keel "task" < f`), not a
/// terminal or `/dev/null`.
pub fn piped_stdin() -> bool {
    use std::os::fd::AsFd;
    let Ok(stat) = rustix::fs::fstat(std::io::stdin().as_fd()) else { return false };
    let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
    matches!(kind, rustix::fs::FileType::Fifo | rustix::fs::FileType::RegularFile)
}

/// At most `cap` bytes of `input` (cut at a character boundary), and how many bytes it
/// had in all.
pub fn read_capped(input: impl Read, cap: usize) -> std::io::Result<(String, u64)> {
    let mut bytes = Vec::new();
    let mut input = input;
    (&mut input).take(cap as u64 + 1).read_to_end(&mut bytes)?;
    let mut total = bytes.len() as u64;
    if bytes.len() > cap {
        total += std::io::copy(&mut input, &mut std::io::sink())?;
        bytes.truncate(cap);
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = if total > cap as u64 { text.trim_end_matches('\u{fffd}') } else { &text };
    Ok((text.to_owned(), total))
}

/// The task, then the piped text in a fenced block, with a note of what was cut.
pub fn with_piped(task: &str, piped: &str, total: u64) -> String {
    if piped.trim().is_empty() {
        return task.to_owned();
    }
    let longest = piped.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let mut out = format!("{task}\n\n{fence}\n{}\n{fence}", piped.trim_end_matches('\n'));
    if total > piped.len() as u64 {
        out.push_str(&format!("\n[piped input cut: the first {} of {} bytes are shown]", piped.len(), total));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piped_text_follows_the_task_fenced_and_capped() {
        assert_eq!(
            with_piped("explain this", "fn main() {}\n", 13),
            "explain this\n\n```\nfn main() {}\n```"
        );
        assert_eq!(with_piped("t", "a ``` b", 7), "t\n\n````\na ``` b\n````");
        assert_eq!(with_piped("t", "  \n", 3), "t");
        let (text, total) = read_capped(&b"0123456789"[..], 4).unwrap();
        assert_eq!((text.as_str(), total), ("0123", 10));
        assert_eq!(
            with_piped("t", &text, total),
            "t\n\n```\n0123\n```\n[piped input cut: the first 4 of 10 bytes are shown]"
        );
        let (text, _) = read_capped("éé".as_bytes(), 3).unwrap();
        assert_eq!(text, "é");
    }
}
