//! The names MCP tools get in keel: `mcp__<server>__<tool>`, made of `[a-zA-Z0-9_-]` and
//! at most 64 characters (what providers accept), the same on every run.

/// The longest tool name providers accept.
pub const MAX_TOOL_NAME: usize = 64;

/// Every name keel gives an MCP tool starts with this.
pub const PREFIX: &str = "mcp__";

/// `text` with every character outside `[a-zA-Z0-9_-]` replaced by `_` (empty becomes
/// `_`).
pub fn sanitize(text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    if clean.is_empty() { "_".to_owned() } else { clean }
}

/// The name the model calls server `server`'s tool `tool` by: `mcp__<server>__<tool>`,
/// sanitized. A name longer than [`MAX_TOOL_NAME`] is cut and ends with `_` and 12 hex
/// digits of a hash of the server and tool names, so long names that differ only past
/// the cut stay apart. Two tools may still get the same name (`a.b` and `a_b`): the
/// registry refuses the second.
pub fn tool_name(server: &str, tool: &str) -> String {
    let name = format!("{PREFIX}{}__{}", sanitize(server), sanitize(tool));
    if name.len() <= MAX_TOOL_NAME {
        return name;
    }
    let hash = fnv1a(server.as_bytes(), tool.as_bytes());
    let suffix = format!("_{:0width$x}", hash & 0xffff_ffff_ffff, width = CUT_SUFFIX - 1);
    // Sanitized names are ASCII: any byte index is a character boundary.
    format!("{}{suffix}", &name[..MAX_TOOL_NAME - suffix.len()])
}

/// The length of what ends a cut name: `_` and 12 hex digits.
const CUT_SUFFIX: usize = 13;

/// What the name of every tool of server `server` starts with: `mcp__<server>__`, or as
/// much of it as a cut name keeps ([`tool_name`]). A permission rule for the server's
/// tools (`mcp__github__*`) is told from a mistyped one by it.
pub fn server_prefix(server: &str) -> String {
    let mut prefix = format!("{PREFIX}{}__", sanitize(server));
    prefix.truncate(MAX_TOOL_NAME - CUT_SUFFIX);
    prefix
}

/// FNV-1a (64 bits) of `server`, a separator, and `tool`: stable across runs and Rust
/// versions, unlike the standard library's hasher.
fn fnv1a(server: &[u8], tool: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in server.iter().chain(&[0u8]).chain(tool) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    #[test]
    fn names_are_prefixed_sanitized_and_cut_with_a_hash() {
        assert_eq!(tool_name("github", "create_issue"), "mcp__github__create_issue");
        assert_eq!(tool_name("my docs", "search.v2"), "mcp__my_docs__search_v2");
        assert_eq!(tool_name("", "é"), "mcp______");
        let long = tool_name("filesystem", &"read_".repeat(20));
        assert_eq!(long.len(), MAX_TOOL_NAME);
        assert!(long.starts_with("mcp__filesystem__read_read_"), "{long}");
        assert_eq!(long, tool_name("filesystem", &"read_".repeat(20)), "the same on every run");
        assert_eq!(&long[long.len() - 13..], "_48eadd5299ba", "{long}");
    }

    #[test]
    fn every_tool_of_a_server_starts_with_its_prefix() {
        assert_eq!(server_prefix("github"), "mcp__github__");
        assert_eq!(server_prefix("my docs"), "mcp__my_docs__");
        let server = "a-server-with-a-rather-long-name-that-goes-on";
        let prefix = server_prefix(server);
        assert_eq!(prefix.len(), MAX_TOOL_NAME - 13);
        for tool in ["x", "a_tool_with_a_long_name"] {
            assert!(tool_name(server, tool).starts_with(&prefix), "{}", tool_name(server, tool));
        }
    }

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_TOOL_NAME
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    proptest! {
        /// Any server and tool name, however long or strange, gives a valid name that
        /// starts with the prefix and is the same every time.
        #[test]
        fn every_name_is_valid_and_stable(server in any::<String>(), tool in any::<String>()) {
            let name = tool_name(&server, &tool);
            prop_assert!(valid(&name), "{name}");
            prop_assert!(name.starts_with(PREFIX), "{name}");
            prop_assert!(name.starts_with(&server_prefix(&server)), "{name}");
            prop_assert_eq!(&name, &tool_name(&server, &tool));
        }

        /// Names already valid and short enough are kept whole; long ones that differ
        /// anywhere (even past the cut) stay apart.
        #[test]
        fn valid_names_are_kept_and_distinct_ones_stay_apart(
            server in "[a-zA-Z0-9_-]{1,40}",
            a in "[a-zA-Z0-9_-]{1,80}",
            b in "[a-zA-Z0-9_-]{1,80}",
        ) {
            let (name_a, name_b) = (tool_name(&server, &a), tool_name(&server, &b));
            if PREFIX.len() + server.len() + 2 + a.len() <= MAX_TOOL_NAME {
                prop_assert_eq!(&name_a, &format!("{PREFIX}{server}__{a}"));
            }
            if a != b {
                prop_assert_ne!(name_a, name_b);
            }
        }
    }
}
