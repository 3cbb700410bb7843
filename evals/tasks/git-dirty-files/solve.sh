git status --porcelain | awk '{print $2}' > "$KEEL_EVAL_ANSWER"
