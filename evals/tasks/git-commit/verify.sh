[ "$(git log -1 --format=%s)" = "Fix typo in README" ] || { echo "last commit: $(git log -1 --format=%s)"; exit 1; }
[ -z "$(git status --porcelain)" ] || { echo "uncommitted: $(git status --porcelain)"; exit 1; }
git show HEAD:README.md | grep -q "small widget library" || { echo "README change not committed"; exit 1; }
