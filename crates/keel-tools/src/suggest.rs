//! "Did you mean …?": near matches for a path that does not exist.

use std::path::Path;

use crate::workspace::Roots;

/// Levenshtein distance, for short names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push((previous[j] + cost).min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// When a relative `path` starts with the project folder's own name, how to name the
/// folder and the files in it instead.
fn names_the_root_itself(roots: &Roots, path: &str) -> Option<String> {
    let root_name = roots.root().file_name()?.to_str()?;
    let rest = path.trim_start_matches("./").strip_prefix(root_name)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let inner = rest.trim_matches('/');
    let example = if inner.is_empty() { String::new() } else { format!(" (here `{inner}`)") };
    Some(format!(
        " `{root_name}` is the name of the project folder itself, and your tools already work in it: use `.` for the folder and paths inside it without `{root_name}/`{example}."
    ))
}

/// A message for a missing `path`: near matches in the workspace and the entries of the
/// nearest existing folder.
pub fn missing_path_message(roots: &Roots, path: &str) -> String {
    let wanted = roots.lexical(path);
    let wanted_name = wanted.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let mut candidates: Vec<(usize, String)> = Vec::new();
    let walker = ignore::WalkBuilder::new(roots.root())
        .require_git(false)
        .git_global(false)
        .max_depth(Some(8))
        .build();
    for entry in walker.flatten().take(20_000) {
        let Some(name) = entry.file_name().to_str() else { continue };
        let name = name.to_lowercase();
        let score = if name == wanted_name {
            0
        } else {
            let d = distance(&name, &wanted_name);
            if d > (wanted_name.len() / 3).max(2) {
                continue;
            }
            d + 1
        };
        if entry.depth() == 0 {
            continue;
        }
        candidates.push((score, roots.display(entry.path())));
    }
    candidates.sort();
    candidates.dedup();
    let mut message = format!("`{path}` does not exist.");
    // A small model given "/tmp/…/project" as the folder asked for `project` and read the
    // folder listing that followed as the answer.
    if let Some(advice) = names_the_root_itself(roots, path) {
        message.push_str(&advice);
    }
    if !candidates.is_empty() {
        let names: Vec<String> = candidates.iter().take(3).map(|(_, p)| format!("`{p}`")).collect();
        message.push_str(&format!(" Did you mean {}?", names.join(" or ")));
    }
    // The nearest folder that exists, and what is in it.
    let mut folder = wanted.parent().map(Path::to_path_buf);
    while let Some(dir) = &folder {
        if dir.is_dir() && roots.allows(&dir.canonicalize().unwrap_or_default(), false) {
            break;
        }
        folder = dir.parent().map(Path::to_path_buf);
    }
    if let Some(dir) = folder
        && let Ok(entries) = std::fs::read_dir(&dir)
    {
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| {
                let mut name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    name.push('/');
                }
                name
            })
            .collect();
        names.sort();
        let total = names.len();
        names.truncate(30);
        let more =
            if total > names.len() { format!(" and {} more", total - names.len()) } else { String::new() };
        let shown: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        let folder = roots.display(&dir);
        let place =
            if folder == "." { "The project folder".to_owned() } else { format!("The folder `{folder}/`") };
        if shown.is_empty() {
            message.push_str(&format!("\n{place} is empty."));
        } else {
            message.push_str(&format!("\n{place} contains: {}{more}.", shown.join(", ")));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("math.rs", "maths.rs"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn suggests_same_name_elsewhere_and_lists_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/math.rs"), "").unwrap();
        std::fs::write(dir.path().join("README.md"), "").unwrap();
        let roots = Roots::new(dir.path(), &[], &[]).unwrap();
        let message = missing_path_message(&roots, "math.rs");
        assert_eq!(
            message,
            "`math.rs` does not exist. Did you mean `src/math.rs`?\nThe project folder contains: `README.md`, `src/`."
        );
        let message = missing_path_message(&roots, "src/maths.rs");
        assert_eq!(
            message,
            "`src/maths.rs` does not exist. Did you mean `src/math.rs`?\nThe folder `src/` contains: `math.rs`."
        );
    }

    #[test]
    fn the_project_folders_own_name_is_explained() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("project");
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::write(dir.join("main.py"), "").unwrap();
        let roots = Roots::new(&dir, &[], &[]).unwrap();
        assert_eq!(
            missing_path_message(&roots, "project"),
            "`project` does not exist. `project` is the name of the project folder itself, and your tools already work in it: use `.` for the folder and paths inside it without `project/`.\nThe project folder contains: `lib/`, `main.py`."
        );
        assert!(
            missing_path_message(&roots, "project/lib/x.py")
                .contains("without `project/` (here `lib/x.py`).")
        );
        assert!(!missing_path_message(&roots, "projects").contains("name of the project folder"));
    }
}
