grep -qw "50" "$KEEL_EVAL_ANSWER" || { echo "answer does not give the new limit (50 MB)"; exit 1; }
grep -qi "webp" "$KEEL_EVAL_ANSWER" || { echo "answer does not mention WebP"; exit 1; }
[ "$(git rev-parse HEAD)" = "$(cat .git/eval-setup-head)" ] || { echo "history changed: $(git log --oneline)"; exit 1; }
[ -z "$(git status --porcelain | grep -v '__pycache__/$')" ] || { echo "files changed: $(git status --porcelain)"; exit 1; }
