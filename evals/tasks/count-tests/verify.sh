grep -qw "9" "$KEEL_EVAL_ANSWER" || grep -qiw "nine" "$KEEL_EVAL_ANSWER" || { echo "answer does not say 9"; exit 1; }
changed=$(diff -rq -x __pycache__ -x .pytest_cache "$TASK_DIR/files" . 2>&1) || { echo "files were changed: $changed" | head -3; exit 1; }
