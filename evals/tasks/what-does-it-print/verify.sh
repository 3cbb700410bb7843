grep -qi "dana" "$KEEL_EVAL_ANSWER" && grep -qw "175" "$KEEL_EVAL_ANSWER" || { echo "answer lacks the winner Dana with 175 points"; exit 1; }
grep -qF "166.8" "$KEEL_EVAL_ANSWER" || { echo "answer lacks the field average 166.8"; exit 1; }
changed=$(diff -rq -x __pycache__ "$TASK_DIR/files" . 2>&1) || { echo "files were changed: $changed" | head -3; exit 1; }
