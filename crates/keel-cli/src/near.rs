//! "Did you mean …?": the nearest of some names to a word a user typed (a command, a
//! config key, a tool, a model).

/// The candidate closest to `word` by edit distance, when it is close: one edit, or two
/// in a word of six characters or more. The first of equally close candidates wins.
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let allowed = if word.chars().count() >= 6 { 2 } else { 1 };
    candidates
        .iter()
        .map(|candidate| (distance(word, candidate), *candidate))
        .filter(|(d, _)| *d <= allowed)
        .min_by_key(|(d, _)| *d)
        .map(|(_, candidate)| candidate)
}

/// The edit distance between `a` and `b`: insertions, deletions, substitutions and swaps
/// of two neighbouring characters (`modle` is one edit from `model`), each counting one.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // rows[i][j]: the distance between a[..i] and b[..j].
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn distances_count_edits_and_swaps() {
        assert_eq!(distance("modle", "model"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("max_step", "max_steps"), 1);
        assert_eq!(distance("same", "same"), 0);
    }

    #[test]
    fn only_a_close_name_is_offered() {
        assert_eq!(nearest("modle", &["mode", "model"]), Some("mode"));
        assert_eq!(nearest("temprature", &["temperature", "tools"]), Some("temperature"));
        assert_eq!(nearest("xyz", &["model"]), None);
    }
}
