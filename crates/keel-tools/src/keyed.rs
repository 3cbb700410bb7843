//! Lines that set a key to a value: `version = "0.4.1"`, `"timeout": 30,`, `port: 3000`
//! — the shape shared by TOML, INI, JSON, YAML, `.env` files and assignments in code.
//! Read structurally (a key of letters, digits, `_`, `.` or `-`, then `=` or `:`), in any
//! script; keys compare by their parts, so `__version__` is `version` and
//! `default-color` is `default_color`.

/// `key = value` or `key: value` (the key may be quoted) as its key and raw value.
pub(crate) fn split(line: &str) -> Option<(&str, &str)> {
    let at = line.find([':', '='])?;
    let key = unquote(line[..at].trim())?;
    let value = line[at + 1..].trim();
    let is_key = !key.is_empty() && key.chars().all(|c| c.is_alphanumeric() || "_.-".contains(c));
    let first = key.chars().next()?;
    // `a == b` (a pinned requirement) and `a := b` are not settings.
    let is_setting = !value.starts_with('=') && !value.is_empty() && !first.is_ascii_digit();
    (is_key && is_setting).then_some((key, value))
}

/// The text inside matching quotes, or the text itself when it is not quoted.
pub(crate) fn unquote(text: &str) -> Option<&str> {
    for quote in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(quote) {
            return inner.strip_suffix(quote);
        }
    }
    Some(text)
}

/// The key and the value a line sets (a trailing comma and quotes taken off the value).
pub(crate) fn setting(line: &str) -> Option<(&str, &str)> {
    let (key, value) = split(line.trim())?;
    let value = value.trim_end_matches(',').trim();
    Some((key, unquote(value).unwrap_or(value)))
}

/// A key as compared: its parts between `_` and `-`, lowercased, joined by `_`.
fn normal_key(key: &str) -> String {
    let parts: Vec<String> = key.split(['_', '-']).filter(|p| !p.is_empty()).map(str::to_lowercase).collect();
    parts.join("_")
}

/// Whether two keys are the same: the same parts between `_` and `-`, any case.
pub(crate) fn same_key(a: &str, b: &str) -> bool {
    normal_key(a) == normal_key(b)
}

/// The values `text`'s lines set `key` to.
pub(crate) fn values_of<'t>(text: &'t str, key: &str) -> Vec<&'t str> {
    text.lines().filter_map(setting).filter(|(found, _)| same_key(found, key)).map(|(_, v)| v).collect()
}

/// A key whose value a change replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Changed {
    pub key: String,
    pub before: String,
    pub after: String,
}

impl Changed {
    fn new(key: &str, before: &str, after: &str) -> Self {
        Changed { key: key.to_owned(), before: before.to_owned(), after: after.to_owned() }
    }
}

/// Each key `text` sets (as [`normal_key`]) with its values and the key as first written.
fn settings_of(text: &str) -> std::collections::HashMap<String, (&str, Vec<&str>)> {
    let mut found: std::collections::HashMap<String, (&str, Vec<&str>)> = std::collections::HashMap::new();
    for (key, value) in text.lines().filter_map(setting) {
        found.entry(normal_key(key)).or_insert((key, Vec::new())).1.push(value);
    }
    found
}

/// The keys set once in both texts whose value changed, at most `max`, in the order
/// `before` sets them. One pass over each text: edit_file's note runs this on every edit.
pub(crate) fn changed(before: &str, after: &str, max: usize) -> Vec<Changed> {
    let (old, new) = (settings_of(before), settings_of(after));
    let mut found: Vec<Changed> = Vec::new();
    for (key, _) in before.lines().filter_map(setting) {
        if found.len() == max {
            break;
        }
        let normal = normal_key(key);
        if found.iter().any(|c| normal_key(&c.key) == normal) {
            continue;
        }
        if let (Some((key, values)), Some((_, now))) = (old.get(&normal), new.get(&normal))
            && let ([was], [is]) = (&values[..], &now[..])
            && was != is
        {
            found.push(Changed::new(key, was, is));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_in_every_file_shape() {
        assert_eq!(setting("version = \"0.4.1\""), Some(("version", "0.4.1")));
        assert_eq!(setting("  \"timeout\": 30,"), Some(("timeout", "30")));
        assert_eq!(setting("port: 3000"), Some(("port", "3000")));
        assert_eq!(setting("颜色 = 红"), Some(("颜色", "红")));
        assert_eq!(setting("requests==2.32.3"), None);
        assert_eq!(setting("print(x)"), None);
        assert!(same_key("__version__", "version"));
        assert!(same_key("default-color", "Default_Color"));
        assert!(!same_key("server_port", "port"));
    }

    #[test]
    fn changed_values_are_keys_set_once_on_both_sides() {
        let before = "name = \"tidyup\"\nversion = \"0.4.1\"\n";
        let after = "name = \"tidyup\"\nversion = \"0.4.2\"\n";
        assert_eq!(changed(before, after, 4), vec![Changed::new("version", "0.4.1", "0.4.2")]);
        assert_eq!(changed(before, before, 4), Vec::new());
        assert_eq!(changed(before, "name = \"tidyup\"\n", 4), Vec::new(), "a key removed");
    }
}
