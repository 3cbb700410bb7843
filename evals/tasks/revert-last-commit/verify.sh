for f in server.py README.md; do
  cmp -s $f "$TASK_DIR/files/$f" || { echo "$f is not as before the last commit: $(diff "$TASK_DIR/files/$f" $f)"; exit 1; }
done
git log --format=%s | grep -qx "Add a /health endpoint" || { echo "the commit before the last one is gone: $(git log --oneline)"; exit 1; }
[ -z "$(git status --porcelain | grep -v '__pycache__/$')" ] || { echo "not committed: $(git status --porcelain)"; exit 1; }
