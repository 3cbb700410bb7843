grep -qiF "time_out" "$KEEL_EVAL_ANSWER" || { echo "answer does not name the cause (settings.json spells the key time_out)"; exit 1; }
changed=$(diff -rq -x __pycache__ -x .pytest_cache "$TASK_DIR/files" . 2>&1) || { echo "files were changed: $changed" | head -3; exit 1; }
